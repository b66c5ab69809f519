/* SPDX-License-Identifier: MIT */
/*
 * Clock faults in the lab: a part of torture.c in a file of its own
 * (included after the lab's pieces; not compiled alone).
 *
 * Every lab server runs with support/clock_shift.c preloaded (its wall
 * clock 1 ms ahead of the machine's to begin with), so that its clock
 * can be stepped as `date -s` would step it: TIME, the scripts' clock and
 * key expiry jump; CLOCK_MONOTONIC, which the checker and the clients
 * use, does not.
 *
 * One server (and the master with replicas), where the README says what
 * a step costs ("What Redis must be and do", README_CLOCK_STEP):
 *   clock-forward  the clock stepped ahead by one to three longest
 *                  leases: every key expires early, so another client
 *                  can be granted a lock whose holder is still valid, for
 *                  up to a lease after the step: two holds valid at once,
 *                  and the fenced store refusing the older holder's write,
 *                  are expected then;
 *   clock-back     the clock stepped back by 100 ms to 2 s (to where it
 *                  was, when it was ahead): fences come from the clock, so
 *                  a hold granted before the clock is back where it had
 *                  been may get a fence below an earlier hold's, and the
 *                  fenced store refuses its writes for as long as it
 *                  holds: expected for holds granted then (lab_expected.c's
 *                  windows by grant);
 *   clock-drift    the clock runs fast or slow for 2 to 8 s, then keeps
 *                  the shift it got to (no step either way), while a
 *                  holder is frozen (its renewals stop). Within the
 *                  drift a hold's deadline leaves (1% of the lease + 2
 *                  ms): up to 0.8% fast or slow, and nothing may happen;
 *                  one time in three 2% to 5% fast, which expires keys
 *                  early by the rate above 1% of a lease: two holds
 *                  valid at once expected from its start to a lease after
 *                  its end (README_CLOCK_DRIFT).
 * Redlock (one of the five, when all five are up): the same steps, or
 * the same drift. A step back is one server's vote, and the fence floors
 * keep the fences growing across it. A step forward too, for a hold
 * already on every server (each server up for a lease before the step);
 * but a new hold that a bare majority with that server in it granted can
 * be granted again by another majority, for up to a lease: expected
 * (README_REDLOCK_CLOCK_STEP). A drift of up to 0.8% on one server, with
 * a holder frozen, may do nothing; 2% to 5% fast is a slow step forward:
 * expected as a step forward is, from its start to a lease after its end
 * (README_REDLOCK_CLOCK_DRIFT).
 */

/* The shift of each server's clock now (ms ahead of the machine's). */
static int clock_now[LAB_MAX_SERVERS];
/* The furthest the one server's clock has been, as CLOCK_MONOTONIC ms +
 * its shift: until it is there again, fences come out below earlier ones
 * (two steps back in a row add up). */
static int64_t clock_peak;

#define README_CLOCK_STEP                                                                         \
    "docs/how-it-works.md \"What Redis must be and do\", \"A clock that does not step\": a step " \
    "forward "                                                                                    \
    "expires lock keys early, so another client can be granted a lock whose holder is still "     \
    "valid; a step back gives fences below earlier ones for as long as the step (run NTP "        \
    "slewing, not stepping, on the Redis hosts)"

/* Steps server r's clock (s: its index) by delta ms; 0 or -1. */
static int clock_step(test_redis *r, int s, int delta) {
    int to = (clock_now[s] != 0 ? clock_now[s] : 1) + delta;
    if (to == 0)
        to = 1;
    if (test_redis_step_clock(r, to) != 0)
        return -1;
    clock_now[s] = to;
    return 0;
}

/* A step forward (forward != 0) or back of the one server's clock; how
 * far, in said. Opens the window of the violations it makes expected. */
