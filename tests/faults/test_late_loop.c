/* SPDX-License-Identifier: MIT */
/*
 * When the loop runs late (busy, or the process stopped): a renewal's
 * answer read after the hold's deadline does not bring the hold back, and
 * commands whose deadlines pass in one batch complete one by one, so that
 * the callback of one may cancel another. Each case, found by the fault
 * tests, failed on the engine before its fix; each names the guarantee.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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
 * DESIGN 1.5 "any API call is safe from inside any leash callback": a
 * callback that cancels (or frees) another handle whose acquire expires in
 * the same batch crashes. expire_queue() and fail_queue() (src/wire/conn.c)
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
        TEST_CASE(callback_canceling_another_acquire_that_expires_with_it),
        {0},
    };
    return test_main(argc, argv, cases);
}
