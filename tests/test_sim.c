/* SPDX-License-Identifier: MIT */
/* The simulated Redis (support/sim.h) and the failing allocator
 * (support/failalloc.h), proved on leash's public API. The cases answer
 * scripts with error replies only: the scripts' reply shapes belong to
 * the engine's own tests. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strdup */
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <leash/leash.h>

#include "base/sha1.h"
#include "check.h"
#include "failalloc.h"
#include "sim_fixture.h"

static leash_client *new_client(sim *s, void (*tweak)(leash_options *)) {
    leash_options o;

    sim_options(s, &o);
    if (tweak)
        tweak(&o);
    return simfx_client(s, &o);
}

static int acquire(leash_lock *l, int64_t wait_ms, simfx_rec *r) {
    int rc;
    simfx_in_call = 1;
    rc = leash_acquire(l, wait_ms, simfx_on_acquired, r);
    simfx_in_call = 0;
    return rc;
}

/* Frees the client and checks that it left nothing running behind. */
static void finish(sim *s, leash_client *c) {
    leash_client_free(c);
    sim_run(s);
    CHECK_EQ_INT(sim_client_count(s), 0);
    CHECK_EQ_INT(sim_timers_alive(s), 0);
    CHECK(sim_cmd_conn(s) == NULL);
    sim_free(s);
}

TEST(t_connects_through_the_sim) {
    sim *s = sim_new();
    leash_client *c = new_client(s, NULL);
    sim_conn *conn;

    CHECK(!leash_client_connected(c)); /* nothing moves before sim_run */
    sim_run(s);
    CHECK(leash_client_connected(c));
    CHECK(sim_now() == SIM_START_MS);
    conn = sim_cmd_conn(s);
    CHECK(conn != NULL);
    CHECK(sim_conn_client(conn) == c);
    CHECK(sim_conn_received(conn) >= 1);     /* the scripts were loaded... */
    CHECK_EQ_INT(sim_conn_pending(conn), 0); /* ...and answered by auto mode */
    CHECK(sim_sub_conn(s) == NULL);          /* no SUBSCRIBE yet */
    CHECK_EQ_INT(sim_conn_count(s), 2);      /* command and subscriber */
    finish(s, c);
}

TEST(t_error_reply_completes_from_sim_run) {
    sim *s = sim_new();
    leash_client *c = new_client(s, NULL);
    leash_lock *l = leash_lock_new(c, "job");
    simfx_rec r = {0};
    sim_cmd *cmd;
    const char *sha;

    CHECK(l != NULL);
    CHECK_EQ_INT(acquire(l, 0, &r), LEASH_OK);
    CHECK_EQ_INT(r.calls, 0);
    cmd = sim_wait_cmd(s, SIM_ROLE_CMD, "EVALSHA");
    CHECK(sim_now() == SIM_START_MS); /* it came without time passing */
    CHECK(cmd->conn == sim_cmd_conn(s));
    CHECK(sim_cmd_is(cmd, "evalsha"));
    sha = sim_cmd_sha(cmd);
    CHECK(sha != NULL && strlen(sha) == 40);
    CHECK(sim_script_source(s, sha) != NULL); /* loaded at connect */
    CHECK_EQ_INT(r.calls, 0);

    CHECK_EQ_INT(sim_reply(cmd->conn, "-ERR x\r\n"), 0);
    CHECK_EQ_INT(r.calls, 0); /* queued, not delivered */
    sim_run(s);
    CHECK_EQ_INT(r.calls, 1);
    CHECK_EQ_INT(r.status, LEASH_EREDIS);
    CHECK(!r.inside_call);
    CHECK(!leash_held(l));
    sim_advance(s, 5000);
    CHECK_EQ_INT(r.calls, 1);
    finish(s, c);
}

/*
 * Virtual time. An unanswered attempt breaks the connection after exactly
 * command_timeout_ms (200 in sim_options). The wait of 300 ms fails, never
 * before its end; not at its end either: leash lets an attempt still in
 * flight at the deadline decide (src/prim/holding.c), so the callback comes when
 * the resent attempt times out too, with LEASH_ECONN.
 */
