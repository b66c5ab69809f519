/* SPDX-License-Identifier: MIT */
/*
 * DESIGN.md section 8, the misuse that tests/test_unit.c does not cover:
 * each call is refused with its code and a log line naming the problem,
 * nothing crashes, nothing changes state (what was under way goes on and
 * completes exactly once), and no callback fires for a refused call.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdlib.h>
#include <string.h>

#include <leash/loop.h>

#include "fixture.h"
#include "prim/lock.h"
#include "redis_server.h"

/* ---- options (no server needed) ---- */

static int new_client(leash_options *o) {
    leash_client *c = NULL;
    int rc;
    o->log_cb = fx_log_cb;
    fx_log_clear();
    rc = leash_client_new(&c, o);
    if (rc == LEASH_OK)
        leash_client_free(c);
    else
        CHECK(c == NULL);
    return rc;
}

TEST(more_nonsense_options_are_refused_with_a_log_line) {
    static const struct {
        int what;
        const char *says;
    } cases[] = {
        {0, "lease_ms must be >= 10"},
        {1, "renew_interval_ms must be > 0 and below lease_ms"},
        {2, "connect_timeout_ms must be 1..LEASH_DURATION_MAX_MS"},
        {3, "command_timeout_ms must be 1..LEASH_DURATION_MAX_MS"},
        {4, "reconnect_min_ms must be 1..LEASH_DURATION_MAX_MS"},
        {5, "reconnect_max_ms must be 1..LEASH_DURATION_MAX_MS"},
        {6, "max_hold_ms must be 0..LEASH_DURATION_MAX_MS"},
        {7, "log_level"},
        {8, "log_level"},
        {9, "key_prefix must be"},
        {10, "key_prefix must be"},
        {11, "unix_path is longer"},
        {12, "port -1 is out of range"},
        {13, "lease_ms must be 10..LEASH_DURATION_MAX_MS"},
        {14, "renew_interval_ms must be > 0 and below lease_ms"},
    };
    char long_prefix[LEASH_PREFIX_MAX + 2], long_path[200];
    size_t i;

    memset(long_prefix, 'p', sizeof long_prefix - 1);
    long_prefix[sizeof long_prefix - 1] = '\0';
    memset(long_path, 'u', sizeof long_path - 1);
    long_path[sizeof long_path - 1] = '\0';
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        leash_options o;
        leash_options_init(&o);
        switch (cases[i].what) {
        case 0:
            o.lease_ms = 9;
            break;
        case 1:
            o.renew_interval_ms = -1;
            break;
        case 2:
            o.connect_timeout_ms = 0;
            break;
        case 3:
            o.command_timeout_ms = 0;
            break;
        case 4:
            o.reconnect_min_ms = 0;
            break;
        case 5:
            o.reconnect_max_ms = -3;
            break;
        case 6:
            o.max_hold_ms = -1;
            break;
        case 7:
            o.log_level = -1;
            break;
        case 8:
            o.log_level = 9;
            break;
        case 9:
            o.key_prefix = NULL;
            break;
        case 10:
            o.key_prefix = long_prefix;
            break;
        case 11:
            o.unix_path = long_path;
            break;
        case 12:
            o.port = -1;
            break;
        case 13:
            o.lease_ms = -1000;
            break;
        case 14:
            o.lease_ms = 100;
            o.renew_interval_ms = 150;
            break;
        }
        CHECK_MSG(new_client(&o) == LEASH_EINVAL, "case %zu accepted", i);
        CHECK_MSG(fx_log_contains(cases[i].says), "case %zu: no log line saying '%s'", i,
                  cases[i].says);
    }
}

TEST(attaching_with_missing_hooks_is_refused) {
    leash_options o;
    leash_client *c;
    leash_loop hooks;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    leash_lock *l;
    fx_result res = {0};

    leash_options_init(&o);
    o.log_cb = fx_log_cb;
    fx_log_clear();
    CHECK_EQ_INT(leash_client_new(&c, &o), LEASH_OK);
    leash_loop_init(&hooks);
    CHECK_EQ_INT(leash_client_attach_loop(c, NULL), LEASH_EINVAL);
    CHECK(fx_log_contains("leaves a hook NULL"));
    CHECK_EQ_INT(leash_client_attach_loop(NULL, &hooks), LEASH_EINVAL);
    fx_log_clear();
    CHECK_EQ_INT(leash_client_attach_loop(c, &hooks), LEASH_EINVAL);
    CHECK(fx_log_contains("leaves a hook NULL"));
    /* Still unattached, still usable once attached properly. */
    l = leash_lock_new(c, "x");
    CHECK_EQ_INT(leash_acquire(l, 0, fx_acquire_cb, &res), LEASH_ELOOP);
    CHECK_EQ_INT(leash_libev_attach(loop, c), LEASH_OK);
    leash_client_free(c);
    CHECK_EQ_INT(res.calls, 0);
    ev_loop_destroy(loop);
}

