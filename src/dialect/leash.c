#include "dialect/dialect.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>
#include <leash/leash.h>

#include "base/slot.h"
#include "base/token.h"
#include "dialect/family.h"
#include "wire/resp.h"

/* LEASH_RESERVE_MS and LEASH_RESERVE_QUEUE as the scripts write them. */
#define TEXT_(x) #x
#define TEXT(x) TEXT_(x)
#define LEASH__RESERVE_MS_TEXT TEXT(LEASH_RESERVE_MS)
#define LEASH__RESERVE_QUEUE_TEXT TEXT(LEASH_RESERVE_QUEUE)

/*
 * leash's own layout: one string key per lock, its channel, four scripts.
 * The scripts are loaded with SCRIPT LOAD on every (re)connect of a command
 * connection and called with EVALSHA; a NOSCRIPT answer makes the
 * connection resend the same call as EVAL (which caches it again).
 *
 * Names. A lock's key is key_prefix + name. Names that belong to a lock but
 * are not its key (its channel here) are companions: key + NUL + a part
 * that starts with the key's hash tag. A lock name never holds a NUL, so a
 * companion equals no lock key; the part before the first NUL is the whole
 * key, so two companions of different keys never meet; and the first {tag}
 * of a companion is the key's own, so it lands in the key's cluster slot:
 *   "leash:x"       -> "leash:x\0{leash:x}released:3"
 *   "app:{42}:lock" -> "app:{42}:lock\0released:3"
 * Pub/sub is shared by every db of a server: a channel carries the db, so
 * the same name in two dbs never meets.
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
 * Starving waiters (leash.h, LEASH_STARVE_MS; README "Fairness"). A waiter
 * that has waited that long asks with its age (count = minus the ms it
 * waited). Finding the lock busy, its attempt queues it for the grants
 * after this hold, oldest first (at most LEASH_RESERVE_QUEUE of them):
 * the hold's value goes on with one ":<token>:<since>" per queued waiter
 * (since: the server's ms when it began to wait). The hold's own writes
 * keep them. The release then does not delete the key: it leaves
 *   "<first token>:1:0:0" + the rest of the queue
 * (count 0: no hold; the lock kept for that waiter) with a PX of
 * LEASH_RESERVE_MS, and publishes "<released token>:<first token>", which
 * wakes that waiter wherever it queues (the others sleep on). Only its
 * attempt is granted meanwhile (a new hold with a new fence, that keeps
 * the rest of the queue); the others find it busy with a TTL of
 * LEASH_RESERVE_MS at most: a queued waiter that died delays the lock that
 * long at its turn, and one that gives up releases its place or its turn
 * (a release of its token). An uncontended acquire and release never see
 * any of this.
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
 * acquire  KEYS: lock [, fence floor]  ARGV: token, lease_ms, count, not_after
 *          With a fence floor (Redlock), a new hold's fence is above it.
 *          count below 1: a new hold from a waiter that has waited -count
 *          ms (it queues if busy, see above; never with Redlock).
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
 * Messages go out with the command named by an argument: PUBLISH, or
 * SPUBLISH for sharded pub/sub (a cluster delivers it on the channel's
 * shard only; the channel shares the key's slot, as a script needs).
 *
 * release  KEYS: lock  ARGV: token, count_after, channel, publish, valid_until
 *          -> count left (> 0), 0 released (key deleted; the token
 *             published on the channel when marked "w"; or the key kept
 *             for the first queued waiter, see above), -1 not ours (a
 *             waiter's token queued behind the hold leaves the queue).
 *          valid_until is 0 on the first write; on a resend after a lost
 *          answer it is the hold's local deadline on the server's clock:
 *          before it the hold cannot have expired, so "not ours" means this
 *          release already ran (0); after it the script cannot tell (-2).
 * renew    KEYS: lock1..lockN  ARGV: token1, lease1, channel1, ..., publish,
 *          not_after
 *          -> {r1..rN}, 1 renewed, 0 not ours (gone, taken, wrong type,
 *             or only kept for that token: count 0 holds nothing),
 *             -3 each when not_after passed: it did nothing. not_after (as
 *             the acquire's: written at the write, the command timeout
 *             later on the server's clock) keeps a copy that sat in a
 *             frozen server's socket, which the client gave up on, from
 *             setting a fresh lease when it runs late - after a release
 *             that has not reached that server yet, say;
 *             a renewed lock marked "w" publishes "renewed:<lease>", so
 *             waiters sleep through a live holder's renewals without
 *             sending anything, and wake on their own only when it stops
 * raise    KEYS: fence floor  ARGV: fence, ttl_ms
 *          -> 1; the floor is at least fence from now on (its TTL renewed).
 *          Redlock (route/quorum.c): a grant's fence is the largest of the
 *          granting servers', and every granting server's floor is raised
 *          to it before the grant counts, so that the next majority, which
 *          shares a server with this one, grants a larger fence.
 * force    KEYS: lock  ARGV: channel, publish
 *          -> 1 a hold was removed (key deleted, PUBLISH "forced" on channel),
 *             0 nobody held it, a WRONGTYPE error when the key is not a lock
 *             (it is left alone). Whoever held it finds out at its next
 *             renewal (lost, EXPIRED).
 *          Sent as EVAL, never EVALSHA: the resend that follows a NOSCRIPT
 *          answer would run it after commands issued later (an acquire, say)
 *          and remove the hold they created.
 */