TEST(t_wait_ends_on_the_virtual_clock) {
    sim *s = sim_new();
    leash_client *c = new_client(s, NULL);
    leash_lock *l = leash_lock_new(c, "job");
    simfx_rec r = {0};
    sim_conn *conn;
    int64_t t0;

    sim_run(s);
    t0 = sim_now();
    CHECK_EQ_INT(acquire(l, 300, &r), LEASH_OK);
    conn = sim_wait_cmd(s, SIM_ROLE_CMD, "EVALSHA")->conn;
    CHECK(sim_now() == t0);
    sim_advance(s, 199);
    CHECK(sim_conn_live(conn));
    sim_advance(s, 1);
    CHECK(!sim_conn_live(conn));
    CHECK(sim_now() == t0 + 200);
    sim_advance(s, 99);
    CHECK_EQ_INT(r.calls, 0);
    CHECK(sim_now() == t0 + 299);
    sim_advance(s, 1000);
    CHECK_EQ_INT(r.calls, 1);
    CHECK(r.status != LEASH_OK);
    CHECK(r.at >= t0 + 300);
    CHECK(!r.inside_call);
    finish(s, c);
}

TEST(t_server_close_makes_the_client_reconnect) {
    sim *s = sim_new();
    leash_client *c = new_client(s, NULL);
    sim_conn *first, *second;
    leash_stats st;

    sim_run(s);
    first = sim_cmd_conn(s);
    CHECK(first != NULL && leash_client_connected(c));
    sim_close(first);
    CHECK(!sim_conn_live(first));
    CHECK(sim_cmd_conn(s) == NULL);
    sim_run(s);
    CHECK(!leash_client_connected(c));
    sim_advance(s, 100); /* backoff of 10..40 ms */
    second = sim_cmd_conn(s);
    CHECK(second != NULL && second != first);
    CHECK(sim_conn_index(second) > sim_conn_index(first));
    CHECK(leash_client_connected(c));
    leash_client_stats(c, &st);
    CHECK_EQ_INT(st.connects, 2);
    CHECK_EQ_INT(st.disconnects, 1);
    finish(s, c);
}

static void select_db_1(leash_options *o) {
    o->db = 1;
}

/* Auto mode switched off for one kind: the test answers it, and what the
 * client pipelined behind it waits its turn. */
TEST(t_scripted_select) {
    sim *s = sim_new();
    leash_client *c;
    sim_cmd *cmd;
    sim_conn *conn;

    sim_set_auto(s, SIM_AUTO_SELECT, 0);
    c = new_client(s, select_db_1);
    cmd = sim_wait_cmd(s, SIM_ROLE_CMD, "SELECT");
    conn = cmd->conn;
    CHECK_STR_EQ(sim_cmd_arg(cmd, 1), "1");
    CHECK(sim_conn_pending(conn) > 1); /* the SCRIPT LOADs wait behind it */
    CHECK(sim_cmd_is(sim_conn_cmd(conn, 1), "SCRIPT"));
    CHECK_EQ_INT(sim_reply(conn, "-BUSY x\r\n"), 0);
    sim_run(s);
    CHECK(!leash_client_connected(c));
    CHECK(!sim_conn_live(conn)); /* the client dropped it */

    sim_set_auto(s, SIM_AUTO_SELECT, 1);
    sim_advance(s, 100);
    CHECK(leash_client_connected(c));
    CHECK(sim_cmd_conn(s) != conn);
    finish(s, c);
}

