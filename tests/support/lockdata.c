/* SPDX-License-Identifier: MIT */
#include "lockdata.h"

#include <string.h>

#include "base/token.h"
#include "dialect/dialect.h"

long long test_lock_value(test_redis *r, const char *key, char *token, uint64_t *fence) {
    redisReply *type = test_redis_cmd(r, "TYPE %s", key), *value = NULL;
    leash__state st;
    long long count = -1;

    memset(&st, 0, sizeof(st));
    if (type == NULL || type->type != REDIS_REPLY_STATUS)
        goto done;
    if (leash__dialect_leash.state_cmd(type->str) != NULL &&
        (value = test_redis_cmd(r, "%s %s", leash__dialect_leash.state_cmd(type->str), key)) ==
            NULL)
        goto done;
    if (leash__dialect_leash.read_state(type->str, value, -1, 0, &st) != 0)
        goto done;
    if (st.kind == LEASH__STATE_NONE) {
        count = 0;
    } else if (st.kind == LEASH__STATE_MUTEX && st.nholders == 1 &&
               strlen(st.holders[0].token) != LEASH__TOKEN_LEN) {
        count = -1; /* a token leash never writes: token[33] takes 32 digits */
    } else if (st.kind == LEASH__STATE_MUTEX) {
        count = st.nholders == 1 ? st.holders[0].count : 0;
        if (st.nholders == 1 && token != NULL)
            memcpy(token, st.holders[0].token, 33);
        if (st.nholders == 1 && fence != NULL)
            *fence = st.holders[0].fence;
    }
done:
    leash__state_clear(&st);
    if (value != NULL)
        freeReplyObject(value);
    if (type != NULL)
        freeReplyObject(type);
    return count;
}

redisReply *test_cmd_args(const char *buf, size_t len) {
    redisReader *rd = redisReaderCreate();
    void *reply = NULL;
    size_t i;

    if (rd == NULL)
        return NULL;
    if (redisReaderFeed(rd, buf, len) != REDIS_OK || redisReaderGetReply(rd, &reply) != REDIS_OK ||
        reply == NULL || rd->pos != rd->len) {
        if (reply != NULL)
            freeReplyObject(reply);
        redisReaderFree(rd);
        return NULL;
    }
    redisReaderFree(rd);
    if (((redisReply *)reply)->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(reply);
        return NULL;
    }
    for (i = 0; i < ((redisReply *)reply)->elements; i++)
        if (((redisReply *)reply)->element[i]->type != REDIS_REPLY_STRING) {
            freeReplyObject(reply);
            return NULL;
        }
    return reply;
}

redisReply *test_cmd_run(redisContext *c, leash__cmd *cmd) {
    const char *argv[3 + 4 * LEASH__RENEW_BATCH + 2 * LEASH__RENEW_BATCH + 2];
    size_t lens[sizeof(argv) / sizeof(argv[0])], i;
    redisReply *args, *reply = NULL;

    if (cmd->script != NULL) {
        const leash__script *s = leash__script_for(cmd->script, test_redis_version());
        leash__script_retarget(cmd->buf, cmd->len, s);
        reply = redisCommand(c, "SCRIPT LOAD %b", s->src, s->len);
        if (reply == NULL)
            goto done;
        freeReplyObject(reply);
        reply = NULL;
    }
    args = test_cmd_args(cmd->buf, cmd->len);
    if (args != NULL && args->elements <= sizeof(argv) / sizeof(argv[0])) {
        for (i = 0; i < args->elements; i++) {
            argv[i] = args->element[i]->str;
            lens[i] = args->element[i]->len;
        }
        reply = redisCommandArgv(c, (int)i, argv, lens);
    }
    if (args != NULL)
        freeReplyObject(args);
done:
    leash__cmd_free(cmd);
    return reply;
}
