/* SPDX-License-Identifier: MIT */
#include "wire/script.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/sha1.h"
#include "wire/resp.h"

void leash__script_init(leash__script *s, const char *src) {
    leash__script_init_since(s, src, 0, NULL);
}

void leash__script_init_since(leash__script *s, const char *src, int since,
                              const leash__script *older) {
    s->src = src;
    s->len = strlen(src);
    leash__sha1_hex(src, s->len, s->sha);
    s->since = since;
    s->older = older;
}

const leash__script *leash__script_for(const leash__script *s, int version) {
    while (s->older != NULL && version < s->since)
        s = s->older;
    return s;
}

/* "*N\r\n" then "$7\r\nEVALSHA\r\n$40\r\n" and the SHA: where the SHA of a
 * command built by call() starts, or 0 when buf is not such a command. */
static size_t sha_offset(const char *buf, size_t len) {
    static const char verb[] = "$7\r\nEVALSHA\r\n$40\r\n";
    const char *first = memchr(buf, '\n', len);
    size_t at;

    if (first == NULL)
        return 0;
    at = (size_t)(first + 1 - buf);
    if (at + sizeof(verb) - 1 + LEASH__SHA_LEN > len || memcmp(buf + at, verb, sizeof(verb) - 1))
        return 0;
    return at + sizeof(verb) - 1;
}

void leash__script_retarget(char *evalsha, size_t len, const leash__script *s) {
    size_t at = sha_offset(evalsha, len);

    if (at != 0)
        memcpy(evalsha + at, s->sha, LEASH__SHA_LEN);
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

char *leash__script_call(size_t *out_len, const leash__script *s, int numkeys, int argc,
                         const char **argv, size_t *lens) {
    return call(out_len, "EVALSHA", s->sha, LEASH__SHA_LEN, numkeys, argc, argv, lens);
}

char *leash__script_eval_call(size_t *out_len, const leash__script *s, int numkeys, int argc,
                              const char **argv, size_t *lens) {
    return call(out_len, "EVAL", s->src, s->len, numkeys, argc, argv, lens);
}

char *leash__script_as_eval(size_t *out_len, const char *evalsha, size_t len,
                            const leash__script *s) {
    /* "*N\r\n$7\r\nEVALSHA\r\n$40\r\n<sha>\r\n<rest>" ->
     * "*N\r\n$4\r\nEVAL\r\n$L\r\n<src>\r\n<rest>" */
    size_t sha = sha_offset(evalsha, len), head, skip, rest_len, pos;
    char *out;

    if (sha == 0 || sha + LEASH__SHA_LEN + 2 > len)
        return NULL;
    head = (size_t)((const char *)memchr(evalsha, '\n', len) + 1 - evalsha);
    skip = sha + LEASH__SHA_LEN + 2;
    rest_len = len - skip;
    out = malloc(head + 32 + s->len + rest_len + 1);
    if (out == NULL)
        return NULL;
    memcpy(out, evalsha, head);
    pos = head;
    pos += (size_t)sprintf(out + pos, "$4\r\nEVAL\r\n$%zu\r\n", s->len);
    memcpy(out + pos, s->src, s->len);
    pos += s->len;
    out[pos++] = '\r';
    out[pos++] = '\n';
    memcpy(out + pos, evalsha + skip, rest_len);
    pos += rest_len;
    out[pos] = '\0';
    *out_len = pos;
    return out;
}
