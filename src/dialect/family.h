/* SPDX-License-Identifier: MIT */
/*
 * The lock family's layout in leash's dialect (dialect/family.c says what
 * it is): the Lua functions every script of the family uses, as a string
 * literal that a script's source begins with. The renew script
 * (dialect/leash.c) renews holds of both layouts in one call, so it
 * needs them too (fam_renew).
 */
#ifndef LEASH_DIALECT_FAMILY_H
#define LEASH_DIALECT_FAMILY_H

/* A family lock is ONE hash K (dialect/family.c lists its fields). Times
 * are the server's ms.
 *
 * fam_read reads the lock's fields and the script's own token's h, q, p
 * and n fields in one HMGET. A script's fast path works on that reply
 * (the acquire's on one of its own, of fewer fields) directly; everything
 * else takes the toolkit, fam_lib() (made only then:
 * Lua makes every function of it anew on each run). With the toolkit, S,
 * the state a script works on, is made from that reply (fam_load), and the
 * script changes S, never Redis, until its end: fam_done then writes every
 * field changed in one HSET and one HDEL (fam_flush), and a PEXPIRE when
 * fam_keep moved the TTL; or deletes K when nobody holds or waits. So a
 * script checks everything before its first write, and K, which keeps its
 * fence2 field, is never emptied before the script's last command (a
 * cluster slot being migrated stops a script that touches a key its own
 * earlier command deleted, "non local key").
 *
 * held and queued count the holders and waiters whose entries are there,
 * live or not; soonest is at most the earliest holder's expiry (grants
 * lower it, renewals leave it), so fam_prune reads the whole hash
 * (fam_scan: drops every holder and place whose lease ran out, and counts
 * again) only once a lease might have run out, and at most once a lease
 * otherwise (fam_keep). fam_admit lets the head of the queue in while it
 * fits: the head's record is read only when the counts say it could fit.
 * The holders of a name are of one kind at a time (fam_fits: readers with
 * readers, permits with permits; a writer's paired readers beside it),
 * and mode says which. */
