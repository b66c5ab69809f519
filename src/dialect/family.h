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
 * expiries (zset: token -> expiry). Times are the server's ms. */
#define LEASH__FAMILY_LUA                                                                     \
    "local function fam_ok(L)\n"                                                              \
    "  local t = redis.call('type', L[1])['ok']\n"                                            \
    "  if t ~= 'none' and (t ~= 'hash' or (redis.call('hexists', L[1], 'seq') == 0 and\n"     \
    "      redis.call('hexists', L[1], 'fence') == 0)) then return false end\n"               \
    "  for i = 2, 4 do\n"                                                                     \
    "    t = redis.call('type', L[i])['ok']\n"                                                \
    "    if t ~= 'none' and t ~= 'zset' then return false end\n"                              \
    "  end\n"                                                                                 \
    "  return true\n"                                                                         \
    "end\n"                                                                                   \
    "local function fam_drop_holder(L, tok)\n"                                                \
    "  redis.call('zrem', L[2], tok)\n"                                                       \
    "  redis.call('hdel', L[1], 'h' .. tok)\n"                                                \
    "  if redis.call('hget', L[1], 'x') == tok then redis.call('hdel', L[1], 'x') end\n"      \
    "end\n"                                                                                   \
    "local function fam_drop_waiter(L, tok)\n"                                                \
    "  redis.call('zrem', L[3], tok)\n"                                                       \
    "  redis.call('zrem', L[4], tok)\n"                                                       \
    "  redis.call('hdel', L[1], 'q' .. tok)\n"                                                \
    "end\n"                                                                                   \
    "local function fam_prune(L, now)\n"                                                      \
    "  for _, tok in ipairs(redis.call('zrangebyscore', L[2], '-inf', now)) do\n"             \
    "    fam_drop_holder(L, tok)\n"                                                           \
    "  end\n"                                                                                 \
    "  for _, tok in ipairs(redis.call('zrangebyscore', L[4], '-inf', now)) do\n"             \
    "    fam_drop_waiter(L, tok)\n"                                                           \
    "  end\n"                                                                                 \
    "end\n"                                                                                   \
    "local function fam_fits(L, mode)\n"                                                      \
    "  if mode == 'f' or mode == 'w' then return redis.call('zcard', L[2]) == 0 end\n"        \
    "  if redis.call('hexists', L[1], 'x') == 1 then return false end\n"                      \
    "  if mode == 's' then\n"                                                                 \
    "    return redis.call('zcard', L[2]) < tonumber(redis.call('hget', L[1], 'permits') or " \
    "1)\n"                                                                                    \
    "  end\n"                                                                                 \
    "  return true\n"                                                                         \
    "end\n"                                                                                   \
    "local function fam_grant(L, tok, mode, cl, exp, t)\n"                                    \
    "  local f = t[1] * 1000000 + t[2]\n"                                                     \
    "  local last = tonumber(redis.call('hget', L[1], 'fence') or 0)\n"                       \
    "  if f <= last then f = last + 1 end\n"                                                  \
    "  f = string.format('%.0f', f)\n"                                                        \
    "  fam_drop_waiter(L, tok)\n"                                                             \
    "  redis.call('hset', L[1], 'fence', f, 'h' .. tok, mode .. ':1:' .. f .. ':' .. cl)\n"   \
    "  redis.call('zadd', L[2], exp, tok)\n"                                                  \
    "  if mode == 'f' or mode == 'w' then redis.call('hset', L[1], 'x', tok) end\n"           \
    "  return f\n"                                                                            \
    "end\n"                                                                                   \
    "local function fam_admit(L, t, self, base, verb)\n"                                      \
    "  local got\n"                                                                           \
    "  while true do\n"                                                                       \
    "    local head = redis.call('zrange', L[3], 0, 0)[1]\n"                                  \
    "    if not head then break end\n"                                                        \
    "    local mode, cl = string.match(redis.call('hget', L[1], 'q' .. head) or '', "         \
    "'^(%a):(%x+)$')\n"                                                                       \
    "    local exp = redis.call('zscore', L[4], head)\n"                                      \
    "    if not mode or not exp then\n"                                                       \
    "      fam_drop_waiter(L, head)\n"                                                        \
    "    else\n"                                                                              \
    "      if not fam_fits(L, mode) then break end\n"                                         \
    "      local f = fam_grant(L, head, mode, cl, exp, t)\n"                                  \
    "      if head == self then got = f\n"                                                    \
    "      else redis.call(verb, base .. cl, 'g:' .. head .. ':' .. f) end\n"                 \
    "    end\n"                                                                               \
    "  end\n"                                                                                 \
    "  return got\n"                                                                          \
    "end\n"                                                                                   \
    "local function fam_expire(L, now)\n"                                                     \
    "  local m = 0\n"                                                                         \
    "  local a = redis.call('zrange', L[2], -1, -1, 'withscores')\n"                          \
    "  if a[2] then m = tonumber(a[2]) end\n"                                                 \
    "  a = redis.call('zrange', L[4], -1, -1, 'withscores')\n"                                \
    "  if a[2] and tonumber(a[2]) > m then m = tonumber(a[2]) end\n"                          \
    "  if m <= now then redis.call('del', L[1], L[2], L[3], L[4]) return end\n"               \
    "  for i = 1, 4 do redis.call('pexpire', L[i], m - now) end\n"                            \
    "end\n"                                                                                   \
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

int leash__family_names(leash__names *n, const leash__logger *lg, const char *prefix,
                        const char *name, int db, const char *client_id);
leash__cmd *leash__family_acquire_cmd(const leash__names *n, const char *token, int64_t lease_ms,
                                      char mode, int permits, int once, int count,
                                      const char *under, int64_t validity_ms, int64_t deadline);
leash__cmd *leash__family_release_cmd(const leash__names *n, const char *token, int count_after,
                                      int64_t valid_until, int64_t deadline);
leash__cmd *leash__family_force_cmd(const leash__names *n, int64_t deadline);

#endif