/* Bytes are cut into complete replies: half a reply reaches nobody. */
TEST(t_split_reply) {
    sim *s = sim_new();
    leash_client *c = new_client(s, NULL);
    leash_lock *l = leash_lock_new(c, "job");
    simfx_rec r = {0};
    sim_conn *conn;

    CHECK_EQ_INT(acquire(l, 0, &r), LEASH_OK);
    conn = sim_wait_cmd(s, SIM_ROLE_CMD, "EVALSHA")->conn;
    CHECK_EQ_INT(sim_reply(conn, "-ER"), 0);
    sim_run(s);
    CHECK_EQ_INT(r.calls, 0);
    CHECK_EQ_INT(sim_reply(conn, "R x\r\n"), -1); /* nothing pending any more */
    CHECK_EQ_INT(sim_push(conn, "R x\r\n"), 0);
    sim_run(s);
    CHECK_EQ_INT(r.calls, 1);
    CHECK_EQ_INT(r.status, LEASH_EREDIS);
    finish(s, c);
}

/* Bytes that are not RESP go to hiredis as they are; it drops the
 * connection and the client makes a new one. */
TEST(t_garbage_breaks_the_connection) {
    sim *s = sim_new();
    leash_client *c = new_client(s, NULL);
    leash_lock *l = leash_lock_new(c, "job");
    simfx_rec r = {0};
    sim_conn *conn;

    CHECK_EQ_INT(acquire(l, 0, &r), LEASH_OK);
    conn = sim_wait_cmd(s, SIM_ROLE_CMD, "EVALSHA")->conn;
    CHECK_EQ_INT(sim_reply(conn, "?garbage\r\n"), 0);
    sim_run(s);
    CHECK(!sim_conn_live(conn));
    sim_advance(s, 100);
    CHECK(sim_cmd_conn(s) != NULL && sim_cmd_conn(s) != conn);
    finish(s, c);
}

/* Replies a bare hiredis context got, flattened to one line each. */
typedef struct seen {
    int n;
    char line[8][128];
} seen;

static void flatten(char *out, size_t cap, const redisReply *r) {
    size_t i, len = strlen(out);

    switch (r->type) {
    case REDIS_REPLY_ARRAY:
        snprintf(out + len, cap - len, "[");
        for (i = 0; i < r->elements; i++) {
            len = strlen(out);
            snprintf(out + len, cap - len, i ? " " : "");
            flatten(out, cap, r->element[i]);
        }
        len = strlen(out);
        snprintf(out + len, cap - len, "]");
        break;
    case REDIS_REPLY_INTEGER:
        snprintf(out + len, cap - len, ":%lld", r->integer);
        break;
    case REDIS_REPLY_NIL:
        snprintf(out + len, cap - len, "nil");
        break;
    default: /* string, status, error */
        snprintf(out + len, cap - len, "%s%s", r->type == REDIS_REPLY_ERROR ? "-" : "", r->str);
        break;
    }
}

static void on_reply(redisAsyncContext *ac, void *reply, void *arg) {
    seen *v = arg;
    (void)ac;
    if (reply != NULL && v->n < 8)
        flatten(v->line[v->n++], sizeof v->line[0], reply);
}

