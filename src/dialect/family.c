/* SPDX-License-Identifier: MIT */
/*
 * The lock family in leash's dialect: fair lock, read-write lock and
 * semaphore share one layout and three scripts (the renew script of
 * dialect/leash.c renews their holds and queue places too: fam_renew).
 *
 * Names. Of a lock name K = key_prefix + name (companions: see
 * dialect/common.c):
 *   K                 hash, the whole lock (below)
 *   K\0{K}g:<db>:<client>   the channel of one client (32 hex digits, new
 *                     for every client): where it hears that the lock was
 *                     handed to one of its waiters, "g:<token>:<fence>"
 * The hash's fields:
 *   fence2            the last fence given (not named "fence": leash 0.3's
 *                     family lock, layout 1, kept it there, and 0.3's
 *                     scripts take a hash with a fence field for one of
 *                     theirs; without it they refuse this hash, WRONGTYPE,
 *                     where they would let their waiters in beside our
 *                     holders and delete our hash)
 *   seq               the last queue place given
 *   permits           a semaphore's permits
 *   mode              the holders' kind, while anyone holds
 *   held, queued      how many holder and waiter entries there are
 *   soonest           at most the earliest holder's expiry
 *   ttl               when K expires (the PEXPIRE last set)
 *   head, tail        the first and last waiter's token
 *   h<token>          "<mode>:<count>:<fence>:<client>:<expiry>" per holder
 *   q<token>          "<mode>:<client>:<expiry>:<place>" per waiter
 *   n<token>, p<token>  the next and the previous waiter's token: the
 *                     queue is a list through the hash, so a script finds
 *                     the head, appends and unlinks with the fields it
 *                     already reads and writes
 * Modes: f fair lock, w writer, r reader, s semaphore permit. f and w are
 * exclusive; r goes in while only readers hold (and a writer's paired read
 * handle beside its writer); s while fewer than permits hold. A holder's
 * or waiter's entry is its lease: its expiry is in its field, set at the
 * grant (a place's expiry when a waiter is let in) and by renewals.
 *
 * The queue. A waiter's place is a lease (its expiry), renewed by its
 * watchdog like a hold. A script that frees room or finds its own way
 * blocked lets the head of the queue in while it fits (fam_admit): each
 * one let in becomes a holder whose expiry is that of its place and is
 * told on its client's channel. So the release, the renewal or the attempt
 * that notices a gap hands over, and a handoff costs one message. A head
 * whose place ran out is dropped when it comes up; entries whose lease ran
 * out are dropped by fam_scan (family.h says when it runs); until then they
 * are in nobody's way.
 *
 * Cost (Redis calls, EVALSHA included). Each script reads the lock in
 * one HMGET and first tries its fast path, straight-line code for the
 * common cases; the rest goes through the toolkit (fam_lib; the acquire's
 * reads the lock once more, one HMGET). A grant with nothing in the way:
 * EVALSHA, TIME, HMGET, HSET (4; a new lock also EXISTS, and a PEXPIRE);
 * a place at the end of the queue behind live holders: the same 4 (the
 * place, the link and the counts in one HSET); the release of one of
 * several holds: EVALSHA, HMGET, HSET, HDEL (4), of the last one EVALSHA,
 * HMGET, DEL (3); a release that lets the head in: EVALSHA, HMGET, TIME,
 * an HMGET of the head's place, the PUBLISH, HSET, HDEL (7; one more HMGET
 * and PUBLISH per further waiter let in). Once a lease, a PEXPIRE (and an
 * HGETALL when a lease may have run out).
 *
 * TTL: K's TTL is at least the latest expiry in it: a script that sets an
 * expiry beyond ttl sets it to twice that lease (fam_keep), so that a
 * stream of holds rewrites it once a lease, not once a hold. A script that
 * leaves no holder and nobody queued deletes K.
 *
 * Fences: the server's clock (TIME) in microseconds at the grant, and
 * above the last fence given (readers let in together). The fast paths
 * write them as they come from TIME, digits put together (fam_fence): a
 * 16-digit number made and printed in Lua costs the server a strtod and a
 * printf of a double each time.
 *
 * acquire KEYS: K  ARGV: token, lease, mode, client, permits, once,
 *         count, channel base, publish verb, under, not_after
 *         under: a read's paired write hold's token ("" none): while that
 *         token holds the write, the read goes in at once (a downgrade)
 *         -> {1, fence, count, now}: held (a new hold let in now, a place
 *            that was let in before (a check), or with count > 1 an extra
 *            hold of a held token: its count raised to count)
 *         -> {0, ms, 0, now, mark}: queued, at the head: the first
 *            holder's lease ends in ms at the soonest
 *         -> {0, -6, 0, now, mark}: queued behind others (or, once = 1,
 *            not let in: nothing written, {0, -6, 0, now})
 *         mark: the larger of the fence2 field and TIME in us when the
 *         place was written (fam_mark): every fence given before, hence
 *         every let-in message of an earlier place, is at most mark, and
 *         every later fence is above it (fences strictly grow per hash,
 *         whatever the server's clock does; prim/family.c, handed). A
 *         renewal of a place answers {2, mark} likewise (fam_renew).
 *         -> {0, -3, 0, now}: too late, did nothing; {0, -4, 0, now}: an
 *            extra hold of a hold that is gone
 *         -> {0, -5, permits, now}: a semaphore with another permit count
 * release KEYS: K  ARGV: token, count_after, channel base, verb,
 *         valid_until
 *         -> count left, 0 released, -1 not ours (a waiter's place is
 *            given up: also -1, it held nothing), -2 a resend that cannot
 *            tell (as the mutex's)
 * force   KEYS: K  ARGV: channel base, verb
 *         -> 1 holders were removed, 0 none; waiters are let in.
 * A key K that is not a family lock's hash (not a hash, no fence2 field,
 * or no held field: leash 0.3's family lock, layout 1) is a WRONGTYPE error
 * before anything is written.
 */
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>
#include <leash/leash.h>

