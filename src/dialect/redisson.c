/* SPDX-License-Identifier: MIT */
#include "dialect/dialect.h"

#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>
#include <leash/leash.h>

#include "base/token.h"
#include "wire/resp.h"

/*
 * Redisson's RLock layout (Redisson 3.x, RedissonLock), so that leash and
 * Redisson exclude each other on one name and wake each other's waiters.
 * What Redisson's own scripts do with it:
 *
 *   lock key   the name (here key_prefix + name): a hash, field
 *              "<uuid>:<thread id>" = the reentrant count, PEXPIRE = lease
 *   tryLock    if the key is missing or has our field: HINCRBY field 1,
 *              PEXPIRE lease, answer nil; else answer the key's PTTL
 *   unlock     KEYS lock, channel, latch "redisson_unlock_latch:{name}:<id>":
 *              a latch that exists answers its value (a resent unlock);
 *              no field: nil; else HINCRBY -1: above 0 PEXPIRE lease, latch
 *              "0", answer 0; else DEL, PUBLISH channel "0", latch "1",
 *              answer 1. The latch has a PX of about a command's retries.
 *   renew      if HEXISTS field then PEXPIRE lease, 1 else 0 (its watchdog,
 *              every lockWatchdogTimeout / 3, 30 s / 3 by default)
 *   forceUnlock  if DEL removed the key: PUBLISH channel "0", 1 else 0
 *   waiters    SUBSCRIBE redisson_lock__channel:{name} (the name as is when
 *              it holds a '{'), try again on "0" or after the PTTL
 *
 * leash's scripts below write exactly that data, and answer in the shapes
 * of leash's own scripts (dialect/leash.c), so the answers are read by the
 * same code (dialect/common.c):
 *
 * Field. A leash hold's field is its owner token as a UUID (8-4-4-4-12
 * hex digits) and thread id 0: new for every hold (and for every attempt
 * of a Redlock), so a late release of an earlier hold or attempt can never
 * take a later one, which a field per handle could. No Java thread has the
 * id 0.
 *
 * Counts are absolute: an acquire sets the field to the hold count (never
 * lower), a release to the count after it. So a resent acquire or partial
 * release does what the first copy did, and leash needs no unlock latch:
 * a final release resent after a lost answer finds the field gone, and
 * valid_until (the hold's local deadline on the server's clock) tells
 * "released by the first copy" (0) from "cannot tell" (-2), as in leash's
 * dialect. Redisson's latch keys are never read nor written here, so the
 * ones Redisson leaves confuse nothing (they expire by their PX).
 *
 * acquire  KEYS: lock [, fence floor]  ARGV: field, lease_ms, count
 *          [, floor_ttl_ms, proposal], not_after (as dialect/leash.c's)
 *          -> {1, fence, count, now} granted: the key was missing (count 1:
 *             its fence becomes the floor, as in dialect/leash.c)
 *             or holds our field (a retry, or an extra hold: count set,
 *             never lowered); the lease PEXPIREd
 *          -> {0, pttl, 0, now} held by another
 *          -> {0, -3, 0, now} too late (not_after passed): it did nothing
 *          -> {0, -4, 0, now} an extra hold (count > 1) whose hold is gone
 *          fence: the server's clock in microseconds, or with a floor the
 *          largest of that, the proposal and the floor + 1: Redisson keeps
 *          none in its hash, so only the floor records it.
 * release  KEYS: lock  ARGV: field, count_after, channel, publish, valid_until
 *          -> count left (> 0; the TTL kept), 0 released (key deleted, "0"
 *             published: Redisson's waiters do not say that they wait, so
 *             every final release publishes, as Redisson's does; except a
 *             give-back, whose publish is "", see giveback_cmd in
 *             dialect.h), -1 not ours, -2 a resend that cannot tell.
 * renew    KEYS: lock1..lockN  ARGV: field1, lease1, ..., not_after
 *          -> {r1..rN}: 1 HEXISTS, PEXPIREd; 0 not ours (gone, another's,
 *             another type); -3 each when not_after passed (leash's own
 *             renew: a late copy does nothing). Nothing is published:
 *             Redisson's renewals do not, and its waiters sleep on the PTTL.
 * force    KEYS: lock  ARGV: channel, publish
 *          -> 1 the hash was deleted and "0" published, 0 nobody held it,
 *             a WRONGTYPE error when the key is not a hash (left alone).
 *             Sent as EVAL (see dialect/leash.c).
 * raise    the shared one (dialect/common.c): the floor is a companion key
 *          with a TTL whose name holds a NUL, so Redisson never names it.
 *
 * Every key is written with a TTL: the lock's hash by its PEXPIRE (a
 * Redisson holder's too), the floor by its PX.
 *
 * Wake-ups. "0" on the channel is a release (or a force release) by
 * anyone; it names nobody, so a release of this client is announced twice
 * to its waiters (its answer, then the message) and may cost one extra
 * attempt.
 */

