/* SPDX-License-Identifier: MIT */
#include "redisson.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/*
 * Redisson's RedissonLock scripts, as its documentation and source describe
 * them (KEYS and ARGV in Redisson's order):
 *
 * tryLockInnerAsync  KEYS: name  ARGV: leaseTime, lockName
 * unlockInnerAsync   KEYS: name, channel, unlock latch  ARGV: unlock
 *                    message "0", leaseTime, lockName, publish command,
 *                    latch timeout
 * renewExpiration    KEYS: name  ARGV: leaseTime, lockName
 * forceUnlockAsync   KEYS: name, channel  ARGV: "0", publish command
 */
static const char try_lock_lua[] =
    "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) "
    "then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; end; return redis.call('pttl', KEYS[1]);";

static const char unlock_lua[] =
    "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val); end; "
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); "
    "redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; "
    "else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); "
    "redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end;";

static const char renew_lua[] = "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then "
                                "redis.call('pexpire', KEYS[1], ARGV[1]); return 1; end; return 0;";

static const char force_unlock_lua[] =
    "if (redis.call('del', KEYS[1]) == 1) then redis.call(ARGV[2], KEYS[2], ARGV[1]); "
    "return 1 else return 0 end";

/* Redisson's latch lives about as long as a command's retries can take. */
#define LATCH_PX_MS 13500

void rs_client_init(rs_client *rc, test_redis *r, int sharded) {
    unsigned char b[16];
    FILE *f = fopen("/dev/urandom", "rb");

    CHECK(f != NULL);
    CHECK(fread(b, 1, sizeof b, f) == sizeof b);
    fclose(f);
    snprintf(rc->uuid, sizeof rc->uuid,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
             b[15]);
    rc->c = test_redis_connect_admin(r, 2000);
    CHECK(rc->c != NULL);
    rc->sharded = sharded;
}

void rs_client_close(rs_client *rc) {
    redisFree(rc->c);
    rc->c = NULL;
}

void rs_field(const rs_client *rc, long thread, char *out) {
    snprintf(out, 64, "%s:%ld", rc->uuid, thread);
}

/* Redisson's prefixName(). */
void rs_channel(const char *name, char *out) {
    if (strchr(name, '{') != NULL)
        snprintf(out, 1024, "redisson_lock__channel:%s", name);
    else
        snprintf(out, 1024, "redisson_lock__channel:{%s}", name);
}

/* An integer reply, nil as -1; fails the test on anything else. */
static long long int_or_nil(redisReply *r, const char *what) {
    long long v;

    CHECK_MSG(r != NULL, "%s: no reply", what);
    CHECK_MSG(r->type == REDIS_REPLY_INTEGER || r->type == REDIS_REPLY_NIL,
              "%s: reply type %d (%s)", what, r->type, r->type == REDIS_REPLY_ERROR ? r->str : "");
    v = r->type == REDIS_REPLY_NIL ? -1 : r->integer;
    freeReplyObject(r);
    return v;
}

long long rs_try_lock(rs_client *rc, const char *name, long thread, int64_t lease_ms) {
    char field[64];

    rs_field(rc, thread, field);
    return int_or_nil(
        redisCommand(rc->c, "EVAL %s 1 %s %lld %s", try_lock_lua, name, (long long)lease_ms, field),
        "tryLock");
}

long long rs_unlock(rs_client *rc, const char *name, long thread, int64_t lease_ms,
                    const char *request_id) {
    char field[64], chan[1024], latch[1200];

    rs_field(rc, thread, field);
    rs_channel(name, chan);
    /* prefixName("redisson_unlock_latch", name) + ":" + request id */
    if (strchr(name, '{') != NULL)
        snprintf(latch, sizeof latch, "redisson_unlock_latch:%s:%s", name, request_id);
    else
        snprintf(latch, sizeof latch, "redisson_unlock_latch:{%s}:%s", name, request_id);
    return int_or_nil(redisCommand(rc->c, "EVAL %s 3 %s %s %s 0 %lld %s %s %d", unlock_lua, name,
                                   chan, latch, (long long)lease_ms, field,
                                   rc->sharded ? "spublish" : "publish", LATCH_PX_MS),
                      "unlock");
}

long long rs_renew(rs_client *rc, const char *name, long thread, int64_t lease_ms) {
    char field[64];

    rs_field(rc, thread, field);
    return int_or_nil(
        redisCommand(rc->c, "EVAL %s 1 %s %lld %s", renew_lua, name, (long long)lease_ms, field),
        "renewExpiration");
}

long long rs_force_unlock(rs_client *rc, const char *name) {
    char chan[1024];

    rs_channel(name, chan);
    return int_or_nil(redisCommand(rc->c, "EVAL %s 2 %s %s 0 %s", force_unlock_lua, name, chan,
                                   rc->sharded ? "spublish" : "publish"),
                      "forceUnlock");
}

void rs_waiter_init(rs_waiter *w, test_redis *r, const char *name, int sharded) {
    redisReply *reply;

    memset(w, 0, sizeof(*w));
    rs_channel(name, w->channel);
    w->sub = test_redis_connect_admin(r, 2000);
    CHECK(w->sub != NULL);
    reply = redisCommand(w->sub, "%s %s", sharded ? "SSUBSCRIBE" : "SUBSCRIBE", w->channel);
    CHECK_MSG(reply != NULL && reply->type == REDIS_REPLY_ARRAY && reply->elements == 3,
              "subscribe %s: %s", w->channel,
              reply != NULL && reply->type == REDIS_REPLY_ERROR ? reply->str : "bad reply");
    freeReplyObject(reply);
}

void rs_waiter_close(rs_waiter *w) {
    redisFree(w->sub);
    w->sub = NULL;
}

int rs_waiter_poll(rs_waiter *w) {
    int got = 0;

    for (;;) {
        redisReply *reply = NULL;
        struct pollfd p = {.fd = w->sub->fd, .events = POLLIN};

        CHECK(redisGetReplyFromReader(w->sub, (void **)&reply) == REDIS_OK);
        if (reply == NULL) {
            if (poll(&p, 1, 0) <= 0)
                break;
            CHECK(redisBufferRead(w->sub) == REDIS_OK);
            continue;
        }
        /* ["message" | "smessage", channel, payload] */
        CHECK(reply->type == REDIS_REPLY_ARRAY && reply->elements == 3);
        CHECK_STR_EQ(reply->element[1]->str, w->channel);
        if (strcmp(reply->element[2]->str, "0") == 0)
            got++;
        freeReplyObject(reply);
    }
    w->messages += got;
    return got;
}