/* Auto mode, roles and pub/sub state, on a bare hiredis context. */
TEST(t_auto_mode) {
    sim *s = sim_new();
    redisAsyncContext *ac = redisAsyncConnectUnix(sim_unix_path(s));
    seen v = {0}, sub = {0};
    sim_conn *conn;
    char sha[41];
    sim_cmd *cmd;

    CHECK(ac != NULL && ac->err == 0);
    CHECK_EQ_INT(sim_attach_context(s, ac), 0);
    conn = sim_conn_at(s, 0);
    CHECK(sim_conn_client(conn) == NULL);
    redisAsyncCommand(ac, on_reply, &v, "PING");
    redisAsyncCommand(ac, on_reply, &v, "TIME");
    redisAsyncCommand(ac, on_reply, &v, "AUTH user pass");
    redisAsyncCommand(ac, on_reply, &v, "SCRIPT LOAD %s", "return 1");
    sim_advance(s, 1234);
    CHECK_EQ_INT(v.n, 4);
    CHECK_STR_EQ(v.line[0], "PONG");
    CHECK_STR_EQ(v.line[1], "[1795001000 0]");
    CHECK_STR_EQ(v.line[2], "OK");
    leash__sha1_hex("return 1", 8, sha);
    CHECK_STR_EQ(v.line[3], sha);
    CHECK_STR_EQ(sim_script_source(s, sha), "return 1");
    CHECK_EQ_INT(sim_conn_role(conn), SIM_ROLE_CMD); /* it sent SCRIPT */
    CHECK_EQ_INT(sim_conn_received(conn), 4);

    /* TIME follows the virtual clock. */
    redisAsyncCommand(ac, on_reply, &v, "TIME");
    sim_run(s);
    CHECK_STR_EQ(v.line[4], "[1795001001 234000]");

    /* An EVAL waits for the test, and so does the PING behind it. */
    redisAsyncCommand(ac, on_reply, &v, "EVAL %s 0", "return 2");
    redisAsyncCommand(ac, on_reply, &v, "PING hi");
    cmd = sim_wait_cmd(s, SIM_ROLE_CMD, "EVAL");
    CHECK_STR_EQ(sim_cmd_arg(cmd, 1), "return 2");
    CHECK(sim_cmd_sha(cmd) == NULL);
    CHECK_EQ_INT(sim_conn_pending(conn), 2);
    CHECK_EQ_INT(v.n, 5);
    CHECK_EQ_INT(sim_replyf(conn, ":%d\r\n", 2), 0);
    sim_run(s);
    CHECK_EQ_INT(v.n, 7);
    CHECK_STR_EQ(v.line[5], ":2");
    CHECK_STR_EQ(v.line[6], "hi");

    /* Subscriptions: the connection becomes a subscriber. A confirmation
     * held back by the test comes when it says so. */
    sim_set_auto(s, SIM_AUTO_SUBSCRIBE, 0);
    redisAsyncCommand(ac, on_reply, &sub, "SUBSCRIBE a b");
    cmd = sim_wait_cmd(s, SIM_ROLE_SUB, "SUBSCRIBE");
    CHECK(sim_sub_conn(s) == conn && sim_cmd_conn(s) == NULL);
    CHECK_EQ_INT(sim_conn_subscriptions(conn), 0);
    CHECK_EQ_INT(sim_publish(s, "a", 1, "lost", 4), 0); /* not subscribed yet */
    CHECK_EQ_INT(sim_reply_auto(conn), 0);
    sim_run(s);
    CHECK_EQ_INT(sub.n, 2);
    CHECK_STR_EQ(sub.line[0], "[subscribe a :1]");
    CHECK_STR_EQ(sub.line[1], "[subscribe b :2]");
    CHECK_EQ_INT(sim_conn_subscriptions(conn), 2);
    CHECK(sim_conn_subscribed(conn, "b", 1));
    CHECK_STR_EQ(sim_conn_subscription(conn, 0, NULL, NULL), "a");

    CHECK_EQ_INT(sim_publish(s, "a", 1, "hello", 5), 1);
    sim_run(s);
    CHECK_EQ_INT(sub.n, 3);
    CHECK_STR_EQ(sub.line[2], "[message a hello]");

    redisAsyncCommand(ac, NULL, NULL, "UNSUBSCRIBE a");
    sim_run(s);
    CHECK(!sim_conn_subscribed(conn, "a", 1));
    CHECK_EQ_INT(sim_conn_subscriptions(conn), 1);
    CHECK_EQ_INT(sim_publish(s, "a", 1, "gone", 4), 0);

    /* A frame the test writes itself counts as much as auto mode's. */
    CHECK_EQ_INT(sim_push(conn, "*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:2\r\n"), 0);
    CHECK(sim_conn_subscribed(conn, "c", 1));

    redisAsyncFree(ac);
    CHECK(!sim_conn_live(conn));
    sim_run(s);
    sim_free(s);
}

static void free_client(leash_lock *l, int status, void *arg) {
    simfx_on_acquired(l, status, arg);
    leash_client_free(leash_lock_client(l));
}