/* The grant is one SET ... NX GET from Redis 7.0 (NX with GET is 7.0);
 * before that a SET ... NX, and a GET only when the key was there (a busy
 * lock, our own extra hold, a key of another type: GET's WRONGTYPE, before
 * anything was written). GRANT is the part that differs. */
#define ACQUIRE_LUA(GRANT)                                                                   \
    "local t = redis.call('time')\n"                                                         \
    "local now = t[1] * 1000 + math.floor(t[2] / 1000)\n"                                    \
    "if ARGV[4] + 0 > 0 and now >= ARGV[4] + 0 then return {0, -3, 0, now} end\n"            \
    "local k, tok, n = KEYS[1], ARGV[1], tonumber(ARGV[3])\n"                                \
    "local since\n"                                                                          \
    "if n < 1 then since, n = now + n, 1 end\n"                                              \
    "local v\n"                                                                              \
    "if n == 1 then\n"                                                                       \
    "  local f = t[1] * 1000000 + t[2]\n"                                                    \
    "  if KEYS[2] then\n"                                                                    \
    "    local fl = tonumber(redis.call('get', KEYS[2]) or 0) or 0\n"                        \
    "    if fl >= f then f = fl + 1 end\n"                                                   \
    "  end\n"                                                                                \
    "  f = string.format('%.0f', f)\n" GRANT "else\n"                                        \
    "  v = redis.call('get', k)\n"                                                           \
    "  if not v then return {0, -4, 0, now} end\n"                                           \
    "end\n"                                                                                  \
    "local o, w, c, f, r = string.match(v, '^(%x+):([01]):(%d+):(%d+)(.*)$')\n"              \
    "if r and string.gsub(r, ':%x+:%d+', '') ~= '' then o = nil end\n"                       \
    "if not o then return redis.error_reply('WRONGTYPE the key holds a value that is not a " \
    "lock') end\n"                                                                           \
    "if o == tok and c == '0' then\n"                                                        \
    "  if n > 1 then return {0, -4, 0, now} end\n"                                           \
    "  f = string.format('%.0f', t[1] * 1000000 + t[2])\n"                                   \
    "  redis.call('set', k, tok .. ':1:1:' .. f .. r, 'PX', ARGV[2])\n"                      \
    "  return {1, tonumber(f), 1, now}\n"                                                    \
    "end\n"                                                                                  \
    "if o == tok then\n"                                                                     \
    "  if n < tonumber(c) then n = tonumber(c) end\n"                                        \
    "  v = o .. ':' .. w .. ':' .. n .. ':' .. f .. r\n"                                     \
    "  redis.call('set', k, v, 'PX', ARGV[2])\n"                                             \
    "  return {1, tonumber(f), n, now}\n"                                                    \
    "end\n"                                                                                  \
    "if n > 1 then return {0, -4, 0, now} end\n"                                             \
    "local r2 = r\n"                                                                         \
    "if since and not string.find(r, ':' .. tok .. ':', 1, true) then\n"                     \
    "  local q, me = {}, string.format(':%s:%.0f', tok, since)\n"                            \
    "  for e, s in string.gmatch(r, '(:%x+:(%d+))') do\n"                                    \
    "    if me and since < tonumber(s) then q[#q + 1], me = me, nil end\n"                   \
    "    q[#q + 1] = e\n"                                                                    \
    "  end\n"                                                                                \
    "  if me then q[#q + 1] = me end\n"                                                      \
    "  r2 = table.concat(q, '', 1, math.min(#q, " LEASH__RESERVE_QUEUE_TEXT "))\n"           \
    "end\n"                                                                                  \
    "if w == '0' or r2 ~= r then\n"                                                          \
    "  redis.call('set', k, o .. ':1:' .. c .. ':' .. f .. r2, 'KEEPTTL')\n"                 \
    "end\n"                                                                                  \
    "return {0, redis.call('pttl', k), 0, now}\n"

