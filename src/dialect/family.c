/*
 * The lock family in leash's dialect: fair lock, read-write lock and
 * semaphore share one layout and three scripts (the renew script of
 * dialect/leash.c renews their holds and queue places too).
 *
 * Names. Of a lock name K = key_prefix + name, as companions (see
 * dialect/leash.c), all in K's cluster slot:
 *   K                 hash: seq (the last queue place given), fence (the
 *                     last fence given), permits (a semaphore's), x (the
 *                     token of an exclusive holder), h<token> =
 *                     "<mode>:<count>:<fence>:<client>" per holder,
 *                     q<token> = "<mode>:<client>" per waiter
 *   K\0{K}h           zset: holder token -> expiry (server ms)
 *   K\0{K}q           zset: waiter token -> place (seq: the server's order)
 *   K\0{K}x           zset: waiter token -> expiry (server ms)
 *   K\0{K}g:<db>:<client>   the channel of one client (32 hex digits, new
 *                     for every client): where it hears that the lock was
 *                     handed to one of its waiters, "g:<token>:<fence>"
 * Modes: f fair lock, w writer, r reader, s semaphore permit. f and w are
 * exclusive (x names the holder); r goes in while there is no exclusive
 * holder; s while fewer than permits hold.
 *
 * The queue. A waiter's place is a lease (its expiry), renewed by its
 * watchdog like a hold. Every script first drops holders and waiters whose
 * lease ran out (fam_prune), then, after its own change, lets the head of
 * the queue in while it fits (fam_admit): each one let in becomes a holder
 * whose expiry is that of its place (which its last renewal set) and is
 * told on its client's channel. So the release, the renewal or the attempt
 * that notices a gap hands over, and a handoff costs one message. Every
 * script sets the TTL of all four keys to the latest expiry in them, or
 * deletes them when nothing is left.
 *
 * Fences: the server's clock (TIME) in microseconds at the grant, and
 * above the last fence given (readers let in together).
 *
 * acquire KEYS: K, h, q, x  ARGV: token, lease, mode, client, permits, once,
 *         count, channel base, publish verb, under, not_after
 *         under: a read's paired write hold's token ("" none): while that
 *         token holds the write, the read goes in at once (a downgrade)
 *         -> {1, fence, count, now}: held (a new hold let in now, a place
 *            that was let in before (a check), or with count > 1 an extra
 *            hold of a held token: its count raised to count)
 *         -> {0, ms, 0, now}: queued, at the head: the first holder's
 *            lease ends in ms
 *         -> {0, -6, 0, now}: queued behind others (or, once = 1, not let
 *            in: nothing written)
 *         -> {0, -3, 0, now}: too late, did nothing; {0, -4, 0, now}: an
 *            extra hold of a hold that is gone
 *         -> {0, -5, permits, now}: a semaphore with another permit count
 * release KEYS: K, h, q, x  ARGV: token, count_after, channel base, verb,
 *         valid_until
 *         -> count left, 0 released, -1 not ours (a waiter's place is
 *            given up: also -1, it held nothing), -2 a resend that cannot
 *            tell (as the mutex's)
 * force   KEYS: K, h, q, x  ARGV: channel base, verb
 *         -> 1 holders were removed, 0 none; waiters are let in.
 * A hash at K that is not a family lock (no seq nor fence field), or keys
 * of other types, are a WRONGTYPE error before anything is written.
 */
#include <stdlib.h>
#include <string.h>

#include <leash/leash.h>

#include "base/slot.h"
#include "base/token.h"
#include "dialect/dialect.h"
#include "dialect/family.h"
#include "wire/resp.h"

#define WRONGTYPE                                                                           \
    "if not fam_ok(L) then return redis.error_reply('WRONGTYPE the key holds a value that " \
    "is not a lock of the family') end\n"