#define LEASH__FAMILY_LUA                                                                          \
    "local function fam_now(t) return t[1] * 1000 + math.floor(t[2] / 1000) end\n"                 \
    "local function fam_fence(t, last)\n"                                                          \
    "  local u = t[2]\n"                                                                           \
    "  local f = t[1] .. string.rep('0', 6 - #u) .. u\n"                                           \
    "  if last and (#last > #f or #last == #f and last >= f) then\n"                               \
    "    f = string.format('%.0f', last + 1)\n"                                                    \
    "  end\n"                                                                                      \
    "  return f\n"                                                                                 \
    "end\n"                                                                                        \
    "local function fam_mark(t, last)\n"                                                           \
    "  return math.max(t[1] * 1000000 + t[2], tonumber(last) or 0)\n"                              \
    "end\n"                                                                                        \
    "local function fam_read(K, tok, under)\n"                                                     \
    "  return redis.pcall('hmget', K, 'fence2', 'seq', 'permits', 'mode', 'held', 'queued', "      \
    "'soonest',\n"                                                                                 \
    "      'ttl', 'head', 'tail', 'h' .. tok, 'q' .. tok, 'p' .. tok, 'n' .. tok, 'h' .. (under "  \
    "or ''))\n"                                                                                    \
    "end\n"                                                                                        \
    "local function fam_lib()\n"                                                                   \
    "  local FAM_F = {'fence2', 'seq', 'permits', 'mode', 'held', 'queued', 'soonest', 'ttl', "    \
    "'head', 'tail'}\n"                                                                            \
    "  local FAM_N = {fence2 = 1, seq = 1, held = 1, queued = 1, soonest = 1, ttl = 1}\n"          \
    "  local function fam_num(x) return string.format('%.0f', x) end\n"                            \
    "  local function fam_load(K, tok, under, v)\n"                                                \
    "    v = v or fam_read(K, tok, under)\n"                                                       \
    "    if v.err or v[1] and not v[5] then return nil end\n"                                      \
    "    local S = {o = {}, put = {}, del = {}, h = v[11], q = v[12], p = v[13], nx = v[14], uh "  \
    "= v[15]}\n"                                                                                   \
    "    for i = 1, 10 do\n"                                                                       \
    "      local f = FAM_F[i]\n"                                                                   \
    "      S.o[f] = v[i]\n"                                                                        \
    "      if FAM_N[f] then S[f] = tonumber(v[i]) else S[f] = v[i] end\n"                          \
    "    end\n"                                                                                    \
    "    if not v[1] then\n"                                                                       \
    "      if redis.call('exists', K) == 1 then return nil end\n"                                  \
    "      S.new, S.fence2 = true, 0\n"                                                            \
    "    end\n"                                                                                    \
    "    S.seq, S.held, S.queued, S.ttl = S.seq or 0, S.held or 0, S.queued or 0, S.ttl or 0\n"    \
    "    return S\n"                                                                               \
    "  end\n"                                                                                      \
    "  local function fam_set(S, f, v) S.put[f] = v S.del[f] = nil end\n"                          \
    "  local function fam_unset(S, f) S.put[f] = nil S.del[f] = true end\n"                        \
    "  local function fam_get(S, f, stored)\n"                                                     \
    "    if S.put[f] then return S.put[f] end\n"                                                   \
    "    if S.del[f] then return false end\n"                                                      \
    "    return stored\n"                                                                          \
    "  end\n"                                                                                      \
    "  local function fam_call(cmd, K, a)\n"                                                       \
    "    for i = 1, #a, 4000 do\n"                                                                 \
    "      redis.call(cmd, K, unpack(a, i, math.min(i + 3999, #a)))\n"                             \
    "    end\n"                                                                                    \
    "  end\n"                                                                                      \
    "  local function fam_flush(K, S)\n"                                                           \
    "    for i = 1, 10 do\n"                                                                       \
    "      local f = FAM_F[i]\n"                                                                   \
    "      local v = S[f]\n"                                                                       \
    "      if v then\n"                                                                            \
    "        if FAM_N[f] then v = fam_num(v) end\n"                                                \
    "        if v ~= S.o[f] then fam_set(S, f, v) end\n"                                           \
    "      elseif S.o[f] then\n"                                                                   \
    "        fam_unset(S, f)\n"                                                                    \
    "      end\n"                                                                                  \
    "    end\n"                                                                                    \
    "    local a, d = {}, {}\n"                                                                    \
    "    for f, v in pairs(S.put) do a[#a + 1] = f a[#a + 1] = v end\n"                            \
    "    for f in pairs(S.del) do d[#d + 1] = f end\n"                                             \
    "    fam_call('hset', K, a)\n"                                                                 \
    "    fam_call('hdel', K, d)\n"                                                                 \
    "  end\n"                                                                                      \
    "  local function fam_done(K, S)\n"                                                            \
    "    if S.held == 0 and S.queued == 0 then\n"                                                  \
    "      if not S.new then redis.call('del', K) end\n"                                           \
    "      return\n"                                                                               \
    "    end\n"                                                                                    \
    "    fam_flush(K, S)\n"                                                                        \
    "    if S.expire then redis.call('pexpire', K, S.expire) end\n"                                \
    "  end\n"                                                                                      \
    "  local function fam_hold(v)\n"                                                               \
    "    local m, c, f, cl, e = string.match(v, '^(%a):(%d+):(%d+):(%x+):(%d+)$')\n"               \
    "    return m, tonumber(c), f, cl, tonumber(e)\n"                                              \
    "  end\n"                                                                                      \
    "  local function fam_place(v)\n"                                                              \
    "    local m, cl, e, p = string.match(v or '', '^(%a):(%x+):(%d+):(%d+)$')\n"                  \
    "    return m, cl, tonumber(e), p\n"                                                           \
    "  end\n"                                                                                      \
    "  local function fam_grant(S, tok, mode, cl, exp, c, t)\n"                                    \
    "    local f = t[1] * 1000000 + t[2]\n"                                                        \
    "    if f <= S.fence2 then f = S.fence2 + 1 end\n"                                             \
    "    S.fence2 = f\n"                                                                           \
    "    f = fam_num(f)\n"                                                                         \
    "    fam_set(S, 'h' .. tok, mode .. ':' .. c .. ':' .. f .. ':' .. cl .. ':' .. "              \
    "fam_num(exp))\n"                                                                              \
    "    if S.held == 0 then\n"                                                                    \
    "      S.mode, S.soonest = mode, exp\n"                                                        \
    "    elseif not S.soonest or exp < S.soonest then\n"                                           \
    "      S.soonest = exp\n"                                                                      \
    "    end\n"                                                                                    \
    "    S.held = S.held + 1\n"                                                                    \
    "    return f\n"                                                                               \
    "  end\n"                                                                                      \
    "  local function fam_drop_holder(S, tok, m)\n"                                                \
    "    fam_unset(S, 'h' .. tok)\n"                                                               \
    "    S.held, S.freed = S.held - 1, true\n"                                                     \
    "    if S.held <= 0 then\n"                                                                    \
    "      S.held, S.mode, S.soonest = 0, nil, nil\n"                                              \
    "    elseif m == 'w' then\n"                                                                   \
    "      S.mode = 'r'\n"                                                                         \
    "    end\n"                                                                                    \
    "  end\n"                                                                                      \
    "  local function fam_unlink(S, tok, p, nx)\n"                                                 \
    "    fam_unset(S, 'q' .. tok)\n"                                                               \
    "    fam_unset(S, 'p' .. tok)\n"                                                               \
    "    fam_unset(S, 'n' .. tok)\n"                                                               \
    "    if p then\n"                                                                              \
    "      if nx then fam_set(S, 'n' .. p, nx) else fam_unset(S, 'n' .. p) end\n"                  \
    "    else\n"                                                                                   \
    "      S.head = nx\n"                                                                          \
    "    end\n"                                                                                    \
    "    if nx then\n"                                                                             \
    "      if p then fam_set(S, 'p' .. nx, p) else fam_unset(S, 'p' .. nx) end\n"                  \
    "    else\n"                                                                                   \
    "      S.tail = p\n"                                                                           \
    "    end\n"                                                                                    \
    "    S.queued = S.queued - 1\n"                                                                \
    "    if not S.head or S.queued < 0 then S.queued, S.head, S.tail = 0, nil, nil end\n"          \
    "  end\n"                                                                                      \
    "  local function fam_enqueue(S, tok, mode, cl, exp)\n"                                        \
    "    S.seq = S.seq + 1\n"                                                                      \
    "    fam_set(S, 'q' .. tok, mode .. ':' .. cl .. ':' .. fam_num(exp) .. ':' .. "               \
    "fam_num(S.seq))\n"                                                                            \
    "    if S.tail then\n"                                                                         \
    "      fam_set(S, 'n' .. S.tail, tok)\n"                                                       \
    "      fam_set(S, 'p' .. tok, S.tail)\n"                                                       \
    "    else\n"                                                                                   \
    "      S.head = tok\n"                                                                         \
    "    end\n"                                                                                    \
    "    S.tail = tok\n"                                                                           \
    "    S.queued = S.queued + 1\n"                                                                \
    "  end\n"                                                                                      \
    "  local function fam_scan(K, S, now, all)\n"                                                  \
    "    local F, H, Q, N = {}, {}, {}, {}\n"                                                      \
    "    local v = redis.call('hgetall', K)\n"                                                     \
    "    for i = 1, #v, 2 do F[v[i]] = v[i + 1] end\n"                                             \
    "    for f, x in pairs(S.put) do F[f] = x end\n"                                               \
    "    for f in pairs(S.del) do F[f] = nil end\n"                                                \
    "    for f, x in pairs(F) do\n"                                                                \
    "      if #f == 33 then\n"                                                                     \
    "        local c, tok = string.sub(f, 1, 1), string.sub(f, 2)\n"                               \
    "        if c == 'h' then H[tok] = x elseif c == 'q' then Q[tok] = x elseif c == 'n' then "    \
    "N[tok] = x end\n"                                                                             \
    "      end\n"                                                                                  \
    "    end\n"                                                                                    \
    "    local dropped, held, mode, soonest = 0, 0, nil, nil\n"                                    \
    "    for tok, x in pairs(H) do\n"                                                              \
    "      local m, _, _, _, e = fam_hold(x)\n"                                                    \
    "      if all or not e or e <= now then\n"                                                     \
    "        fam_unset(S, 'h' .. tok)\n"                                                           \
    "        dropped = dropped + 1\n"                                                              \
    "      else\n"                                                                                 \
    "        held = held + 1\n"                                                                    \
    "        if not mode or m == 'w' then mode = m end\n"                                          \
    "        if not soonest or e < soonest then soonest = e end\n"                                 \
    "      end\n"                                                                                  \
    "    end\n"                                                                                    \
    "    S.held, S.mode, S.soonest = held, mode, soonest\n"                                        \
    "    if dropped > 0 then S.freed = true end\n"                                                 \
    "    local queued, tok, p, steps, nq = 0, S.head, nil, 0, 0\n"                                 \
    "    for _ in pairs(Q) do nq = nq + 1 end\n"                                                   \
    "    S.queued = nq + 1\n"                                                                      \
    "    while tok and steps <= nq do\n"                                                           \
    "      steps = steps + 1\n"                                                                    \
    "      local nx = N[tok] or nil\n"                                                             \
    "      local _, _, e = fam_place(Q[tok])\n"                                                    \
    "      Q[tok] = nil\n"                                                                         \
    "      if not e or e <= now then\n"                                                            \
    "        fam_unlink(S, tok, p, nx)\n"                                                          \
    "      else\n"                                                                                 \
    "        queued, p = queued + 1, tok\n"                                                        \
    "      end\n"                                                                                  \
    "      tok = nx\n"                                                                             \
    "    end\n"                                                                                    \
    "    for o in pairs(Q) do\n"                                                                   \
    "      fam_unset(S, 'q' .. o)\n"                                                               \
    "      fam_unset(S, 'p' .. o)\n"                                                               \
    "      fam_unset(S, 'n' .. o)\n"                                                               \
    "    end\n"                                                                                    \
    "    S.queued, S.tail = queued, p\n"                                                           \
    "    if queued == 0 then S.head = nil end\n"                                                   \
    "    return dropped\n"                                                                         \
    "  end\n"                                                                                      \
    "  local function fam_prune(K, S, now)\n"                                                      \
    "    if S.held > 0 and (not S.soonest or S.soonest <= now) then fam_scan(K, S, now) end\n"     \
    "  end\n"                                                                                      \
    "  local function fam_fits(S, mode)\n"                                                         \
    "    if S.held == 0 then return true end\n"                                                    \
    "    if mode == 'f' or mode == 'w' or S.mode ~= mode then return false end\n"                  \
    "    if mode == 's' then return S.held < tonumber(S.permits or 1) end\n"                       \
    "    return true\n"                                                                            \
    "  end\n"                                                                                      \
    "  local function fam_admit(K, S, t, now, self, base, verb)\n"                                 \
    "    local got, n = nil, 0\n"                                                                  \
    "    while S.queued > 0 and S.head do\n"                                                       \
    "      if S.held > 0 and S.mode ~= 'r' and\n"                                                  \
    "          (S.mode ~= 's' or S.held >= tonumber(S.permits or 1)) then break end\n"             \
    "      local head = S.head\n"                                                                  \
    "      local v = redis.call('hmget', K, 'q' .. head, 'n' .. head)\n"                           \
    "      local mode, cl, e = fam_place(fam_get(S, 'q' .. head, v[1]))\n"                         \
    "      local live = e and e > now\n"                                                           \
    "      if live and not fam_fits(S, mode) then break end\n"                                     \
    "      fam_unlink(S, head, nil, fam_get(S, 'n' .. head, v[2]))\n"                              \
    "      if live then\n"                                                                         \
    "        local f = fam_grant(S, head, mode, cl, e, 1, t)\n"                                    \
    "        n = n + 1\n"                                                                          \
    "        if head == self then got = f else redis.pcall(verb, base .. cl, 'g:' .. head .. ':' " \
    ".. f) end\n"                                                                                  \
    "      end\n"                                                                                  \
    "    end\n"                                                                                    \
    "    return got, n\n"                                                                          \
    "  end\n"                                                                                      \
    "  local function fam_keep(K, S, now, e)\n"                                                    \
    "    if e > S.ttl then\n"                                                                      \
    "      fam_prune(K, S, now)\n"                                                                 \
    "      S.ttl, S.expire = 2 * e - now, 2 * (e - now)\n"                                         \
    "    end\n"                                                                                    \
    "  end\n"                                                                                      \
    "  return {load = fam_load, set = fam_set, unset = fam_unset, get = fam_get, flush = "         \
    "fam_flush, done = fam_done, hold = fam_hold, place = fam_place, grant = fam_grant, "          \
    "drop_holder = fam_drop_holder, unlink = fam_unlink, enqueue = fam_enqueue, scan = fam_scan, " \
    "prune = fam_prune, fits = fam_fits, admit = fam_admit, keep = fam_keep, num = fam_num}\n"     \
    "end\n"                                                                                        \
    "local function fam_renew(K, tok, lease, base, verb, t, now)\n"                                \
    "  local F = fam_lib()\n"                                                                      \
    "  local S = F.load(K, tok)\n"                                                                 \
    "  if not S or S.new then return 0 end\n"                                                      \
    "  local exp, r = now + lease, 0\n"                                                            \
    "  if S.h then\n"                                                                              \
    "    local m, c, f, cl, e = F.hold(S.h)\n"                                                     \
    "    if e and e > now then\n"                                                                  \
    "      if e < exp then F.set(S, 'h' .. tok, m .. ':' .. c .. ':' .. f .. ':' .. cl .. ':' .. " \
    "F.num(exp)) end\n"                                                                            \
    "      r = tonumber(f)\n"                                                                      \
    "    else\n"                                                                                   \
    "      F.drop_holder(S, tok, m)\n"                                                             \
    "    end\n"                                                                                    \
    "  elseif S.q then\n"                                                                          \
    "    local m, cl, e, place = F.place(S.q)\n"                                                   \
    "    if e and e > now then\n"                                                                  \
    "      F.set(S, 'q' .. tok, m .. ':' .. cl .. ':' .. F.num(exp) .. ':' .. place)\n"            \
    "      r = 2\n"                                                                                \
    "    else\n"                                                                                   \
    "      F.unlink(S, tok, S.p, S.nx)\n"                                                          \
    "    end\n"                                                                                    \
    "  end\n"                                                                                      \
    "  F.prune(K, S, now)\n"                                                                       \
    "  if S.queued > 0 then\n"                                                                     \
    "    local f = F.admit(K, S, t, now, r == 2 and tok or nil, base, verb)\n"                     \
    "    if f then r = tonumber(f) end\n"                                                          \
    "  end\n"                                                                                      \
    "  if r ~= 0 then F.keep(K, S, now, exp) end\n"                                                \
    "  F.done(K, S)\n"                                                                             \
    "  if r == 2 then return {2, fam_mark(t, S.fence2)} end\n"                                     \
    "  return r\n"                                                                                 \
    "end\n"