static const char acquire_lua[] =
    ACQUIRE_LUA("  v = redis.call('set', k, tok .. ':0:1:' .. f, 'NX', 'PX', ARGV[2], 'GET')\n"
                "  if not v then return {1, tonumber(f), 1, now} end\n");
static const char acquire_lua_60[] =
    ACQUIRE_LUA("  if redis.call('set', k, tok .. ':0:1:' .. f, 'NX', 'PX', ARGV[2]) then\n"
                "    return {1, tonumber(f), 1, now}\n"
                "  end\n"
                "  v = redis.call('get', k)\n");

static const char release_lua[] =
    "local v = redis.call('get', KEYS[1])\n"
    "if v and string.sub(v, 1, 33) == ARGV[1] .. ':' then\n"
    "  if ARGV[2] ~= '0' then\n"
    "    local w, f, r = string.match(v, '^%x+:([01]):%d+:(%d+)(.*)$')\n"
    "    if not w then return redis.error_reply('WRONGTYPE the key holds a value that is not a "
    "lock') end\n"
    "    redis.call('set', KEYS[1], ARGV[1] .. ':' .. w .. ':' .. ARGV[2] .. ':' .. f .. r, "
    "'KEEPTTL')\n"
    "    return tonumber(ARGV[2])\n"
    "  end\n"
    "  local r, rest = string.match(v, '^%x+:1:%d+:%d+:(%x+):%d+(.*)$')\n"
    "  if r then\n"
    "    redis.call('set', KEYS[1], r .. ':1:0:0' .. rest, 'PX', " LEASH__RESERVE_MS_TEXT ")\n"
    "    redis.call(ARGV[4], ARGV[3], ARGV[1] .. ':' .. r)\n"
    "    return 0\n"
    "  end\n"
    "  redis.call('del', KEYS[1])\n"
    "  if string.byte(v, 34) == 49 then redis.call(ARGV[4], ARGV[3], ARGV[1]) end\n"
    "  return 0\n"
    "end\n"
    "if ARGV[5] + 0 == 0 then\n"
    "  if v and string.match(v, '^%x+:1:%d+:%d+:') then\n"
    "    local left, gone = string.gsub(v, ':' .. ARGV[1] .. ':%d+', '', 1)\n"
    "    if gone > 0 then redis.call('set', KEYS[1], left, 'KEEPTTL') end\n"
    "  end\n"
    "  return -1\n"
    "end\n"
    "local t = redis.call('time')\n"
    "if t[1] * 1000 + math.floor(t[2] / 1000) < ARGV[5] + 0 then return 0 end\n"
    "return -2\n";

static const char renew_lua[] = LEASH__FAMILY_LUA
    "local r, k, verb, t, now = {}, 1, ARGV[#ARGV - 1]\n"
    "local count = (#ARGV - 2) / 4\n"
    "if ARGV[#ARGV] + 0 > 0 then\n"
    "  t = redis.call('time')\n"
    "  now = fam_now(t)\n"
    "  if now >= ARGV[#ARGV] + 0 then\n"
    "    for i = 1, count do r[i] = -3 end\n"
    "    return r\n"
    "  end\n"
    "end\n"
    "for i = 1, count do\n"
    "  local tok, lease, chan = ARGV[4 * i - 3], ARGV[4 * i - 2], ARGV[4 * i - 1]\n"
    "  if ARGV[4 * i] == 'm' then\n"
    "    local v = redis.pcall('get', KEYS[k])\n"
    "    if type(v) == 'string' and string.sub(v, 1, 33) == tok .. ':' and\n"
    "        string.sub(v, 36, 37) ~= '0:' then\n"
    "      redis.call('pexpire', KEYS[k], lease)\n"
    "      if string.byte(v, 34) == 49 then redis.call(verb, chan, 'renewed:' .. lease) end\n"
    "      r[i] = 1\n"
    "    else\n"
    "      r[i] = 0\n"
    "    end\n"
    "    k = k + 1\n"
    "  else\n"
    "    if not t then\n"
    "      t = redis.call('time')\n"
    "      now = fam_now(t)\n"
    "    end\n"
    "    r[i] = fam_renew(KEYS[k], tok, tonumber(lease), chan, verb, t, now)\n"
    "    k = k + 1\n"
    "  end\n"
    "end\n"
    "return r\n";