#define WRONGTYPE "redis.error_reply('WRONGTYPE the key holds a value that is not a lock')"

static const char acquire_lua[] =
    "local t = redis.call('time')\n"
    "local now = t[1] * 1000 + math.floor(t[2] / 1000)\n"
    "local na = ARGV[#ARGV] + 0\n"
    "if na > 0 and now >= na then return {0, -3, 0, now} end\n"
    "local k, fld, n = KEYS[1], ARGV[1], tonumber(ARGV[3])\n"
    "local f = t[1] * 1000000 + t[2]\n"
    "if KEYS[2] then\n"
    "  local p = tonumber(ARGV[5]) or 0\n"
    "  if p > 0 and p >= f - math.min(ARGV[2] / 4, 1000) * 1000 then f = p end\n"
    "  local fl = tonumber(redis.call('get', KEYS[2]) or 0) or 0\n"
    "  if fl >= f then f = fl + 1 end\n"
    "end\n"
    "local ty = redis.call('type', k)['ok']\n"
    "if ty == 'none' then\n"
    "  if n > 1 then return {0, -4, 0, now} end\n"
    "  redis.call('hset', k, fld, 1)\n"
    "  redis.call('pexpire', k, ARGV[2])\n"
    "  if KEYS[2] then\n"
    "    redis.call('set', KEYS[2], string.format('%.0f', f), 'PX', ARGV[4])\n"
    "  end\n"
    "  return {1, f, 1, now}\n"
    "end\n"
    "if ty ~= 'hash' then return " WRONGTYPE " end\n"
    "local c = redis.call('hget', k, fld)\n"
    "if not c then\n"
    "  if n > 1 then return {0, -4, 0, now} end\n"
    "  return {0, redis.call('pttl', k), 0, now}\n"
    "end\n"
    "c = tonumber(c)\n"
    "if not c then return " WRONGTYPE " end\n"
    "if n < c then n = c end\n"
    "redis.call('hset', k, fld, n)\n"
    "redis.call('pexpire', k, ARGV[2])\n"
    "return {1, f, n, now}\n";

static const char release_lua[] =
    "if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then\n"
    "  if ARGV[2] ~= '0' then\n"
    "    redis.call('hset', KEYS[1], ARGV[1], ARGV[2])\n"
    "    return tonumber(ARGV[2])\n"
    "  end\n"
    "  redis.call('del', KEYS[1])\n"
    "  if ARGV[4] ~= '' then redis.pcall(ARGV[4], ARGV[3], '0') end\n"
    "  return 0\n"
    "end\n"
    "if ARGV[5] + 0 == 0 then return -1 end\n"
    "local t = redis.call('time')\n"
    "if t[1] * 1000 + math.floor(t[2] / 1000) < ARGV[5] + 0 then return 0 end\n"
    "return -2\n";

static const char renew_lua[] =
    "local r = {}\n"
    "if ARGV[#ARGV] + 0 > 0 then\n"
    "  local t = redis.call('time')\n"
    "  if t[1] * 1000 + math.floor(t[2] / 1000) >= ARGV[#ARGV] + 0 then\n"
    "    for i = 1, #KEYS do r[i] = -3 end\n"
    "    return r\n"
    "  end\n"
    "end\n"
    "for i = 1, #KEYS do\n"
    "  if redis.pcall('hexists', KEYS[i], ARGV[2 * i - 1]) == 1 then\n"
    "    redis.call('pexpire', KEYS[i], ARGV[2 * i])\n"
    "    r[i] = 1\n"
    "  else\n"
    "    r[i] = 0\n"
    "  end\n"
    "end\n"
    "return r\n";

