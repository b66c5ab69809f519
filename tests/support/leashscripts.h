/*
 * Which of leash's own scripts a command calls (EVALSHA by SHA1, or EVAL by
 * source), for the fake servers of the tests. Uses the library's dialect
 * (src/dialect/dialect.h): link leash_static.
 */
#ifndef LEASH_TESTS_LEASHSCRIPTS_H
#define LEASH_TESTS_LEASHSCRIPTS_H

#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "dialect/dialect.h"

/* In the order of leash__dialect_leash.scripts. */
enum {
    LS_NONE = -1,
    LS_ACQUIRE = 0,
    LS_RELEASE = 1,
    LS_RENEW = 2,
    LS_FORCE = 3,
    LS_RAISE = 4,
    LS_FAMILY_ACQUIRE = 5,
    LS_FAMILY_RELEASE = 6
};

static inline int leash_script_of(int argc, const char *const *argv, const size_t *lens) {
    const leash__dialect *d = &leash__dialect_leash;
    int i;

    leash__dialects_init();
    if (argc < 3)
        return LS_NONE;
    for (i = 0; i < d->nscripts; i++) {
        const leash__script *s;
        for (s = d->scripts[i]; s != NULL; s = s->older) { /* a variant is the same script */
            if (strcasecmp(argv[0], "EVALSHA") == 0 && lens[1] == LEASH__SHA_LEN &&
                memcmp(argv[1], s->sha, LEASH__SHA_LEN) == 0)
                return i;
            if (strcasecmp(argv[0], "EVAL") == 0 && lens[1] == s->len &&
                memcmp(argv[1], s->src, s->len) == 0)
                return i;
        }
    }
    return LS_NONE;
}

#endif
