/* SPDX-License-Identifier: MIT */
/* Memory stays bounded under load, on a real redis-server: what
 * leash-bench-throughput reports as figures, asserted here as behaviour.
 * The client's heap does not grow with the number of cycles (blocks left
 * allocated after a long run are those of a short one), and Redis holds at
 * most one key per hold in flight, none once the holds are released.
 * The client's blocks are counted by support/failalloc.h (leash's own
 * allocations; hiredis's are not counted). */
#include <stdio.h>
#include <string.h>

#include "failalloc.h"
#include "fixture.h"

#define LOCKS 64
/* Cycles per lock in the short and the long window. */
#define SHORT_CYCLES 20
#define LONG_CYCLES 200

typedef struct cycler {
    leash_lock *l;
    long cycles, target;
    int busy; /* an acquire or a release is pending */
    int failed;
} cycler;

static void on_acquired(leash_lock *l, int status, void *arg);
static void on_released(leash_lock *l, int status, void *arg);

static void start_cycle(cycler *cy) {
    cy->busy = 0;
    if (cy->cycles >= cy->target)
        return;
    cy->busy = 1;
    if (leash_acquire(cy->l, 5000, on_acquired, cy) != LEASH_OK)
        cy->failed++, cy->busy = 0;
}

static void on_acquired(leash_lock *l, int status, void *arg) {
    cycler *cy = arg;

    if (status != LEASH_OK) {
        cy->failed++;
        start_cycle(cy);
        return;
    }
    if (leash_release(l, on_released, cy) != LEASH_OK)
        cy->failed++, cy->busy = 0;
}

static void on_released(leash_lock *l, int status, void *arg) {
    cycler *cy = arg;

    (void)l;
    if (status != LEASH_OK)
        cy->failed++;
    cy->cycles++;
    start_cycle(cy);
}

/* Runs every cycler to its target (each acquire waits: the locks share
 * names two by two, so half the acquires wait for a release), sampling the
 * server's keys; returns the most keys seen. */
static long long run_cycles(fx_world *w, cycler *cys, long target) {
    long long most = 0, keys;
    int i, busy;
    int64_t end = test_now_ms() + 60000;

    for (i = 0; i < LOCKS; i++) {
        cys[i].target += target;
        start_cycle(&cys[i]);
    }
    do {
        fx_run_for(w->loop, 5);
        keys = fx_dbsize(w);
        if (keys > most)
            most = keys;
        for (busy = 0, i = 0; i < LOCKS; i++)
            busy += cys[i].busy;
    } while (busy > 0 && test_now_ms() < end);
    CHECK_EQ_INT(busy, 0);
    for (i = 0; i < LOCKS; i++)
        CHECK_EQ_INT(cys[i].failed, 0);
    return most;
}

TEST(memory_does_not_grow_with_the_number_of_cycles) {
    fx_world w;
    cycler cys[LOCKS];
    char name[32];
    long short_left, long_left;
    long long most;
    int i;

    memset(cys, 0, sizeof(cys));
    fx_world_up(&w, 5000, 0);
    for (i = 0; i < LOCKS; i++) {
        snprintf(name, sizeof(name), "mem-%d", i / 2);
        cys[i].l = leash_lock_new(w.c, name);
        CHECK(cys[i].l != NULL);
    }
    (void)run_cycles(&w, cys, SHORT_CYCLES); /* buffers, maps and queues at size */

    failalloc_reset();
    most = run_cycles(&w, cys, SHORT_CYCLES);
    short_left = failalloc_outstanding();
    CHECK_MSG(most <= LOCKS / 2, "%lld keys with %d names held at most", most, LOCKS / 2);

    failalloc_reset();
    most = run_cycles(&w, cys, LONG_CYCLES);
    long_left = failalloc_outstanding();
    CHECK_MSG(most <= LOCKS / 2, "%lld keys with %d names held at most", most, LOCKS / 2);
    /* Ten times the cycles leave no more blocks than the short run did
     * (give or take a buffer that grew once more). */
    CHECK_MSG(long_left <= short_left + 4, "%ld blocks left after %d cycles, %ld after %d",
              long_left, LOCKS * LONG_CYCLES, short_left, LOCKS * SHORT_CYCLES);
    CHECK_EQ_INT(fx_dbsize(&w), 0);
    for (i = 0; i < LOCKS; i++)
        leash_lock_free(cys[i].l);
    fx_world_down(&w);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(memory_does_not_grow_with_the_number_of_cycles),
        {0},
    };
    return fx_main(argc, argv, cases);
}