#include "base/slot.h"
#include "base/token.h"
#include "dialect/dialect.h"
#include "dialect/family.h"
#include "wire/resp.h"

#define WRONGTYPE                                                                            \
    "if not S then return redis.error_reply('WRONGTYPE the key holds a value that is not a " \
    "lock of the family') end\n"

/* The fast path: a token that neither holds nor waits, with no lease in
 * its way that may have run out, is granted when it fits and nobody waits,
 * or takes a place at the end of the queue behind live holders. The
 * toolkit does the rest: a hold or place of its own, a downgrade, room
 * while others wait (a head that may be dead), a lease to drop. The fast
 * path reads only the fields it uses (not the token's p and n fields nor
 * the paired hold): each field read costs the server a lookup and a Lua
 * string, on every acquire; the toolkit reads the lock again (fam_load),
 * one HMGET more on the rarer slow path. */
static const char acquire_lua[] = LEASH__FAMILY_LUA
    "local t = redis.call('time')\n"
    "local now = fam_now(t)\n"
    "if ARGV[11] + 0 > 0 and now >= ARGV[11] + 0 then return {0, -3, 0, now} end\n"
    "local K, tok, mode = KEYS[1], ARGV[1], ARGV[3]\n"
    "local v = redis.pcall('hmget', K, 'fence2', 'seq', 'permits', 'mode', 'held', 'queued', "
    "'soonest', 'ttl',\n"
    "    'head', 'tail', 'h' .. tok, 'q' .. tok)\n"
    "if not v.err and not v[11] and not v[12] and ARGV[7] == '1' and ARGV[10] == '' and\n"
    "    (v[1] and v[5] or not v[1] and redis.call('exists', K) == 0) then\n"
    "  local held, queued, soon = tonumber(v[5] or 0), tonumber(v[6] or 0), tonumber(v[7])\n"
    "  local exp, ttl, a, r = now + tonumber(ARGV[2]), tonumber(v[8] or 0)\n"
    "  local room = held == 0 or mode == v[4] and\n"
    "      (mode == 'r' or mode == 's' and v[3] == ARGV[5] and held < tonumber(v[3]))\n"
    "  if held > 0 and (not soon or soon <= now) or mode == 's' and held > 0 and v[3] ~= ARGV[5] "
    "then\n"
    "    room = nil\n"
    "  elseif room and queued == 0 then\n"
    "    local f = fam_fence(t, v[1])\n"
    "    a = {'fence2', f, 'held', held + 1, 'h' .. tok, mode .. ':1:' .. f .. ':' .. ARGV[4] .. "
    "':' .. exp}\n"
    "    if held == 0 then\n"
    "      a[7], a[8], a[9], a[10] = 'mode', mode, 'soonest', exp\n"
    "    elseif exp < soon then\n"
    "      a[7], a[8] = 'soonest', exp\n"
    "    end\n"
    "    if mode == 's' and v[3] ~= ARGV[5] then a[#a + 1], a[#a + 2] = 'permits', ARGV[5] end\n"
    "    r = {1, tonumber(f), 1, now}\n"
    "  elseif not room and held > 0 then\n"
    "    if ARGV[6] == '1' then return {0, -6, 0, now} end\n"
    "    local seq = tostring((tonumber(v[2]) or 0) + 1)\n"
    "    a = {'seq', seq, 'queued', queued + 1, 'tail', tok, 'q' .. tok,\n"
    "         mode .. ':' .. ARGV[4] .. ':' .. exp .. ':' .. seq}\n"
    "    if v[10] then\n"
    "      a[9], a[10], a[11], a[12] = 'n' .. v[10], tok, 'p' .. tok, v[10]\n"
    "      r = {0, -6, 0, now, fam_mark(t, v[1])}\n"
    "    else\n"
    "      a[9], a[10] = 'head', tok\n"
    "      r = {0, soon - now, 0, now, fam_mark(t, v[1])}\n"
    "    end\n"
    "  end\n"
    "  if a then\n"
    "    if exp > ttl then a[#a + 1], a[#a + 2] = 'ttl', 2 * exp - now end\n"
    "    redis.call('hset', K, unpack(a))\n"
    "    if exp > ttl then redis.call('pexpire', K, 2 * (exp - now)) end\n"
    "    return r\n"
    "  end\n"
    "end\n"
    "local F = fam_lib()\n"
    "local lease, cl, n = tonumber(ARGV[2]), ARGV[4], tonumber(ARGV[7])\n"
    "local S = F.load(K, tok, ARGV[10])\n" WRONGTYPE "local exp = now + lease\n"
    "if mode == 's' and S.permits and S.permits ~= ARGV[5] and S.held > 0 then\n"
    "  F.prune(K, S, now)\n"
    "  if S.held > 0 then\n"
    "    F.done(K, S)\n"
    "    return {0, -5, tonumber(S.permits), now}\n"
    "  end\n"
    "end\n"
    "if S.h then\n"
    "  local m, c, f, hc, e = F.hold(S.h)\n"
    "  if e and e > now then\n"
    "    if n > c then c = n end\n"
    "    if e < exp then e = exp end\n"
    "    F.set(S, 'h' .. tok, m .. ':' .. c .. ':' .. f .. ':' .. hc .. ':' .. F.num(e))\n"
    "    F.keep(K, S, now, e)\n"
    "    F.done(K, S)\n"
    "    return {1, tonumber(f), c, now}\n"
    "  end\n"
    "  F.drop_holder(S, tok, m)\n"
    "end\n"
    "if n > 1 then\n"
    "  if not S.new then\n"
    "    F.prune(K, S, now)\n"
    "    F.admit(K, S, t, now, nil, ARGV[8], ARGV[9])\n"
    "    F.done(K, S)\n"
    "  end\n"
    "  return {0, -4, 0, now}\n"
    "end\n"
    "if mode == 's' and S.permits ~= ARGV[5] then S.permits = ARGV[5] end\n"
    "if S.q then\n"
    "  local m, qc, e, place = F.place(S.q)\n"
    "  if e and e > now then\n"
    "    F.set(S, 'q' .. tok, m .. ':' .. qc .. ':' .. F.num(exp) .. ':' .. place)\n"
    "    F.prune(K, S, now)\n"
    "    local f = F.admit(K, S, t, now, tok, ARGV[8], ARGV[9])\n"
    "    F.keep(K, S, now, exp)\n"
    "    F.done(K, S)\n"
    "    if f then return {1, tonumber(f), 1, now} end\n"
    "    if S.head == tok and S.soonest then return {0, S.soonest - now, 0, now, fam_mark(t, "
    "S.fence2)} end\n"
    "    return {0, -6, 0, now, fam_mark(t, S.fence2)}\n"
    "  end\n"
    "  F.unlink(S, tok, S.p, S.nx)\n"
    "end\n"
    "local function free()\n"
    "  if S.queued == 0 and F.fits(S, mode) then return true end\n"
    "  if mode ~= 'r' or ARGV[10] == '' or not S.uh then return false end\n"
    "  local m, _, _, _, e = F.hold(S.uh)\n"
    "  return m == 'w' and e and e > now\n"
    "end\n"
    "local ok = free()\n"
    "if not ok then\n"
    "  F.prune(K, S, now)\n"
    "  if S.freed or S.held == 0 or (S.queued > 0 and F.fits(S, mode)) then\n"
    "    F.admit(K, S, t, now, nil, ARGV[8], ARGV[9])\n"
    "  end\n"
    "  ok = free()\n"
    "end\n"
    "if ok then\n"
    "  local f = F.grant(S, tok, mode, cl, exp, 1, t)\n"
    "  F.keep(K, S, now, exp)\n"
    "  F.done(K, S)\n"
    "  return {1, tonumber(f), 1, now}\n"
    "end\n"
    "if ARGV[6] == '1' then\n"
    "  F.done(K, S)\n"
    "  return {0, -6, 0, now}\n"
    "end\n"
    "F.enqueue(S, tok, mode, cl, exp)\n"
    "F.keep(K, S, now, exp)\n"
    "F.done(K, S)\n"
    "if S.head == tok and S.soonest then return {0, S.soonest - now, 0, now, fam_mark(t, "
    "S.fence2)} end\n"
    "return {0, -6, 0, now, fam_mark(t, S.fence2)}\n";