static void clock_fault(int forward, char *said, size_t cap) {
    int delta, w;
    int64_t t;

    if (forward) {
        delta = s_between(cfg.lease_max, 3 * cfg.lease_max);
        w = expect_open(now_ms(), "clock-forward", README_CLOCK_STEP, 0);
        t = now_ms();
        if (clock_step(&R, 0, delta) == 0)
            expect_close(w, now_ms() + cfg.lease_max + 50);
        else
            expect_close(w, t);
    } else {
        /* Back to the machine's clock when ahead, else behind it. */
        delta = clock_now[0] > 100 ? -(clock_now[0] - 1) : -s_between(100, 2000);
        w = expect_open(now_ms(), "clock-back", README_CLOCK_STEP, 1);
        t = now_ms();
        if (t + clock_now[0] > clock_peak)
            clock_peak = t + clock_now[0];
        if (clock_step(&R, 0, delta) == 0)
            expect_close(w, (clock_peak - clock_now[0] > t ? clock_peak - clock_now[0] : t) + 50);
        else
            expect_close(w, t);
    }
    snprintf(said, cap, " (by %+d ms: %+d ms from the machine's)", delta, clock_now[0]);
}

#define README_CLOCK_DRIFT                                                                     \
    "docs/how-it-works.md \"What Redis must be and do\", \"A clock that keeps its rate\": a "  \
    "clock "                                                                                   \
    "that runs fast by more than 1% expires keys early by the difference, and another client " \
    "can be granted the lock while its holder is still valid"

/* Server r's clock (s: its index) runs fast or slow a while (see the
 * top), readme naming what its fast case costs; how long, in ms; how
 * fast, in said. Blocks for as long as it drifts. */
static int64_t drift_one(test_redis *r, int s, const char *readme, char *said, size_t cap) {
    int beyond = s_between(0, 2) == 0, w = -1, end = 0;
    int ppm = beyond ? s_between(20000, 50000) : (s_between(0, 1) ? 1 : -1) * s_between(1000, 8000);
    int64_t ms = s_between(2000, 8000), t0 = now_ms();
    /* A holder frozen meanwhile: its renewals stop, so its key lives what
     * the server's clock gives the lease, and its deadline is all that
     * keeps it from trusting a hold that is gone. */
    int64_t freeze = s_between(cfg.lease_max / 2, cfg.lease_max + 500);

    if (freeze + 500 > ms)
        ms = freeze + 500;
    /* A shift of 0 is the machine's clock, which the server cannot be set
     * back to (test_redis_drift_clock): drift a second longer. */
    if (r->cfg.clock_shift_ms + (ms * ppm + (ppm > 0 ? 500000 : -500000)) / 1000000 == 0)
        ms += 1000;
    if (beyond)
        w = expect_open(t0, "clock-drift", readme, 0);
    if (test_redis_drift_clock(r, ppm, (int)ms, &end) != 0) {
        fprintf(stderr, "torture: a clock drift was refused\n");
        kill_workers();
        exit(2);
    }
    sleep_ms(100); /* it starts within 30 ms (test_redis_drift_clock) */
    sigstop_one(freeze);
    sleep_ms(t0 + ms + 100 - now_ms());
    clock_now[s] = end;
    expect_close(w, now_ms() + cfg.lease_max + 50);
    snprintf(said, cap, " (%+.1f%%: %+d ms from the machine's; a worker frozen %lld ms)",
             ppm / 10000.0, end, (long long)freeze);
    return ms;
}

/* The one server's clock runs fast or slow a while. */
static int64_t clock_drift(char *said, size_t cap) {
    return drift_one(&R, 0, README_CLOCK_DRIFT, said, cap);
}

#define README_REDLOCK_CLOCK_STEP                                                               \
    "docs/how-it-works.md \"What Redis must be and do\", \"A clock that does not step\": with " \
    "Redlock a step forward on one server expires its keys early, and a hold that a bare "      \
    "majority with that server in it granted can be granted to another client: two holders "    \
    "for up to a lease (the Redlock algorithm assumes clocks that do not jump)"

