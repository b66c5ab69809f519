/* SPDX-License-Identifier: MIT */
#define _DEFAULT_SOURCE 1 /* usleep */
/* The counters of leash_stats and leash_lock_stats against a scripted
 * scenario on a real Redis: every counter the scenario moves is checked to
 * the number, times against what the test waited (less a few ms: the loop's
 * timers and leash's deadlines round to ms), and the client's sums against
 * its handles'. Also: a program's older (shorter) struct. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"

#define LEASE_MS 1500 /* the watchdog renews every 500 ms */

static void run_until_lost(fx_loop *loop, fx_result *lost) {
    fx_run_until_flag(loop, &lost->done, 5000);
    CHECK_EQ_INT(lost->calls, 1);
}

/* The client's fields that sum its handles'. */
static void check_sums(const leash_stats *c, leash_lock *const *locks, int n) {
    leash_lock_stats sum, one;
    int i;

    memset(&sum, 0, sizeof(sum));
    for (i = 0; i < n; i++) {
        leash_lock_stats(locks[i], &one);
        sum.acquires += one.acquires;
        sum.grants += one.grants;
        sum.busy += one.busy;
        sum.timeouts += one.timeouts;
        sum.cancels += one.cancels;
        sum.acquire_errors += one.acquire_errors;
        sum.waits += one.waits;
        sum.wait_us_total += one.wait_us_total;
        sum.holds += one.holds;
        sum.hold_us_total += one.hold_us_total;
        sum.renewals += one.renewals;
        sum.renewals_failed += one.renewals_failed;
        sum.lost_expired += one.lost_expired;
        sum.lost_unreachable += one.lost_unreachable;
        sum.lost_fixed_lease += one.lost_fixed_lease;
    }
    CHECK_EQ_INT(c->acquires, sum.acquires);
    CHECK_EQ_INT(c->grants, sum.grants);
    CHECK_EQ_INT(c->busy, sum.busy);
    CHECK_EQ_INT(c->timeouts, sum.timeouts);
    CHECK_EQ_INT(c->cancels, sum.cancels);
    CHECK_EQ_INT(c->acquire_errors, sum.acquire_errors);
    CHECK_EQ_INT(c->waits, sum.waits);
    CHECK_EQ_INT(c->wait_us_total, sum.wait_us_total);
    CHECK_EQ_INT(c->holds, sum.holds);
    CHECK_EQ_INT(c->hold_us_total, sum.hold_us_total);
    CHECK_EQ_INT(c->renewals, sum.renewals);
    CHECK_EQ_INT(c->renewals_failed, sum.renewals_failed);
    CHECK_EQ_INT(c->lost_expired, sum.lost_expired);
    CHECK_EQ_INT(c->lost_unreachable, sum.lost_unreachable);
    CHECK_EQ_INT(c->lost_fixed_lease, sum.lost_fixed_lease);
}