/* The fast path: the last hold's release when nobody waits (the hash
 * goes), one of several when nobody waits or a reader's beside readers,
 * and a release that lets the head of the queue in while it fits. The
 * toolkit does the rest: a writer leaving its paired readers, a lease that
 * may have run out, a place given up, a count lowered. */
static const char release_lua[] = LEASH__FAMILY_LUA
    "local K, tok = KEYS[1], ARGV[1]\n"
    "local v = redis.pcall('hmget', K, 'fence2', 'permits', 'mode', 'held', 'queued', 'soonest', "
    "'head',\n"
    "    'h' .. tok)\n"
    "local t, now\n"
    "if not v.err and v[8] and v[4] and ARGV[2] == '0' then\n"
    "  local held, queued, m = tonumber(v[4]), tonumber(v[5] or 0), string.sub(v[8], 1, 1)\n"
    "  if queued == 0 and held <= 1 then\n"
    "    redis.call('del', K)\n"
    "    return 0\n"
    "  end\n"
    "  if queued == 0 and m ~= 'w' or m == 'r' and v[3] == 'r' and held > 1 then\n"
    "    redis.call('hset', K, 'held', held - 1)\n"
    "    redis.call('hdel', K, 'h' .. tok)\n"
    "    return 0\n"
    "  end\n"
    "  t = redis.call('time')\n"
    "  now = fam_now(t)\n"
    "  local mode, soon, permits = v[3], tonumber(v[6]), tonumber(v[2] or 1)\n"
    "  held = held - 1\n"
    "  if held == 0 then mode, soon = nil, nil end\n"
    "  if (m ~= 'w' or held == 0) and (held == 0 or soon and soon > now) then\n"
    "    local fence, head, a, d = v[1], v[7], {}, {'h' .. tok}\n"
    "    while queued > 0 and head do\n"
    "      if held > 0 and mode ~= 'r' and (mode ~= 's' or held >= permits) then break end\n"
    "      local w = redis.call('hmget', K, 'q' .. head, 'n' .. head)\n"
    "      local hm, cl, e = string.match(w[1] or '', '^(%a):(%x+):(%d+):')\n"
    "      e = tonumber(e)\n"
    "      local live = e and e > now\n"
    "      if live and held > 0 and not (hm == mode and (hm == 'r' or hm == 's' and held < "
    "permits)) then\n"
    "        break\n"
    "      end\n"
    "      d[#d + 1], d[#d + 2] = 'q' .. head, 'n' .. head\n"
    "      if w[2] then d[#d + 1] = 'p' .. w[2] end\n"
    "      queued = queued - 1\n"
    "      if live then\n"
    "        local f = fam_fence(t, fence)\n"
    "        fence = f\n"
    "        a[#a + 1], a[#a + 2] = 'h' .. head, hm .. ':1:' .. f .. ':' .. cl .. ':' .. e\n"
    "        if held == 0 then mode, soon = hm, e elseif e < soon then soon = e end\n"
    "        held = held + 1\n"
    "        redis.pcall(ARGV[4], ARGV[3] .. cl, 'g:' .. head .. ':' .. f)\n"
    "      end\n"
    "      head = w[2]\n"
    "    end\n"
    "    if held == 0 and queued == 0 then\n"
    "      redis.call('del', K)\n"
    "      return 0\n"
    "    end\n"
    "    local function put(f, x, was)\n"
    "      if x ~= was then a[#a + 1], a[#a + 2] = f, x end\n"
    "    end\n"
    "    put('held', held, tonumber(v[4]))\n"
    "    put('queued', queued, tonumber(v[5] or 0))\n"
    "    put('fence2', fence, v[1])\n"
    "    if mode then\n"
    "      put('mode', mode, v[3])\n"
    "      put('soonest', soon, tonumber(v[6]))\n"
    "    else\n"
    "      d[#d + 1], d[#d + 2] = 'mode', 'soonest'\n"
    "    end\n"
    "    if head then\n"
    "      put('head', head, v[7])\n"
    "    else\n"
    "      d[#d + 1], d[#d + 2] = 'head', 'tail'\n"
    "    end\n"
    "    if #a > 0 then redis.call('hset', K, unpack(a)) end\n"
    "    redis.call('hdel', K, unpack(d))\n"
    "    return 0\n"
    "  end\n"
    "end\n"
    "local F = fam_lib()\n"
    "local S = F.load(K, tok)\n" WRONGTYPE "local r, m\n"
    "if S.h then\n"
    "  local c, f, hc, e\n"
    "  m, c, f, hc, e = F.hold(S.h)\n"
    "  if ARGV[2] ~= '0' then\n"
    "    F.set(S, 'h' .. tok, m .. ':' .. ARGV[2] .. ':' .. f .. ':' .. hc .. ':' .. F.num(e))\n"
    "    F.flush(K, S)\n"
    "    return tonumber(ARGV[2])\n"
    "  end\n"
    "  F.drop_holder(S, tok, m)\n"
    "  r = 0\n"
    "elseif S.q then\n"
    "  F.unlink(S, tok, S.p, S.nx)\n"
    "  r = -1\n"
    "end\n"
    "if r then\n"
    "  if S.queued > 0 and not (m == 'r' and S.mode == 'r') then\n"
    "    if not t then\n"
    "      t = redis.call('time')\n"
    "      now = fam_now(t)\n"
    "    end\n"
    "    F.prune(K, S, now)\n"
    "    F.admit(K, S, t, now, nil, ARGV[3], ARGV[4])\n"
    "  end\n"
    "  F.done(K, S)\n"
    "  return r\n"
    "end\n"
    "if ARGV[5] + 0 == 0 then return -1 end\n"
    "if fam_now(redis.call('time')) < ARGV[5] + 0 then return 0 end\n"
    "return -2\n";

