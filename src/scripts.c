#include "scripts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resp.h"
#include "sha1.h"

static const char acquire_lua[] =
    "if redis.call('exists', KEYS[3]) == 1 then return {0, -3} end\n"
    "local n = redis.call('hget', KEYS[1], ARGV[1])\n"
    "if n then\n"
    "  redis.call('hset', KEYS[1], ARGV[1], ARGV[3])\n"
    "  redis.call('pexpire', KEYS[1], ARGV[2])\n"
    "  return {1, tonumber(redis.call('get', KEYS[2]) or '0'), tonumber(ARGV[3])}\n"
    "end\n"
    "if tonumber(ARGV[3]) > 1 then return {0, -4} end\n"
    "if redis.call('exists', KEYS[1]) == 0 then\n"
    "  redis.call('hset', KEYS[1], ARGV[1], ARGV[3])\n"
    "  redis.call('pexpire', KEYS[1], ARGV[2])\n"
    "  return {1, redis.call('incr', KEYS[2]), tonumber(ARGV[3])}\n"
    "end\n"
    "redis.call('hsetnx', KEYS[1], '~waiting', 1)\n"
    "return {0, redis.call('pttl', KEYS[1])}\n";

static const char release_lua[] = "if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then\n"
                                  "  if redis.call('get', KEYS[2]) == '1' then return 0 end\n"
                                  "  redis.call('set', KEYS[2], '0', 'px', ARGV[4])\n"
                                  "  return -1\n"
                                  "end\n"
                                  "local left = tonumber(ARGV[2])\n"
                                  "if left > 0 then\n"
                                  "  redis.call('hset', KEYS[1], ARGV[1], left)\n"
                                  "  return left\n"
                                  "end\n"
                                  "redis.call('del', KEYS[1])\n"
                                  "redis.call('set', KEYS[2], '1', 'px', ARGV[4])\n"
                                  "redis.call('publish', ARGV[3], ARGV[1])\n"
                                  "return 0\n";

static const char renew_lua[] =
    "local r = {}\n"
    "for i = 1, #KEYS do\n"
    "  local ok = redis.pcall('hexists', KEYS[i], ARGV[3 * i - 2])\n"
    "  if ok == 1 then\n"
    "    redis.call('pexpire', KEYS[i], ARGV[3 * i - 1])\n"
    "    if redis.call('hexists', KEYS[i], '~waiting') == 1 then\n"
    "      redis.call('publish', ARGV[3 * i], 'renewed:' .. ARGV[3 * i - 1])\n"
    "    end\n"
    "    r[i] = 1\n"
    "  else\n"
    "    r[i] = 0\n"
    "  end\n"
    "end\n"
    "return r\n";

static const char force_lua[] = "local t = redis.pcall('hexists', KEYS[1], '~waiting')\n"
                                "if type(t) == 'table' then return t end\n"
                                "if redis.call('del', KEYS[1]) == 0 then return 0 end\n"
                                "redis.call('publish', ARGV[1], 'forced')\n"
                                "return 1\n";

static const char *const sources[LEASH__SCRIPT_COUNT] = {acquire_lua, release_lua, renew_lua,
                                                         force_lua};

const char *leash__script_source(int script) {
    return sources[script];
}

void leash__scripts_init(leash__scripts *s) {
    int i;
    for (i = 0; i < LEASH__SCRIPT_COUNT; i++)
        leash__sha1_hex(sources[i], strlen(sources[i]), s->sha[i]);
}

static char *call(size_t *out_len, const char *verb, const char *body, size_t body_len, int numkeys,
                  int argc, const char **argv, size_t *lens) {
    char nk[21];
    size_t n = leash__resp_int(nk, numkeys);
    argv[0] = verb;
    lens[0] = strlen(verb);
    argv[1] = body;
    lens[1] = body_len;
    argv[2] = nk;
    lens[2] = n;
    return leash__resp_format(out_len, argc, (const char *const *)argv, lens);
}

char *leash__script_call(size_t *out_len, const leash__scripts *s, int script, int numkeys,
                         int argc, const char **argv, size_t *lens) {
    return call(out_len, "EVALSHA", s->sha[script], LEASH__SHA_LEN, numkeys, argc, argv, lens);
}

char *leash__script_eval_call(size_t *out_len, int script, int numkeys, int argc, const char **argv,
                              size_t *lens) {
    return call(out_len, "EVAL", sources[script], strlen(sources[script]), numkeys, argc, argv,
                lens);
}

char *leash__script_as_eval(size_t *out_len, const char *evalsha, size_t len, int script) {
    /* "*N\r\n$7\r\nEVALSHA\r\n$40\r\n<sha>\r\n<rest>" ->
     * "*N\r\n$4\r\nEVAL\r\n$L\r\n<src>\r\n<rest>" */
    const char *first = memchr(evalsha, '\n', len);
    const char *src = sources[script];
    size_t head, skip, src_len = strlen(src), rest_len, pos;
    char *out;

    if (first == NULL)
        return NULL;
    head = (size_t)(first + 1 - evalsha);
    skip = head + sizeof("$7\r\nEVALSHA\r\n$40\r\n") - 1 + LEASH__SHA_LEN + 2;
    if (skip > len)
        return NULL;
    rest_len = len - skip;
    out = malloc(head + 32 + src_len + rest_len + 1);
    if (out == NULL)
        return NULL;
    memcpy(out, evalsha, head);
    pos = head;
    pos += (size_t)sprintf(out + pos, "$4\r\nEVAL\r\n$%zu\r\n", src_len);
    memcpy(out + pos, src, src_len);
    pos += src_len;
    out[pos++] = '\r';
    out[pos++] = '\n';
    memcpy(out + pos, evalsha + skip, rest_len);
    pos += rest_len;
    out[pos] = '\0';
    *out_len = pos;
    return out;
}