/* The sim outlives a client freed inside a callback it runs. */
TEST(t_client_freed_in_a_callback) {
    sim *s = sim_new();
    leash_client *c = new_client(s, NULL);
    leash_lock *l = leash_lock_new(c, "job");
    simfx_rec r = {0};
    sim_conn *conn;

    CHECK_EQ_INT(leash_acquire(l, 0, free_client, &r), LEASH_OK);
    conn = sim_wait_cmd(s, SIM_ROLE_CMD, "EVALSHA")->conn;
    CHECK_EQ_INT(sim_reply(conn, "-ERR x\r\n"), 0);
    sim_run(s);
    CHECK_EQ_INT(r.calls, 1);
    CHECK_EQ_INT(sim_client_count(s), 0);
    CHECK_EQ_INT(sim_timers_alive(s), 0);
    CHECK(!sim_conn_live(conn));
    sim_advance(s, 1000);
    sim_free(s);
}

TEST(t_failalloc_lock_new) {
    sim *s;
    leash_client *c;
    leash_lock *l;

    failalloc_reset();
    s = sim_new();
    c = new_client(s, NULL);
    sim_run(s);
    failalloc_arm(1);
    l = leash_lock_new(c, "job");
    CHECK(l == NULL);
    CHECK(failalloc_failed());
    CHECK(failalloc_count() >= 1);
    failalloc_disarm();
    l = leash_lock_new(c, "job");
    CHECK(l != NULL);
    CHECK(failalloc_outstanding() > 0);
    finish(s, c);
    CHECK_EQ_INT(failalloc_outstanding(), 0);
}

/* The allocator's own bookkeeping, without leash. Called through
 * volatile pointers, which the compiler cannot see through: it may remove
 * a malloc/free pair it can see (the pointers still name the wrappers: the
 * linker renames the references). */
static void *(*volatile do_malloc)(size_t) = malloc;
static void *(*volatile do_calloc)(size_t, size_t) = calloc;
static void *(*volatile do_realloc)(void *, size_t) = realloc;
static char *(*volatile do_strdup)(const char *) = strdup;
static void (*volatile do_free)(void *) = free;

TEST(t_failalloc_counts) {
    char *p;
    void *q;

    failalloc_reset();
    failalloc_arm(2);
    p = do_strdup("one");
    CHECK(p != NULL && strcmp(p, "one") == 0);
    CHECK(!failalloc_failed());
    CHECK(do_malloc(8) == NULL);
    CHECK(failalloc_failed());
    q = do_calloc(2, 8); /* it fails once only */
    CHECK(q != NULL);
    CHECK_EQ_INT(failalloc_count(), 3);
    CHECK_EQ_INT(failalloc_outstanding(), 2);
    failalloc_arm(1);
    CHECK(do_realloc(q, 4096) == NULL); /* q is still valid */
    q = do_realloc(q, 4096);
    CHECK(q != NULL);
    CHECK_EQ_INT(failalloc_outstanding(), 2);
    do_free(p);
    do_free(q);
    CHECK_EQ_INT(failalloc_outstanding(), 0);
    failalloc_reset();
    q = do_malloc(1); /* made before the reset: not this window's */
    failalloc_reset();
    do_free(q);
    CHECK_EQ_INT(failalloc_outstanding(), 0);
    failalloc_disarm();
}

int main(int argc, char **argv) {
    return test_main(argc, argv,
                     (test_case[]){
                         TEST_CASE(t_connects_through_the_sim),
                         TEST_CASE(t_error_reply_completes_from_sim_run),
                         TEST_CASE(t_wait_ends_on_the_virtual_clock),
                         TEST_CASE(t_server_close_makes_the_client_reconnect),
                         TEST_CASE(t_scripted_select),
                         TEST_CASE(t_split_reply),
                         TEST_CASE(t_garbage_breaks_the_connection),
                         TEST_CASE(t_auto_mode),
                         TEST_CASE(t_client_freed_in_a_callback),
                         TEST_CASE(t_failalloc_lock_new),
                         TEST_CASE(t_failalloc_counts),
                         {0},
                     });
}
