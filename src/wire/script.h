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

typedef struct leash__script {
    const char *src;
    size_t len;
    char sha[LEASH__SHA_LEN + 1];
} leash__script;

/* Fills s for the source src (which must outlive s). */
void leash__script_init(leash__script *s, const char *src);

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