#include <stddef.h>
#include <stdint.h>

#include "dialect/dialect.h"

void leash__family_scripts_init(void);
extern leash__script leash__family_acquire_script, leash__family_release_script;

/* The channel base of n (a family lock): its client channel without the
 * client id, which the scripts complete with a waiter's client's id. */
size_t leash__family_base_len(const leash__names *n);
int leash__family_names(leash__names *n, const leash__logger *lg, const char *prefix,
                        const char *name, int db, const char *client_id);
leash__cmd *leash__family_acquire_cmd(const leash__names *n, const char *token, int64_t lease_ms,
                                      char mode, int permits, int once, int count,
                                      const char *under, int64_t validity_ms, int64_t deadline);
leash__cmd *leash__family_release_cmd(const leash__names *n, const char *token, int count_after,
                                      int64_t valid_until, int64_t deadline);
leash__cmd *leash__family_force_cmd(const leash__names *n, int64_t deadline);
/* A family lock's hash (HGETALL reply all) into s, whose ttl_ms and
 * server_ms are set (read_state, dialect.h). 1, 0 when all is no family
 * lock's hash (no fence2 or no held field: the scripts' WRONGTYPE), -1
 * without memory. */
int leash__family_read_state(const struct redisReply *all, leash__state *s);

#endif
