#include "fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char log_buf[1 << 16];
static size_t log_len;

void fx_log_cb(int level, const char *msg, void *arg) {
    size_t n = strlen(msg);
    (void)arg;
    if (getenv("LEASH_TEST_LOG"))
        fprintf(stderr, "  log[%d] %s\n", level, msg);
    if (log_len + n + 2 < sizeof(log_buf)) {
        memcpy(log_buf + log_len, msg, n);
        log_len += n;
        log_buf[log_len++] = '\n';
        log_buf[log_len] = '\0';
    }
}

int fx_log_contains(const char *needle) {
    return strstr(log_buf, needle) != NULL;
}

void fx_log_clear(void) {
    log_len = 0;
    log_buf[0] = '\0';
}

static void record(fx_result *r, leash_lock *l, int status) {
    r->calls++;
    r->done = 1;
    r->status = status;
    r->at_ms = test_now_ms();
    r->lock = l;
}

void fx_acquire_cb(leash_lock *l, int status, void *arg) {
    record(arg, l, status);
}

void fx_release_cb(leash_lock *l, int status, void *arg) {
    record(arg, l, status);
}

void fx_lost_cb(leash_lock *l, int reason, void *arg) {
    record(arg, l, reason);
}

void fx_options(leash_options *o, const test_redis *r, int64_t lease_ms) {
    leash_options_init(o);
    if (r->unix_path[0] != '\0') {
        o->unix_path = r->unix_path;
    } else {
        o->host = "127.0.0.1";
        o->port = r->port;
    }
    o->password = r->cfg.requirepass;
    o->lease_ms = lease_ms;
    o->command_timeout_ms = 1000;
    o->connect_timeout_ms = 1000;
    o->reconnect_min_ms = 20;
    o->reconnect_max_ms = 200;
    o->log_cb = fx_log_cb;
    o->log_level = LEASH_LOG_DEBUG;
}

leash_client *fx_client_opts(struct ev_loop *loop, const leash_options *o) {
    leash_client *c = NULL;
    CHECK_EQ_INT(leash_client_new(&c, o), LEASH_OK);
    CHECK_EQ_INT(leash_libev_attach(loop, c), LEASH_OK);
    return c;
}

leash_client *fx_client(struct ev_loop *loop, const test_redis *r, int64_t lease_ms) {
    leash_options o;
    fx_options(&o, r, lease_ms);
    return fx_client_opts(loop, &o);
}

static int connected_flag;
static leash_client *watched;

static void poll_connected(EV_P_ ev_timer *w, int revents) {
    (void)revents;
    (void)w;
#if EV_MULTIPLICITY
    (void)loop;
#endif
    if (leash_client_connected(watched))
        connected_flag = 1;
}

void fx_wait_connected(struct ev_loop *loop, leash_client *c, int64_t timeout_ms) {
    ev_timer t;
    connected_flag = leash_client_connected(c);
    watched = c;
    ev_timer_init(&t, poll_connected, 0.002, 0.002);
    ev_timer_start(loop, &t);
    test_run_until(loop, &connected_flag, timeout_ms);
    ev_timer_stop(loop, &t);
    CHECK_MSG(connected_flag, "client did not connect within %lld ms", (long long)timeout_ms);
}

void fx_run_until(struct ev_loop *loop, fx_result *r, int64_t timeout_ms) {
    int rc = test_run_until(loop, &r->done, timeout_ms);
    CHECK_MSG(rc == 0, "no callback within %lld ms", (long long)timeout_ms);
}

int fx_acquire_sync(struct ev_loop *loop, leash_lock *l, int64_t wait_ms, int64_t timeout_ms) {
    fx_result r = {0};
    CHECK_EQ_INT(leash_acquire(l, wait_ms, fx_acquire_cb, &r), LEASH_OK);
    CHECK_EQ_INT(r.calls, 0); /* never inside the call */
    fx_run_until(loop, &r, timeout_ms);
    CHECK_EQ_INT(r.calls, 1);
    return r.status;
}

int fx_release_sync(struct ev_loop *loop, leash_lock *l, int64_t timeout_ms) {
    fx_result r = {0};
    CHECK_EQ_INT(leash_release(l, fx_release_cb, &r), LEASH_OK);
    CHECK_EQ_INT(r.calls, 0);
    fx_run_until(loop, &r, timeout_ms);
    CHECK_EQ_INT(r.calls, 1);
    return r.status;
}

long long fx_redis_exists(test_redis *r, const char *key) {
    return test_redis_int(r, "EXISTS %s", key);
}