static const char acquire_lua[] = LEASH__FAMILY_LUA
    "local t = redis.call('time')\n"
    "local now = fam_now(t)\n"
    "if ARGV[11] + 0 > 0 and now >= ARGV[11] + 0 then return {0, -3, 0, now} end\n"
    "local L = {KEYS[1], KEYS[2], KEYS[3], KEYS[4]}\n" WRONGTYPE
    "local tok, lease, mode, cl, n = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], "
    "tonumber(ARGV[7])\n"
    "if mode == 's' then\n"
    "  local p = redis.call('hget', L[1], 'permits')\n"
    "  if p and p ~= ARGV[5] and redis.call('zcount', L[2], '(' .. now, '+inf') > 0 then\n"
    "    return {0, -5, tonumber(p), now}\n"
    "  end\n"
    "end\n"
    "fam_prune(L, now)\n"
    "local h = redis.call('hget', L[1], 'h' .. tok)\n"
    "if h then\n"
    "  local m, c, f, hc = string.match(h, '^(%a):(%d+):(%d+):(%x+)$')\n"
    "  c = tonumber(c)\n"
    "  if n > c then c = n end\n"
    "  redis.call('hset', L[1], 'h' .. tok, m .. ':' .. c .. ':' .. f .. ':' .. hc)\n"
    "  local e = redis.call('zscore', L[2], tok)\n"
    "  if not e or tonumber(e) < now + lease then redis.call('zadd', L[2], now + lease, tok) "
    "end\n"
    "  fam_expire(L, now)\n"
    "  return {1, tonumber(f), c, now}\n"
    "end\n"
    "if n > 1 then\n"
    "  fam_admit(L, t, nil, ARGV[8], ARGV[9])\n"
    "  fam_expire(L, now)\n"
    "  return {0, -4, 0, now}\n"
    "end\n"
    "if mode == 's' then redis.call('hset', L[1], 'permits', ARGV[5]) end\n"
    "if redis.call('hexists', L[1], 'q' .. tok) == 0 then\n"
    "  local free = redis.call('zcard', L[3]) == 0 and fam_fits(L, mode)\n"
    "  if not free and mode == 'r' and ARGV[10] ~= '' then\n"
    "    free = redis.call('hget', L[1], 'x') == ARGV[10]\n"
    "  end\n"
    "  if free then\n"
    "    local f = fam_grant(L, tok, mode, cl, now + lease, t)\n"
    "    fam_expire(L, now)\n"
    "    return {1, tonumber(f), 1, now}\n"
    "  end\n"
    "  if ARGV[6] == '1' then\n"
    "    fam_expire(L, now)\n"
    "    return {0, -6, 0, now}\n"
    "  end\n"
    "  redis.call('zadd', L[3], redis.call('hincrby', L[1], 'seq', 1), tok)\n"
    "  redis.call('hset', L[1], 'q' .. tok, mode .. ':' .. cl)\n"
    "end\n"
    "redis.call('zadd', L[4], now + lease, tok)\n"
    "local f = fam_admit(L, t, tok, ARGV[8], ARGV[9])\n"
    "fam_expire(L, now)\n"
    "if f then return {1, tonumber(f), 1, now} end\n"
    "if redis.call('zrank', L[3], tok) == 0 then\n"
    "  local a = redis.call('zrange', L[2], 0, 0, 'withscores')\n"
    "  if a[2] then return {0, tonumber(a[2]) - now, 0, now} end\n"
    "end\n"
    "return {0, -6, 0, now}\n";

