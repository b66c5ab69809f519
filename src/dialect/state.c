/* SPDX-License-Identifier: MIT */
/*
 * Reading a lock back, for the library (leash_lock_state, prim/lockstate.c)
 * and the leash tool alike: one command that reads a key's state, and one
 * reader of what it answers, which asks each dialect in turn (leash's
 * layouts, then Redisson's). This file uses each dialect, none of them uses
 * it (scripts/check-layers), as dialects.c.
 *
 * The command is one script, so the reads are one snapshot: no script of a
 * lock runs between them.
 *   KEYS: key  ARGV: channel ("" none), then pairs <Redis type> <command>:
 *   the command that reads a key of that type (the dialects' state_cmd)
 *   -> {type, pttl, time seconds, time microseconds, subscribers [, value]}
 * subscribers: PUBSUB NUMSUB plus PUBSUB SHARDNUMSUB of the channel (a
 * server without the second counts the first), -1 without a channel. The
 * value is last: a missing key (GET's nil) ends the array there.
 */
#include "dialect/dialect.h"

#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

static const char state_lua[] =
    "local t = redis.call('TYPE', KEYS[1])['ok']\n"
    "local now = redis.call('TIME')\n"
    "local subs = -1\n"
    "if ARGV[1] ~= '' then\n"
    "  subs = 0\n"
    "  for _, verb in ipairs({'NUMSUB', 'SHARDNUMSUB'}) do\n"
    "    local n = redis.pcall('PUBSUB', verb, ARGV[1])\n"
    "    if type(n) == 'table' and n[2] then subs = subs + n[2] end\n"
    "  end\n"
    "end\n"
    "local r = {t, redis.call('PTTL', KEYS[1]), now[1], now[2], subs}\n"
    "for i = 2, #ARGV - 1, 2 do\n"
    "  if ARGV[i] == t then r[6] = redis.call(ARGV[i + 1], KEYS[1]) end\n"
    "end\n"
    "return r\n";

/* The dialects whose layouts are read, in the order tried: a key that is
 * no lock of one may be of the next. */
static const leash__dialect *const dialects[] = {&leash__dialect_leash, &leash__dialect_redisson};
#define NDIALECTS (sizeof(dialects) / sizeof(dialects[0]))

/* The Redis types a key can have that some dialect keeps a lock in are
 * asked of the dialects from this list. */
static const char *const types[] = {"string", "hash", "list", "set", "zset", "stream"};
#define NTYPES (sizeof(types) / sizeof(types[0]))

const char *leash__state_value_cmd(const char *type) {
    const char *cmd = NULL;
    size_t i;

    for (i = 0; i < NDIALECTS && cmd == NULL; i++)
        cmd = dialects[i]->state_cmd(type);
    return cmd;
}

int leash__state_read(const char *type, const struct redisReply *value, int64_t pttl,
                      int64_t server_ms, leash__state *out) {
    size_t i;

    memset(out, 0, sizeof(*out));
    for (i = 0; i < NDIALECTS; i++) {
        if (dialects[i]->read_state(type, value, pttl, server_ms, out) != 0)
            return -1;
        if (out->kind != LEASH__STATE_OTHER)
            break;
    }
    out->subscribers = -1;
    return 0;
}

int leash__state_args(const char *key, size_t key_len, const char *chan, size_t chan_len,
                      const char **argv, size_t *lens) {
    int argc = 0;
    size_t i;

    argv[argc] = "EVAL";
    lens[argc++] = 4;
    argv[argc] = state_lua;
    lens[argc++] = sizeof(state_lua) - 1;
    argv[argc] = "1";
    lens[argc++] = 1;
    argv[argc] = key;
    lens[argc++] = key_len;
    argv[argc] = chan != NULL ? chan : "";
    lens[argc++] = chan != NULL ? chan_len : 0;
    for (i = 0; i < NTYPES; i++) {
        const char *cmd = leash__state_value_cmd(types[i]);
        if (cmd == NULL)
            continue;
        argv[argc] = types[i];
        lens[argc++] = strlen(types[i]);
        argv[argc] = cmd;
        lens[argc++] = strlen(cmd);
    }
    return argc;
}

/* EVALSHA, and EVAL after NOSCRIPT (it is loaded on no connection). */
static leash__script state_script;

void leash__state_scripts_init(void) {
    leash__script_init(&state_script, state_lua);
}

leash__cmd *leash__state_cmd(const leash__names *n, int with_channel, int64_t deadline) {
    const char *argv[LEASH__STATE_ARGS_MAX];
    size_t lens[LEASH__STATE_ARGS_MAX];
    int argc = leash__state_args(n->key, n->key_len, with_channel ? n->channel : NULL,
                                 n->channel_len, argv, lens);

    /* EVALSHA in the first three slots (leash__script_cmd). A read changes
     * nothing: it may run twice. */
    return leash__script_cmd(&state_script, 1, argc, argv, lens, LEASH__CMD_RETRY, deadline);
}

static int64_t integer_of(const redisReply *r) {
    if (r->type == REDIS_REPLY_INTEGER)
        return r->integer;
    if (r->type == REDIS_REPLY_STRING)
        return strtoll(r->str, NULL, 10);
    return -1;
}

int leash__state_parse(const struct redisReply *r, leash__state *out) {
    char type[16];
    int64_t server_ms, subs;

    memset(out, 0, sizeof(*out));
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 5 || r->elements > 6)
        return 1;
    if (r->element[0]->type != REDIS_REPLY_STRING || r->element[0]->len >= sizeof(type))
        return 1;
    memcpy(type, r->element[0]->str, r->element[0]->len);
    type[r->element[0]->len] = '\0';
    server_ms = integer_of(r->element[2]) * 1000 + integer_of(r->element[3]) / 1000;
    subs = integer_of(r->element[4]);
    if (leash__state_read(type, r->elements == 6 ? r->element[5] : NULL, integer_of(r->element[1]),
                          server_ms, out) != 0)
        return -1;
    out->subscribers = subs;
    return 0;
}

void leash__state_free(leash__state *s) {
    if (s != NULL)
        leash__state_clear(s);
    free(s);
}

/* A state answer: a malloc'ed state, or the status that says why not. */
static void parse_state(const redisReply *r, leash__answer *a, size_t n, const leash__logger *lg,
                        const char *what) {
    leash__state *s;
    int rc;

    (void)n;
    memset(a, 0, sizeof(*a));
    if (r->type == REDIS_REPLY_ERROR) {
        leash__log(lg, LEASH_LOG_WARN, "lock state of %s: Redis answered: %.*s", what, (int)r->len,
                   r->str);
        a->status = LEASH_EREDIS;
        return;
    }
    if ((s = malloc(sizeof(*s))) == NULL) {
        a->status = LEASH_ENOMEM;
        return;
    }
    rc = leash__state_parse(r, s);
    if (rc != 0) {
        leash__state_free(s);
        if (rc > 0)
            leash__log(lg, LEASH_LOG_WARN, "lock state of %s: unexpected reply", what);
        a->status = rc > 0 ? LEASH_EPROTO : LEASH_ENOMEM;
        return;
    }
    a->kind = LEASH__ANS_STATE;
    a->server_ms = s->server_ms;
    a->state = s;
}

const leash__opdef leash__op_state = {"lock state", LEASH__OP_READ, parse_state};
