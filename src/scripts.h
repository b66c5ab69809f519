/*
 * The Lua scripts of a lock. Loaded with SCRIPT LOAD on every (re)connect of
 * the command connection and called with EVALSHA; a NOSCRIPT answer makes
 * the connection resend the same call as EVAL (which caches it again).
 *
 * A lock is one string key, written with its lease as PEXPIRE:
 *   "<token>:<w>:<count>:<fence>"
 * token: the holder's owner token (32 hex digits); w: 1 once someone found
 * it busy (its release and renewals then PUBLISH, else they need not);
 * count: the holder's reentrant holds; fence: this hold's fencing token,
 * the server's clock (TIME) in microseconds when the hold began. Nothing
 * else is written, so an unused name leaves nothing behind once its lease
 * ran out, and Redis memory does not grow with throughput.
 *
 * Fences: a hold's fence is the server's microsecond clock at its grant, so
 * it is larger than every earlier hold's fence as long as the server's
 * clock does not step back (and, after a failover, the new master's clock
 * is not behind the old one's by more than the failover took) - also when
 * Redis lost the key: a restart without persistence, a failover that lost
 * the last writes, an eviction. Two holds of one name are at least a
 * release (or an expiry) apart, which takes the clock past a microsecond.
 *
 * Every script reads and checks first and writes last: Redis does not roll
 * back a script that fails half-way. A key of another type is WRONGTYPE
 * before anything is written; a string that is not a lock likewise.
 *
 * acquire  KEYS: lock  ARGV: token, lease_ms, count, not_after
 *          not_after (a server time in ms, LEASH__STAMP_DIGITS digits; 0 =
 *          none) is written by the connection when it writes the command:
 *          a copy that runs later (it sat in a frozen server's socket after
 *          the client gave up on it) does nothing.
 *          -> {1, fence, count, now} granted (count 1: a new hold, or the
 *             retry of one that already ran; count > 1: an extra hold of
 *             our own token: its count is set, never lowered, and its lease
 *             renewed)
 *          -> {0, pttl, 0, now} held by another (and marked "w")
 *          -> {0, -3, 0, now} too late (not_after passed): it did nothing
 *          -> {0, -4, 0, now} an extra hold (count > 1) for a hold that is gone
 *             (expired, force-released, server restarted): it must not come
 *             back as a new hold with a fence its holder never saw
 *          now: the server's clock in ms, for the connection's offset.
 * release  KEYS: lock  ARGV: token, count_after, channel, valid_until
 *          -> count left (> 0), 0 released (key deleted; PUBLISH of the
 *             token on the channel when marked "w"), -1 not ours.
 *          valid_until is 0 on the first write; on a resend after a lost
 *          answer it is the hold's local deadline on the server's clock:
 *          before it the hold cannot have expired, so "not ours" means this
 *          release already ran (0); after it the script cannot tell (-2).
 * renew    KEYS: lock1..lockN  ARGV: token1, lease1, channel1, ...
 *          -> {r1..rN}, 1 renewed, 0 not ours (gone, taken or wrong type);
 *             a renewed lock marked "w" publishes "renewed:<lease>", so
 *             waiters sleep through a live holder's renewals without
 *             sending anything, and wake on their own only when it stops
 * force    KEYS: lock  ARGV: channel
 *          -> 1 a hold was removed (key deleted, PUBLISH "forced" on channel),
 *             0 nobody held it, a WRONGTYPE error when the key is not a lock
 *             (it is left alone). Whoever held it finds out at its next
 *             renewal (lost, EXPIRED).
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