static const char release_lua[] = LEASH__FAMILY_LUA
    "local L = {KEYS[1], KEYS[2], KEYS[3], KEYS[4]}\n" WRONGTYPE "local tok = ARGV[1]\n"
    "local t = redis.call('time')\n"
    "local now = fam_now(t)\n"
    "local h = redis.call('hget', L[1], 'h' .. tok)\n"
    "local r\n"
    "if h then\n"
    "  if ARGV[2] ~= '0' then\n"
    "    local m, f, hc = string.match(h, '^(%a):%d+:(%d+):(%x+)$')\n"
    "    redis.call('hset', L[1], 'h' .. tok, m .. ':' .. ARGV[2] .. ':' .. f .. ':' .. hc)\n"
    "    return tonumber(ARGV[2])\n"
    "  end\n"
    "  fam_drop_holder(L, tok)\n"
    "  r = 0\n"
    "elseif redis.call('hexists', L[1], 'q' .. tok) == 1 then\n"
    "  fam_drop_waiter(L, tok)\n"
    "  r = -1\n"
    "end\n"
    "if r then\n"
    "  fam_prune(L, now)\n"
    "  fam_admit(L, t, nil, ARGV[3], ARGV[4])\n"
    "  fam_expire(L, now)\n"
    "  return r\n"
    "end\n"
    "if ARGV[5] + 0 == 0 then return -1 end\n"
    "if now < ARGV[5] + 0 then return 0 end\n"
    "return -2\n";

static const char force_lua[] = LEASH__FAMILY_LUA
    "local L = {KEYS[1], KEYS[2], KEYS[3], KEYS[4]}\n" WRONGTYPE "local t = redis.call('time')\n"
    "local now = fam_now(t)\n"
    "local holders = redis.call('zrange', L[2], 0, -1)\n"
    "for _, tok in ipairs(holders) do fam_drop_holder(L, tok) end\n"
    "fam_prune(L, now)\n"
    "fam_admit(L, t, nil, ARGV[1], ARGV[2])\n"
    "fam_expire(L, now)\n"
    "if #holders > 0 then return 1 end\n"
    "return 0\n";

leash__script leash__family_acquire_script, leash__family_release_script;
static leash__script force_script;

void leash__family_scripts_init(void) {
    leash__script_init(&leash__family_acquire_script, acquire_lua);
    leash__script_init(&leash__family_release_script, release_lua);
    leash__script_init(&force_script, force_lua);
}

/* ---- names ---- */

int leash__family_names(leash__names *n, const leash__logger *lg, const char *prefix,
                        const char *name, int db, const char *client_id) {
    char kind[48];
    size_t kind_len;
    int rc;

    memcpy(kind, "g:", 2);
    kind_len = 2 + leash__resp_int(kind + 2, db);
    kind[kind_len++] = ':';
    memcpy(kind + kind_len, client_id, LEASH__TOKEN_LEN);
    kind_len += LEASH__TOKEN_LEN;
    rc = leash__names_make(n, lg, prefix, name, kind, kind_len);
    if (rc == LEASH_OK)
        n->family = 1;
    return rc;
}

/* The companion `c` ("h", "q" or "x") of n's key into buf
 * (LEASH__FLOOR_MAX bytes): its length. */
static size_t companion(const leash__names *n, const char *c, char *buf) {
    leash__companion(buf, n->key, n->key_len, c, 1);
    return leash__companion_len(n->key, n->key_len, 1);
}

void leash__family_keys(const leash__names *n, const char **argv, size_t *lens,
                        char bufs[3][LEASH__FLOOR_MAX]) {
    argv[0] = n->key;
    lens[0] = n->key_len;
    argv[1] = bufs[0];
    lens[1] = companion(n, "h", bufs[0]);
    argv[2] = bufs[1];
    lens[2] = companion(n, "q", bufs[1]);
    argv[3] = bufs[2];
    lens[3] = companion(n, "x", bufs[2]);
}

static const char stamp_zeros[LEASH__STAMP_DIGITS + 1] = "0000000000000000000";

static const char *verb(const leash__names *n, size_t *len) {
    *len = n->sharded ? 8 : 7;
    return n->sharded ? "spublish" : "publish";
}

/* The channel base: the client's channel without the client id. */
static size_t base_len(const leash__names *n) {
    return n->channel_len - LEASH__TOKEN_LEN;
}

