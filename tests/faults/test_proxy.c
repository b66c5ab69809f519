/* SPDX-License-Identifier: MIT */
/* The fault proxy itself, with blocking hiredis connections through it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strdup */
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>

#include "check.h"
#include "proxy.h"
#include "redis_server.h"

typedef struct world {
    test_redis r;
    fault_proxy p;
} world;

static void up(world *w) {
    CHECK_EQ_INT(test_redis_start(&w->r, NULL), 0);
    CHECK_EQ_INT(fp_start(&w->p, w->r.port), 0);
}

static void down(world *w) {
    fp_stop(&w->p);
    test_redis_stop(&w->r);
}

static redisContext *connect_to(int port, int timeout_ms) {
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    CHECK(c != NULL);
    if (c->err == 0)
        redisSetTimeout(c, tv);
    return c;
}

/* The reply of a command as a string ("PONG", "OK", a bulk), or NULL. */
static char *cmd_str(redisContext *c, const char *cmd) {
    redisReply *r = redisCommand(c, cmd);
    char *s = NULL;
    if (r == NULL)
        return NULL;
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)
        s = strdup(r->str);
    freeReplyObject(r);
    return s;
}

static int ping_ok(redisContext *c) {
    char *s = cmd_str(c, "PING");
    int ok = s != NULL && strcmp(s, "PONG") == 0;
    free(s);
    return ok;
}

TEST(forwards_both_ways) {
    world w;
    redisContext *c;
    char *s;
    fp_stats st;

    up(&w);
    c = connect_to(w.p.port, 2000);
    CHECK_EQ_INT(c->err, 0);
    CHECK(ping_ok(c));
    freeReplyObject(redisCommand(c, "SET k hello"));
    s = cmd_str(c, "GET k");
    CHECK_STR_EQ(s, "hello");
    free(s);
    CHECK_EQ_INT(fp_stats_get(&w.p, &st), 0);
    CHECK_EQ_INT((long long)st.accepted, 1);
    CHECK(st.bytes_up > 0 && st.bytes_down > 0);
    redisFree(c);
    down(&w);
}

TEST(delay_adds_latency_each_way) {
    world w;
    redisContext *c;
    int64_t t0, took;

    up(&w);
    c = connect_to(w.p.port, 2000);
    CHECK(ping_ok(c));
    CHECK_EQ_INT(fp_delay(&w.p, FP_ALL, FP_BOTH, 100), 0);
    t0 = test_now_ms();
    CHECK(ping_ok(c));
    took = test_now_ms() - t0;
    CHECK_MSG(took >= 195 && took < 600, "PING took %lld ms, expected about 200", (long long)took);
    CHECK_EQ_INT(fp_delay(&w.p, FP_ALL, FP_BOTH, 0), 0);
    t0 = test_now_ms();
    CHECK(ping_ok(c));
    CHECK(test_now_ms() - t0 < 100);
    redisFree(c);
    down(&w);
}

/* 4 bytes a millisecond: a 200-byte value comes back whole, in about 52
 * pieces, so no sooner than 51 ms; off again, at once. */
TEST(trickle_cuts_bytes_into_pieces) {
    char value[201], *s;
    world w;
    redisContext *c;
    int64_t t0, took;

    memset(value, 'v', 200);
    value[200] = '\0';
    up(&w);
    c = connect_to(w.p.port, 2000);
    freeReplyObject(redisCommand(c, "SET k %s", value));
    CHECK_EQ_INT(fp_trickle(&w.p, FP_ALL, FP_DOWN, 4), 0);
    t0 = test_now_ms();
    s = cmd_str(c, "GET k");
    took = test_now_ms() - t0;
    CHECK_STR_EQ(s, value);
    free(s);
    CHECK_MSG(took >= 51 && took < 1000, "GET took %lld ms, expected about 55", (long long)took);
    CHECK_EQ_INT(fp_trickle(&w.p, FP_ALL, FP_DOWN, 0), 0);
    t0 = test_now_ms();
    s = cmd_str(c, "GET k");
    CHECK_STR_EQ(s, value);
    free(s);
    CHECK(test_now_ms() - t0 < 50);
    redisFree(c);
    down(&w);
}