static const char force_lua[] =
    "local v = redis.pcall('get', KEYS[1])\n"
    "if type(v) == 'table' then return v end\n"
    "if not v then return 0 end\n"
    "local tail = string.match(v, '^%x+:[01]:%d+:%d+(.*)$')\n"
    "if not tail or string.gsub(tail, ':%x+:%d+', '') ~= '' then\n"
    "  return redis.error_reply('WRONGTYPE the key holds a value that is not a lock')\n"
    "end\n"
    "redis.call('del', KEYS[1])\n"
    "redis.call(ARGV[2], ARGV[1], 'forced')\n"
    "return 1\n";

static const char raise_lua[] = "local cur = tonumber(redis.call('get', KEYS[1]) or 0) or 0\n"
                                "if cur < tonumber(ARGV[1]) then\n"
                                "  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
                                "else\n"
                                "  redis.call('pexpire', KEYS[1], ARGV[2])\n"
                                "end\n"
                                "return 1\n";

static leash__script acquire_script, acquire_script_60, release_script, renew_script, force_script;
leash__script leash__raise_script;
static const leash__script *const scripts[] = {&acquire_script,
                                               &release_script,
                                               &renew_script,
                                               &force_script,
                                               &leash__raise_script,
                                               &leash__family_acquire_script,
                                               &leash__family_release_script};

/* What leash__dialects_init does once: the SHA1s of every dialect's
 * scripts. */
static void make_scripts(void) {
    leash__script_init(&acquire_script_60, acquire_lua_60);
    leash__script_init_since(&acquire_script, acquire_lua, LEASH__VERSION(7, 0, 0),
                             &acquire_script_60);
    leash__script_init(&release_script, release_lua);
    leash__script_init(&renew_script, renew_lua);
    leash__script_init(&force_script, force_lua);
    leash__script_init(&leash__raise_script, raise_lua);
    leash__family_scripts_init();
    leash__redisson_scripts_init();
}

/* Once per process, whichever thread makes the first client; a thread
 * that comes while another makes them sleeps in pthread_once until they
 * are made (base/token.c uses pthread_once too) rather than spinning. */
void leash__dialects_init(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    (void)pthread_once(&once, make_scripts);
}

/* ---- names ---- */

size_t leash__companion_len(const char *key, size_t key_len, size_t kind_len) {
    size_t start, tag_len;

    if (leash__hash_tag(key, key_len, &start, &tag_len))
        return key_len + 1 + kind_len;
    return key_len + 1 + 1 + key_len + 1 + kind_len; /* key \0 { key } kind */
}

void leash__companion(char *out, const char *key, size_t key_len, const char *kind,
                      size_t kind_len) {
    size_t start, tag_len;

    memcpy(out, key, key_len);
    out += key_len;
    *out++ = '\0';
    if (!leash__hash_tag(key, key_len, &start, &tag_len)) {
        /* Untagged keys have no braces at all (names() refuses stray
         * ones), so "{key}" is a tag that hashes like the key. */
        *out++ = '{';
        memcpy(out, key, key_len);
        out += key_len;
        *out++ = '}';
    }
    memcpy(out, kind, kind_len);
}

void leash__names_clear(leash__names *n) {
    free(n->mem);
    memset(n, 0, sizeof(*n));
}

int leash__names_make(leash__names *n, const leash__logger *lg, const char *prefix,
                      const char *name, const char *kind, size_t kind_len) {
    size_t plen, nlen, klen, start, tag_len, chan_len;
    char *p, *grown;

    if (name == NULL || name[0] == '\0') {
        leash__log(lg, LEASH_LOG_ERROR, "leash_lock_new: the lock name is empty");
        return LEASH_EINVAL;
    }
    nlen = strlen(name);
    if (nlen > LEASH_NAME_MAX) {
        leash__log(lg, LEASH_LOG_ERROR, "leash_lock_new: the lock name is %zu bytes, over %d", nlen,
                   LEASH_NAME_MAX);
        return LEASH_EINVAL;
    }
    plen = strlen(prefix);
    klen = plen + nlen;
    p = malloc(klen + 1);
    if (p == NULL)
        return LEASH_ENOMEM;
    memcpy(p, prefix, plen);
    memcpy(p + plen, name, nlen + 1);
    /* Braces without a valid tag would give a companion another slot. */
    if (!leash__hash_tag(p, klen, &start, &tag_len) &&
        (memchr(p, '{', klen) != NULL || memchr(p, '}', klen) != NULL)) {
        free(p);
        leash__log(lg, LEASH_LOG_ERROR,
                   "leash_lock_new: prefix+name has braces that are not a hash tag: "
                   "use a balanced, non-empty {tag}");
        return LEASH_EINVAL;
    }
    chan_len = leash__companion_len(p, klen, kind_len);
    grown = realloc(p, klen + 1 + chan_len + 1);
    if (grown == NULL) {
        free(p);
        return LEASH_ENOMEM;
    }
    n->mem = grown;
    n->key = grown;
    n->key_len = klen;
    n->channel = grown + klen + 1;
    n->channel_len = chan_len;
    leash__companion(n->channel, n->key, klen, kind, kind_len);
    n->channel[chan_len] = '\0';
    n->slot = leash__key_slot(n->key, klen);
    return LEASH_OK;
}