static const char force_lua[] =
    LEASH__FAMILY_LUA "local K = KEYS[1]\n"
                      "local F = fam_lib()\n"
                      "local S = F.load(K, '')\n" WRONGTYPE "if S.new then return 0 end\n"
                      "local t = redis.call('time')\n"
                      "local now = fam_now(t)\n"
                      "local removed = F.scan(K, S, now, true)\n"
                      "F.admit(K, S, t, now, nil, ARGV[1], ARGV[2])\n"
                      "F.done(K, S)\n"
                      "if removed > 0 then return 1 end\n"
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

size_t leash__family_base_len(const leash__names *n) {
    return n->channel_len - LEASH__TOKEN_LEN;
}

leash__cmd *leash__family_acquire_cmd(const leash__names *n, const char *token, int64_t lease_ms,
                                      char mode, int permits, int once, int count,
                                      const char *under, int64_t validity_ms, int64_t deadline) {
    const char *argv[3 + 1 + 11];
    size_t lens[3 + 1 + 11], len;
    char lease[21], perm[21], cnt[21];
    char *buf;
    leash__cmd *cmd;

    argv[3] = n->key;
    lens[3] = n->key_len;
    argv[4] = token;
    lens[4] = LEASH__TOKEN_LEN;
    argv[5] = lease;
    lens[5] = leash__resp_int(lease, lease_ms);
    argv[6] = &mode;
    lens[6] = 1;
    argv[7] = n->channel + leash__family_base_len(n);
    lens[7] = LEASH__TOKEN_LEN;
    argv[8] = perm;
    lens[8] = leash__resp_int(perm, permits);
    argv[9] = once ? "1" : "0";
    lens[9] = 1;
    argv[10] = cnt;
    lens[10] = leash__resp_int(cnt, count);
    argv[11] = n->channel;
    lens[11] = leash__family_base_len(n);
    argv[12] = leash__publish_verb(n, &lens[12]);
    argv[13] = under != NULL ? under : "";
    lens[13] = under != NULL ? LEASH__TOKEN_LEN : 0;
    argv[14] = leash__stamp_zeros;
    lens[14] = LEASH__STAMP_DIGITS;
    buf = leash__script_call(&len, &leash__family_acquire_script, 1, 15, argv, lens);
    cmd = buf ? leash__cmd_new(buf, len, &leash__family_acquire_script, LEASH__CMD_RETRY, deadline,
                               NULL, NULL)
              : NULL;
    if (cmd != NULL) {
        leash__cmd_publish_arg(cmd, 12);
        leash__cmd_stamp(cmd, LEASH__STAMP_NOT_AFTER, validity_ms);
    }
    return cmd;
}