TEST(null_handles_everywhere) {
    leash_stats st;
    memset(&st, 0xff, sizeof st);
    leash_client_stats(NULL, &st);
    CHECK_EQ_INT((long long)st.connects, 0);
    leash_client_stats(NULL, NULL);
    CHECK_EQ_INT(leash_lock_set_watchdog(NULL, 1000, 0), LEASH_EINVAL);
    CHECK_EQ_INT(leash_lock_set_fixed_lease(NULL, 1000), LEASH_EINVAL);
    CHECK_EQ_INT(leash_lock_set_max_hold(NULL, 0), LEASH_EINVAL);
    CHECK_EQ_INT(leash_lock_set_reentrant(NULL, 1), LEASH_EINVAL);
    CHECK_EQ_INT(leash_hold_count(NULL), 0);
    CHECK_EQ_INT((long long)leash_renewals(NULL), 0);
    CHECK(leash_lock_name(NULL) == NULL);
    CHECK(leash_lock_client(NULL) == NULL);
    CHECK(leash_lock_get_data(NULL) == NULL);
    CHECK(leash_client_get_data(NULL) == NULL);
    CHECK_EQ_INT(leash_client_connected(NULL), 0);
    leash_lock_set_data(NULL, &st);
    leash_client_set_data(NULL, &st);
    CHECK(leash_strerror(12345) != NULL);
    CHECK(leash_status_name(12345) != NULL);
    CHECK(leash_lost_reason_name(77) != NULL);
}

TEST(a_handle_that_is_not_a_handle_is_refused) {
    /* Debug builds check a magic number: memory that is not a live handle
     * (zeroed, or a handle whose magic was wiped by its free) is refused. */
    leash_lock *fake = calloc(1, sizeof(leash_lock));
    fx_result res = {0};
    CHECK(fake != NULL);
    CHECK_EQ_INT(leash_acquire(fake, 0, fx_acquire_cb, &res), LEASH_ESTATE);
    CHECK_EQ_INT(leash_release(fake, fx_release_cb, &res), LEASH_ESTATE);
    CHECK_EQ_INT(leash_cancel(fake), LEASH_ESTATE);
    CHECK_EQ_INT(leash_held(fake), 0);
    leash_lock_free(fake); /* ignored */
    CHECK_EQ_INT(res.calls, 0);
    free(fake);
}

/* ---- state misuse, against a real server ---- */

typedef struct mworld {
    test_redis r;
    struct ev_loop *loop;
    leash_client *c;
} mworld;

static void m_up(mworld *w) {
    CHECK_EQ_INT(test_redis_start(&w->r, NULL), 0);
    w->loop = ev_loop_new(EVFLAG_AUTO);
    w->c = fx_fault_client(w->loop, w->r.port, 1000);
    fx_wait_connected(w->loop, w->c, 3000);
    fx_log_clear();
}

static void m_down(mworld *w) {
    leash_client_free(w->c);
    test_redis_stop(&w->r);
    ev_loop_destroy(w->loop);
}

TEST(second_acquire_while_acquiring_is_refused_and_the_first_goes_on) {
    mworld w;
    leash_lock *l;
    fx_result first = {0}, second = {0};

    m_up(&w);
    l = leash_lock_new(w.c, "twice");
    CHECK_EQ_INT(leash_acquire(l, 1000, fx_acquire_cb, &first), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(l, 1000, fx_acquire_cb, &second), LEASH_ESTATE);
    CHECK_EQ_INT(leash_acquire(l, 0, fx_acquire_cb, &second), LEASH_ESTATE);
    CHECK(fx_log_contains("already acquiring"));
    fx_run_until(w.loop, &first, 3000);
    test_run_for(w.loop, 20);
    CHECK_EQ_INT(first.calls, 1);
    CHECK_EQ_INT(first.status, LEASH_OK);
    CHECK_EQ_INT(second.calls, 0);
    CHECK(leash_held(l));
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    m_down(&w);
}

TEST(second_release_while_one_is_in_flight_is_refused) {
    mworld w;
    leash_lock *l;
    fx_result first = {0}, second = {0};

    m_up(&w);
    l = leash_lock_new(w.c, "rel-twice");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(leash_release(l, fx_release_cb, &first), LEASH_OK);
    CHECK_EQ_INT(leash_release(l, fx_release_cb, &second), LEASH_ESTATE);
    CHECK(fx_log_contains("a release is in flight"));
    fx_run_until(w.loop, &first, 3000);
    test_run_for(w.loop, 20);
    CHECK_EQ_INT(first.calls, 1);
    CHECK_EQ_INT(first.status, LEASH_OK);
    CHECK_EQ_INT(second.calls, 0);
    /* Released: a third one is refused as "not held". */
    fx_log_clear();
    CHECK_EQ_INT(leash_release(l, fx_release_cb, &second), LEASH_ESTATE);
    CHECK(fx_log_contains("not held"));
    m_down(&w);
}