TEST(every_counter_follows_a_scripted_scenario) {
    fx_world w;
    leash_lock *a, *b, *d, *e, *f, *g;
    fx_result rb = {0}, ra = {0}, lost_d = {0}, lost_f = {0}, lost_g = {0};
    leash_stats st;
    leash_lock_stats sa, sb, sd, sf, sg;
    uint64_t connects, sub_connects;

    fx_world_up(&w, LEASE_MS, 0);
    a = leash_lock_new(w.c, "stats");
    b = leash_lock_new(w.c, "stats");

    /* A grant, and a try-once that finds it held. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, b, 0, 5000), LEASH_EBUSY);
    /* A wait that is granted, after a's hold saw two renewals. */
    CHECK_EQ_INT(leash_acquire(b, 10000, fx_acquire_cb, &rb), LEASH_OK);
    fx_run_for(w.loop, 200);
    leash_client_stats(w.c, &st);
    CHECK_EQ_INT(st.waiting_now, 1);
    CHECK_EQ_INT(st.held_now, 1);
    fx_run_for(w.loop, 1100);
    CHECK_EQ_INT(rb.calls, 0);
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 5000), LEASH_OK);
    fx_run_until(w.loop, &rb, 5000);
    CHECK_EQ_INT(rb.status, LEASH_OK);
    leash_client_stats(w.c, &st);
    CHECK_EQ_INT(st.waiting_now, 0);
    CHECK_EQ_INT(st.held_now, 1);

    /* A wait that times out, and one that is cancelled (each asleep
     * first: both count as waits). */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 150, 5000), LEASH_ETIMEDOUT);
    CHECK_EQ_INT(leash_acquire(a, 10000, fx_acquire_cb, &ra), LEASH_OK);
    fx_run_for(w.loop, 100);
    CHECK_EQ_INT(leash_cancel(a), LEASH_OK);
    fx_run_until(w.loop, &ra, 5000);
    CHECK_EQ_INT(ra.status, LEASH_ECANCELED);
    CHECK_EQ_INT(fx_release_sync(w.loop, b, 5000), LEASH_OK);

    leash_lock_stats(a, &sa);
    CHECK_EQ_INT(sa.acquires, 3);
    CHECK_EQ_INT(sa.grants, 1);
    CHECK_EQ_INT(sa.busy, 0);
    CHECK_EQ_INT(sa.timeouts, 1);
    CHECK_EQ_INT(sa.cancels, 1);
    CHECK_EQ_INT(sa.acquire_errors, 0);
    CHECK_EQ_INT(sa.waits, 2);
    CHECK_MSG(sa.wait_us_total >= 240000, "a waited %llu us", (unsigned long long)sa.wait_us_total);
    CHECK_MSG(sa.wait_us_max >= 145000 && sa.wait_us_max <= sa.wait_us_total, "max %llu us",
              (unsigned long long)sa.wait_us_max);
    CHECK_EQ_INT(sa.holds, 1);
    CHECK_MSG(sa.hold_us_total >= 1250000, "a held %llu us", (unsigned long long)sa.hold_us_total);
    CHECK_EQ_INT(sa.hold_us_max, sa.hold_us_total);
    CHECK_MSG(sa.renewals >= 2, "renewals %llu", (unsigned long long)sa.renewals);
    CHECK_EQ_INT(sa.renewals_failed, 0);
    CHECK_EQ_INT(sa.lost_expired + sa.lost_unreachable + sa.lost_fixed_lease, 0);

    leash_lock_stats(b, &sb);
    CHECK_EQ_INT(sb.acquires, 2);
    CHECK_EQ_INT(sb.grants, 1);
    CHECK_EQ_INT(sb.busy, 1);
    CHECK_EQ_INT(sb.timeouts + sb.cancels + sb.acquire_errors, 0);
    CHECK_EQ_INT(sb.waits, 1);
    CHECK_MSG(sb.wait_us_total >= 1250000, "b waited %llu us",
              (unsigned long long)sb.wait_us_total);
    CHECK_EQ_INT(sb.wait_us_max, sb.wait_us_total);
    CHECK_EQ_INT(sb.holds, 1);
    CHECK_MSG(sb.hold_us_total >= 240000, "b held %llu us", (unsigned long long)sb.hold_us_total);

    /* Lost, expired: another handle force-releases d's hold, d's next
     * renewal finds it gone. */
    d = leash_lock_new(w.c, "stats-expired");
    e = leash_lock_new(w.c, "stats-expired");
    leash_on_lost(d, fx_lost_cb, &lost_d);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, d, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_force_release_sync(w.loop, e, 5000), LEASH_OK);
    run_until_lost(w.loop, &lost_d);
    CHECK_EQ_INT(lost_d.status, LEASH_LOST_EXPIRED);
    leash_lock_stats(d, &sd);
    CHECK_EQ_INT(sd.lost_expired, 1);
    CHECK_EQ_INT(sd.renewals_failed, 1);
    CHECK_EQ_INT(sd.holds, 1);

    /* Lost, unreachable: the loop stands still past the lease. */
    f = leash_lock_new(w.c, "stats-frozen");
    CHECK_EQ_INT(leash_lock_set_watchdog(f, 300, 100), LEASH_OK);
    leash_on_lost(f, fx_lost_cb, &lost_f);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, f, 0, 5000), LEASH_OK);
    usleep(500 * 1000);
    run_until_lost(w.loop, &lost_f);
    CHECK_EQ_INT(lost_f.status, LEASH_LOST_UNREACHABLE);
    leash_lock_stats(f, &sf);
    CHECK_EQ_INT(sf.lost_unreachable, 1);
    CHECK_MSG(sf.hold_us_total >= 490000, "f held %llu us", (unsigned long long)sf.hold_us_total);

    /* Lost, fixed lease. */
    g = leash_lock_new(w.c, "stats-fixed");
    CHECK_EQ_INT(leash_lock_set_fixed_lease(g, 200), LEASH_OK);
    leash_on_lost(g, fx_lost_cb, &lost_g);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, g, 0, 5000), LEASH_OK);
    run_until_lost(w.loop, &lost_g);
    CHECK_EQ_INT(lost_g.status, LEASH_LOST_FIXED_LEASE);
    leash_lock_stats(g, &sg);
    CHECK_EQ_INT(sg.lost_fixed_lease, 1);
    CHECK_EQ_INT(sg.renewals + sg.renewals_failed, 0);

    /* A reconnect: the server drops the command connection. */
    leash_client_stats(w.c, &st);
    CHECK_EQ_INT(st.reconnects, 0);
    connects = st.connects;
    sub_connects = st.sub_connects;
    fx_all(&w, "CLIENT KILL TYPE normal");
    for (int i = 0; i < 500 && (st.connects == connects || !leash_client_connected(w.c)); i++) {
        fx_run_for(w.loop, 10);
        leash_client_stats(w.c, &st);
    }
    fx_run_for(w.loop, 200);
    leash_client_stats(w.c, &st);
    CHECK_EQ_INT(st.connects, connects + 1);
    CHECK_EQ_INT(st.disconnects, 1);
    /* The subscriber connection, once it has no channel left, is a
     * "normal" client too, and may be killed with the other. */
    CHECK_EQ_INT(st.reconnects, 1 + st.sub_connects - sub_connects);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 5000), LEASH_OK);

    /* The client's view: its handles' sums, and its own. */
    leash_client_stats(w.c, &st);
    {
        leash_lock *all[] = {a, b, d, e, f, g};
        check_sums(&st, all, 6);
    }
    CHECK_EQ_INT(st.losts, 3);
    CHECK_EQ_INT(st.lost_max_hold + st.lost_replicas, 0);
    CHECK_EQ_INT(st.held_now, 0);
    CHECK_EQ_INT(st.waiting_now, 0);
    CHECK_EQ_INT(st.wait_us_max, sb.wait_us_total);
    /* Each acquire sent one attempt at least, a woken waiter another. */
    CHECK_MSG(st.acquire_commands >= st.acquires + 1, "%llu attempts for %llu acquires",
              (unsigned long long)st.acquire_commands, (unsigned long long)st.acquires);
    /* Releases: a, b, a; each loss but the expired one gives its key back. */
    CHECK_MSG(st.release_commands >= 5, "%llu releases", (unsigned long long)st.release_commands);
    CHECK_MSG(st.renew_commands >= st.renewals, "%llu renew commands",
              (unsigned long long)st.renew_commands);
    CHECK(st.other_commands >= 1); /* the force release */
    CHECK(st.subscriptions >= 1);
    CHECK_EQ_INT(st.renewals, sa.renewals + sb.renewals + sd.renewals + sf.renewals);
    fx_world_down(&w);
}

