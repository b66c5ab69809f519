/* SPDX-License-Identifier: MIT */
/*
 * A Lua script as the wire sees it: its source and SHA1, called with
 * EVALSHA, and the EVAL form of such a call for a server that answered
 * NOSCRIPT (restart, failover, SCRIPT FLUSH). What the scripts do is the
 * dialect's business (src/dialect/).
 */
#ifndef LEASH_WIRE_SCRIPT_H
#define LEASH_WIRE_SCRIPT_H

#include <stddef.h>

#define LEASH__SHA_LEN 40

/* A server version as one number: LEASH__VERSION(7, 0, 0) = 70000. */
#define LEASH__VERSION(major, minor, patch) ((major)*10000 + (minor)*100 + (patch))

typedef struct leash__script {
    const char *src;
    size_t len;
    char sha[LEASH__SHA_LEN + 1];
    /* A script that uses what only newer servers have: the oldest server
     * version that runs it, and the same script (same keys, arguments and
     * answers) for the servers before that. 0 and NULL: any server. */
    int since;
    const struct leash__script *older;
} leash__script;

/* Fills s for the source src (which must outlive s), for any server. */
void leash__script_init(leash__script *s, const char *src);
/* Fills s for a source that needs a server of version `since` or later;
 * older (which must outlive s) is the same script for the others. */
void leash__script_init_since(leash__script *s, const char *src, int since,
                              const leash__script *older);
/* The variant of s that a server of this version runs (0: not known, then
 * the oldest, which every server runs). */
const leash__script *leash__script_for(const leash__script *s, int version);
/* Makes a command built by leash__script_call call s instead (a variant of
 * the script it was built for). */
void leash__script_retarget(char *evalsha, size_t len, const leash__script *s);

/*
 * Builds "EVALSHA sha numkeys args..." where argv[0..2] are left for this
 * function to fill (the caller passes its arguments from argv[3] on).
 * Returns a malloc'ed command or NULL without memory.
 */
char *leash__script_call(size_t *out_len, const leash__script *s, int numkeys, int argc,
                         const char **argv, size_t *lens);

/* The same as EVAL with the script's source: for a command that must not
 * be resent after NOSCRIPT, behind what was sent after it. */
char *leash__script_eval_call(size_t *out_len, const leash__script *s, int numkeys, int argc,
                              const char **argv, size_t *lens);

/* The EVAL form of a command built by leash__script_call, or NULL. */
char *leash__script_as_eval(size_t *out_len, const char *evalsha, size_t len,
                            const leash__script *s);

#endif