#define README_REDLOCK_CLOCK_DRIFT                                                               \
    "docs/how-it-works.md \"What Redis must be and do\", \"A clock that keeps its rate\": with " \
    "Redlock a server whose clock runs fast by more than 1% expires its keys early, and a hold " \
    "that a bare majority with that server in it granted can be granted to another client"

/* Redlock in the lab: how many clock steps and drifts, for the cell lines. */
static uint64_t rl_clock_steps, rl_clock_drifts;

/* Redlock in the lab: one server's clock runs fast or slow a while. */
static void redlock_clock_drift(int s, int64_t t0) {
    char said[160];
    probe pr;

    probe_start(&pr);
    drift_one(&RS[s], s, README_REDLOCK_CLOCK_DRIFT, said, sizeof said);
    rl_clock_drifts++;
    fprintf(stderr, "torture: t=%lld fault clock-drift: server %d%s, done at t=%lld\n",
            (long long)t0, s, said, (long long)now_ms());
    probe_check(&pr, now_ms(), "clock-drift");
}

/* Redlock in the lab: now and then (when every server is up), one
 * server's clock stepped forward or back, or drifting. 1 if it did. */
static int redlock_clock_fault(void) {
    int s, delta, w = -1;
    int64_t t0;
    probe pr;

    if (!cfg.lab || rl_down_count() > 0 || s_between(0, 7) != 0)
        return 0;
    t0 = now_ms();
    /* Every hold renewed onto every server first (see the top). */
    sleep_ms(cfg.lease_max);
    s = s_between(0, RL_N - 1);
    /* A clock off the machine's by more than 100 ms is stepped back to it
     * first: a drift starts from a clock about right. */
    if (clock_now[s] <= 100 && clock_now[s] >= -100 && s_between(0, 2) == 0) {
        redlock_clock_drift(s, t0);
        return 1;
    }
    /* Back to about the machine's clock when off by more than 100 ms. */
    delta = clock_now[s] > 100 || clock_now[s] < -100
                ? 1 - clock_now[s]
                : (s_between(0, 1) ? s_between(cfg.lease_max, 3 * cfg.lease_max)
                                   : -s_between(100, 2000));
    probe_start(&pr);
    /* A step forward expires server s's keys early: a hold that a bare
     * majority with s in it granted (a new one, not yet spread) can be
     * granted again by another majority, for up to a lease. */
    if (delta > 0)
        w = expect_open(now_ms(), "clock-step", README_REDLOCK_CLOCK_STEP, 0);
    if (clock_step(&RS[s], s, delta) != 0) {
        fprintf(stderr, "torture: a clock step was refused\n");
        kill_workers();
        exit(2);
    }
    rl_clock_steps++;
    fprintf(stderr,
            "torture: t=%lld fault clock-step: server %d by %+d ms (%+d ms from the machine's), "
            "done at t=%lld\n",
            (long long)t0, s, delta, clock_now[s], (long long)now_ms());
    expect_close(w, now_ms() + cfg.lease_max + 50);
    probe_check(&pr, now_ms(), "clock-step");
    return 1;
}

/* Redlock's cell lines for its clock steps and drifts. */
static void redlock_clock_print(void) {
    const struct cell *c = cell_of("clock-step");
    printf("\ncell clock-step fired=%" PRIu64 " probes=%" PRIu64 " failed=%" PRIu64
           " documented=%" PRIu64 " expected=%" PRIu64,
           rl_clock_steps, c->probes, c->failed, c->documented, c->expected);
    c = cell_of("clock-drift");
    printf("\ncell clock-drift fired=%" PRIu64 " probes=%" PRIu64 " failed=%" PRIu64
           " documented=%" PRIu64 " expected=%" PRIu64,
           rl_clock_drifts, c->probes, c->failed, c->documented, c->expected);
}