/* An extra reentrant hold is an acquire and a grant, not a hold; a fair
 * lock's waiter let in by the holder's release (a handoff, no attempt of
 * its own) counts its wait like a mutex's. */
TEST(reentrant_holds_and_a_fair_handoff) {
    fx_world w;
    leash_lock *a, *f1, *f2;
    fx_result r2 = {0};
    leash_lock_stats sa, s2;
    leash_stats st;

    fx_world_up(&w, LEASE_MS, 0);
    a = leash_lock_new(w.c, "stats-again");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 5000), LEASH_OK);
    leash_client_stats(w.c, &st);
    CHECK_EQ_INT(st.held_now, 1);
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 5000), LEASH_OK);
    leash_lock_stats(a, &sa);
    CHECK_EQ_INT(sa.acquires, 2);
    CHECK_EQ_INT(sa.grants, 2);
    CHECK_EQ_INT(sa.holds, 1);
    CHECK_EQ_INT(sa.waits, 0);

    f1 = leash_fair_lock_new(w.c, "stats-fair");
    f2 = leash_fair_lock_new(w.c, "stats-fair");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, f1, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(f2, 10000, fx_acquire_cb, &r2), LEASH_OK);
    fx_run_for(w.loop, 200);
    leash_client_stats(w.c, &st);
    CHECK_EQ_INT(st.waiting_now, 1);
    CHECK_EQ_INT(fx_release_sync(w.loop, f1, 5000), LEASH_OK);
    fx_run_until(w.loop, &r2, 5000);
    CHECK_EQ_INT(r2.status, LEASH_OK);
    leash_lock_stats(f2, &s2);
    CHECK_EQ_INT(s2.acquires, 1);
    CHECK_EQ_INT(s2.grants, 1);
    CHECK_EQ_INT(s2.waits, 1);
    CHECK_MSG(s2.wait_us_total >= 190000, "f2 waited %llu us",
              (unsigned long long)s2.wait_us_total);
    CHECK_EQ_INT(s2.holds, 1);
    leash_client_stats(w.c, &st);
    CHECK_EQ_INT(st.waiting_now, 0);
    CHECK_EQ_INT(st.held_now, 1);
    CHECK_EQ_INT(fx_release_sync(w.loop, f2, 5000), LEASH_OK);
    leash_client_stats(w.c, &st);
    CHECK_EQ_INT(st.held_now, 0);
    CHECK_EQ_INT(st.holds, 3);
    fx_world_down(&w);
}