leash__cmd *leash__family_release_cmd(const leash__names *n, const char *token, int count_after,
                                      int64_t valid_until, int64_t deadline) {
    const char *argv[3 + 1 + 5];
    size_t lens[3 + 1 + 5], len;
    char cnt[21];
    char *buf;
    leash__cmd *cmd;

    argv[3] = n->key;
    lens[3] = n->key_len;
    argv[4] = token;
    lens[4] = LEASH__TOKEN_LEN;
    argv[5] = cnt;
    lens[5] = leash__resp_int(cnt, count_after);
    argv[6] = n->channel;
    lens[6] = leash__family_base_len(n);
    argv[7] = leash__publish_verb(n, &lens[7]);
    argv[8] = leash__stamp_zeros;
    lens[8] = LEASH__STAMP_DIGITS;
    buf = leash__script_call(&len, &leash__family_release_script, 1, 9, argv, lens);
    cmd = buf ? leash__cmd_new(buf, len, &leash__family_release_script, LEASH__CMD_RETRY, deadline,
                               NULL, NULL)
              : NULL;
    if (cmd != NULL)
        leash__cmd_publish_arg(cmd, 7);
    if (cmd != NULL && valid_until != 0)
        leash__cmd_stamp(cmd, LEASH__STAMP_RESEND_VALID_UNTIL, valid_until);
    return cmd;
}

