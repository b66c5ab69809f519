/*
 * The Lua scripts of a lock. Loaded with SCRIPT LOAD on every (re)connect of
 * the command connection and called with EVALSHA; a NOSCRIPT answer makes
 * the connection resend the same call as EVAL (which caches it again).
 *
 * acquire  KEYS: lock, fence, tombstone ARGV: token, lease_ms, count
 *          -> {1, fence, count} granted (a new hold increments the fence;
 *             our own token just gets its count set: retries are idempotent)
 *          -> {0, pttl} held by another (and the hash is marked
 *             "~waiting", which makes the holder's renewals announce themselves)
 *          -> {0, -3} this token was already released or given up: an
 *             attempt that arrives late (it sat in a frozen server's socket
 *             after we gave up on it) must not create a hold nobody owns
 *          -> {0, -4} an extra hold (count > 1) for a hold that is gone
 *             (expired, force-released, server restarted): it must not come
 *             back as a new hold with a fence its holder never saw
 * release  KEYS: lock, tombstone        ARGV: token, count_after, channel, tomb_ms
 *          -> count left (> 0), 0 released (key deleted, PUBLISH on channel,
 *             tombstone "1" set so a retried release still answers 0),
 *             -1 not ours (tombstone "0" set: the token is dead either way)
 * renew    KEYS: lock1..lockN           ARGV: token1, lease1, channel1, ...
 *          -> {r1..rN}, 1 renewed, 0 not ours (gone, taken or wrong type);
 *             a renewed lock that has waiters publishes "renewed:<lease>",
 *             so waiters sleep through a live holder's renewals without
 *             sending anything, and wake on their own only when it stops
 * force    KEYS: lock                   ARGV: channel
 *          -> 1 a hold was removed (key deleted, PUBLISH "forced" on channel),
 *             0 nobody held it, a WRONGTYPE error when the key is not a lock
 *             (it is left alone). Whoever held it finds out at its next
 *             renewal (lost, EXPIRED). The fence is left alone: it only grows.
 *          Sent as EVAL, never EVALSHA: the resend that follows a NOSCRIPT
 *          answer would run it after commands issued later (an acquire, say)
 *          and remove the hold they created.
 */
#ifndef LEASH_SCRIPTS_H
#define LEASH_SCRIPTS_H

#include <stddef.h>

enum leash__script {
    LEASH__SCRIPT_ACQUIRE = 0,
    LEASH__SCRIPT_RELEASE = 1,
    LEASH__SCRIPT_RENEW = 2,
    LEASH__SCRIPT_FORCE = 3,
    LEASH__SCRIPT_COUNT
};

#define LEASH__SHA_LEN 40

typedef struct leash__scripts {
    char sha[LEASH__SCRIPT_COUNT][LEASH__SHA_LEN + 1];
} leash__scripts;

const char *leash__script_source(int script);
void leash__scripts_init(leash__scripts *s);

/*
 * Builds "EVALSHA sha numkeys args..." where argv[0..2] are left for this
 * function to fill (the caller passes its arguments from argv[3] on).
 * Returns a malloc'ed command or NULL without memory.
 */
char *leash__script_call(size_t *out_len, const leash__scripts *s, int script, int numkeys,
                         int argc, const char **argv, size_t *lens);

/* The same as EVAL with the script's source: for a command that must not
 * be resent after NOSCRIPT, behind what was sent after it. */
char *leash__script_eval_call(size_t *out_len, int script, int numkeys, int argc, const char **argv,
                              size_t *lens);

/* The EVAL form of a command built by leash__script_call, or NULL. */
char *leash__script_as_eval(size_t *out_len, const char *evalsha, size_t len, int script);

#endif