TEST(an_older_programs_struct_gets_what_it_knows) {
    fx_world w;
    leash_lock *a;
    leash_stats whole;
    leash_lock_stats lwhole;
    unsigned char buf[sizeof(leash_stats) + 16];
    size_t old = 9 * sizeof(uint64_t); /* leash_stats of 0.2 */
    size_t i;

    fx_world_up(&w, LEASE_MS, 0);
    a = leash_lock_new(w.c, "stats-old");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 5000), LEASH_OK);

    leash_client_stats(w.c, &whole);
    CHECK(whole.connects >= 1);
    CHECK_EQ_INT(whole.grants, 1);
    memset(buf, 0xAB, sizeof buf);
    leash_client_stats_sized(w.c, (leash_stats *)buf, old);
    CHECK(memcmp(buf, &whole, old) == 0);
    for (i = old; i < sizeof buf; i++)
        CHECK_EQ_INT(buf[i], 0xAB);
    /* The function by name fills this version's whole struct. */
    memset(buf, 0xAB, sizeof buf);
    (leash_client_stats)(w.c, (leash_stats *)buf);
    CHECK(memcmp(buf, &whole, sizeof whole) == 0);
    CHECK_EQ_INT(buf[sizeof whole], 0xAB);

    leash_lock_stats(a, &lwhole);
    CHECK_EQ_INT(lwhole.acquires, 1);
    memset(buf, 0xAB, sizeof buf);
    leash_lock_stats_sized(a, (leash_lock_stats *)buf, 2 * sizeof(uint64_t));
    CHECK(memcmp(buf, &lwhole, 2 * sizeof(uint64_t)) == 0);
    CHECK_EQ_INT(buf[2 * sizeof(uint64_t)], 0xAB);
    /* A newer program's longer struct: zeros past what this library counts. */
    memset(buf, 0xAB, sizeof buf);
    leash_lock_stats_sized(a, (leash_lock_stats *)buf, sizeof(leash_lock_stats) + 8);
    CHECK(memcmp(buf, &lwhole, sizeof(lwhole)) == 0);
    for (i = sizeof(leash_lock_stats); i < sizeof(leash_lock_stats) + 8; i++)
        CHECK_EQ_INT(buf[i], 0);

    leash_lock_stats(NULL, &lwhole);
    CHECK_EQ_INT(lwhole.acquires, 0);
    leash_lock_stats(a, NULL); /* nothing to fill: no crash */
    fx_world_down(&w);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(every_counter_follows_a_scripted_scenario),
        TEST_CASE(reentrant_holds_and_a_fair_handoff),
        TEST_CASE(an_older_programs_struct_gets_what_it_knows),
        {0},
    };
    return fx_main(argc, argv, cases);
}