TEST(stall_holds_bytes_until_lifted) {
    world w;
    redisContext *c;
    redisReply *r;
    void *reply = NULL;
    int64_t t0;

    up(&w);
    c = connect_to(w.p.port, 300);
    CHECK(ping_ok(c));
    CHECK_EQ_INT(fp_stall(&w.p, FP_ALL, FP_DOWN, 1), 0);
    t0 = test_now_ms();
    r = redisCommand(c, "PING");
    CHECK(r == NULL); /* timed out: the answer is held */
    CHECK(test_now_ms() - t0 >= 250);
    CHECK_EQ_INT(fp_stall(&w.p, FP_ALL, FP_DOWN, 0), 0);
    /* The held answer arrives now, on the same connection. */
    c->err = 0;
    redisSetTimeout(c, (struct timeval){2, 0});
    CHECK_EQ_INT(redisGetReply(c, &reply), REDIS_OK);
    CHECK(reply != NULL);
    CHECK_STR_EQ(((redisReply *)reply)->str, "PONG");
    freeReplyObject(reply);
    redisFree(c);
    down(&w);
}

TEST(blackhole_drops_then_closes) {
    world w;
    redisContext *c, *d;
    fp_stats st;

    up(&w);
    c = connect_to(w.p.port, 300);
    d = connect_to(w.p.port, 300);
    CHECK(ping_ok(c));
    CHECK(ping_ok(d));
    CHECK_EQ_INT(fp_blackhole(&w.p, FP_ALL, FP_UP, 1), 0);
    CHECK(redisCommand(c, "SET gone 1") == NULL); /* no answer: it never arrived */
    CHECK_EQ_INT(fp_blackhole(&w.p, FP_ALL, FP_UP, 0), 0);
    CHECK_EQ_INT(test_redis_int(&w.r, "EXISTS gone"), 0);
    CHECK_EQ_INT(fp_stats_get(&w.p, &st), 0);
    CHECK(st.bytes_dropped > 0);
    CHECK_EQ_INT((long long)st.cut, 1); /* c lost bytes and was closed; d was idle */
    CHECK(ping_ok(d));
    redisFree(c);
    redisFree(d);
    down(&w);
}

TEST(cut_closes_every_connection) {
    world w;
    redisContext *c;

    up(&w);
    c = connect_to(w.p.port, 1000);
    CHECK(ping_ok(c));
    CHECK_EQ_INT(fp_cut(&w.p, FP_ALL), 0);
    CHECK(redisCommand(c, "PING") == NULL);
    redisFree(c);
    c = connect_to(w.p.port, 1000);
    CHECK(ping_ok(c)); /* new ones are fine */
    redisFree(c);
    down(&w);
}

TEST(refuse_all_gives_connection_refused) {
    world w;
    redisContext *c;

    up(&w);
    CHECK_EQ_INT(fp_refuse(&w.p, FP_ALL, 1), 0);
    c = connect_to(w.p.port, 1000);
    CHECK(c->err != 0);
    CHECK_MSG(strstr(c->errstr, "refused") != NULL, "errstr: %s", c->errstr);
    redisFree(c);
    CHECK_EQ_INT(fp_refuse(&w.p, FP_ALL, 0), 0);
    c = connect_to(w.p.port, 1000);
    CHECK_EQ_INT(c->err, 0);
    CHECK(ping_ok(c));
    redisFree(c);
    down(&w);
}

