#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ft_in_call;

static char log_buf[1 << 18];
static size_t log_len;

void ft_log_cb(int level, const char *msg, void *arg) {
    size_t n = strlen(msg);
    (void)arg;
    if (getenv("LEASH_TEST_LOG"))
        fprintf(stderr, "  log[%d] %s\n", level, msg);
    if (log_len + n + 2 < sizeof log_buf) {
        memcpy(log_buf + log_len, msg, n);
        log_len += n;
        log_buf[log_len++] = '\n';
        log_buf[log_len] = '\0';
    }
}

int ft_log_contains(const char *needle) {
    return strstr(log_buf, needle) != NULL;
}

void ft_log_clear(void) {
    log_len = 0;
    log_buf[0] = '\0';
}

static void record(ft_result *r, int status) {
    r->calls++;
    r->status = status;
    r->at_ms = test_now_ms();
    if (ft_in_call)
        r->inside = 1;
}

void ft_acquire_cb(leash_lock *l, int status, void *arg) {
    (void)l;
    record(arg, status);
}

void ft_release_cb(leash_lock *l, int status, void *arg) {
    (void)l;
    record(arg, status);
}

void ft_lost_cb(leash_lock *l, int reason, void *arg) {
    (void)l;
    record(arg, reason);
}

void ft_options(leash_options *o, int port, int64_t lease_ms) {
    leash_options_init(o);
    o->host = "127.0.0.1";
    o->port = port;
    o->lease_ms = lease_ms;
    o->command_timeout_ms = 300;
    o->connect_timeout_ms = 300;
    o->reconnect_min_ms = 10;
    o->reconnect_max_ms = 100;
    o->log_cb = ft_log_cb;
    o->log_level = LEASH_LOG_DEBUG;
}

leash_client *ft_client_opts(struct ev_loop *loop, const leash_options *o) {
    leash_client *c = NULL;
    CHECK_EQ_INT(leash_client_new(&c, o), LEASH_OK);
    CHECK_EQ_INT(leash_libev_attach(loop, c), LEASH_OK);
    return c;
}

leash_client *ft_client(struct ev_loop *loop, int port, int64_t lease_ms) {
    leash_options o;
    ft_options(&o, port, lease_ms);
    return ft_client_opts(loop, &o);
}

void ft_wait_connected(struct ev_loop *loop, leash_client *c, int64_t timeout_ms) {
    int64_t end = test_now_ms() + timeout_ms;
    while (!leash_client_connected(c) && test_now_ms() < end)
        test_run_for(loop, 2);
    CHECK_MSG(leash_client_connected(c), "no connection within %lld ms", (long long)timeout_ms);
}

void ft_run_until(struct ev_loop *loop, ft_result *r, int64_t timeout_ms) {
    int64_t end = test_now_ms() + timeout_ms;
    while (r->calls == 0 && test_now_ms() < end)
        test_run_for(loop, 2);
    CHECK_MSG(r->calls > 0, "no callback within %lld ms", (long long)timeout_ms);
}

int ft_acquire(struct ev_loop *loop, leash_lock *l, int64_t wait_ms, int64_t timeout_ms) {
    ft_result r = {0};
    int rc;
    ft_in_call = 1;
    rc = leash_acquire(l, wait_ms, ft_acquire_cb, &r);
    ft_in_call = 0;
    CHECK_EQ_INT(rc, LEASH_OK);
    CHECK_EQ_INT(r.calls, 0);
    ft_run_until(loop, &r, timeout_ms);
    test_run_for(loop, 1); /* a second call would show now */
    CHECK_EQ_INT(r.calls, 1);
    return r.status;
}

int ft_release(struct ev_loop *loop, leash_lock *l, int64_t timeout_ms) {
    ft_result r = {0};
    int rc;
    ft_in_call = 1;
    rc = leash_release(l, ft_release_cb, &r);
    ft_in_call = 0;
    CHECK_EQ_INT(rc, LEASH_OK);
    CHECK_EQ_INT(r.calls, 0);
    ft_run_until(loop, &r, timeout_ms);
    test_run_for(loop, 1);
    CHECK_EQ_INT(r.calls, 1);
    return r.status;
}
