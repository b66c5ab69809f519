/*
 * Engine bugs found by the fault tests, each reduced to a minimal case.
 * They fail until the engine is fixed; each names the guarantee it breaks.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include <hiredis/async.h>

#include "hostile.h"
#include "prim/core.h"
#include "prim/lock.h"
#include "proxy.h"
#include "redis_server.h"
#include "route/node.h"

static void block_ms(int64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/*
 * README: "leash_held() is 0 from the deadline on, whatever the loop does";
 * DESIGN 1.4: no renewal before the local deadline -> lost, once, and the
 * lock counts as not held.
 *
 * A renewal sent before the deadline whose reply is read after it (the
 * loop was busy, or the process stopped) brings the hold back when the
 * loop hands over the socket before the expired timer:
 * the renewal's answer moves the deadline forward without looking at the
 * clock, and the lock timer then finds the deadline ahead. leash_held()
 * went 1 -> 0 -> 1 and no lost callback fired. libev happens to invoke
 * the timer first when both are ready in one iteration (its pending queue
 * runs last-fed first), but leash arms its timers with whole
 * milliseconds, so the timer can also come up to 1 ms after the deadline,
 * and a socket served in that window revives the hold on libev too.
 */
/* PUBLISH msg on the channel of lock `name` (prefix "leash:", db 0), as
 * anyone allowed to publish there could. */
static long long publish_on(test_redis *r, const char *name, const char *msg) {
    leash__names k;
    leash__logger lg = {NULL, NULL, LEASH_LOG_ERROR};
    long long n;

    CHECK_EQ_INT(leash__dialect_leash.names(&k, &lg, "leash:", name, 0), LEASH_OK);
    n = test_redis_int(r, "PUBLISH %b %s", k.channel, k.channel_len, msg);
    leash__names_clear(&k);
    return n;
}

TEST(renewal_answered_after_the_deadline_does_not_revive_the_hold) {
    test_redis r;
    fault_proxy p;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    leash_client *c;
    leash_lock *l;
    fx_result lost = {0};
    leash_stats st;
    uint64_t renews;
    int64_t end;

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    CHECK_EQ_INT(fp_start(&p, r.port), 0);
    c = fx_fault_client(loop, p.port, 300); /* renewals every 100 ms */
    fx_wait_connected(loop, c, 3000);
    l = leash_lock_new(c, "revive");
    leash_on_lost(l, fx_lost_cb, &lost);
    CHECK_EQ_INT(fx_acquire_sync(loop, l, 0, 3000), LEASH_OK);
    /* Replies take 50 ms from now on: a renewal's answer is on its way
     * for a while after it was sent. */
    CHECK_EQ_INT(fp_delay(&p, FP_ALL, FP_DOWN, 50), 0);
    leash_client_stats(c, &st);
    renews = st.renew_commands;
    end = test_now_ms() + 2000;
    while (st.renew_commands == renews && test_now_ms() < end) {
        ev_run(loop, EVRUN_NOWAIT);
        leash_client_stats(c, &st);
    }
    CHECK(st.renew_commands > renews);
    ev_run(loop, EVRUN_NOWAIT); /* written out */
    /* The loop is busy for 250 ms: the deadline (the previous renewal's
     * send + 295 ms, so about this one's + 195 ms) passes while this
     * renewal's answer waits in the socket; the answer would move it to
     * this one's send + 295 ms. */
    block_ms(250);
    CHECK_EQ_INT(leash_held(l), 0);
    end = l->hold.deadline;
    /* A loop that serves ready sockets before expired timers (libev runs
     * the timer first within one iteration; nothing in leash/loop.h asks
     * for either order) hands the answer to leash now. */
    {
        leash__route *route = leash__client_core(c)->route;
        ev_feed_fd_event(loop, leash__sock_fd(route->ops->node(route, 0)->cmd.sock), EV_READ);
        ev_invoke_pending(loop);
    }
    CHECK_MSG(!leash_held(l), "leash_held() is 1 again, %lld ms after the deadline passed",
              (long long)(test_now_ms() - end));
    test_run_for(loop, 100);
    CHECK_MSG(lost.calls == 1 && !leash_held(l),
              "after the deadline: lost fired %d times, leash_held() = %d (the hold came back)",
              lost.calls, leash_held(l));
    leash_client_free(c);
    fp_stop(&p);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}

/*
 * A waiter takes "renewed:<lease>" messages on the lock's channel at their
 * word: leash__lock_holder_renewed() computes now + lease_ms + 1 with the
 * number from the message, which overflows int64_t (undefined behaviour:
 * UBSan stops the process) for a large one. Anyone allowed to PUBLISH on
 * the channel can send it; a holder's own watchdog never would.
 */
