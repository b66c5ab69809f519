/* SPDX-License-Identifier: MIT */
/*
 * Expected violations: a part of torture.c in a file of its own (included
 * after the shared log's definition; not compiled alone).
 *
 * Where the README says that a topology does not hold under a fault (a
 * server restarted without its data, a clock further off than the
 * lease), the supervisor opens a window when it fires that fault; a
 * violation of mutual exclusion or of the fence order that happens in the
 * window is counted as expected, for that fault's cell, with the README
 * sentence that documents it, instead of failing the run. Only those two
 * kinds are excused (the callers say which checks ask): a callback that
 * fires twice, a stranded waiter or a late lost callback fail as always.
 *
 * The windows live in the shared log (S->expect), so that the workers'
 * own checks (the fenced store refusing a write while the hold is valid)
 * can ask too. A window is of times at which the violation happens, or,
 * by_grant, of times at which the hold that suffers it was granted (a
 * clock stepped back gives a low fence to holds granted then, which the
 * store refuses for as long as they hold: expected_grant).
 */

/* What the README says about the fault of window i (the supervisor's). */
static const char *expect_cell[MAX_EXPECT];
static const char *expect_why[MAX_EXPECT];

/* Opens a window from `from` on, open-ended until expect_close. Returns
 * its index, or -1 when they ran out (then nothing is excused). */
static int expect_open(int64_t from, const char *cell, const char *why, int by_grant) {
    int i = S->nexpect;
    if (i >= MAX_EXPECT)
        return -1;
    expect_cell[i] = cell;
    expect_why[i] = why;
    S->expect[i].from = from;
    S->expect[i].to = INT64_MAX;
    S->expect[i].by_grant = by_grant;
    __atomic_store_n(&S->nexpect, i + 1, __ATOMIC_RELEASE);
    return i;
}

static void expect_close(int i, int64_t to) {
    if (i >= 0)
        __atomic_store_n(&S->expect[i].to, to, __ATOMIC_RELEASE);
}

static int expected_in(int by_grant, int64_t t, const char *what) {
    int n = __atomic_load_n(&S->nexpect, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (S->expect[i].by_grant == by_grant && S->expect[i].from <= t &&
            t <= __atomic_load_n(&S->expect[i].to, __ATOMIC_ACQUIRE)) {
            __atomic_fetch_add(&S->expect[i].n, 1, __ATOMIC_RELAXED);
            /* A worker forked before the window opened has no name for it:
             * the supervisor's tally names it. */
            fprintf(stderr, "torture: EXPECTED %s at t=%lld (%s from t=%lld)\n", what, (long long)t,
                    expect_cell[i] != NULL ? expect_cell[i] : "a documented fault",
                    (long long)S->expect[i].from);
            return 1;
        }
    return 0;
}

/* 1 (counted and said) if a violation of mutual exclusion or of the
 * fence order at time t falls in a window; 0: it is a violation. */
static int expected(int64_t t, const char *what) {
    return expected_in(0, t, what);
}

/* The same for a violation suffered by a hold granted at time t. */
static int expected_grant(int64_t t, const char *what) {
    return expected_in(1, t, what);
}

/* The expected violations of each window, into the cells' counts, and
 * the README sentences named once each. Returns the total. */
static uint64_t expect_tally(uint64_t (*add)(const char *cell, uint64_t n)) {
    uint64_t total = 0;
    for (int i = 0; i < S->nexpect; i++) {
        int first = 1;
        total += add(expect_cell[i], S->expect[i].n);
        for (int j = 0; j < i; j++)
            if (expect_why[j] == expect_why[i] && S->expect[j].n > 0)
                first = 0;
        if (S->expect[i].n > 0 && first)
            printf("expected (%s): %s\n", expect_cell[i], expect_why[i]);
    }
    return total;
}
