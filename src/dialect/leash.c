/* SPDX-License-Identifier: MIT */
#include "dialect/dialect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>
#include <leash/leash.h>

#include "base/slot.h"
#include "base/token.h"
#include "dialect/family.h"
#include "dialect/multi.h"
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
 * Names: the channel is the companion "released:<db>" of the key
 * (dialect/common.c says what a companion is, and builds the commands and
 * reads the answers that Redisson's dialect shares).
 *
 * A lock is one string key, written with its lease as PEXPIRE:
 *   "<token>:<w>:<count>:<fence>"
 * token: the holder's owner token (32 hex digits); w: 1 once an attempt
 * that waits found it busy (its release and renewals then PUBLISH, else
 * they need not: scripts run one at a time, so a waiter either marked the
 * hold before its release, or attempts after it and finds the lock free;
 * a try-once does not wait for a message and marks nothing; a new hold
 * starts unmarked, and its own writes keep the mark);
 * count: the holder's reentrant holds; fence: this hold's fencing token,
 * the server's clock (TIME) in microseconds when the hold began. Nothing
 * else is written, so an unused name leaves nothing behind once its lease
 * ran out, and Redis memory does not grow with throughput.
 *
 * Starving waiters (leash.h, LEASH_STARVE_MS; docs/how-it-works.md "Fairness"). A waiter
 * that has waited that long asks with its age (count = minus the ms it
 * waited). Finding the lock busy, its attempt queues it for the grants
 * after this hold, oldest first (at most LEASH_RESERVE_QUEUE of them):
 * the hold's value goes on with one ":<token>:<since>" per queued waiter
 * (since: the server's ms when it began to wait). The hold's own writes
 * keep them. The release then does not delete the key: it leaves
 *   "<first token>:1:0:<released fence>" + the rest of the queue
 * (count 0: no hold; the lock kept for that waiter, whose grant takes a
 * fence above the released one even if the clock stepped back) with a PX of
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
 * acquire  KEYS: lock [, fence floor]  ARGV: token, lease_ms, count, mark
 *          [, floor_ttl_ms, proposal (with a floor)], not_after
 *          mark: 1 for an attempt that waits, 0 for a try-once: only the
 *          busy answer of one that waits (or starves) marks the hold "w".
 *          count below 1: a new hold from a waiter that has waited -count
 *          ms (it queues if busy, see above; never with Redlock).
 *          With a fence floor (Redlock), a new hold's fence is the proposal
 *          (one fence route/quorum.c proposes to every server alike, its
 *          digits without leading zeros; 0 none), or the server's clock
 *          when the proposal lags it by more than W = min(lease / 4, 1 s),
 *          or the floor + 1 when that is larger; the grant writes it as the
 *          floor (PX floor_ttl_ms), its last write, after every check: a
 *          floor only grows. So the servers that granted one proposal hold
 *          it as their floor already, and the grant needs no raise.
 *          not_after (a server time in ms, LEASH__STAMP_DIGITS digits; 0 =
 *          none) is written by the connection when it writes the command:
 *          a copy that runs later (it sat in a frozen server's socket after
 *          the client gave up on it) does nothing.
 *          -> {1, fence, count, now} granted (count 1: a new hold, or the
 *             retry of one that already ran; count > 1: an extra hold of
 *             our own token: its count is set, never lowered, and its lease
 *             renewed)
 *          -> {0, pttl, 0, now} held by another (and marked "w" when
 *             mark is 1)
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
 * renew    KEYS: lock1..lockN  ARGV: token1, lease1, channel1, layout1, ...,
 *          publish, not_after
 *          layout: 'm' a mutex, 'f' the lock family's, 'r<fence>:<floor
 *          ttl ms>' a Redlock hold, whose fence floor follows its key in
 *          KEYS. A Redlock hold spreads: where its key is missing and the
 *          floor is below its fence, the renewal writes the hold (count 1,
 *          that fence) and raises the floor to it. A hold granted by a bare
 *          majority (the others still held the last holder's key, or did
 *          not answer) so reaches the rest, and survives the loss of any
 *          minority, as Redlock promises. The floor is what keeps it from
 *          coming back where it was: every server that had the hold, by
 *          grant, raise or spread, has its fence as floor, so a hold
 *          force-released or released there is never written again (the
 *          holder learns at the next renewal, as on one server). Where the
 *          hold is, such a renewal keeps that floor (at least the fence,
 *          its TTL renewed): written at the grant only, it would expire
 *          under a hold renewed for longer than a floor lives, and the
 *          spread would then undo a force release everywhere (and the next
 *          holder's fence would rest on the clocks alone). The watchdog
 *          sends the 'r' layout on a hold's first renewals, until one
 *          reached every server that is up (route/quorum.c), and one in
 *          every quarter of the floor's life, 'm' on the others. Where the
 *          spread is refused for the floor (the hold was removed there), it
 *          keeps that floor's TTL (a partial force release, below). A floor of
 *          another type is passed by, and a spread refused for memory (a
 *          script's first write is, when Redis is full) is not one: they
 *          fail no other lock of the batch.
 *          -> {r1..rN, now}, 1 renewed, 0 not ours (gone, taken, wrong type,
 *             or only kept for that token: count 0 holds nothing), -5 not
 *             ours for now (spreading: an older hold, whose fence is below
 *             this one's, still stands there: its release or expiry comes,
 *             and a spread after it can take); a family waiter's place
 *             {2, mark} renewed (dialect/family.c says what mark is) or a
 *             fence, let in; now:
 *             the server's clock in ms, for the connection's offset (a
 *             hold's renewals measure it again every renew interval),
 *             -3 each when not_after passed: it did nothing. not_after (as
 *             the acquire's: written at the write, the command timeout
 *             later on the server's clock) keeps a copy that sat in a
 *             frozen server's socket, which the client gave up on, from
 *             setting a fresh lease when it runs late - after a release
 *             that has not reached that server yet, say;
 *             a renewed lock marked "w" publishes "renewed:<lease>", so
 *             waiters sleep through a live holder's renewals without
 *             sending anything, and wake on their own only when it stops
 * raise    KEYS: fence floor [, more floors]  ARGV: fence, ttl_ms
 *          -> 1; the floor is at least fence from now on (its TTL renewed).
 *          More floors: a Redlock multi-lock's members, which its one
 *          script granted one fence (dialect/multi.c); every floor is read
 *          before any is written.
 *          Redlock (route/quorum.c): when fewer than a majority of the
 *          granting servers returned one fence (a floor above the proposal
 *          somewhere), the hold's fence is the largest returned, and the
 *          floors of the granting servers below it are raised to it before
 *          the grant counts, so that a majority's floors hold it and the
 *          next majority, which shares a server with them, grants a larger
 *          fence. When a majority returned one fence, their grants wrote it
 *          as their floors, and nothing is raised.
 * force    KEYS: lock [, fence floor]  ARGV: channel, publish [, floor ttl ms]
 *          -> 1 a hold was removed (key deleted, PUBLISH "forced" on channel),
 *             0 nobody held it, a WRONGTYPE error when the key is not a lock
 *             (it is left alone). Whoever held it finds out at its next
 *             renewal (lost, EXPIRED).
 *          With a fence floor (Redlock): -> {1 or 0, the floor after it}
 *          (0: none, or one of another type). Removing a hold keeps the
 *          floor at least at its fence, and a floor that is there (removed
 *          or not) lives at least floor ttl from now: a spread writes a
 *          hold only where the floor is below its fence, so a server whose
 *          floor is at least the removed hold's takes it back neither now
 *          nor before the holder's renewals found it gone; the holder's
 *          spreading renewals keep that floor from then on. route/quorum.c
 *          counts a "nobody" only with such a floor (the removed hold's
 *          fence as the removing servers' floors say): on a server that
 *          never had the hold (its grant copy dropped, restarted empty)
 *          the spread would write it.
 *          Sent as EVAL, never EVALSHA: the resend that follows a NOSCRIPT
 *          answer would run it after commands issued later (an acquire, say)
 *          and remove the hold they created.
 */

/* The grant is one SET ... NX GET from Redis 7.0 (NX with GET is 7.0);
 * before that a SET ... NX, and a GET only when the key was there (a busy
 * lock, our own extra hold, a key of another type: GET's WRONGTYPE, before
 * anything was written). GRANT is the part that differs.
 * A new hold's fence is written as the digits TIME or the proposal came
 * with, not through string.format('%.0f'): formatting a double was the
 * dearest Lua of a grant (callgrind on redis-server 7.0: about 3,000 of the
 * 124,000 instructions of a one-server acquire and release at the server's
 * clock; issue 35). Only a fence above the floor is formatted.
 * Each string read as a number costs a strtod (about 600 instructions) and
 * tonumber() two of them behind a C call: TIME's fields are read once, our
 * own arguments by arithmetic (an error there, before any write, is as good
 * as tonumber's nil), the floor, which may hold anything, by tonumber; the
 * window is worked out only for a proposal behind the clock, TIME's digits
 * only when they are the fence, and the answer carries the fence's number,
 * not its digits read back (about 9,000 of 121,000 instructions a server
 * spends on a Redlock acquire and release; issue 35). */
#define ACQUIRE_LUA(GRANT)                                                                   \
    "local t = redis.call('time')\n"                                                         \
    "local s, us = t[1] + 0, t[2] + 0\n"                                                     \
    "local now = s * 1000 + math.floor(us / 1000)\n"                                         \
    "local na = ARGV[#ARGV] + 0\n"                                                           \
    "if na > 0 and now >= na then return {0, -3, 0, now} end\n"                              \
    "local k, tok, n = KEYS[1], ARGV[1], ARGV[3] + 0\n"                                      \
    "local since\n"                                                                          \
    "if n < 1 then since, n = now + n, 1 end\n"                                              \
    "local v\n"                                                                              \
    "if n == 1 then\n"                                                                       \
    "  local fn, f = s * 1000000 + us\n"                                                     \
    "  if KEYS[2] then\n"                                                                    \
    "    local p = ARGV[6] + 0\n"                                                            \
    "    if p > 0 and (p >= fn or p >= fn - math.min(ARGV[2] / 4, 1000) * 1000) then\n"      \
    "      fn = p\n"                                                                         \
    "      if p < 9007199254740992 then f = ARGV[6] end\n"                                   \
    "    end\n"                                                                              \
    "    local fl = redis.call('get', KEYS[2])\n"                                            \
    "    fl = fl and tonumber(fl) or 0\n"                                                    \
    "    if fl >= fn then fn, f = fl + 1, nil end\n"                                         \
    "  end\n"                                                                                \
    "  if not f and fn == s * 1000000 + us then\n"                                           \
    "    f = t[1] .. string.sub('00000' .. t[2], -6)\n"                                      \
    "  end\n"                                                                                \
    "  f = f or string.format('%.0f', fn)\n" GRANT "else\n"                                  \
    "  v = redis.call('get', k)\n"                                                           \
    "  if not v then return {0, -4, 0, now} end\n"                                           \
    "end\n"                                                                                  \
    "local o, w, c, f, r = string.match(v, '^(%x+):([01]):(%d+):(%d+)(.*)$')\n"              \
    "if r and string.gsub(r, ':%x+:%d+', '') ~= '' then o = nil end\n"                       \
    "if not o then return redis.error_reply('WRONGTYPE the key holds a value that is not a " \
    "lock') end\n"                                                                           \
    "if o == tok and c == '0' then\n"                                                        \
    "  if n > 1 then return {0, -4, 0, now} end\n"                                           \
    "  local g = t[1] * 1000000 + t[2]\n"                                                    \
    "  if g <= tonumber(f) then g = tonumber(f) + 1 end\n"                                   \
    "  f = string.format('%.0f', g)\n"                                                       \
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
    "local w2 = (ARGV[4] == '1' or since) and '1' or w\n"                                    \
    "if w2 ~= w or r2 ~= r then\n"                                                           \
    "  redis.call('set', k, o .. ':' .. w2 .. ':' .. c .. ':' .. f .. r2, 'KEEPTTL')\n"      \
    "end\n"                                                                                  \
    "return {0, redis.call('pttl', k), 0, now}\n"

/* A new hold's fence becomes its server's floor (Redlock), after every
 * check: the floor only grows, since f is above it. */
#define FLOOR_LUA "if KEYS[2] then redis.call('set', KEYS[2], f, 'PX', ARGV[5]) end\n"

static const char acquire_lua[] =
    ACQUIRE_LUA("  v = redis.call('set', k, tok .. ':0:1:' .. f, 'NX', 'PX', ARGV[2], 'GET')\n"
                "  if not v then\n"
                "    " FLOOR_LUA "    return {1, fn, 1, now}\n"
                "  end\n");
static const char acquire_lua_60[] =
    ACQUIRE_LUA("  if redis.call('set', k, tok .. ':0:1:' .. f, 'NX', 'PX', ARGV[2]) then\n"
                "    " FLOOR_LUA "    return {1, fn, 1, now}\n"
                "  end\n"
                "  v = redis.call('get', k)\n");

/* An unmarked hold is deleted before any pattern runs: waiters queue only
 * in a marked one (their attempt marks it), and the pattern was most of the
 * release's own Lua. Both bytes after the token come from one call, and are
 * looked at before the token is cut out. */
static const char release_lua[] =
    "local v = redis.call('get', KEYS[1])\n"
    "local b33, b34\n"
    "if v then b33, b34 = string.byte(v, 33, 34) end\n"
    "if b33 == 58 and string.sub(v, 1, 32) == ARGV[1] then\n"
    "  if ARGV[2] ~= '0' then\n"
    "    local w, f, r = string.match(v, '^%x+:([01]):%d+:(%d+)(.*)$')\n"
    "    if not w then return redis.error_reply('WRONGTYPE the key holds a value that is not a "
    "lock') end\n"
    "    redis.call('set', KEYS[1], ARGV[1] .. ':' .. w .. ':' .. ARGV[2] .. ':' .. f .. r, "
    "'KEEPTTL')\n"
    "    return tonumber(ARGV[2])\n"
    "  end\n"
    "  if b34 ~= 49 then\n"
    "    redis.call('del', KEYS[1])\n"
    "    return 0\n"
    "  end\n"
    "  local f, r, rest = string.match(v, '^%x+:1:%d+:(%d+):(%x+):%d+(.*)$')\n"
    "  if r then\n"
    "    redis.call('set', KEYS[1], r .. ':1:0:' .. f .. rest, 'PX', " LEASH__RESERVE_MS_TEXT ")\n"
    "    redis.pcall(ARGV[4], ARGV[3], ARGV[1] .. ':' .. r)\n"
    "    return 0\n"
    "  end\n"
    "  redis.call('del', KEYS[1])\n"
    "  redis.pcall(ARGV[4], ARGV[3], ARGV[1])\n"
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
    "local function floor_of(key)\n"
    "  local fl = redis.pcall('get', key)\n"
    "  if type(fl) == 'table' then return nil end\n"
    "  return tonumber(fl or 0) or 0\n"
    "end\n"
    "local function spread(key, v, lease, floor, f, ttl)\n"
    "  local ok = redis.pcall('set', key, v, 'PX', lease)\n"
    "  if type(ok) == 'table' and ok.err then return false end\n"
    "  redis.call('set', floor, f, 'PX', ttl)\n"
    "  return true\n"
    "end\n"
    "local function keep_floor(key, f, ttl)\n"
    "  local fl = floor_of(key)\n"
    "  if not fl then return end\n"
    "  if fl < tonumber(f) then redis.call('set', key, f, 'PX', ttl)\n"
    "  else redis.call('pexpire', key, ttl) end\n"
    "end\n"
    "local r, k, verb, t, now = {}, 1, ARGV[#ARGV - 1]\n"
    "local count = (#ARGV - 2) / 4\n"
    "if ARGV[#ARGV] + 0 > 0 then\n"
    "  t = redis.call('time')\n"
    "  now = fam_now(t)\n"
    "  if now >= ARGV[#ARGV] + 0 then\n"
    "    for i = 1, count do r[i] = -3 end\n"
    "    r[count + 1] = now\n"
    "    return r\n"
    "  end\n"
    "end\n"
    "for i = 1, count do\n"
    "  local tok, lease, chan = ARGV[4 * i - 3], ARGV[4 * i - 2], ARGV[4 * i - 1]\n"
    "  local layout = ARGV[4 * i]\n"
    "  if layout ~= 'f' then\n"
    "    local v = redis.pcall('get', KEYS[k])\n"
    "    local f, ttl = string.match(layout, '^r(%d+):(%d+)$')\n"
    "    if type(v) == 'string' and string.sub(v, 1, 33) == tok .. ':' and\n"
    "        string.sub(v, 36, 37) ~= '0:' then\n"
    "      redis.call('pexpire', KEYS[k], lease)\n"
    "      if f then keep_floor(KEYS[k + 1], f, ttl) end\n"
    "      if string.byte(v, 34) == 49 then redis.pcall(verb, chan, 'renewed:' .. lease) end\n"
    "      r[i] = 1\n"
    "    elseif v == false and f and (floor_of(KEYS[k + 1]) or math.huge) < tonumber(f) and\n"
    "        spread(KEYS[k], tok .. ':0:1:' .. f, lease, KEYS[k + 1], f, ttl) then\n"
    "      r[i] = 1\n"
    "    elseif f and type(v) == 'string' and\n"
    "        tonumber(string.match(v, '^%x+:[01]:%d+:(%d+)') or f) < tonumber(f) then\n"
    "      r[i] = -5\n"
    "    else\n"
    "      if v == false and f and (floor_of(KEYS[k + 1]) or -1) >= tonumber(f) and\n"
    "          redis.call('pttl', KEYS[k + 1]) < tonumber(ttl) then\n"
    "        redis.call('pexpire', KEYS[k + 1], ttl)\n"
    "      end\n"
    "      r[i] = 0\n"
    "    end\n"
    "    k = k + (f and 2 or 1)\n"
    "  else\n"
    "    if not t then\n"
    "      t = redis.call('time')\n"
    "      now = fam_now(t)\n"
    "    end\n"
    "    r[i] = fam_renew(KEYS[k], tok, tonumber(lease), chan, verb, t, now)\n"
    "    k = k + 1\n"
    "  end\n"
    "end\n"
    "if not t then t = redis.call('time') end\n"
    "r[count + 1] = fam_now(t)\n"
    "return r\n";

static const char force_lua[] =
    "local v = redis.pcall('get', KEYS[1])\n"
    "if type(v) == 'table' then return v end\n"
    "local fl, fs, f\n"
    "if KEYS[2] then\n"
    "  fl = redis.pcall('get', KEYS[2])\n"
    "  if type(fl) == 'table' then fl = nil else fl = tonumber(fl or 0) or 0 end\n"
    "end\n"
    "if v then\n"
    "  local tail\n"
    "  fs, tail = string.match(v, '^%x+:[01]:%d+:(%d+)(.*)$')\n"
    "  if not tail or string.gsub(tail, ':%x+:%d+', '') ~= '' then\n"
    "    return redis.error_reply('WRONGTYPE the key holds a value that is not a lock')\n"
    "  end\n"
    "  redis.call('del', KEYS[1])\n"
    "  redis.pcall(ARGV[2], ARGV[1], 'forced')\n"
    "  f = tonumber(fs)\n"
    "end\n"
    "if not KEYS[2] then return v and 1 or 0 end\n"
    "if fl and (f or 0) > fl then\n"
    "  local ttl = math.max(redis.call('pttl', KEYS[2]), tonumber(ARGV[3]))\n"
    "  redis.call('set', KEYS[2], fs, 'PX', ttl)\n"
    "  fl = f\n"
    "elseif fl and fl > 0 and redis.call('pttl', KEYS[2]) < tonumber(ARGV[3]) then\n"
    "  redis.call('pexpire', KEYS[2], ARGV[3])\n"
    "end\n"
    "return {v and 1 or 0, fl or f or 0}\n";

static leash__script acquire_script, acquire_script_60, release_script, renew_script, force_script;
/* By id (dialect.h), so that the ids and the array cannot drift apart. */
static const leash__script *const scripts[LEASH__LEASH_SCRIPT_COUNT] = {
    [LEASH__LEASH_SCRIPT_ACQUIRE] = &acquire_script,
    [LEASH__LEASH_SCRIPT_RELEASE] = &release_script,
    [LEASH__LEASH_SCRIPT_RENEW] = &renew_script,
    [LEASH__LEASH_SCRIPT_FORCE] = &force_script,
    [LEASH__LEASH_SCRIPT_RAISE] = &leash__raise_script,
    [LEASH__LEASH_SCRIPT_FAMILY_ACQUIRE] = &leash__family_acquire_script,
    [LEASH__LEASH_SCRIPT_FAMILY_RELEASE] = &leash__family_release_script,
    [LEASH__LEASH_SCRIPT_MULTI_ACQUIRE] = &leash__multi_acquire_script,
    [LEASH__LEASH_SCRIPT_MULTI_ACQUIRE_FENCED] = &leash__multi_acquire_fenced_script};

/* The SHA1s of leash's own scripts (leash__dialects_init). */
void leash__leash_scripts_init(void) {
    leash__script_init(&acquire_script_60, acquire_lua_60);
    leash__script_init_since(&acquire_script, acquire_lua, LEASH__VERSION(7, 0, 0),
                             &acquire_script_60);
    leash__script_init(&release_script, release_lua);
    leash__script_init(&renew_script, renew_lua);
    leash__script_init(&force_script, force_lua);
}

/* ---- names ---- */

static int make_names(leash__names *n, const leash__logger *lg, const char *prefix,
                      const char *name, int db) {
    char kind[32];

    memcpy(kind, "released:", 9);
    return leash__names_make(n, lg, prefix, name, kind, 9 + leash__resp_int(kind + 9, db));
}

/* ---- commands ---- */

static leash__cmd *acquire_cmd(const leash__names *n, const char *token, int64_t lease_ms,
                               int count, int waits, int64_t validity_ms, int64_t deadline) {
    return leash__hold_acquire_cmd(&acquire_script, n, token, LEASH__TOKEN_LEN, lease_ms, count,
                                   waits ? "1" : "0", validity_ms, deadline);
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

/* Per lock: its key (and a spreading Redlock hold's fence floor), and ARGV
 * token, lease, channel (the family: the channel base), layout ('m' the
 * mutex's, 'f' the family's, 'r<fence>:<floor ttl>' a Redlock hold that
 * spreads); then the publish verb. */
static leash__cmd *renew_cmd(const leash__renew_item *items, size_t n, int64_t void_after_ms,
                             int64_t deadline) {
    enum {
        KEYS_MAX = 2 * LEASH__RENEW_BATCH,
        ARGS_MAX = 4 * LEASH__RENEW_BATCH + 2,
        LAYOUT_MAX = 1 + 20 + 1 + 20 + 1
    };
    const char *keys[KEYS_MAX], *args[ARGS_MAX], *argv[3 + KEYS_MAX + ARGS_MAX];
    size_t klens[KEYS_MAX], alens[ARGS_MAX], lens[3 + KEYS_MAX + ARGS_MAX], i, k = 0, a = 0;
    char leases[LEASH__RENEW_BATCH][21], layouts[LEASH__RENEW_BATCH][LAYOUT_MAX];
    char(*floors)[LEASH__FLOOR_MAX] = NULL;
    leash__cmd *cmd = NULL;

    if (n == 0 || n > LEASH__RENEW_BATCH)
        return NULL;
    for (i = 0; i < n; i++) {
        const leash__names *nm = items[i].names;
        int spreads = nm->fenced && !nm->family && items[i].fence > 0;
        if (spreads && floors == NULL && (floors = malloc(n * sizeof(*floors))) == NULL)
            return NULL;
        keys[k] = nm->key;
        klens[k++] = nm->key_len;
        if (spreads) {
            keys[k] = floors[i];
            klens[k++] = leash__floor_name(nm, floors[i]);
        }
        args[a] = items[i].token;
        alens[a++] = LEASH__TOKEN_LEN;
        alens[a] = leash__resp_int(leases[i], items[i].lease_ms);
        args[a++] = leases[i];
        args[a] = nm->channel;
        alens[a++] = nm->family ? leash__family_base_len(nm) : nm->channel_len;
        if (spreads) {
            alens[a] = (size_t)snprintf(layouts[i], sizeof(layouts[i]), "r%llu:%lld",
                                        (unsigned long long)items[i].fence,
                                        (long long)leash__floor_ttl_ms(items[i].lease_ms));
            args[a++] = layouts[i];
        } else {
            args[a] = nm->family ? "f" : "m";
            alens[a++] = 1;
        }
    }
    args[a] = leash__publish_verb(items[0].names, &alens[a]);
    a++;
    args[a] = leash__stamp_zeros;
    alens[a++] = LEASH__STAMP_DIGITS;
    memcpy(argv + 3, keys, k * sizeof(*keys));
    memcpy(lens + 3, klens, k * sizeof(*klens));
    memcpy(argv + 3 + k, args, a * sizeof(*args));
    memcpy(lens + 3 + k, alens, a * sizeof(*alens));
    /* A spreading renewal retried after BUSY could run after the release
     * that passed it in the delayed list, and write the hold again. */
    cmd = leash__script_cmd(&renew_script, (int)k, (int)(3 + k + a), argv, lens,
                            floors != NULL ? LEASH__CMD_ONCE : 0, deadline);
    free(floors);
    if (cmd != NULL) {
        leash__cmd_publish_arg(cmd, (unsigned)(3 + k + a - 2));
        leash__cmd_stamp(cmd, LEASH__STAMP_NOT_AFTER, void_after_ms);
    }
    return cmd;
}

/* A Redlock hold's force release also keeps its fence floor (KEYS[2]): at
 * least the removed hold's fence, for at least a floor's shortest life
 * (ARGV[3]); the holder's renewals keep it from then on (renew, above). */
static leash__cmd *force_cmd(const leash__names *n, int64_t deadline) {
    const char *argv[3 + 5];
    size_t lens[3 + 5], len;
    char floor[LEASH__FLOOR_MAX], ttl[21];
    char *buf;

    if (!n->fenced || n->family)
        return leash__hold_force_cmd(&force_script, n, deadline);
    argv[3] = n->key;
    lens[3] = n->key_len;
    argv[4] = floor;
    lens[4] = leash__floor_name(n, floor);
    argv[5] = n->channel;
    lens[5] = n->channel_len;
    argv[6] = leash__publish_verb(n, &lens[6]);
    argv[7] = ttl;
    lens[7] = leash__resp_int(ttl, leash__floor_ttl_ms(0));
    /* EVAL, never resent: leash__hold_force_cmd says why. */
    buf = leash__script_eval_call(&len, &force_script, 2, 8, argv, lens);
    return leash__publishing_cmd(buf, len, 6, deadline);
}

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

/* ---- reading a lock back ---- */

static int hex_token(const char *p, size_t n) {
    size_t i;

    for (i = 0; i < n; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
            return 0;
    return n > 0;
}

/* The part of [*p, end) up to the next ':' (or the end): its start, its
 * length in *len; *p moves past it, and *more says whether a ':' ended it. */
static const char *next_part(const char **p, const char *end, size_t *len, int *more) {
    const char *start = *p, *colon = memchr(start, ':', (size_t)(end - start));

    *more = colon != NULL;
    *len = (size_t)((colon != NULL ? colon : end) - start);
    *p = start + *len + *more;
    return start;
}

/* The mutex's string (see the top): "<token>:<w>:<count>:<fence>", then
 * ":<token>:<since>" per queued waiter; count 0: nobody holds it, it is
 * kept for token, the first of its waiters. 1, 0 for a string of another
 * shape (no lock), -1 without memory. */
static int read_mutex(const redisReply *v, leash__state *s) {
    const char *p = v->str, *end = v->str + v->len, *part[4], *since;
    size_t len[4], since_len;
    int64_t place = 1;
    leash__state_entry *h;
    int more = 1, i;

    for (i = 0; i < 4; i++) {
        if (!more)
            return 0;
        part[i] = next_part(&p, end, &len[i], &more);
    }
    if (!hex_token(part[0], len[0]) || len[1] != 1 || (part[1][0] != '0' && part[1][0] != '1') ||
        !leash__all_digits(part[2], len[2]) || !leash__all_digits(part[3], len[3]))
        return 0;
    s->kind = LEASH__STATE_MUTEX;
    s->marked = part[1][0] == '1';
    if (len[2] == 1 && part[2][0] == '0') {
        h = leash__state_add(&s->waiters, &s->nwaiters, part[0], len[0]);
        if (h == NULL)
            return -1;
        h->count = place++;
    } else {
        if ((h = leash__state_add(&s->holders, &s->nholders, part[0], len[0])) == NULL)
            return -1;
        h->count = strtoll(part[2], NULL, 10);
        h->fence = s->fence = strtoull(part[3], NULL, 10);
        h->ttl_ms = s->ttl_ms;
    }
    h->mode = 'm';
    while (more) {
        const char *tok = next_part(&p, end, &len[0], &more);
        if (!more)
            return 0;
        since = next_part(&p, end, &since_len, &more);
        if (!hex_token(tok, len[0]) || !leash__all_digits(since, since_len))
            return 0;
        if ((h = leash__state_add(&s->waiters, &s->nwaiters, tok, len[0])) == NULL)
            return -1;
        h->mode = 'm';
        h->count = place++;
    }
    return 1;
}

static const char *state_cmd(const char *type) {
    return strcmp(type, "string") == 0 ? "GET" : strcmp(type, "hash") == 0 ? "HGETALL" : NULL;
}

/* A string is the mutex's, a hash with fence and held fields the family's. */
static int read_state(const char *type, const redisReply *value, int64_t pttl, int64_t server_ms,
                      leash__state *out) {
    int rc = 0;

    memset(out, 0, sizeof(*out));
    out->ttl_ms = pttl >= 0 ? pttl : -1;
    out->server_ms = server_ms;
    if (strcmp(type, "none") == 0 || (value != NULL && value->type == REDIS_REPLY_NIL))
        return 0; /* NONE: also a key gone between TYPE and its read */
    out->kind = LEASH__STATE_OTHER;
    if (value != NULL && value->type == REDIS_REPLY_STRING && strcmp(type, "string") == 0)
        rc = read_mutex(value, out);
    else if (value != NULL && value->type == REDIS_REPLY_ARRAY && strcmp(type, "hash") == 0)
        rc = leash__family_read_state(value, out);
    if (rc <= 0) { /* no lock of this dialect after all, or no memory */
        leash__state_clear(out);
        out->kind = LEASH__STATE_OTHER;
        out->ttl_ms = pttl >= 0 ? pttl : -1;
        out->server_ms = server_ms;
    }
    return rc < 0 ? -1 : 0;
}

const leash__dialect leash__dialect_leash = {
    .name = "leash",
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
    .family_names = leash__family_names,
    .family_acquire_cmd = leash__family_acquire_cmd,
    .family_release_cmd = leash__family_release_cmd,
    .family_force_cmd = leash__family_force_cmd,
    .reserves = 1,
    .state_cmd = state_cmd,
    .read_state = read_state,
};