static int make_names(leash__names *n, const leash__logger *lg, const char *prefix,
                      const char *name, int db) {
    char kind[32];

    memcpy(kind, "released:", 9);
    return leash__names_make(n, lg, prefix, name, kind, 9 + leash__resp_int(kind + 9, db));
}

/* The fence floor of lock n (Redlock): the companion "fence" of its key,
 * into buf (LEASH__FLOOR_MAX bytes). Its length. */
size_t leash__floor_name(const leash__names *n, char *buf) {
    size_t len = leash__companion_len(n->key, n->key_len, 5);
    leash__companion(buf, n->key, n->key_len, "fence", 5);
    return len;
}

/* ---- commands ---- */

/* The zeros the connection overwrites with a server-time stamp. */
const char leash__stamp_zeros[LEASH__STAMP_DIGITS + 1] = "0000000000000000000";

leash__cmd *leash__script_cmd(const leash__script *s, int numkeys, int argc, const char **argv,
                              size_t *lens, unsigned flags, int64_t deadline) {
    size_t len;
    char *buf = leash__script_call(&len, s, numkeys, argc, argv, lens);
    return buf ? leash__cmd_new(buf, len, s, flags, deadline, NULL, NULL) : NULL;
}

leash__cmd *leash__hold_acquire_cmd(const leash__script *s, const leash__names *n,
                                    const char *holder, size_t holder_len, int64_t lease_ms,
                                    int count, int64_t validity_ms, int64_t deadline) {
    const char *argv[3 + 6];
    size_t lens[3 + 6];
    char lease[21], cnt[21], floor[LEASH__FLOOR_MAX];
    int k = n->fenced ? 2 : 1;
    leash__cmd *cmd;

    argv[3] = n->key;
    lens[3] = n->key_len;
    if (n->fenced) {
        argv[4] = floor;
        lens[4] = leash__floor_name(n, floor);
    }
    argv[3 + k] = holder;
    lens[3 + k] = holder_len;
    argv[4 + k] = lease;
    lens[4 + k] = leash__resp_int(lease, lease_ms);
    argv[5 + k] = cnt;
    lens[5 + k] = leash__resp_int(cnt, count);
    argv[6 + k] = leash__stamp_zeros;
    lens[6 + k] = LEASH__STAMP_DIGITS;
    cmd = leash__script_cmd(s, k, 7 + k, argv, lens, LEASH__CMD_RETRY, deadline);
    if (cmd != NULL)
        leash__cmd_stamp(cmd, LEASH__STAMP_NOT_AFTER, validity_ms);
    return cmd;
}

static leash__cmd *acquire_cmd(const leash__names *n, const char *token, int64_t lease_ms,
                               int count, int64_t validity_ms, int64_t deadline) {
    return leash__hold_acquire_cmd(&acquire_script, n, token, LEASH__TOKEN_LEN, lease_ms, count,
                                   validity_ms, deadline);
}

leash__cmd *leash__publishing_cmd(char *buf, size_t len, unsigned verb_arg, int64_t deadline) {
    leash__cmd *cmd = buf != NULL ? leash__cmd_new(buf, len, NULL, 0, deadline, NULL, NULL) : NULL;

    if (cmd != NULL)
        leash__cmd_publish_arg(cmd, verb_arg);
    return cmd;
}

const char *leash__publish_verb(const leash__names *n, size_t *len) {
    int sharded = n->sharded != NULL && *n->sharded;

    *len = sharded ? 8 : 7;
    return sharded ? "spublish" : "publish";
}

