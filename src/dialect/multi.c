/* SPDX-License-Identifier: MIT */
/*
 * A multi-lock's members of one server (one hash slot in a cluster) in
 * one script: all of them or
 * none, in leash's own mutex layout (dialect/leash.c says it), so that
 * each member is afterwards a mutex hold like any other: renewed, released
 * and force-released by the mutex's scripts, and excluded by and excluding
 * every mutex handle of its name.
 *
 * multi acquire  KEYS: lock1..lockN (one slot in a cluster)  ARGV: token1..tokenN,
 *                lease_ms, not_after
 *   Every key is read before anything is written (Redis does not roll
 *   back a script that fails half-way): one that is there and is not this
 *   acquire's own lock (a hold, a lock kept for a starving waiter, a key
 *   that is no lock) makes it busy, and nothing is written:
 *     -> {0, pttl, 0, now, i}   key i (from 1) is the first busy one
 *   A key of another type fails the GET (WRONGTYPE) before any write.
 *     -> {0, -3, 0, now}        too late (not_after passed): nothing done
 *   Else every key is written "<token i>:0:1:<fence>" with PX lease_ms,
 *   fence the server's clock in microseconds, as the mutex's grant of a
 *   free name (no key of the name stands, so no fence above it does):
 *     -> {1, fence, 1, now}
 *   A resend after a lost answer finds its own tokens and writes them
 *   again (count 1, a newer fence nobody saw the old one of, above it
 *   even if the clock stepped back), keeping what others wrote into
 *   them meanwhile, as the mutex's own writes do: the mark "w" of a
 *   waiting attempt that found it busy (so its release publishes) and
 *   the starving waiters' queue (so its release hands the lock on). The
 *   busy key is not marked "someone waits": whoever waits for it marks
 *   it with its own attempt (prim/multi.c waits with that member's mutex
 *   wait).
 *
 * multi acquire, Redlock (names fenced)  KEYS: lock1, floor1, .., lockN,
 *                floorN  ARGV: token1..tokenN, lease_ms, floor_ttl_ms,
 *                proposal, not_after
 *   One server's part of a Redlock multi-lock (route/quorum.c decides
 *   over the servers): as above, all of them or none on this server,
 *   every key read before any write, and with the fences of the Redlock
 *   mutex's acquire (dialect/leash.c): one fence f for every member, the
 *   proposal (or the server's clock when the proposal lags it by more
 *   than W = min(lease / 4, 1 s)), raised above every member's floor and
 *   every key of its own a resend finds; each key and each floor are
 *   written with f (the floor PX floor_ttl_ms), so every member's floor
 *   only grows and f is above every fence a mutex of that name was given
 *   here. The servers that granted one proposal agree on f; where they
 *   do not, route/quorum.c raises every member's floor (raise, below
 *   each key in turn) as it does for one lock. A name free everywhere is
 *   found with one EXISTS before any GET.
 *     -> as above: {1, f, 1, now}, {0, pttl, 0, now, i}, {0, -3, 0, now}
 */
#include "dialect/multi.h"

#include <stdlib.h>
#include <string.h>

#include "base/token.h"
#include "wire/resp.h"

static const char multi_acquire_lua[] =
    "local t = redis.call('time')\n"
    "local now = t[1] * 1000 + math.floor(t[2] / 1000)\n"
    "local na = ARGV[#ARGV] + 0\n"
    "if na > 0 and now >= na then return {0, -3, 0, now} end\n"
    "local n, g, keep = #KEYS, t[1] * 1000000 + t[2], {}\n"
    "for i = 1, n do\n"
    "  local v = redis.call('get', KEYS[i])\n"
    "  keep[i] = {'0', ''}\n"
    "  if v then\n"
    "    local o, w, c, f, r = string.match(v, '^(%x+):([01]):(%d+):(%d+)(.*)$')\n"
    "    if o ~= ARGV[i] or string.gsub(r, ':%x+:%d+', '') ~= '' then\n"
    "      return {0, redis.call('pttl', KEYS[i]), 0, now, i}\n"
    "    end\n"
    "    keep[i] = {w, r}\n"
    "    if tonumber(f) >= g then g = tonumber(f) + 1 end\n"
    "  end\n"
    "end\n"
    "local f = string.format('%.0f', g)\n"
    "for i = 1, n do\n"
    "  redis.call('set', KEYS[i], ARGV[i] .. ':' .. keep[i][1] .. ':1:' .. f .. keep[i][2],\n"
    "             'PX', ARGV[n + 1])\n"
    "end\n"
    "return {1, tonumber(f), 1, now}\n";