TEST(renewed_message_with_a_huge_lease_is_not_undefined_behaviour) {
    test_redis r;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    leash_client *c;
    leash_lock *a, *b;
    fx_result res = {0};

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    c = fx_fault_client(loop, r.port, 300);
    fx_wait_connected(loop, c, 3000);
    a = leash_lock_new(c, "forged");
    b = leash_lock_new(c, "forged");
    CHECK_EQ_INT(fx_acquire_sync(loop, a, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(b, 3000, fx_acquire_cb, &res), LEASH_OK);
    test_run_for(loop, 100); /* subscribed and parked */
    CHECK_EQ_INT(publish_on(&r, "forged", "renewed:9223372036854775807"), 1);
    test_run_for(loop, 100);
    CHECK_EQ_INT(fx_release_sync(loop, a, 3000), LEASH_OK);
    fx_run_until(loop, &res, 3000);
    CHECK_EQ_INT(res.status, LEASH_OK);
    leash_client_free(c);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}

/*
 * DESIGN 5.3 and "no waiter stranded": a waiter wakes at the holder's
 * remaining TTL at the latest, because a crashed holder publishes nothing.
 * A forged "renewed:<lease>" message (any client with PUBLISH on the
 * channel) moves that wake-up as far as it likes: here a day. The holder
 * then vanishes (its key expires, nothing is published) and the waiter
 * sleeps on past its expiry. The lease in a message should be capped (for
 * instance by the waiter's own lease setting, or the PTTL it saw).
 */
TEST(forged_renewed_message_does_not_strand_a_waiter) {
    test_redis r;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    leash_client *c;
    leash_lock *b;
    fx_result res = {0};
    redisReply *rep;
    int64_t t0;

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    c = fx_fault_client(loop, r.port, 300);
    fx_wait_connected(loop, c, 3000);
    /* A holder that will vanish: a key with another owner and 300 ms left. */
    rep = test_redis_cmd(&r, "SET leash:stranded %s:0:1:1 PX 300",
                         "0123456789abcdef0123456789abcdef");
    CHECK(rep != NULL && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    b = leash_lock_new(c, "stranded");
    t0 = test_now_ms();
    CHECK_EQ_INT(leash_acquire(b, 5000, fx_acquire_cb, &res), LEASH_OK);
    test_run_for(loop, 100);
    CHECK_EQ_INT(res.calls, 0);
    publish_on(&r, "stranded", "renewed:86400000");
    fx_run_until(loop, &res, 6000);
    CHECK_MSG(res.status == LEASH_OK && res.at_ms - t0 < 1000,
              "the waiter got %s after %lld ms; the key expired after 300 ms",
              leash_status_name(res.status), (long long)(res.at_ms - t0));
    leash_client_free(c);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}

/*
 * The busy answer's PTTL, from a hostile server: now + pttl + 1 in
 * wait_for_release() overflows the same way (UBSan stops the process).
 */
TEST(busy_answer_with_a_huge_ttl_is_not_undefined_behaviour) {
    hworld w;
    leash_lock *l;
    fx_result res = {0};

    hw_up(&w, 2000);
    l = leash_lock_new(w.c, "ttl");
    hw_set(&w, FR_ACQUIRE, NULL, HOSTILE_REPLY, "*4\r\n:0\r\n:9223372036854775807\r\n:0\r\n:1\r\n",
           1);
    CHECK_EQ_INT(leash_acquire(l, 500, fx_acquire_cb, &res), LEASH_OK);
    fx_run_until(w.loop, &res, 3000);
    CHECK(res.status == LEASH_OK || res.status == LEASH_ETIMEDOUT);
    hw_down(&w);
}

/*
 * DESIGN 1.5 "any API call is safe from inside any leash callback": a
 * callback that cancels (or frees) another handle whose acquire expires in
 * the same batch crashes. expire_queue() and fail_queue() (src/conn.c)
 * move the doomed commands to a local list and set cmd->conn = NULL on all
 * of them before completing the first; a callback that then cancels one of
 * the others reaches leash__cmd_cancel(), which (the command not being
 * SENT) calls queue_remove(cmd->conn = NULL, cmd): a NULL dereference. The
 * engine itself gets there without any user callback, too: the renewal
 * batch completes ECONN from the same list, the hold is past its deadline,
 * lose() abandons the handle's reentrant attempt, which is in that list
 * (found by fuzz/fuzz_replies).
 */
static leash_lock *other;
static fx_result first, second;

static void cancel_the_other(leash_lock *l, int status, void *arg) {
    fx_acquire_cb(l, status, arg);
    CHECK_EQ_INT(leash_cancel(other), LEASH_OK);
}

TEST(callback_canceling_another_acquire_that_expires_with_it) {
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    leash_client *c;
    leash_lock *a;
    int port;

    /* A port nobody listens on: connects fail, commands wait in the queue. */
    {
        test_redis r;
        CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
        port = r.port;
        test_redis_stop(&r);
    }
    c = fx_fault_client(loop, port, 1000);
    test_run_for(loop, 50);
    CHECK(!leash_client_connected(c));
    a = leash_lock_new(c, "first");
    other = leash_lock_new(c, "second");
    CHECK_EQ_INT(leash_acquire(a, 0, cancel_the_other, &first), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(other, 0, fx_acquire_cb, &second), LEASH_OK);
    /* Both try-once deadlines (command timeout, 300 ms) pass before the
     * loop runs again: one expire_queue() completes them both. */
    block_ms(400);
    test_run_for(loop, 100);
    CHECK_EQ_INT(first.calls, 1);
    CHECK_EQ_INT(first.status, LEASH_ECONN);
    CHECK_EQ_INT(second.calls, 1);
    CHECK_EQ_INT(second.status, LEASH_ECANCELED);
    leash_client_free(c);
    ev_loop_destroy(loop);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(renewal_answered_after_the_deadline_does_not_revive_the_hold),
        TEST_CASE(renewed_message_with_a_huge_lease_is_not_undefined_behaviour),
        TEST_CASE(forged_renewed_message_does_not_strand_a_waiter),
        TEST_CASE(busy_answer_with_a_huge_ttl_is_not_undefined_behaviour),
        TEST_CASE(callback_canceling_another_acquire_that_expires_with_it),
        {0},
    };
    return test_main(argc, argv, cases);
}
