/* SPDX-License-Identifier: MIT */
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

/* The dialect's own ids (the index of each script in
 * leash__dialect_leash.scripts), under the tests' short names. */
enum {
    LS_NONE = -1,
    LS_ACQUIRE = LEASH__LEASH_SCRIPT_ACQUIRE,
    LS_RELEASE = LEASH__LEASH_SCRIPT_RELEASE,
    LS_RENEW = LEASH__LEASH_SCRIPT_RENEW,
    LS_FORCE = LEASH__LEASH_SCRIPT_FORCE,
    LS_RAISE = LEASH__LEASH_SCRIPT_RAISE,
    LS_FAMILY_ACQUIRE = LEASH__LEASH_SCRIPT_FAMILY_ACQUIRE,
    LS_FAMILY_RELEASE = LEASH__LEASH_SCRIPT_FAMILY_RELEASE,
    LS_MULTI_ACQUIRE = LEASH__LEASH_SCRIPT_MULTI_ACQUIRE,
    LS_MULTI_ACQUIRE_FENCED = LEASH__LEASH_SCRIPT_MULTI_ACQUIRE_FENCED
};

/* The id of the script of dialect d (its index in d->scripts) that a
 * command calls, LS_NONE for none. */
static inline int leash_script_in(const leash__dialect *d, int argc, const char *const *argv,
                                  const size_t *lens) {
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

/* The id of leash's own script that a command calls. */
static inline int leash_script_of(int argc, const char *const *argv, const size_t *lens) {
    return leash_script_in(&leash__dialect_leash, argc, argv, lens);
}

#endif
