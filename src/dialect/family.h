/*
 * The lock family's layout in leash's dialect (dialect/family.c says what
 * it is): the Lua functions every script of the family uses, as a string
 * literal that a script's source begins with. The renew script
 * (dialect/leash.c) renews holds of both layouts in one call, so it
 * needs them too.
 */
#ifndef LEASH_DIALECT_FAMILY_H
#define LEASH_DIALECT_FAMILY_H

/* The four names of a family lock, L[1..4]: the hash (key), the holders
 * (zset: token -> expiry), the queue (zset: token -> place), the queue's
 * expiries (zset: token -> expiry). Times are the server's ms.
 *
 * While a lock exists, its three zsets hold a sentinel member "" of score 0
 * and its hash the field fence: no command of a script ever empties a key.
 * In a cluster slot being migrated, a script that touches a key its own
 * earlier command deleted is stopped half-way ("non local key"); Redis
 * checks the keys only before a script starts (all there, or TRYAGAIN).
 * The last command of a script that leaves nothing live deletes all four.
 *
 * S, the state a script works on, is read in one HMGET (fam_load) and kept
 * up to date by these functions: fence, x (the exclusive holder), permits,
 * and the script's own token's h and q fields. fam_admit answers the fence
 * of `self` if it was let in, and how many were; while an exclusive holder
 * holds it looks at nobody (nobody fits). The holders of a name are of one
 * kind at a time (fam_fits: readers with readers, permits with permits),
 * so one holder's mode tells the kind of all. */