leash__cmd *leash__hold_release_cmd(const leash__script *s, const leash__names *n,
                                    const char *holder, size_t holder_len, int count_after,
                                    int announce, int64_t valid_until, int64_t deadline) {
    const char *argv[3 + 6];
    size_t lens[3 + 6];
    char cnt[21];
    leash__cmd *cmd;

    argv[3] = n->key;
    lens[3] = n->key_len;
    argv[4] = holder;
    lens[4] = holder_len;
    argv[5] = cnt;
    lens[5] = leash__resp_int(cnt, count_after);
    argv[6] = n->channel;
    lens[6] = n->channel_len;
    if (announce) {
        argv[7] = leash__publish_verb(n, &lens[7]);
    } else {
        argv[7] = "";
        lens[7] = 0;
    }
    argv[8] = leash__stamp_zeros;
    lens[8] = LEASH__STAMP_DIGITS;
    cmd = leash__script_cmd(s, 1, 9, argv, lens, LEASH__CMD_RETRY, deadline);
    if (cmd != NULL && announce)
        leash__cmd_publish_arg(cmd, 7);
    if (cmd != NULL && valid_until != 0)
        leash__cmd_stamp(cmd, LEASH__STAMP_RESEND_VALID_UNTIL, valid_until);
    return cmd;
}

static leash__cmd *release_cmd(const leash__names *n, const char *token, int count_after,
                               int64_t valid_until, int64_t deadline) {
    return leash__hold_release_cmd(&release_script, n, token, LEASH__TOKEN_LEN, count_after, 1,
                                   valid_until, deadline);
}

/* The script publishes only when someone found the hold busy ("w"). */
static leash__cmd *giveback_cmd(const leash__names *n, const char *token, int64_t deadline) {
    return release_cmd(n, token, 0, 0, deadline);
}

/* Per lock: its key, and ARGV token, lease,
 * channel (the family: the channel base), layout ('m' the mutex's, 'f' the
 * family's); then the publish verb. */
static leash__cmd *renew_cmd(const leash__renew_item *items, size_t n, int64_t void_after_ms,
                             int64_t deadline) {
    enum {
        KEYS_MAX = LEASH__RENEW_BATCH,
        ARGS_MAX = 4 * LEASH__RENEW_BATCH + 2
    };
    const char *keys[KEYS_MAX], *args[ARGS_MAX], *argv[3 + KEYS_MAX + ARGS_MAX];
    size_t klens[KEYS_MAX], alens[ARGS_MAX], lens[3 + KEYS_MAX + ARGS_MAX], i, k = 0, a = 0;
    char leases[LEASH__RENEW_BATCH][21];
    leash__cmd *cmd;

    if (n == 0 || n > LEASH__RENEW_BATCH)
        return NULL;
    for (i = 0; i < n; i++) {
        const leash__names *nm = items[i].names;
        keys[k] = nm->key;
        klens[k++] = nm->key_len;
        args[a] = items[i].token;
        alens[a++] = LEASH__TOKEN_LEN;
        alens[a] = leash__resp_int(leases[i], items[i].lease_ms);
        args[a++] = leases[i];
        args[a] = nm->channel;
        alens[a++] = nm->family ? leash__family_base_len(nm) : nm->channel_len;
        args[a] = nm->family ? "f" : "m";
        alens[a++] = 1;
    }
    args[a] = leash__publish_verb(items[0].names, &alens[a]);
    a++;
    args[a] = leash__stamp_zeros;
    alens[a++] = LEASH__STAMP_DIGITS;
    memcpy(argv + 3, keys, k * sizeof(*keys));
    memcpy(lens + 3, klens, k * sizeof(*klens));
    memcpy(argv + 3 + k, args, a * sizeof(*args));
    memcpy(lens + 3 + k, alens, a * sizeof(*alens));
    cmd = leash__script_cmd(&renew_script, (int)k, (int)(3 + k + a), argv, lens, 0, deadline);
    if (cmd != NULL) {
        leash__cmd_publish_arg(cmd, (unsigned)(3 + k + a - 2));
        leash__cmd_stamp(cmd, LEASH__STAMP_NOT_AFTER, void_after_ms);
    }
    return cmd;
}

leash__cmd *leash__hold_force_cmd(const leash__script *s, const leash__names *n, int64_t deadline) {
    const char *argv[3 + 3];
    size_t lens[3 + 3], len;
    char *buf;

    argv[3] = n->key;
    lens[3] = n->key_len;
    argv[4] = n->channel;
    lens[4] = n->channel_len;
    argv[5] = leash__publish_verb(n, &lens[5]);
    /* EVAL, never resent after a lost answer nor after NOSCRIPT: a second
     * run behind commands issued later would remove the hold they made. */
    buf = leash__script_eval_call(&len, s, 1, 6, argv, lens);
    return leash__publishing_cmd(buf, len, 5, deadline);
}

static leash__cmd *force_cmd(const leash__names *n, int64_t deadline) {
    return leash__hold_force_cmd(&force_script, n, deadline);
}