static const char force_lua[] = "local ty = redis.call('type', KEYS[1])['ok']\n"
                                "if ty == 'none' then return 0 end\n"
                                "if ty ~= 'hash' then return " WRONGTYPE " end\n"
                                "redis.call('del', KEYS[1])\n"
                                "redis.pcall(ARGV[2], ARGV[1], '0')\n"
                                "return 1\n";

static leash__script acquire_script, release_script, renew_script, force_script;
/* By id (dialect.h). */
static const leash__script *const scripts[LEASH__REDISSON_SCRIPT_COUNT] = {
    [LEASH__REDISSON_SCRIPT_ACQUIRE] = &acquire_script,
    [LEASH__REDISSON_SCRIPT_RELEASE] = &release_script,
    [LEASH__REDISSON_SCRIPT_RENEW] = &renew_script,
    [LEASH__REDISSON_SCRIPT_FORCE] = &force_script,
    [LEASH__REDISSON_SCRIPT_RAISE] = &leash__raise_script};

void leash__redisson_scripts_init(void) {
    leash__script_init(&acquire_script, acquire_lua);
    leash__script_init(&release_script, release_lua);
    leash__script_init(&renew_script, renew_lua);
    leash__script_init(&force_script, force_lua);
}

/* ---- names ---- */

static const char channel_prefix[] = "redisson_lock__channel:";
#define CHANNEL_PREFIX_LEN (sizeof(channel_prefix) - 1)

/* Key prefix + name; the channel as Redisson's prefixName() writes it:
 * "redisson_lock__channel:{key}", or without the braces when the key
 * holds a '{' (then it has a valid hash tag: leash__names_make refuses
 * other braces, whose channel would hash elsewhere than the key). */
static int make_names(leash__names *n, const leash__logger *lg, const char *prefix,
                      const char *name, int db) {
    leash__names checked;
    size_t chan_len;
    int tagged, rc;
    char *p;

    (void)db; /* Redisson's channel carries none */
    if ((rc = leash__names_make(&checked, lg, prefix, name, "", 0)) != LEASH_OK)
        return rc;
    tagged = memchr(checked.key, '{', checked.key_len) != NULL;
    chan_len = CHANNEL_PREFIX_LEN + checked.key_len + (tagged ? 0 : 2);
    p = malloc(checked.key_len + 1 + chan_len + 1);
    if (p == NULL) {
        leash__names_clear(&checked);
        return LEASH_ENOMEM;
    }
    memset(n, 0, sizeof(*n));
    n->mem = p;
    n->key = p;
    n->key_len = checked.key_len;
    memcpy(p, checked.key, checked.key_len + 1);
    n->channel = p + n->key_len + 1;
    n->channel_len = chan_len;
    p = n->channel;
    memcpy(p, channel_prefix, CHANNEL_PREFIX_LEN);
    p += CHANNEL_PREFIX_LEN;
    if (!tagged)
        *p++ = '{';
    memcpy(p, n->key, n->key_len);
    p += n->key_len;
    if (!tagged)
        *p++ = '}';
    *p = '\0';
    n->slot = checked.slot;
    leash__names_clear(&checked);
    return LEASH_OK;
}

/* ---- commands ---- */

/* "<uuid>:0": the hold's field (see the top). */
#define FIELD_LEN (LEASH__TOKEN_LEN + 4 + 2)

static void field_of(char *out, const char *token) {
    static const int groups[] = {8, 4, 4, 4, 12};
    size_t i;

    for (i = 0; i < sizeof(groups) / sizeof(groups[0]); i++) {
        if (i > 0)
            *out++ = '-';
        memcpy(out, token, (size_t)groups[i]);
        out += groups[i];
        token += groups[i];
    }
    memcpy(out, ":0", 2);
}

/* waits: Redisson's layout has no mark (its releases always publish). */
static leash__cmd *acquire_cmd(const leash__names *n, const char *token, int64_t lease_ms,
                               int count, int waits, int64_t validity_ms, int64_t deadline) {
    char field[FIELD_LEN];

    (void)waits;
    field_of(field, token);
    return leash__hold_acquire_cmd(&acquire_script, n, field, FIELD_LEN, lease_ms, count, NULL,
                                   validity_ms, deadline);
}