leash__cmd *leash__family_acquire_cmd(const leash__names *n, const char *token, int64_t lease_ms,
                                      char mode, int permits, int once, int count,
                                      const char *under, int64_t validity_ms, int64_t deadline) {
    const char *argv[3 + 4 + 11];
    size_t lens[3 + 4 + 11], len;
    char bufs[3][LEASH__FLOOR_MAX], lease[21], perm[21], cnt[21];
    char *buf;
    leash__cmd *cmd;

    leash__family_keys(n, argv + 3, lens + 3, bufs);
    argv[7] = token;
    lens[7] = LEASH__TOKEN_LEN;
    argv[8] = lease;
    lens[8] = leash__resp_int(lease, lease_ms);
    argv[9] = &mode;
    lens[9] = 1;
    argv[10] = n->channel + base_len(n);
    lens[10] = LEASH__TOKEN_LEN;
    argv[11] = perm;
    lens[11] = leash__resp_int(perm, permits);
    argv[12] = once ? "1" : "0";
    lens[12] = 1;
    argv[13] = cnt;
    lens[13] = leash__resp_int(cnt, count);
    argv[14] = n->channel;
    lens[14] = base_len(n);
    argv[15] = verb(n, &lens[15]);
    argv[16] = under != NULL ? under : "";
    lens[16] = under != NULL ? LEASH__TOKEN_LEN : 0;
    argv[17] = stamp_zeros;
    lens[17] = LEASH__STAMP_DIGITS;
    buf = leash__script_call(&len, &leash__family_acquire_script, 4, 18, argv, lens);
    cmd = buf ? leash__cmd_new(buf, len, &leash__family_acquire_script, LEASH__CMD_RETRY, deadline,
                               NULL, NULL)
              : NULL;
    if (cmd != NULL)
        leash__cmd_stamp(cmd, LEASH__STAMP_NOT_AFTER, validity_ms);
    return cmd;
}

leash__cmd *leash__family_release_cmd(const leash__names *n, const char *token, int count_after,
                                      int64_t valid_until, int64_t deadline) {
    const char *argv[3 + 4 + 5];
    size_t lens[3 + 4 + 5], len;
    char bufs[3][LEASH__FLOOR_MAX], cnt[21];
    char *buf;
    leash__cmd *cmd;

    leash__family_keys(n, argv + 3, lens + 3, bufs);
    argv[7] = token;
    lens[7] = LEASH__TOKEN_LEN;
    argv[8] = cnt;
    lens[8] = leash__resp_int(cnt, count_after);
    argv[9] = n->channel;
    lens[9] = base_len(n);
    argv[10] = verb(n, &lens[10]);
    argv[11] = stamp_zeros;
    lens[11] = LEASH__STAMP_DIGITS;
    buf = leash__script_call(&len, &leash__family_release_script, 4, 12, argv, lens);
    cmd = buf ? leash__cmd_new(buf, len, &leash__family_release_script, LEASH__CMD_RETRY, deadline,
                               NULL, NULL)
              : NULL;
    if (cmd != NULL && valid_until != 0)
        leash__cmd_stamp(cmd, LEASH__STAMP_RESEND_VALID_UNTIL, valid_until);
    return cmd;
}

leash__cmd *leash__family_force_cmd(const leash__names *n, int64_t deadline) {
    const char *argv[3 + 4 + 2];
    size_t lens[3 + 4 + 2], len;
    char bufs[3][LEASH__FLOOR_MAX];
    char *buf;

    leash__family_keys(n, argv + 3, lens + 3, bufs);
    argv[7] = n->channel;
    lens[7] = base_len(n);
    argv[8] = verb(n, &lens[8]);
    /* EVAL, never resent: as the mutex's force (dialect/leash.c). */
    buf = leash__script_eval_call(&len, &force_script, 4, 9, argv, lens);
    return buf ? leash__cmd_new(buf, len, NULL, 0, deadline, NULL, NULL) : NULL;
}