leash__cmd *leash__raise_cmd(const leash__names *n, uint64_t fence, int64_t ttl_ms,
                             int64_t deadline) {
    const char *argv[3 + 3];
    size_t lens[3 + 3];
    char floor[LEASH__FLOOR_MAX], f[21], ttl[21];

    argv[3] = floor;
    lens[3] = leash__floor_name(n, floor);
    argv[4] = f;
    lens[4] = leash__resp_int(f, (long long)fence);
    argv[5] = ttl;
    lens[5] = leash__resp_int(ttl, ttl_ms);
    /* Raising twice is raising once. */
    return leash__script_cmd(&leash__raise_script, 1, 6, argv, lens, LEASH__CMD_RETRY, deadline);
}

/* ---- answers ---- */

static void fail_all(leash__answer *out, size_t n, int status) {
    size_t i;
    for (i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof(out[i]));
        out[i].status = status;
    }
}

/* An error reply or one of no known shape, for every answer. */
static void bad_reply(const redisReply *r, leash__answer *out, size_t n, const leash__logger *lg,
                      const char *op, const char *what) {
    if (r->type == REDIS_REPLY_ERROR) {
        leash__log(lg, LEASH_LOG_ERROR, "%s %s: Redis error: %s", op, what, r->str);
        fail_all(out, n, LEASH_EREDIS);
    } else {
        leash__log(lg, LEASH_LOG_ERROR, "%s %s: reply of unexpected shape", op, what);
        fail_all(out, n, LEASH_EPROTO);
    }
}

/* {1, fence, count, now} or {0, x, 0, now}: x the holder's pttl, -3 too
 * late, -4 gone. */
static void parse_acquire(const redisReply *r, leash__answer *a, size_t n, const leash__logger *lg,
                          const char *what) {
    (void)n;
    memset(a, 0, sizeof(*a));
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 4 &&
        r->element[0]->type == REDIS_REPLY_INTEGER && r->element[1]->type == REDIS_REPLY_INTEGER &&
        r->element[2]->type == REDIS_REPLY_INTEGER && r->element[3]->type == REDIS_REPLY_INTEGER) {
        a->server_ms = r->element[3]->integer;
        if (r->element[0]->integer == 1 && r->element[1]->integer >= 0 &&
            r->element[2]->integer >= 1 && r->element[2]->integer <= INT32_MAX) {
            a->kind = LEASH__ANS_GRANTED;
            a->fence = (uint64_t)r->element[1]->integer;
            a->n = r->element[2]->integer;
            return;
        }
        if (r->element[0]->integer == 0 && r->element[1]->integer == -5) {
            leash__log(lg, LEASH_LOG_ERROR,
                       "acquire %s: the semaphore is in use with %lld permits, not this handle's",
                       what, (long long)r->element[2]->integer);
            a->status = LEASH_EINVAL;
            return;
        }
        if (r->element[0]->integer == 0) {
            a->n = r->element[1]->integer;
            a->kind = a->n == -3 ? LEASH__ANS_LATE : a->n == -4 ? LEASH__ANS_GONE : LEASH__ANS_BUSY;
            return;
        }
    }
    bad_reply(r, a, 1, lg, "acquire", what);
}

/* count left (> 0), 0 released, -1 not ours, -2 a resend that cannot tell. */
static void parse_release(const redisReply *r, leash__answer *a, size_t n, const leash__logger *lg,
                          const char *what) {
    (void)n;
    memset(a, 0, sizeof(*a));
    if (r->type == REDIS_REPLY_INTEGER && r->integer >= -2) {
        a->n = r->integer;
        a->kind = r->integer > 0     ? LEASH__ANS_LEFT
                  : r->integer == 0  ? LEASH__ANS_RELEASED
                  : r->integer == -1 ? LEASH__ANS_NOT_OURS
                                     : LEASH__ANS_UNSURE;
        return;
    }
    bad_reply(r, a, 1, lg, "release", what);
}

/* {r1..rN}: 1 renewed, 0 not ours, -3 too late (not_after passed); the
 * family's waiters also 2 (the place renewed) and a fence (let in by this
 * renewal); anything else is a protocol error for that lock, never a
 * verdict on its hold. */
