#include "scripts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resp.h"
#include "sha1.h"

static const char acquire_lua[] =
    "local t = redis.call('time')\n"
    "local now = t[1] * 1000 + math.floor(t[2] / 1000)\n"
    "if ARGV[4] + 0 > 0 and now >= ARGV[4] + 0 then return {0, -3, 0, now} end\n"
    "local k, tok, n = KEYS[1], ARGV[1], tonumber(ARGV[3])\n"
    "local v\n"
    "if n == 1 then\n"
    "  local f = string.format('%.0f', t[1] * 1000000 + t[2])\n"
    "  v = redis.call('set', k, tok .. ':0:1:' .. f, 'NX', 'PX', ARGV[2], 'GET')\n"
    "  if not v then return {1, tonumber(f), 1, now} end\n"
    "else\n"
    "  v = redis.call('get', k)\n"
    "  if not v then return {0, -4, 0, now} end\n"
    "end\n"
    "local o, w, c, f = string.match(v, '^(%x+):([01]):(%d+):(%d+)$')\n"
    "if not o then return redis.error_reply('WRONGTYPE the key holds a value that is not a "
    "lock') end\n"
    "if o == tok then\n"
    "  if n < tonumber(c) then n = tonumber(c) end\n"
    "  redis.call('set', k, o .. ':' .. w .. ':' .. n .. ':' .. f, 'PX', ARGV[2])\n"
    "  return {1, tonumber(f), n, now}\n"
    "end\n"
    "if n > 1 then return {0, -4, 0, now} end\n"
    "if w == '0' then redis.call('set', k, o .. ':1:' .. c .. ':' .. f, 'KEEPTTL') end\n"
    "return {0, redis.call('pttl', k), 0, now}\n";

static const char release_lua[] =
    "local v = redis.call('get', KEYS[1])\n"
    "if v and string.sub(v, 1, 33) == ARGV[1] .. ':' then\n"
    "  if ARGV[2] ~= '0' then\n"
    "    local w, f = string.match(v, '^%x+:([01]):%d+:(%d+)$')\n"
    "    if not w then return redis.error_reply('WRONGTYPE the key holds a value that is not a "
    "lock') end\n"
    "    redis.call('set', KEYS[1], ARGV[1] .. ':' .. w .. ':' .. ARGV[2] .. ':' .. f, "
    "'KEEPTTL')\n"
    "    return tonumber(ARGV[2])\n"
    "  end\n"
    "  redis.call('del', KEYS[1])\n"
    "  if string.byte(v, 34) == 49 then redis.call('publish', ARGV[3], ARGV[1]) end\n"
    "  return 0\n"
    "end\n"
    "if ARGV[4] + 0 == 0 then return -1 end\n"
    "local t = redis.call('time')\n"
    "if t[1] * 1000 + math.floor(t[2] / 1000) < ARGV[4] + 0 then return 0 end\n"
    "return -2\n";

static const char renew_lua[] =
    "local r = {}\n"
    "for i = 1, #KEYS do\n"
    "  local v = redis.pcall('get', KEYS[i])\n"
    "  if type(v) == 'string' and string.sub(v, 1, 33) == ARGV[3 * i - 2] .. ':' then\n"
    "    redis.call('pexpire', KEYS[i], ARGV[3 * i - 1])\n"
    "    if string.byte(v, 34) == 49 then\n"
    "      redis.call('publish', ARGV[3 * i], 'renewed:' .. ARGV[3 * i - 1])\n"
    "    end\n"
    "    r[i] = 1\n"
    "  else\n"
    "    r[i] = 0\n"
    "  end\n"
    "end\n"
    "return r\n";

static const char force_lua[] =
    "local v = redis.pcall('get', KEYS[1])\n"
    "if type(v) == 'table' then return v end\n"
    "if not v then return 0 end\n"
    "if not string.match(v, '^%x+:[01]:%d+:%d+$') then\n"
    "  return redis.error_reply('WRONGTYPE the key holds a value that is not a lock')\n"
    "end\n"
    "redis.call('del', KEYS[1])\n"
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