/* announce 0: the final release publishes nothing (a give-back). */
static leash__cmd *release_as(const leash__names *n, const char *token, int count_after,
                              int64_t valid_until, int64_t deadline, int announce) {
    char field[FIELD_LEN];

    field_of(field, token);
    return leash__hold_release_cmd(&release_script, n, field, FIELD_LEN, count_after, announce,
                                   valid_until, deadline);
}

static leash__cmd *release_cmd(const leash__names *n, const char *token, int count_after,
                               int64_t valid_until, int64_t deadline) {
    return release_as(n, token, count_after, valid_until, deadline, 1);
}

static leash__cmd *giveback_cmd(const leash__names *n, const char *token, int64_t deadline) {
    return release_as(n, token, 0, 0, deadline, 0);
}

static leash__cmd *renew_cmd(const leash__renew_item *items, size_t n, int64_t void_after_ms,
                             int64_t deadline) {
    const char *argv[4 + 3 * LEASH__RENEW_BATCH];
    size_t lens[4 + 3 * LEASH__RENEW_BATCH], i;
    leash__cmd *cmd;
    char leases[LEASH__RENEW_BATCH][21], fields[LEASH__RENEW_BATCH][FIELD_LEN];

    if (n == 0 || n > LEASH__RENEW_BATCH)
        return NULL;
    for (i = 0; i < n; i++) {
        argv[3 + i] = items[i].names->key;
        lens[3 + i] = items[i].names->key_len;
        field_of(fields[i], items[i].token);
        argv[3 + n + 2 * i] = fields[i];
        lens[3 + n + 2 * i] = FIELD_LEN;
        lens[4 + n + 2 * i] = leash__resp_int(leases[i], items[i].lease_ms);
        argv[4 + n + 2 * i] = leases[i];
    }
    argv[3 + 3 * n] = leash__stamp_zeros;
    lens[3 + 3 * n] = LEASH__STAMP_DIGITS;
    cmd = leash__script_cmd(&renew_script, (int)n, (int)(4 + 3 * n), argv, lens, 0, deadline);
    if (cmd != NULL)
        leash__cmd_stamp(cmd, LEASH__STAMP_NOT_AFTER, void_after_ms);
    return cmd;
}

static leash__cmd *force_cmd(const leash__names *n, int64_t deadline) {
    return leash__hold_force_cmd(&force_script, n, deadline);
}

/* ---- messages ---- */

/* "0": Redisson's unlock message, sent by every release and force release
 * (its read-write lock's "1" goes to another channel). */
static void message(const char *msg, size_t len, leash__msg *out) {
    memset(out, 0, sizeof(*out));
    out->kind = len == 1 && msg[0] == '0' ? LEASH__MSG_RELEASED : LEASH__MSG_OTHER;
}

/* ---- reading a lock back ---- */

static const char *state_cmd(const char *type) {
    return strcmp(type, "hash") == 0 ? "HGETALL" : NULL;
}

/* Whether f is a holder field: "<uuid>:<digits>" (Redisson's uuid, or a
 * leash token as one), then ":write" when write (RReadWriteLock's writer). */
static int holder_field(const redisReply *f, int write) {
    const char *colon;
    size_t id, len = f->len;

    if (f->type != REDIS_REPLY_STRING)
        return 0;
    if (write) {
        if (len < 6 || memcmp(f->str + len - 6, ":write", 6) != 0)
            return 0;
        len -= 6;
    }
    colon = len > 0 ? memchr(f->str, ':', len) : NULL;
    id = colon != NULL ? (size_t)(colon - f->str) : 0;
    return colon != NULL && id >= 8 && strspn(f->str, "0123456789abcdefABCDEF-") >= id &&
           leash__all_digits(colon + 1, len - id - 1);
}