static void parse_renew(const redisReply *r, leash__answer *out, size_t n, const leash__logger *lg,
                        const char *what) {
    size_t i;

    if (r->type != REDIS_REPLY_ARRAY || r->elements != n) {
        bad_reply(r, out, n, lg, "renew", what);
        return;
    }
    for (i = 0; i < n; i++) {
        const redisReply *e = r->element[i];
        memset(&out[i], 0, sizeof(out[i]));
        if (e->type == REDIS_REPLY_INTEGER && e->integer == -3) {
            /* Too late to count: it did nothing, as one never written. */
            out[i].status = LEASH_ECONN;
        } else if (e->type == REDIS_REPLY_INTEGER && e->integer >= 0) {
            out[i].kind = e->integer == 0   ? LEASH__ANS_NOT_OURS
                          : e->integer == 1 ? LEASH__ANS_RENEWED
                          : e->integer == 2 ? LEASH__ANS_QUEUED
                                            : LEASH__ANS_HANDED;
            out[i].fence = (uint64_t)e->integer;
        } else {
            leash__log(lg, LEASH_LOG_WARN,
                       "renew: answer %zu is neither 0 nor 1 (nor a family place's 2 or fence)", i);
            out[i].status = LEASH_EPROTO;
        }
    }
}

/* 1 removed, 0 nobody held it; a WRONGTYPE error for a key that is not a
 * lock. */
static void parse_force(const redisReply *r, leash__answer *a, size_t n, const leash__logger *lg,
                        const char *what) {
    (void)n;
    memset(a, 0, sizeof(*a));
    if (r->type == REDIS_REPLY_INTEGER && (r->integer == 0 || r->integer == 1)) {
        a->kind = r->integer == 1 ? LEASH__ANS_REMOVED : LEASH__ANS_NOBODY;
        return;
    }
    bad_reply(r, a, 1, lg, "force release", what);
}

const leash__opdef leash__op_acquire = {"acquire", LEASH__OP_GRANT, parse_acquire};
const leash__opdef leash__op_release = {"release", LEASH__OP_RELEASE, parse_release};
const leash__opdef leash__op_renew = {"renew", LEASH__OP_RENEW, parse_renew};
const leash__opdef leash__op_force = {"force release", LEASH__OP_FORCE, parse_force};

/* 1; anything else is a protocol error. */
static void parse_raise(const redisReply *r, leash__answer *a, size_t n, const leash__logger *lg,
                        const char *what) {
    (void)n;
    memset(a, 0, sizeof(*a));
    if (r->type == REDIS_REPLY_INTEGER && r->integer == 1) {
        a->kind = LEASH__ANS_RAISED;
        return;
    }
    bad_reply(r, a, 1, lg, "fence raise", what);
}

const leash__opdef leash__op_raise = {"fence raise", LEASH__OP_RAISE, parse_raise};

/* ---- messages ---- */

/* "renewed:<lease ms>" from a holder's watchdog, "forced" from a force
 * release, "g:<token>:<fence>" on a family client's own channel (its
 * waiter token was let in), else the released token. */
static void message(const char *msg, size_t len, leash__msg *out) {
    static const char renewed[] = "renewed:";

    memset(out, 0, sizeof(*out));
    if (len > 3 + LEASH__TOKEN_LEN && memcmp(msg, "g:", 2) == 0 &&
        msg[2 + LEASH__TOKEN_LEN] == ':') {
        char digits[21];
        size_t dl = len - 3 - LEASH__TOKEN_LEN;
        if (dl >= sizeof(digits))
            return;
        memcpy(digits, msg + 3 + LEASH__TOKEN_LEN, dl);
        digits[dl] = '\0';
        out->kind = LEASH__MSG_GRANTED;
        out->token = msg + 2;
        out->token_len = LEASH__TOKEN_LEN;
        out->fence = strtoull(digits, NULL, 10);
        return;
    }
    if (len > sizeof(renewed) - 1 && memcmp(msg, renewed, sizeof(renewed) - 1) == 0) {
        out->kind = LEASH__MSG_RENEWED;
        out->lease_ms = strtoll(msg + sizeof(renewed) - 1, NULL, 10);
    } else if (len == 6 && memcmp(msg, "forced", 6) == 0) {
        out->kind = LEASH__MSG_FORCED;
    } else {
        out->kind = LEASH__MSG_RELEASED;
        out->token = msg;
        out->token_len = len;
        /* "<released token>:<token>": the lock is kept for that waiter. */
        if (len == 2 * LEASH__TOKEN_LEN + 1 && msg[LEASH__TOKEN_LEN] == ':') {
            out->token_len = LEASH__TOKEN_LEN;
            out->reserved = msg + LEASH__TOKEN_LEN + 1;
        }
    }
}

const leash__dialect leash__dialect_leash = {
    .name = "leash",
    .names = make_names,
    .scripts = scripts,
    .nscripts = 7,
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
    .message = message,
    .family_names = leash__family_names,
    .family_acquire_cmd = leash__family_acquire_cmd,
    .family_release_cmd = leash__family_release_cmd,
    .family_force_cmd = leash__family_force_cmd,
    .reserves = 1,
};