leash__cmd *leash__family_force_cmd(const leash__names *n, int64_t deadline) {
    const char *argv[3 + 1 + 2];
    size_t lens[3 + 1 + 2], len;
    char *buf;

    argv[3] = n->key;
    lens[3] = n->key_len;
    argv[4] = n->channel;
    lens[4] = leash__family_base_len(n);
    argv[5] = leash__publish_verb(n, &lens[5]);
    /* EVAL, never resent: as the mutex's force (dialect/leash.c). */
    buf = leash__script_eval_call(&len, &force_script, 1, 6, argv, lens);
    return leash__publishing_cmd(buf, len, 5, deadline);
}

/* ---- reading a lock back ---- */

/* The number after the skip-th colon of v[0..len), or -1. */
static long long entry_part(const char *v, size_t len, int skip) {
    const char *p = v, *end = v + len;
    char digits[21];
    size_t n = 0;

    for (; skip > 0; skip--) {
        if ((p = memchr(p, ':', (size_t)(end - p))) == NULL)
            return -1;
        p++;
    }
    while (p + n < end && p[n] >= '0' && p[n] <= '9' && n + 1 < sizeof(digits))
        n++;
    if (n == 0)
        return -1;
    memcpy(digits, p, n);
    digits[n] = '\0';
    return strtoll(digits, NULL, 10);
}