TEST(release_while_an_extra_hold_is_in_flight_is_refused) {
    mworld w;
    leash_lock *l;
    fx_result extra = {0}, rel = {0};

    m_up(&w);
    l = leash_lock_new(w.c, "extra");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(l, 0, fx_acquire_cb, &extra), LEASH_OK);
    CHECK_EQ_INT(leash_release(l, fx_release_cb, &rel), LEASH_ESTATE);
    CHECK(fx_log_contains("an extra hold is in flight"));
    fx_run_until(w.loop, &extra, 3000);
    CHECK_EQ_INT(extra.status, LEASH_OK);
    CHECK_EQ_INT(leash_hold_count(l), 2);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    CHECK_EQ_INT(rel.calls, 0);
    CHECK(!leash_held(l));
    m_down(&w);
}

TEST(settings_while_acquiring_or_held_are_refused_and_change_nothing) {
    mworld w;
    leash_lock *l;
    fx_result res = {0};
    int64_t lease;

    m_up(&w);
    l = leash_lock_new(w.c, "settings");
    CHECK_EQ_INT(leash_acquire(l, 1000, fx_acquire_cb, &res), LEASH_OK);
    CHECK_EQ_INT(leash_lock_set_watchdog(l, 5000, 0), LEASH_ESTATE);
    CHECK(fx_log_contains("is acquiring or held"));
    fx_run_until(w.loop, &res, 3000);
    CHECK_EQ_INT(res.status, LEASH_OK);
    lease = l->hold.lease_ms;
    CHECK_EQ_INT(leash_lock_set_watchdog(l, 5000, 0), LEASH_ESTATE);
    CHECK_EQ_INT(leash_lock_set_fixed_lease(l, 5000), LEASH_ESTATE);
    CHECK_EQ_INT(leash_lock_set_max_hold(l, 50), LEASH_ESTATE);
    CHECK_EQ_INT(leash_lock_set_reentrant(l, 0), LEASH_ESTATE);
    CHECK_EQ_INT(l->hold.lease_ms, lease);
    CHECK_EQ_INT(l->lease_ms, 1000);
    CHECK_EQ_INT(l->max_hold_ms, 0);
    CHECK_EQ_INT(l->reentrant, 1);
    CHECK(leash_valid_ms(l) <= 1000);
    test_run_for(w.loop, 100); /* no max hold of 50 ms crept in */
    CHECK(leash_held(l));
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    m_down(&w);
}

TEST(cancel_of_a_held_handle_is_refused) {
    mworld w;
    leash_lock *l;

    m_up(&w);
    l = leash_lock_new(w.c, "cancel-held");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(leash_cancel(l), LEASH_ESTATE);
    CHECK(fx_log_contains("no acquire is pending"));
    CHECK(leash_held(l));
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    m_down(&w);
}

/* Calls made while the client is being freed: from a callback that
 * leash_client_free() fires. */
static leash_client *dying;
static int refused_new, refused_acquire, refused_release;

static void during_free(leash_lock *l, int status, void *arg) {
    fx_result *r = arg;
    r->calls++;
    r->status = status;
    refused_new = leash_lock_new(dying, "late") == NULL;
    refused_acquire = leash_acquire(l, 0, fx_acquire_cb, r) == LEASH_ESTATE;
    refused_release = leash_release(l, NULL, NULL) == LEASH_ESTATE;
    leash_client_free(dying); /* again: a no-op */
}

TEST(calls_while_the_client_is_being_freed_are_refused) {
    mworld w;
    leash_lock *a, *b;
    fx_result res = {0};

    m_up(&w);
    dying = w.c;
    a = leash_lock_new(w.c, "dying");
    b = leash_lock_new(w.c, "dying");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(b, 5000, during_free, &res), LEASH_OK);
    test_run_for(w.loop, 50);
    leash_client_free(w.c);
    CHECK_EQ_INT(res.calls, 1);
    CHECK_EQ_INT(res.status, LEASH_ECANCELED);
    CHECK(refused_new);
    CHECK(refused_acquire);
    CHECK(refused_release);
    test_run_for(w.loop, 20);
    CHECK_EQ_INT(res.calls, 1);
    test_redis_stop(&w.r);
    ev_loop_destroy(w.loop);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(more_nonsense_options_are_refused_with_a_log_line),
        TEST_CASE(attaching_with_missing_hooks_is_refused),
        TEST_CASE(null_handles_everywhere),
        TEST_CASE(a_handle_that_is_not_a_handle_is_refused),
        TEST_CASE(second_acquire_while_acquiring_is_refused_and_the_first_goes_on),
        TEST_CASE(second_release_while_one_is_in_flight_is_refused),
        TEST_CASE(release_while_an_extra_hold_is_in_flight_is_refused),
        TEST_CASE(settings_while_acquiring_or_held_are_refused_and_change_nothing),
        TEST_CASE(cancel_of_a_held_handle_is_refused),
        TEST_CASE(calls_while_the_client_is_being_freed_are_refused),
        {0},
    };
    return test_main(argc, argv, cases);
}