/* Redisson's RReadWriteLock: a hash whose "mode" is "read" or "write";
 * the readers' fields "<uuid>:<thread>", the writer's "<uuid>:<thread>:write"
 * (a writer's own read holds are reader fields beside it), each a count;
 * each reader's leases are keys of their own ({name}:<uuid>:<thread>:
 * rwlock_timeout:<n>), not read: every holder shows the hash's PTTL. 1, 0
 * when it is not one, -1 without memory. */
static int read_rw(const redisReply *value, leash__state *out) {
    const redisReply *mode = leash__hash_field(value, "mode");
    size_t i;

    if (mode == NULL || mode->type != REDIS_REPLY_STRING ||
        !((mode->len == 4 && memcmp(mode->str, "read", 4) == 0) ||
          (mode->len == 5 && memcmp(mode->str, "write", 5) == 0)))
        return 0;
    for (i = 0; i + 1 < value->elements; i += 2) {
        const redisReply *f = value->element[i], *n = value->element[i + 1];
        if (n == mode)
            continue;
        if (n->type != REDIS_REPLY_STRING || !leash__all_digits(n->str, n->len) ||
            !(holder_field(f, 0) || holder_field(f, 1)))
            return 0;
    }
    for (i = 0; i + 1 < value->elements; i += 2) {
        const redisReply *f = value->element[i];
        int write = holder_field(f, 1);
        leash__state_entry *h;

        if (value->element[i + 1] == mode)
            continue;
        h = leash__state_add(&out->holders, &out->nholders, f->str, write ? f->len - 6 : f->len);
        if (h == NULL)
            return -1;
        h->mode = write ? 'w' : 'r';
        h->count = strtoll(value->element[i + 1]->str, NULL, 10);
        h->ttl_ms = out->ttl_ms;
    }
    out->kind = LEASH__STATE_REDISSON_RW;
    return 1;
}

/* Every field a holder's, every value a count: an RLock; a hash with
 * "mode": an RReadWriteLock (read_rw); anything else is neither. */
static int read_state(const char *type, const redisReply *value, int64_t pttl, int64_t server_ms,
                      leash__state *out) {
    size_t i;

    memset(out, 0, sizeof(*out));
    out->ttl_ms = pttl >= 0 ? pttl : -1;
    out->server_ms = server_ms;
    if (strcmp(type, "none") == 0 || (value != NULL && value->type == REDIS_REPLY_NIL))
        return 0;
    out->kind = LEASH__STATE_OTHER;
    if (strcmp(type, "hash") != 0 || value == NULL || value->type != REDIS_REPLY_ARRAY ||
        value->elements == 0)
        return 0;
    switch (read_rw(value, out)) {
    case 1:
        return 0;
    case -1:
        leash__state_clear(out);
        return -1;
    default: /* no "mode": it added nothing */
        break;
    }
    for (i = 0; i + 1 < value->elements; i += 2) {
        const redisReply *n = value->element[i + 1];

        if (!holder_field(value->element[i], 0) || n->type != REDIS_REPLY_STRING ||
            !leash__all_digits(n->str, n->len))
            return 0;
    }
    for (i = 0; i + 1 < value->elements; i += 2) {
        const redisReply *f = value->element[i];
        leash__state_entry *h = leash__state_add(&out->holders, &out->nholders, f->str, f->len);
        if (h == NULL) {
            leash__state_clear(out);
            return -1;
        }
        h->mode = 'R';
        h->count = strtoll(value->element[i + 1]->str, NULL, 10);
        h->ttl_ms = out->ttl_ms;
    }
    out->kind = LEASH__STATE_REDISSON;
    return 0;
}

const leash__dialect leash__dialect_redisson = {
    .name = "redisson",
    .names = make_names,
    .scripts = scripts,
    .nscripts = sizeof(scripts) / sizeof(scripts[0]),
    .acquire = &leash__op_acquire,
    .release = &leash__op_release,
    .renew = &leash__op_renew,
    .force = &leash__op_force,
    .raise = &leash__op_raise,
    .acquire_cmd = acquire_cmd,
    .release_cmd = release_cmd,
    .giveback_cmd = giveback_cmd,
    .renew_cmd = renew_cmd,
    .force_cmd = force_cmd,
    .raise_cmd = leash__raise_cmd,
    .propose_fence = leash__hold_propose_fence,
    .message = message,
    .state_cmd = state_cmd,
    .read_state = read_state,
};