static int by_place(const void *a, const void *b) {
    const leash__state_entry *x = a, *y = b;
    return (x->count > y->count) - (x->count < y->count);
}

/* The fields named at the top: h<token> holders, q<token> waiters (by
 * place); entries whose lease ran out by s->server_ms are left out: they
 * hold nothing, and the next script that meets them drops them. The kind
 * is the modes' (a semaphore's permits field stays while nobody holds). A
 * hash without fence or held is no lock to the scripts (fam_load), so it
 * is none here either. */
int leash__family_read_state(const struct redisReply *all, leash__state *s) {
    const redisReply *fence = leash__hash_field(all, "fence2"),
                     *permits = leash__hash_field(all, "permits");
    int modes[128] = {0};
    size_t i;

    if (fence == NULL || fence->type != REDIS_REPLY_STRING ||
        leash__hash_field(all, "held") == NULL)
        return 0;
    s->fence = strtoull(fence->str, NULL, 10);
    s->permits = permits != NULL && permits->type == REDIS_REPLY_STRING
                     ? strtoll(permits->str, NULL, 10)
                     : 0;
    for (i = 0; i + 1 < all->elements; i += 2) {
        const redisReply *k = all->element[i], *v = all->element[i + 1];
        int holder;
        long long expiry;
        leash__state_entry *h;

        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING ||
            k->len != 1 + LEASH__TOKEN_LEN || (k->str[0] != 'h' && k->str[0] != 'q') || v->len < 2)
            continue;
        holder = k->str[0] == 'h';
        expiry = entry_part(v->str, v->len, holder ? 4 : 2);
        if (expiry <= s->server_ms)
            continue;
        h = holder ? leash__state_add(&s->holders, &s->nholders, k->str + 1, LEASH__TOKEN_LEN)
                   : leash__state_add(&s->waiters, &s->nwaiters, k->str + 1, LEASH__TOKEN_LEN);
        if (h == NULL)
            return -1;
        h->mode = v->str[0];
        h->ttl_ms = expiry - s->server_ms;
        modes[(unsigned char)v->str[0] & 127] = 1;
        if (holder) {
            long long f = entry_part(v->str, v->len, 2);
            h->count = entry_part(v->str, v->len, 1);
            h->fence = f > 0 ? (uint64_t)f : 0;
        } else {
            h->count = entry_part(v->str, v->len, 3);
        }
    }
    if (s->nwaiters > 1)
        qsort(s->waiters, s->nwaiters, sizeof(*s->waiters), by_place);
    s->kind = modes['f']                      ? LEASH__STATE_FAIR
              : modes['r'] || modes['w']      ? LEASH__STATE_RW
              : modes['s'] || permits != NULL ? LEASH__STATE_SEMAPHORE
                                              : LEASH__STATE_FAMILY;
    return 1;
}
