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
 * Each zset also holds the sentinel "" with score 0 while the lock exists
 * (family.h says why).
 *
 * The queue. A waiter's place is a lease (its expiry), renewed by its
 * watchdog like a hold. A script that finds someone waiting, or finds its
 * own way blocked, drops holders and waiters whose lease ran out
 * (fam_prune), then, after its own change, lets the head of the queue in
 * while it fits (fam_admit): each one let in becomes a holder whose expiry
 * is that of its place (which its last renewal set) and is told on its
 * client's channel. So the release, the renewal or the attempt that
 * notices a gap hands over, and a handoff costs one message. Expired
 * entries nobody waits behind stay until some script meets them; they are
 * in nobody's way.
 *
 * TTLs: all four keys share one, at least the latest expiry in them: a
 * script that sets an expiry beyond it sets it to twice that lease
 * (fam_keep), so that a stream of holds rewrites it once a lease, not once
 * a hold; that rewrite also prunes, so that crashed holders do not pile up
 * while others keep the lock in use. A script that leaves no live holder
 * and nobody queued deletes the four (fam_gc).
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
 * A key K that is not a family lock's hash (not a hash, or no fence field)
 * is a WRONGTYPE error before anything is written. The companions are
 * leash's own names (a NUL byte and a hash tag in them): their types are
 * checked when a lock is made, not at every call.
 */
#include <stdlib.h>
#include <string.h>

#include <leash/leash.h>

#include "base/slot.h"
#include "base/token.h"
#include "dialect/dialect.h"
#include "dialect/family.h"
#include "wire/resp.h"

#define WRONGTYPE                                                                            \
    "if not S then return redis.error_reply('WRONGTYPE the key holds a value that is not a " \
    "lock of the family') end\n"

/* The common case, a token that neither holds nor waits and goes in at
 * once, reads the state and writes the hold without a prune: expired
 * holders and places are dropped only when they could be in the way. */
static const char acquire_lua[] = LEASH__FAMILY_LUA
    "local t = redis.call('time')\n"
    "local now = fam_now(t)\n"
    "if ARGV[11] + 0 > 0 and now >= ARGV[11] + 0 then return {0, -3, 0, now} end\n"
    "local L = {KEYS[1], KEYS[2], KEYS[3], KEYS[4]}\n"
    "local tok, lease, mode, cl, n = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], "
    "tonumber(ARGV[7])\n"
    "local S = fam_load(L, tok)\n" WRONGTYPE
    "if mode == 's' and S.permits and S.permits ~= ARGV[5] and\n"
    "    redis.call('zcount', L[2], '(' .. now, '+inf') > 0 then\n"
    "  return {0, -5, tonumber(S.permits), now}\n"
    "end\n"
    "local pruned = false\n"
    "local function prune()\n"
    "  if pruned then return end\n"
    "  fam_prune(L, S, now)\n"
    "  pruned = true\n"
    "  local v = redis.call('hmget', L[1], 'h' .. tok, 'q' .. tok)\n"
    "  S.h, S.q = v[1], v[2]\n"
    "end\n"
    "if S.h or S.q or n > 1 then prune() end\n"
    "if S.h then\n"
    "  local m, c, f, hc = string.match(S.h, '^(%a):(%d+):(%d+):(%x+)$')\n"
    "  c = tonumber(c)\n"
    "  if n > c then c = n end\n"
    "  redis.call('hset', L[1], 'h' .. tok, m .. ':' .. c .. ':' .. f .. ':' .. hc)\n"
    "  local e = redis.call('zscore', L[2], tok)\n"
    "  if not e or tonumber(e) < now + lease then redis.call('zadd', L[2], now + lease, tok) end\n"
    "  fam_keep(L, S, now, now + lease)\n"
    "  return {1, tonumber(f), c, now}\n"
    "end\n"
    "if n > 1 then\n"
    "  if not S.new then\n"
    "    fam_admit(L, S, t, nil, ARGV[8], ARGV[9])\n"
    "    fam_gc(L, now)\n"
    "  end\n"
    "  return {0, -4, 0, now}\n"
    "end\n"
    "if S.new then fam_create(L, S) end\n"
    "if mode == 's' and S.permits ~= ARGV[5] then\n"
    "  redis.call('hset', L[1], 'permits', ARGV[5])\n"
    "  S.permits = ARGV[5]\n"
    "end\n"
    "if not S.q then\n"
    "  local function free()\n"
    "    if redis.call('zcard', L[3]) == 1 and fam_fits(L, S, mode) then return true end\n"
    "    return mode == 'r' and ARGV[10] ~= '' and S.x == ARGV[10] and\n"
    "        fam_live(L[2], S.x, now) and true\n"
    "  end\n"
    "  local ok = free()\n"
    "  if not ok and not pruned then\n"
    "    prune()\n"
    "    fam_admit(L, S, t, nil, ARGV[8], ARGV[9])\n"
    "    ok = free()\n"
    "  end\n"
    "  if ok then\n"
    "    local f = fam_grant(L, S, tok, mode, cl, now + lease, t)\n"
    "    fam_keep(L, S, now, now + lease)\n"
    "    return {1, tonumber(f), 1, now}\n"
    "  end\n"
    /* Not free after a prune: someone live holds or waits, so there is
     * nothing for fam_gc to delete. */
    "  if ARGV[6] == '1' then return {0, -6, 0, now} end\n"
    "  redis.call('zadd', L[3], redis.call('hincrby', L[1], 'seq', 1), tok)\n"
    "  redis.call('hset', L[1], 'q' .. tok, mode .. ':' .. cl)\n"
    "end\n"
    "redis.call('zadd', L[4], now + lease, tok)\n"
    "local f = fam_admit(L, S, t, tok, ARGV[8], ARGV[9])\n"
    "fam_keep(L, S, now, now + lease)\n"
    "if f then return {1, tonumber(f), 1, now} end\n"
    "if redis.call('zrank', L[3], tok) == 1 then\n"
    "  local a = redis.call('zrange', L[2], 1, 1, 'withscores')\n"
    "  if a[2] then return {0, tonumber(a[2]) - now, 0, now} end\n"
    "end\n"
    "return {0, -6, 0, now}\n";

