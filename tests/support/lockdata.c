#include "lockdata.h"

#include <stdio.h>
#include <string.h>

long long test_lock_value(test_redis *r, const char *key, char *token, uint64_t *fence) {
    redisReply *rep = test_redis_cmd(r, "GET %s", key);
    char tok[33];
    int w = -1, n = 0;
    long long count = -1;
    unsigned long long f = 0;

    if (rep == NULL)
        return -1;
    if (rep->type == REDIS_REPLY_NIL)
        count = 0;
    else if (rep->type == REDIS_REPLY_STRING &&
             sscanf(rep->str, "%32[0-9a-f]:%d:%lld:%llu%n", tok, &w, &count, &f, &n) == 4 &&
             ((size_t)n == rep->len || rep->str[n] == ':') && strlen(tok) == 32 &&
             (w == 0 || w == 1)) {
        if (token != NULL)
            memcpy(token, tok, sizeof(tok));
        if (fence != NULL)
            *fence = f;
    } else {
        count = -1;
    }
    freeReplyObject(rep);
    return count;
}