static const char multi_acquire_fenced_lua[] =
    "local t = redis.call('time')\n"
    "local now = t[1] * 1000 + math.floor(t[2] / 1000)\n"
    "local na = ARGV[#ARGV] + 0\n"
    "if na > 0 and now >= na then return {0, -3, 0, now} end\n"
    "local n = #KEYS / 2\n"
    "local f = t[1] * 1000000 + t[2]\n"
    "local p = tonumber(ARGV[n + 3]) or 0\n"
    "if p > 0 and p >= f - math.min(ARGV[n + 1] / 4, 1000) * 1000 then f = p end\n"
    "local locks, keep = {}, {}\n"
    "for i = 1, n do\n"
    "  locks[i] = KEYS[2 * i - 1]\n"
    "  keep[i] = {'0', ''}\n"
    "end\n"
    "if redis.call('exists', unpack(locks)) > 0 then\n"
    "  for i = 1, n do\n"
    "    local v = redis.call('get', locks[i])\n"
    "    if v then\n"
    "      local o, w, c, g, r = string.match(v, '^(%x+):([01]):(%d+):(%d+)(.*)$')\n"
    "      if o ~= ARGV[i] or string.gsub(r, ':%x+:%d+', '') ~= '' then\n"
    "        return {0, redis.call('pttl', locks[i]), 0, now, i}\n"
    "      end\n"
    "      keep[i] = {w, r}\n"
    "      if tonumber(g) >= f then f = tonumber(g) + 1 end\n"
    "    end\n"
    "  end\n"
    "end\n"
    "for i = 1, n do\n"
    "  local fl = tonumber(redis.call('get', KEYS[2 * i]) or 0) or 0\n"
    "  if fl >= f then f = fl + 1 end\n"
    "end\n"
    "f = string.format('%.0f', f)\n"
    "for i = 1, n do\n"
    "  redis.call('set', locks[i], ARGV[i] .. ':' .. keep[i][1] .. ':1:' .. f .. keep[i][2],\n"
    "             'PX', ARGV[n + 1])\n"
    "  redis.call('set', KEYS[2 * i], f, 'PX', ARGV[n + 2])\n"
    "end\n"
    "return {1, tonumber(f), 1, now}\n";

leash__script leash__multi_acquire_script, leash__multi_acquire_fenced_script;

void leash__multi_scripts_init(void) {
    leash__script_init(&leash__multi_acquire_script, multi_acquire_lua);
    leash__script_init(&leash__multi_acquire_fenced_script, multi_acquire_fenced_lua);
}

/* The Redlock form: each key followed by its fence floor, and the floors'
 * TTL and the fence proposal (route/quorum.c writes it in) before the
 * stamp, where leash__hold_propose_fence finds it. */
static leash__cmd *fenced_cmd(const leash__names *const *names, const char *const *tokens, size_t n,
                              int64_t lease_ms, int64_t validity_ms, int64_t deadline) {
    enum {
        ARGC = 3 + 3 * LEASH__MULTI_SCRIPT_MAX + 4
    };
    static const char proposal_zeros[LEASH__PROPOSAL_DIGITS + 1] = "00000000000000000000";
    const char *argv[ARGC];
    size_t lens[ARGC], i;
    char lease[21], ttl[21], *floors;
    int a;
    leash__cmd *cmd;

    /* Floor names are up to LEASH__FLOOR_MAX bytes each: too many for the
     * stack at LEASH__MULTI_SCRIPT_MAX members. */
    if ((floors = malloc(n * LEASH__FLOOR_MAX)) == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        argv[3 + 2 * i] = names[i]->key;
        lens[3 + 2 * i] = names[i]->key_len;
        argv[4 + 2 * i] = floors + i * LEASH__FLOOR_MAX;
        lens[4 + 2 * i] = leash__floor_name(names[i], floors + i * LEASH__FLOOR_MAX);
        argv[3 + 2 * n + i] = tokens[i];
        lens[3 + 2 * n + i] = LEASH__TOKEN_LEN;
    }
    a = (int)(3 + 3 * n);
    argv[a] = lease;
    lens[a++] = leash__resp_int(lease, lease_ms);
    argv[a] = ttl;
    lens[a++] = leash__resp_int(ttl, leash__floor_ttl_ms(lease_ms));
    argv[a] = proposal_zeros;
    lens[a++] = LEASH__PROPOSAL_DIGITS;
    argv[a] = leash__stamp_zeros;
    lens[a++] = LEASH__STAMP_DIGITS;
    cmd = leash__script_cmd(&leash__multi_acquire_fenced_script, (int)(2 * n), a, argv, lens,
                            LEASH__CMD_RETRY, deadline);
    free(floors);
    if (cmd != NULL)
        leash__cmd_stamp(cmd, LEASH__STAMP_NOT_AFTER, validity_ms);
    return cmd;
}

leash__cmd *leash__multi_acquire_cmd(const leash__names *const *names, const char *const *tokens,
                                     size_t n, int64_t lease_ms, int64_t validity_ms,
                                     int64_t deadline) {
    enum {
        ARGC = 3 + 2 * LEASH__MULTI_SCRIPT_MAX + 2
    };
    const char *argv[ARGC];
    size_t lens[ARGC], i;
    char lease[21];
    int a;
    leash__cmd *cmd;

    if (n < 2 || n > LEASH__MULTI_SCRIPT_MAX)
        return NULL;
    if (names[0]->fenced)
        return fenced_cmd(names, tokens, n, lease_ms, validity_ms, deadline);
    for (i = 0; i < n; i++) {
        argv[3 + i] = names[i]->key;
        lens[3 + i] = names[i]->key_len;
        argv[3 + n + i] = tokens[i];
        lens[3 + n + i] = LEASH__TOKEN_LEN;
    }
    a = (int)(3 + 2 * n);
    argv[a] = lease;
    lens[a++] = leash__resp_int(lease, lease_ms);
    argv[a] = leash__stamp_zeros;
    lens[a++] = LEASH__STAMP_DIGITS;
    cmd = leash__script_cmd(&leash__multi_acquire_script, (int)n, a, argv, lens, LEASH__CMD_RETRY,
                            deadline);
    if (cmd != NULL)
        leash__cmd_stamp(cmd, LEASH__STAMP_NOT_AFTER, validity_ms);
    return cmd;
}