/* A release with nobody queued lets nobody in and prunes nothing. */
static const char release_lua[] = LEASH__FAMILY_LUA
    "local L = {KEYS[1], KEYS[2], KEYS[3], KEYS[4]}\n"
    "local tok = ARGV[1]\n"
    "local S = fam_load(L, tok)\n" WRONGTYPE "local t = redis.call('time')\n"
    "local now = fam_now(t)\n"
    "local r\n"
    "if S.h then\n"
    "  if ARGV[2] ~= '0' then\n"
    "    local m, f, hc = string.match(S.h, '^(%a):%d+:(%d+):(%x+)$')\n"
    "    redis.call('hset', L[1], 'h' .. tok, m .. ':' .. ARGV[2] .. ':' .. f .. ':' .. hc)\n"
    "    return tonumber(ARGV[2])\n"
    "  end\n"
    "  fam_drop_holder(L, S, tok)\n"
    "  r = 0\n"
    "elseif S.q then\n"
    "  fam_drop_waiter(L, tok)\n"
    "  r = -1\n"
    "end\n"
    "if r then\n"
    "  if redis.call('zcard', L[3]) > 1 then\n"
    "    fam_prune(L, S, now)\n"
    "    local _, n = fam_admit(L, S, t, nil, ARGV[3], ARGV[4])\n"
    "    if n == 0 then fam_gc(L, now) end\n"
    "  else\n"
    "    fam_gc(L, now, 1)\n"
    "  end\n"
    "  return r\n"
    "end\n"
    "if ARGV[5] + 0 == 0 then return -1 end\n"
    "if now < ARGV[5] + 0 then return 0 end\n"
    "return -2\n";

static const char force_lua[] =
    LEASH__FAMILY_LUA "local L = {KEYS[1], KEYS[2], KEYS[3], KEYS[4]}\n"
                      "local S = fam_load(L, '')\n" WRONGTYPE "if S.new then return 0 end\n"
                      "local t = redis.call('time')\n"
                      "local now = fam_now(t)\n"
                      "local holders = redis.call('zrange', L[2], 1, -1)\n"
                      "for _, tok in ipairs(holders) do fam_drop_holder(L, S, tok) end\n"
                      "fam_prune(L, S, now)\n"
                      "fam_admit(L, S, t, nil, ARGV[1], ARGV[2])\n"
                      "fam_gc(L, now)\n"
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

size_t leash__family_base_len(const leash__names *n) {
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
    argv[10] = n->channel + leash__family_base_len(n);
    lens[10] = LEASH__TOKEN_LEN;
    argv[11] = perm;
    lens[11] = leash__resp_int(perm, permits);
    argv[12] = once ? "1" : "0";
    lens[12] = 1;
    argv[13] = cnt;
    lens[13] = leash__resp_int(cnt, count);
    argv[14] = n->channel;
    lens[14] = leash__family_base_len(n);
    argv[15] = leash__publish_verb(n, &lens[15]);
    argv[16] = under != NULL ? under : "";
    lens[16] = under != NULL ? LEASH__TOKEN_LEN : 0;
    argv[17] = leash__stamp_zeros;
    lens[17] = LEASH__STAMP_DIGITS;
    buf = leash__script_call(&len, &leash__family_acquire_script, 4, 18, argv, lens);
    cmd = buf ? leash__cmd_new(buf, len, &leash__family_acquire_script, LEASH__CMD_RETRY, deadline,
                               NULL, NULL)
              : NULL;
    if (cmd != NULL) {
        leash__cmd_publish_arg(cmd, 15);
        leash__cmd_stamp(cmd, LEASH__STAMP_NOT_AFTER, validity_ms);
    }
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
    lens[9] = leash__family_base_len(n);
    argv[10] = leash__publish_verb(n, &lens[10]);
    argv[11] = leash__stamp_zeros;
    lens[11] = LEASH__STAMP_DIGITS;
    buf = leash__script_call(&len, &leash__family_release_script, 4, 12, argv, lens);
    cmd = buf ? leash__cmd_new(buf, len, &leash__family_release_script, LEASH__CMD_RETRY, deadline,
                               NULL, NULL)
              : NULL;
    if (cmd != NULL)
        leash__cmd_publish_arg(cmd, 10);
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
    lens[7] = leash__family_base_len(n);
    argv[8] = leash__publish_verb(n, &lens[8]);
    /* EVAL, never resent: as the mutex's force (dialect/leash.c). */
    buf = leash__script_eval_call(&len, &force_script, 4, 9, argv, lens);
    return leash__publishing_cmd(buf, len, 8, deadline);
}