TEST(roles_are_told_apart) {
    world w;
    redisContext *cmd, *sub;
    redisReply *r;
    fp_stats st;

    up(&w);
    cmd = connect_to(w.p.port, 1000);
    sub = connect_to(w.p.port, 1000);
    r = redisCommand(cmd, "SCRIPT LOAD %s", "return 1");
    CHECK(r != NULL && r->type == REDIS_REPLY_STRING);
    freeReplyObject(r);
    r = redisCommand(sub, "SUBSCRIBE ch");
    CHECK(r != NULL);
    freeReplyObject(r);
    CHECK_EQ_INT(fp_stats_get(&w.p, &st), 0);
    CHECK_EQ_INT((long long)st.open_cmd, 1);
    CHECK_EQ_INT((long long)st.open_sub, 1);

    /* A stall of the subscriber connection does not touch commands. */
    CHECK_EQ_INT(fp_stall(&w.p, FP_SUB, FP_BOTH, 1), 0);
    CHECK_EQ_INT(test_redis_int(&w.r, "PUBLISH ch hello"), 1);
    CHECK(ping_ok(cmd));
    CHECK_EQ_INT(redisGetReply(sub, (void **)&r), REDIS_ERR); /* held */
    CHECK_EQ_INT(fp_stall(&w.p, FP_SUB, FP_BOTH, 0), 0);
    sub->err = 0;
    CHECK_EQ_INT(redisGetReply(sub, (void **)&r), REDIS_OK);
    CHECK_STR_EQ(r->element[2]->str, "hello");
    freeReplyObject(r);

    /* Cutting subscribers leaves the command connection. */
    CHECK_EQ_INT(fp_cut(&w.p, FP_SUB), 0);
    CHECK(ping_ok(cmd));
    CHECK_EQ_INT(fp_stats_get(&w.p, &st), 0);
    CHECK_EQ_INT((long long)st.open_sub, 0);
    CHECK_EQ_INT((long long)st.open_cmd, 1);
    redisFree(cmd);
    redisFree(sub);
    down(&w);
}

TEST(refuse_one_role_resets_it_when_it_shows) {
    world w;
    redisContext *cmd, *sub;
    redisReply *r;
    fp_stats st;

    up(&w);
    CHECK_EQ_INT(fp_refuse(&w.p, FP_SUB, 1), 0);
    cmd = connect_to(w.p.port, 1000);
    sub = connect_to(w.p.port, 1000);
    r = redisCommand(cmd, "SCRIPT LOAD %s", "return 2");
    CHECK(r != NULL && r->type == REDIS_REPLY_STRING);
    freeReplyObject(r);
    CHECK(redisCommand(sub, "SUBSCRIBE ch") == NULL);
    CHECK(ping_ok(cmd));
    CHECK_EQ_INT(fp_stats_get(&w.p, &st), 0);
    CHECK_EQ_INT((long long)st.refused, 1);
    redisFree(cmd);
    redisFree(sub);
    down(&w);
}

TEST(server_gone_closes_clients) {
    world w;
    redisContext *c;

    up(&w);
    c = connect_to(w.p.port, 1000);
    CHECK(ping_ok(c));
    CHECK_EQ_INT(test_redis_kill(&w.r), 0);
    CHECK(redisCommand(c, "PING") == NULL);
    redisFree(c);
    c = connect_to(w.p.port, 1000);
    /* Accepted, then closed: the server is not there. */
    CHECK(c->err != 0 || redisCommand(c, "PING") == NULL);
    redisFree(c);
    CHECK_EQ_INT(test_redis_restart(&w.r), 0);
    c = connect_to(w.p.port, 1000);
    CHECK(ping_ok(c));
    redisFree(c);
    down(&w);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(forwards_both_ways),
        TEST_CASE(delay_adds_latency_each_way),
        TEST_CASE(trickle_cuts_bytes_into_pieces),
        TEST_CASE(stall_holds_bytes_until_lifted),
        TEST_CASE(blackhole_drops_then_closes),
        TEST_CASE(cut_closes_every_connection),
        TEST_CASE(refuse_all_gives_connection_refused),
        TEST_CASE(roles_are_told_apart),
        TEST_CASE(refuse_one_role_resets_it_when_it_shows),
        TEST_CASE(server_gone_closes_clients),
        {0},
    };
    return test_main(argc, argv, cases);
}