#define LEASH__FAMILY_LUA                                                                       \
    "local function fam_load(L, tok)\n"                                                         \
    "  local v = redis.pcall('hmget', L[1], 'fence', 'x', 'permits', 'h' .. tok, 'q' .. tok)\n" \
    "  if v.err then return nil end\n"                                                          \
    "  local S = {fence = v[1], x = v[2], permits = v[3], h = v[4], q = v[5]}\n"                \
    "  if not v[1] then\n"                                                                      \
    "    if redis.call('exists', L[1]) == 1 then return nil end\n"                              \
    "    for i = 2, 4 do\n"                                                                     \
    "      local t = redis.call('type', L[i])['ok']\n"                                          \
    "      if t ~= 'none' and t ~= 'zset' then return nil end\n"                                \
    "    end\n"                                                                                 \
    "    S.new = true\n"                                                                        \
    "  end\n"                                                                                   \
    "  return S\n"                                                                              \
    "end\n"                                                                                     \
    "local function fam_create(L, S)\n"                                                         \
    "  redis.call('del', L[2], L[3], L[4])\n"                                                   \
    "  redis.call('hset', L[1], 'fence', 0, 'seq', 0)\n"                                        \
    "  for i = 2, 4 do redis.call('zadd', L[i], 0, '') end\n"                                   \
    "  S.fence, S.new = '0', nil\n"                                                             \
    "end\n"                                                                                     \
    "local function fam_live(k, tok, now)\n"                                                    \
    "  local e = redis.call('zscore', k, tok)\n"                                                \
    "  return e and tonumber(e) > now and tonumber(e)\n"                                        \
    "end\n"                                                                                     \
    "local function fam_drop_holder(L, S, tok)\n"                                               \
    "  redis.call('zrem', L[2], tok)\n"                                                         \
    "  if S.x == tok then\n"                                                                    \
    "    redis.call('hdel', L[1], 'h' .. tok, 'x')\n"                                           \
    "    S.x = false\n"                                                                         \
    "  else\n"                                                                                  \
    "    redis.call('hdel', L[1], 'h' .. tok)\n"                                                \
    "  end\n"                                                                                   \
    "end\n"                                                                                     \
    "local function fam_drop_waiter(L, tok)\n"                                                  \
    "  redis.call('zrem', L[3], tok)\n"                                                         \
    "  redis.call('zrem', L[4], tok)\n"                                                         \
    "  redis.call('hdel', L[1], 'q' .. tok)\n"                                                  \
    "end\n"                                                                                     \
    "local function fam_prune(L, S, now)\n"                                                     \
    "  for _, tok in ipairs(redis.call('zrangebyscore', L[2], '(0', now)) do\n"                 \
    "    fam_drop_holder(L, S, tok)\n"                                                          \
    "  end\n"                                                                                   \
    "  for _, tok in ipairs(redis.call('zrangebyscore', L[4], '(0', now)) do\n"                 \
    "    fam_drop_waiter(L, tok)\n"                                                             \
    "  end\n"                                                                                   \
    "end\n"                                                                                     \
    "local function fam_fits(L, S, mode)\n"                                                     \
    "  if S.x then return false end\n"                                                          \
    "  local n = redis.call('zcard', L[2]) - 1\n"                                               \
    "  if mode == 'f' or mode == 'w' then return n == 0 end\n"                                  \
    "  if n > 0 then\n"                                                                         \
    "    local h = redis.call('zrange', L[2], 1, 1)[1]\n"                                       \
    "    local v = redis.call('hget', L[1], 'h' .. h) or ''\n"                                  \
    "    if string.sub(v, 1, 1) ~= mode then return false end\n"                                \
    "  end\n"                                                                                   \
    "  if mode == 's' then return n < tonumber(S.permits or 1) end\n"                           \
    "  return true\n"                                                                           \
    "end\n"                                                                                     \
    "local function fam_grant(L, S, tok, mode, cl, exp, t)\n"                                   \
    "  local f = t[1] * 1000000 + t[2]\n"                                                       \
    "  local last = tonumber(S.fence or 0)\n"                                                   \
    "  if f <= last then f = last + 1 end\n"                                                    \
    "  f = string.format('%.0f', f)\n"                                                          \
    "  local v = mode .. ':1:' .. f .. ':' .. cl\n"                                             \
    "  if mode == 'f' or mode == 'w' then\n"                                                    \
    "    redis.call('hset', L[1], 'fence', f, 'h' .. tok, v, 'x', tok)\n"                       \
    "    S.x = tok\n"                                                                           \
    "  else\n"                                                                                  \
    "    redis.call('hset', L[1], 'fence', f, 'h' .. tok, v)\n"                                 \
    "  end\n"                                                                                   \
    "  redis.call('zadd', L[2], exp, tok)\n"                                                    \
    "  S.fence = f\n"                                                                           \
    "  return f\n"                                                                              \
    "end\n"                                                                                     \
    "local function fam_admit(L, S, t, self, base, verb)\n"                                     \
    "  local got, n = nil, 0\n"                                                                 \
    "  while not S.x do\n"                                                                      \
    "    local head = redis.call('zrange', L[3], 1, 1)[1]\n"                                    \
    "    if not head then break end\n"                                                          \
    "    local mode, cl = string.match(redis.call('hget', L[1], 'q' .. head) or '', "           \
    "'^(%a):(%x+)$')\n"                                                                         \
    "    local exp = redis.call('zscore', L[4], head)\n"                                        \
    "    if mode and exp and not fam_fits(L, S, mode) then break end\n"                         \
    "    fam_drop_waiter(L, head)\n"                                                            \
    "    if mode and exp then\n"                                                                \
    "      local f = fam_grant(L, S, head, mode, cl, exp, t)\n"                                 \
    "      n = n + 1\n"                                                                         \
    "      if head == self then got = f\n"                                                      \
    "      else redis.call(verb, base .. cl, 'g:' .. head .. ':' .. f) end\n"                   \
    "    end\n"                                                                                 \
    "  end\n"                                                                                   \
    "  return got, n\n"                                                                         \
    "end\n"                                                                                     \
    "local function fam_keep(L, S, now, e)\n"                                                   \
    "  if redis.call('pttl', L[1]) < e - now then\n"                                            \
    "    fam_prune(L, S, now)\n"                                                                \
    "    for i = 1, 4 do redis.call('pexpire', L[i], 2 * (e - now)) end\n"                      \
    "  end\n"                                                                                   \
    "end\n"                                                                                     \
    "local function fam_gc(L, now, queued)\n"                                                   \
    "  if (queued or redis.call('zcard', L[3])) == 1 and\n"                                     \
    "      #redis.call('zrangebyscore', L[2], '(' .. now, '+inf', 'limit', 0, 1) == 0 then\n"   \
    "    redis.call('del', L[1], L[2], L[3], L[4])\n"                                           \
    "  end\n"                                                                                   \
    "end\n"                                                                                     \
    "local function fam_now(t) return t[1] * 1000 + math.floor(t[2] / 1000) end\n"

#include <stddef.h>
#include <stdint.h>

#include "dialect/dialect.h"

void leash__family_scripts_init(void);
extern leash__script leash__family_acquire_script, leash__family_release_script;

/* The four keys of n (a family lock) into argv[0..3], lens[0..3]; bufs
 * hold the companions. */
void leash__family_keys(const leash__names *n, const char **argv, size_t *lens,
                        char bufs[3][LEASH__FLOOR_MAX]);

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

#endif
