/* SPDX-License-Identifier: MIT */
/* Host names: resolved with c-ares on the loop (never blocking it), every
 * address tried (a race, RFC 8305), resolved again on each reconnect,
 * failures within the connect timeout, every DNS server asked inside it,
 * the last answer serving while DNS is down. The client asks only the
 * test's own DNS servers (support/dns_server.h, on 127.0.0.1) for names
 * under leash.test. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* unshare */
#endif

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dns_server.h"
#include "fixture.h"
#include "proxy.h"
#include "redis_cluster.h"

#define NAME "redis.leash.test"

static struct ev_loop *new_loop(void) {
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    CHECK(loop != NULL);
    return loop;
}

/* Options for NAME:port, asking only d. */
static void name_options(leash_options *o, const test_redis *r, const test_dns *d, const char *host,
                         int64_t lease_ms) {
    fx_options(o, r, lease_ms);
    o->host = host;
    o->dns_servers = d->servers;
}

/* Try-once acquire + release on c; the key is in r while held. */
static void roundtrip(struct ev_loop *loop, leash_client *c, test_redis *r, const char *name) {
    char key[128];
    leash_lock *l = leash_lock_new(c, name);

    CHECK(l != NULL);
    snprintf(key, sizeof(key), "leash:%s", name);
    CHECK_EQ_INT(fx_acquire_sync(loop, l, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_redis_exists(r, key), 1);
    CHECK_EQ_INT(fx_release_sync(loop, l, 5000), LEASH_OK);
    leash_lock_free(l);
}

/* A try-once acquire of name on c, run to its end, which must be
 * LEASH_ECONN: the ms from t0 to its callback. */
static int64_t econn_after(struct ev_loop *loop, leash_client *c, const char *name, int64_t t0) {
    leash_lock *l = leash_lock_new(c, name);
    fx_result res = {0};

    CHECK(l != NULL);
    CHECK_EQ_INT(leash_acquire(l, 0, fx_acquire_cb, &res), LEASH_OK);
    fx_run_until(loop, &res, 3000);
    CHECK_EQ_INT(res.status, LEASH_ECONN);
    leash_lock_free(l);
    return res.at_ms - t0;
}

/* ---- the loop's longest stall, from a timer that repeats every 5 ms ---- */

#define TICK_MS 5

static int64_t last_tick, worst_stall;

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents) {
    int64_t now = test_now_ms();

    (void)loop;
    (void)w;
    (void)revents;
    if (last_tick != 0 && now - last_tick - TICK_MS > worst_stall)
        worst_stall = now - last_tick - TICK_MS;
    last_tick = now;
}

/* (a) */
TEST(a_name_resolves_and_locks_work) {
    test_redis r;
    test_dns d;
    struct ev_loop *loop = new_loop();
    leash_options o;
    leash_client *c;

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    CHECK_EQ_INT(test_dns_start(&d), 0);
    CHECK_EQ_INT(test_dns_set(&d, NAME, "127.0.0.1"), 0);
    name_options(&o, &r, &d, NAME, 5000);
    c = fx_client_opts(loop, &o);
    roundtrip(loop, c, &r, "by-name");
    /* The command and the subscriber connection each asked (A and AAAA). */
    CHECK(test_dns_queries(&d, NAME) >= 2);
    leash_client_free(c);
    test_dns_stop(&d);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}

/* (b) A lookup that takes 2 s: the loop runs on (timers on time, a held
 * lock renewing), and the acquire completes once the answer comes. */
TEST(a_slow_lookup_never_stalls_the_loop) {
    test_redis r;
    test_dns d;
    struct ev_loop *loop = new_loop();
    leash_options o;
    leash_client *holder, *c;
    leash_lock *held, *waiter, *l;
    leash_stats before, after;
    fx_result lost = {0}, waited = {0}, res = {0};
    ev_timer tick;
    int64_t t0;

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    CHECK_EQ_INT(test_dns_start(&d), 0);
    CHECK_EQ_INT(test_dns_set(&d, NAME, "127.0.0.1"), 0);
    CHECK_EQ_INT(test_dns_delay(&d, 2000), 0);

    /* A lock held on another client (at 127.0.0.1), renewed every 200 ms. */
    holder = fx_client(loop, &r, 600);
    held = leash_lock_new(holder, "held");
    leash_on_lost(held, fx_lost_cb, &lost);
    CHECK_EQ_INT(fx_acquire_sync(loop, held, 0, 5000), LEASH_OK);
    leash_client_stats(holder, &before);

    ev_timer_init(&tick, on_tick, TICK_MS / 1000.0, TICK_MS / 1000.0);
    ev_timer_start(loop, &tick);
    t0 = test_now_ms();
    name_options(&o, &r, &d, NAME, 5000);
    o.connect_timeout_ms = 5000;
    o.command_timeout_ms = 5000;
    c = fx_client_opts(loop, &o);
    l = leash_lock_new(c, "by-slow-name");
    CHECK_EQ_INT(leash_acquire(l, 0, fx_acquire_cb, &res), LEASH_OK);
    /* Another lock's wait, which ends on its own timer meanwhile. */
    waiter = leash_lock_new(holder, "held");
    CHECK_EQ_INT(leash_acquire(waiter, 500, fx_acquire_cb, &waited), LEASH_OK);
    fx_run_until(loop, &res, 5000);
    ev_timer_stop(loop, &tick);

    CHECK_EQ_INT(waited.status, LEASH_ETIMEDOUT);
    CHECK_MSG(waited.at_ms - t0 >= 500 && waited.at_ms - t0 <= 500 + TEST_SLACK_MS,
              "a 500 ms wait ended after %lld ms", (long long)(waited.at_ms - t0));
    CHECK_EQ_INT(res.status, LEASH_OK);
    CHECK_MSG(res.at_ms - t0 >= 2000, "acquired %lld ms after the start, before the answer",
              (long long)(res.at_ms - t0));
    CHECK_MSG(res.at_ms - t0 <= 2000 + TEST_SLACK_MS, "acquired %lld ms after the start",
              (long long)(res.at_ms - t0));
    CHECK_MSG(worst_stall < 20 + TEST_SLACK_MS, "the loop stalled %lld ms", (long long)worst_stall);
    leash_client_stats(holder, &after);
    printf("  acquired after %lld ms; the loop's longest stall %lld ms; %llu renewals meanwhile\n",
           (long long)(res.at_ms - t0), (long long)worst_stall,
           (unsigned long long)(after.renewals - before.renewals));
    CHECK_MSG(after.renewals >= before.renewals + 5, "%llu renewals in the 2 s",
              (unsigned long long)(after.renewals - before.renewals));
    CHECK(leash_held(held));
    CHECK_EQ_INT(lost.calls, 0);

    CHECK_EQ_INT(fx_release_sync(loop, l, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(loop, held, 5000), LEASH_OK);
    leash_lock_free(l);
    leash_lock_free(waiter);
    leash_lock_free(held);
    leash_client_free(c);
    leash_client_free(holder);
    test_dns_stop(&d);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}

/* (b) The same lookup with a connect timeout shorter than it: ECONN at
 * that timeout; once DNS answers in time the client connects. (The query
 * runs on after the connect gave up, for the next one: see
 * a_query_outlives_its_connect_attempt.) */
TEST(the_connect_timeout_covers_the_lookup) {
    test_redis r;
    test_dns d;
    struct ev_loop *loop = new_loop();
    leash_options o;
    leash_client *c;
    int64_t t0, took;

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    CHECK_EQ_INT(test_dns_start(&d), 0);
    CHECK_EQ_INT(test_dns_set(&d, NAME, "127.0.0.1"), 0);
    CHECK_EQ_INT(test_dns_delay(&d, 2000), 0);
    name_options(&o, &r, &d, NAME, 5000);
    o.connect_timeout_ms = 500;
    o.command_timeout_ms = 500;
    o.reconnect_min_ms = 1000;
    o.reconnect_max_ms = 1000;
    t0 = test_now_ms();
    c = fx_client_opts(loop, &o);
    took = econn_after(loop, c, "too-slow", t0);
    CHECK_MSG(took >= 500 && took <= 500 + TEST_SLACK_MS, "ECONN %lld ms after the start",
              (long long)took);
    CHECK(fx_log_contains("connect timed out (no answer from DNS yet)"));
    CHECK(!leash_client_connected(c));

    CHECK_EQ_INT(test_dns_delay(&d, 0), 0);
    fx_wait_connected(loop, c, 5000);
    roundtrip(loop, c, &r, "in-time");
    leash_client_free(c);
    test_dns_stop(&d);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}

/* The connect timeout covers the lookup, the connect and the TLS
 * handshake. A handshake still unanswered at the deadline is a connect
 * timeout (LEASH_ECONN), whether a slow lookup left it a few hundred
 * milliseconds or the whole second: an unanswered handshake is no refusal
 * (docs/tls-and-names.md "TLS"). The proxy holds the TLS server's answers back. */
TEST(a_tls_handshake_cut_short_by_a_slow_lookup_is_econn) {
    test_redis_config cfg = {0};
    test_redis r;
    test_dns d;
    fault_proxy p;
    struct ev_loop *loop = new_loop();
    leash_options o;
    leash_client *c;
    leash_lock *l;
    int64_t t0, took;

    cfg.tls_dir = test_tls_certs();
    CHECK(cfg.tls_dir != NULL);
    CHECK_EQ_INT(test_redis_start(&r, &cfg), 0);
    CHECK_EQ_INT(fp_start(&p, r.tls_port), 0);
    CHECK_EQ_INT(fp_stall(&p, FP_ALL, FP_DOWN, 1), 0);
    CHECK_EQ_INT(test_dns_start(&d), 0);
    CHECK_EQ_INT(test_dns_set(&d, NAME, "127.0.0.1"), 0);
    CHECK_EQ_INT(test_dns_delay(&d, 700), 0);
    name_options(&o, &r, &d, NAME, 5000);
    o.port = p.port;
    o.tls = 1;
    o.tls_ca_file = test_tls_file(0, "ca.pem");
    o.tls_server_name = "localhost";
    o.connect_timeout_ms = 1000;
    o.command_timeout_ms = 2000; /* the acquire outwaits the connect */
    o.reconnect_min_ms = 1000;
    o.reconnect_max_ms = 1000;

    /* 700 ms of lookup leave the handshake 300: ECONN. */
    fx_log_clear();
    t0 = test_now_ms();
    c = fx_client_opts(loop, &o);
    took = econn_after(loop, c, "cut-short", t0);
    CHECK_MSG(took >= 1000 && took <= 2000 + TEST_SLACK_MS, "ECONN %lld ms after the start",
              (long long)took);
    CHECK(fx_log_contains("connect timed out (in the TLS handshake: no byte from the server"));
    CHECK(!fx_log_contains("TLS handshake not answered"));
    leash_client_free(c);

    /* A quick lookup leaves the handshake the whole second: ECONN too. */
    CHECK_EQ_INT(test_dns_delay(&d, 0), 0);
    fx_log_clear();
    c = fx_client_opts(loop, &o);
    l = leash_lock_new(c, "not-answered");
    CHECK_EQ_INT(fx_acquire_sync(loop, l, 0, 3000), LEASH_ECONN);
    CHECK(fx_log_contains("connect timed out (in the TLS handshake: no byte from the server"));
    CHECK(!fx_log_contains("TLS handshake not answered"));
    leash_lock_free(l);

    /* Answered now: the same client locks over TLS. */
    CHECK_EQ_INT(fp_stall(&p, FP_ALL, FP_DOWN, 0), 0);
    fx_wait_connected(loop, c, 5000);
    roundtrip(loop, c, &r, "answered");
    leash_client_free(c);
    fp_stop(&p);
    test_dns_stop(&d);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}

/* Freed while its names resolve: the acquire ends ECANCELED, the late
 * answers find nothing (run under ASan). */
TEST(client_free_while_resolving) {
    test_redis r;
    test_dns d;
    struct ev_loop *loop = new_loop();
    leash_options o;
    leash_client *c;
    leash_lock *l;
    fx_result res = {0};

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    CHECK_EQ_INT(test_dns_start(&d), 0);
    CHECK_EQ_INT(test_dns_set(&d, NAME, "127.0.0.1"), 0);
    CHECK_EQ_INT(test_dns_delay(&d, 500), 0);
    name_options(&o, &r, &d, NAME, 5000);
    o.command_timeout_ms = 5000;
    c = fx_client_opts(loop, &o);
    l = leash_lock_new(c, "never");
    CHECK_EQ_INT(leash_acquire(l, 0, fx_acquire_cb, &res), LEASH_OK);
    fx_run_for(loop, 100);
    CHECK(test_dns_queries(&d, NAME) >= 1);
    leash_client_free(c);
    CHECK_EQ_INT(res.calls, 1);
    CHECK_EQ_INT(res.status, LEASH_ECANCELED);
    fx_run_for(loop, 1000);
    CHECK_EQ_INT(res.calls, 1);
    test_dns_stop(&d);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}

/* A name in /etc/hosts ("localhost", as on every Debian machine): c-ares
 * answers it inside the call that starts the lookup, and leash hands the
 * answer over from the loop. A client freed before that turn drops it;
 * one that waits connects. (Any DNS query still goes to d only.) */
TEST(a_hosts_file_answer_comes_from_the_loop) {
    test_redis r;
    test_dns d;
    struct ev_loop *loop = new_loop();
    leash_options o;
    leash_client *c;

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    CHECK_EQ_INT(test_dns_start(&d), 0);
    name_options(&o, &r, &d, "localhost", 5000);
    c = fx_client_opts(loop, &o);
    leash_client_free(c);
    fx_run_for(loop, 50);
    c = fx_client_opts(loop, &o);
    roundtrip(loop, c, &r, "from-hosts");
    leash_client_free(c);
    test_dns_stop(&d);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}

/* (c) The name moves from A (127.0.0.1) to B (127.0.0.2, the same port),
 * then A dies: the reconnect resolves again and goes to B. */
TEST(a_name_that_moves_is_followed) {
    test_redis a, b;
    test_redis_config bcfg = {0};
    test_dns d;
    struct ev_loop *loop = new_loop();
    leash_options o;
    leash_client *c;
    leash_stats st;
    long asked;

    memset(&st, 0, sizeof(st));
    CHECK_EQ_INT(test_redis_start(&a, NULL), 0);
    bcfg.host = "127.0.0.2";
    bcfg.port = a.port;
    CHECK_EQ_INT(test_redis_start(&b, &bcfg), 0);
    CHECK_EQ_INT(test_dns_start(&d), 0);
    CHECK_EQ_INT(test_dns_set(&d, NAME, "127.0.0.1"), 0);
    name_options(&o, &a, &d, NAME, 5000);
    c = fx_client_opts(loop, &o);
    roundtrip(loop, c, &a, "on-a");
    asked = test_dns_queries(&d, NAME);

    CHECK_EQ_INT(test_dns_set(&d, NAME, "127.0.0.2"), 0);
    CHECK_EQ_INT(test_redis_kill(&a), 0);
    /* The break shows, then the reconnect. */
    for (int64_t until = test_now_ms() + 5000; test_now_ms() < until;) {
        leash_client_stats(c, &st);
        if (st.reconnects >= 1 && leash_client_connected(c))
            break;
        fx_run_for(loop, 5);
    }
    CHECK(st.reconnects >= 1);
    roundtrip(loop, c, &b, "on-b");
    CHECK(test_dns_queries(&d, NAME) > asked);
    leash_client_free(c);
    test_dns_stop(&d);
    test_redis_stop(&b);
    test_redis_stop(&a);
    ev_loop_destroy(loop);
}

/* Whether this machine has ::1 (a container may not). */
static int have_ipv6_loopback(void) {
    struct sockaddr_in6 sa;
    int fd = socket(AF_INET6, SOCK_DGRAM, 0), ok;

    if (fd < 0)
        return 0;
    memset(&sa, 0, sizeof(sa));
    sa.sin6_family = AF_INET6;
    sa.sin6_addr = in6addr_loopback;
    ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

/* NAME has addrs; `refused` (as logged, "[::1]") comes first and refuses,
 * Redis listens on 127.0.0.1: locks work, and the log shows the move. */
static void falls_to_the_next_address(const char *addrs, const char *refused) {
    test_redis r;
    test_dns d;
    struct ev_loop *loop = new_loop();
    leash_options o;
    leash_client *c;
    char line[128];

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    CHECK_EQ_INT(test_dns_start(&d), 0);
    CHECK_EQ_INT(test_dns_set(&d, NAME, addrs), 0);
    name_options(&o, &r, &d, NAME, 5000);
    c = fx_client_opts(loop, &o);
    roundtrip(loop, c, &r, "next-address");
    snprintf(line, sizeof(line),
             "connect to %s:%d failed (Connection refused): trying 127.0.0.1:%d", refused, r.port,
             r.port);
    CHECK_MSG(fx_log_contains(line), "no log line \"%s\"", line);
    leash_client_free(c);
    test_dns_stop(&d);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}

/* (d) Two addresses, the first refuses: the second is used. */
TEST(every_address_is_tried_in_order) {
    falls_to_the_next_address("127.0.0.3,127.0.0.1", "127.0.0.3");
}

/* (d) IPv6 and IPv4 alike: ::1 (RFC 6724 puts it first whatever the
 * answers' order; Redis listens on 127.0.0.1 only, so it refuses), then
 * 127.0.0.1. */
TEST(ipv6_then_ipv4) {
    if (!have_ipv6_loopback()) {
        printf("  (skipped: no ::1 here)\n");
        return;
    }
    falls_to_the_next_address("127.0.0.1,::1", "[::1]");
}

/* Every address refuses: ECONN, and the log names the last failure. */
TEST(no_address_answers) {
    test_redis r;
    test_dns d;
    struct ev_loop *loop = new_loop();
    leash_options o;
    leash_client *c;
    leash_lock *l;
    char line[160];

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    CHECK_EQ_INT(test_dns_start(&d), 0);
    CHECK_EQ_INT(test_dns_set(&d, NAME, "127.0.0.3,127.0.0.4"), 0);
    name_options(&o, &r, &d, NAME, 5000);
    c = fx_client_opts(loop, &o);
    l = leash_lock_new(c, "nowhere");
    CHECK_EQ_INT(fx_acquire_sync(loop, l, 0, 5000), LEASH_ECONN);
    snprintf(line, sizeof(line),
             "connect failed (127.0.0.4:%d, the last of 2 addresses of " NAME
             "): Connection refused",
             r.port);
    CHECK(fx_log_contains(line));
    leash_lock_free(l);
    leash_client_free(c);
    test_dns_stop(&d);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}

/* ---- faults: an address that drops SYNs, DNS servers that do not answer ---- */

/* Moves this case (a forked process of its own) into a network namespace
 * of its own, loopback up: the servers it starts from now on live there,
 * and a firewall rule made there touches nothing else and goes with the
 * namespace, when the case ends or is killed (the servers die with it:
 * PR_SET_PDEATHSIG). 0, or -1 when this machine does not allow it. */
static int own_netns(void) {
    if (unshare(CLONE_NEWNET) != 0)
        return -1;
    return system("ip link set lo up") == 0 ? 0 : -1;
}

/* In the case's own namespace: TCP SYNs to ip:port vanish (no RST, no
 * ICMP), as to a dead node behind a firewall. 0, or -1. */
static int drop_syns(const char *ip, int port) {
    char cmd[512];

    snprintf(cmd, sizeof(cmd),
             "nft -f - <<'EOF'\n"
             "table inet leash_test {\n"
             "  chain out {\n"
             "    type filter hook output priority 0; policy accept;\n"
             "    ip daddr %s tcp dport %d tcp flags & (syn | ack) == syn drop\n"
             "  }\n"
             "}\n"
             "EOF\n",
             ip, port);
    return system(cmd) == 0 ? 0 : -1;
}

static void undrop(void) {
    (void)system("nft delete table inet leash_test");
}

/* Issue 32, item 1: NAME has two addresses, the first drops SYNs. The
 * second starts 250 ms later beside it and wins (with tls, the handshake
 * runs on it); the first costs a reconnect nothing once the second has
 * worked. */
static void past_a_dropping_address(int tls) {
    test_redis_config cfg = {0};
    test_redis r;
    test_dns d;
    struct ev_loop *loop;
    leash_options o;
    leash_client *c;
    leash_lock *l;
    leash_stats st;
    fx_result res = {0};
    char line[160];
    int64_t t0, took;
    int port;

    if (own_netns() != 0) {
        printf("  (skipped: no network namespace of our own here)\n");
        return;
    }
    loop = new_loop();
    if (tls) {
        cfg.tls_dir = test_tls_certs();
        CHECK(cfg.tls_dir != NULL);
    }
    CHECK_EQ_INT(test_redis_start(&r, tls ? &cfg : NULL), 0);
    port = tls ? r.tls_port : r.port;
    CHECK_EQ_INT(test_dns_start(&d), 0);
    CHECK_EQ_INT(test_dns_set(&d, NAME, "127.0.0.3,127.0.0.1"), 0);
    CHECK_EQ_INT(drop_syns("127.0.0.3", port), 0);
    name_options(&o, &r, &d, NAME, 5000);
    if (tls) {
        o.port = port;
        o.tls = 1;
        o.tls_ca_file = test_tls_file(0, "ca.pem");
        o.tls_server_name = "localhost";
    }
    t0 = test_now_ms();
    c = fx_client_opts(loop, &o);
    l = leash_lock_new(c, "past-the-drop");
    CHECK(l != NULL);
    CHECK_EQ_INT(leash_acquire(l, 8000, fx_acquire_cb, &res), LEASH_OK);
    fx_run_until(loop, &res, 9000);
    took = res.at_ms - t0;
    printf("  acquired after %lld ms\n", (long long)took);
    CHECK_EQ_INT(res.status, LEASH_OK);
    CHECK_MSG(took >= 250 && took <= 400 + TEST_SLACK_MS, "acquired %lld ms after the start",
              (long long)took);
    snprintf(line, sizeof(line), "connect to 127.0.0.3:%d not done yet: trying 127.0.0.1:%d", port,
             port);
    CHECK_MSG(fx_log_contains(line), "no log line \"%s\"", line);
    CHECK_EQ_INT(fx_release_sync(loop, l, 5000), LEASH_OK);

    /* Both connections dropped by the server: they come back at once, to
     * the address that worked. */
    fx_log_clear();
    memset(&st, 0, sizeof(st));
    CHECK(test_redis_int(&r, "CLIENT KILL TYPE normal") >= 1);
    CHECK(test_redis_int(&r, "CLIENT KILL TYPE pubsub") >= 0);
    t0 = test_now_ms();
    for (int64_t until = t0 + 5000; test_now_ms() < until;) {
        leash_client_stats(c, &st);
        if (st.reconnects >= 1 && leash_client_connected(c))
            break;
        fx_run_for(loop, 5);
    }
    printf("  reconnected %lld ms after the kill\n", (long long)(test_now_ms() - t0));
    CHECK(st.reconnects >= 1);
    CHECK(!fx_log_contains("not done yet"));
    roundtrip(loop, c, &r, "first-next-time");
    leash_lock_free(l);
    leash_client_free(c);
    undrop();
    test_dns_stop(&d);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}

TEST(a_first_address_that_drops_syns_does_not_hold_the_name) {
    past_a_dropping_address(0);
}

TEST(the_tls_handshake_runs_on_the_winner) {
    past_a_dropping_address(1);
}

/* Issue 32, item 1, as reviewed: NAME is [A, B], A a redis-server frozen
 * with SIGSTOP (its kernel completes the TCP connect, nothing answers), B a
 * healthy one on the same port. A wins the first race and its handshake
 * (AUTH/INFO/PING, or with tls the TLS handshake: A need not speak TLS to
 * say nothing) gets no answer within command_timeout_ms (with tls,
 * connect_timeout_ms; 1000 ms both): it must not count as the address that
 * worked (it would win every race after), but go last, so that the next
 * attempt starts at B: the acquire is granted within two timeouts. Once B
 * dropped the client, the reconnect goes to B first. */
static void past_a_frozen_address(int tls) {
    test_redis_config acfg = {0}, bcfg = {0};
    test_redis a, b;
    test_dns d;
    struct ev_loop *loop;
    leash_options o;
    leash_client *c;
    leash_lock *l;
    leash_stats st;
    fx_result res = {0};
    char line[160];
    int64_t t0, took;
    int port;

    if (own_netns() != 0) {
        printf("  (skipped: no network namespace of our own here)\n");
        return;
    }
    loop = new_loop();
    if (tls) {
        bcfg.tls_dir = test_tls_certs();
        CHECK(bcfg.tls_dir != NULL);
    }
    CHECK_EQ_INT(test_redis_start(&b, &bcfg), 0);
    port = tls ? b.tls_port : b.port;
    acfg.host = "127.0.0.3";
    acfg.port = port;
    CHECK_EQ_INT(test_redis_start(&a, &acfg), 0);
    test_redis_freeze(&a);
    CHECK_EQ_INT(test_dns_start(&d), 0);
    CHECK_EQ_INT(test_dns_set(&d, NAME, "127.0.0.3,127.0.0.1"), 0);
    name_options(&o, &b, &d, NAME, 5000);
    CHECK(o.connect_timeout_ms == 1000 && o.command_timeout_ms == 1000);
    if (tls) {
        o.port = port;
        o.tls = 1;
        o.tls_ca_file = test_tls_file(0, "ca.pem");
        o.tls_server_name = "localhost";
    }
    fx_log_clear();
    t0 = test_now_ms();
    c = fx_client_opts(loop, &o);
    l = leash_lock_new(c, "past-the-frozen");
    CHECK(l != NULL);
    CHECK_EQ_INT(leash_acquire(l, 5000, fx_acquire_cb, &res), LEASH_OK);
    fx_run_until(loop, &res, 6000);
    took = res.at_ms - t0;
    printf("  acquired after %lld ms (%s)\n", (long long)took, leash_strerror(res.status));
    CHECK_EQ_INT(res.status, LEASH_OK);
    CHECK_MSG(took >= 1000 && took <= 2000 + TEST_SLACK_MS, "acquired %lld ms after the start",
              (long long)took);
    snprintf(line, sizeof(line), NAME ": connected to 127.0.0.3:%d", port);
    CHECK_MSG(fx_log_contains(line), "no log line \"%s\"", line);
    snprintf(line, sizeof(line), NAME ": connected to 127.0.0.1:%d", port);
    CHECK_MSG(fx_log_contains(line), "no log line \"%s\"", line);
    CHECK_EQ_INT(fx_release_sync(loop, l, 5000), LEASH_OK);

    /* B drops the client: the reconnect goes to B, A is not tried. */
    fx_log_clear();
    memset(&st, 0, sizeof(st));
    CHECK(test_redis_int(&b, "CLIENT KILL TYPE normal") >= 1);
    CHECK(test_redis_int(&b, "CLIENT KILL TYPE pubsub") >= 0);
    t0 = test_now_ms();
    for (int64_t until = t0 + 5000; test_now_ms() < until;) {
        leash_client_stats(c, &st);
        if (st.reconnects >= 1 && leash_client_connected(c))
            break;
        fx_run_for(loop, 5);
    }
    took = test_now_ms() - t0;
    printf("  reconnected %lld ms after the kill\n", (long long)took);
    CHECK(st.reconnects >= 1);
    CHECK_MSG(took < 1000, "reconnected %lld ms after the kill", (long long)took);
    CHECK_MSG(fx_log_contains(line), "no log line \"%s\"", line);
    CHECK_MSG(!fx_log_contains(NAME ": connected to 127.0.0.3"), "A was tried again");
    roundtrip(loop, c, &b, "b-first-next-time");
    CHECK_MSG(!fx_log_contains(NAME ": connected to 127.0.0.3"), "A was tried again");
    leash_lock_free(l);
    leash_client_free(c);
    test_dns_stop(&d);
    test_redis_thaw(&a);
    test_redis_stop(&a);
    test_redis_stop(&b);
    ev_loop_destroy(loop);
}

TEST(a_frozen_first_address_does_not_hold_the_name) {
    past_a_frozen_address(0);
}

TEST(a_frozen_first_address_does_not_hold_the_name_tls) {
    past_a_frozen_address(1);
}

/* Issue 32, item 2: the first DNS server never answers. Each server has
 * its share of half the connect budget (2000 ms: 500 ms each), so the
 * second is asked at 500 ms and the connect has the rest. */
TEST(a_dead_first_dns_server_leaves_time_to_connect) {
    test_redis r;
    test_dns dead, good;
    struct ev_loop *loop = new_loop();
    leash_options o;
    leash_client *c;
    leash_lock *l;
    fx_result res = {0};
    char servers[80];
    int64_t t0, took;

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    CHECK_EQ_INT(test_dns_start(&dead), 0);
    CHECK_EQ_INT(test_dns_start(&good), 0);
    CHECK_EQ_INT(test_dns_set(&dead, NAME, "127.0.0.1"), 0);
    CHECK_EQ_INT(test_dns_delay(&dead, 600000), 0);
    CHECK_EQ_INT(test_dns_set(&good, NAME, "127.0.0.1"), 0);
    snprintf(servers, sizeof(servers), "%s,%s", dead.servers, good.servers);
    name_options(&o, &r, &good, NAME, 5000);
    o.dns_servers = servers;
    o.connect_timeout_ms = 2000;
    t0 = test_now_ms();
    c = fx_client_opts(loop, &o);
    l = leash_lock_new(c, "past-a-dead-server");
    CHECK(l != NULL);
    CHECK_EQ_INT(leash_acquire(l, 5000, fx_acquire_cb, &res), LEASH_OK);
    fx_run_until(loop, &res, 6000);
    took = res.at_ms - t0;
    printf("  acquired after %lld ms\n", (long long)took);
    CHECK_EQ_INT(res.status, LEASH_OK);
    CHECK_MSG(took >= 500 && took <= 500 + 100 + TEST_SLACK_MS, "acquired %lld ms after the start",
              (long long)took);
    CHECK(test_dns_queries(&dead, NAME) >= 1);
    CHECK(test_dns_queries(&good, NAME) >= 1);
    CHECK_EQ_INT(fx_release_sync(loop, l, 5000), LEASH_OK);
    leash_lock_free(l);
    leash_client_free(c);
    test_dns_stop(&good);
    test_dns_stop(&dead);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}

/* Issue 32, item 2: DNS answers after 1500 ms, the connect timeout is
 * 1000. The first connect gives up waiting; the query runs on and the
 * next connect takes its answer. */
TEST(a_query_outlives_its_connect_attempt) {
    test_redis r;
    test_dns d;
    struct ev_loop *loop = new_loop();
    leash_options o;
    leash_client *c;
    leash_lock *l;
    fx_result res = {0};
    int64_t t0, took;

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    CHECK_EQ_INT(test_dns_start(&d), 0);
    CHECK_EQ_INT(test_dns_set(&d, NAME, "127.0.0.1"), 0);
    CHECK_EQ_INT(test_dns_delay(&d, 1500), 0);
    name_options(&o, &r, &d, NAME, 5000);
    o.connect_timeout_ms = 1000;
    o.reconnect_min_ms = 50;
    o.reconnect_max_ms = 100;
    t0 = test_now_ms();
    c = fx_client_opts(loop, &o);
    l = leash_lock_new(c, "slow-answer");
    CHECK(l != NULL);
    CHECK_EQ_INT(leash_acquire(l, 5000, fx_acquire_cb, &res), LEASH_OK);
    fx_run_until(loop, &res, 6000);
    took = res.at_ms - t0;
    printf("  acquired after %lld ms\n", (long long)took);
    CHECK_EQ_INT(res.status, LEASH_OK);
    CHECK(fx_log_contains("connect timed out (no answer from DNS yet)"));
    CHECK_MSG(took >= 1500 && took <= 1500 + 100 + TEST_SLACK_MS,
              "acquired %lld ms after the start", (long long)took);
    CHECK_EQ_INT(fx_release_sync(loop, l, 5000), LEASH_OK);
    leash_lock_free(l);
    leash_client_free(c);
    test_dns_stop(&d);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}

/* Drops the client's connections at the server, then acquires with a
 * 5 s wait: the ms it took. */
static int64_t reacquire_after_kill(struct ev_loop *loop, leash_client *c, test_redis *r,
                                    const char *name) {
    leash_lock *l = leash_lock_new(c, name);
    fx_result res = {0};
    int64_t t0;

    CHECK(l != NULL);
    CHECK(test_redis_int(r, "CLIENT KILL TYPE normal") >= 1);
    CHECK(test_redis_int(r, "CLIENT KILL TYPE pubsub") >= 0);
    t0 = test_now_ms();
    CHECK_EQ_INT(leash_acquire(l, 5000, fx_acquire_cb, &res), LEASH_OK);
    fx_run_until(loop, &res, 6000);
    CHECK_EQ_INT(res.status, LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(loop, l, 5000), LEASH_OK);
    leash_lock_free(l);
    return res.at_ms - t0;
}

/* Issue 32, item 2: the answer had a 60 s TTL; then DNS stops answering
 * (and later refuses): reconnects go on to the unchanged address, once
 * the query's first round (half the connect budget, 1000 ms) asked every
 * server in vain, or at once when they refuse. */
TEST(the_last_answer_serves_while_dns_is_down) {
    test_redis r;
    test_dns d;
    struct ev_loop *loop = new_loop();
    leash_options o;
    leash_client *c;
    int64_t took;

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    CHECK_EQ_INT(test_dns_start(&d), 0);
    CHECK_EQ_INT(test_dns_set(&d, NAME, "127.0.0.1"), 0);
    CHECK_EQ_INT(test_dns_ttl(&d, 60), 0);
    name_options(&o, &r, &d, NAME, 5000);
    o.connect_timeout_ms = 2000;
    c = fx_client_opts(loop, &o);
    roundtrip(loop, c, &r, "while-dns-is-up");

    /* Silent: the first round ends unanswered. */
    CHECK_EQ_INT(test_dns_delay(&d, 600000), 0);
    fx_log_clear();
    took = reacquire_after_kill(loop, c, &r, "while-dns-is-silent");
    printf("  silent DNS: acquired after %lld ms\n", (long long)took);
    CHECK_MSG(took >= 1000 && took <= 1000 + 100 + TEST_SLACK_MS, "acquired after %lld ms",
              (long long)took);
    CHECK(fx_log_contains("no DNS server answered within 1000 ms: using its last answer"));

    /* Gone (its port refuses): the query fails, the last answer serves. */
    test_dns_stop(&d);
    took = reacquire_after_kill(loop, c, &r, "while-dns-is-gone");
    printf("  refusing DNS: acquired after %lld ms\n", (long long)took);
    CHECK_MSG(took <= 100 + TEST_SLACK_MS, "acquired after %lld ms", (long long)took);
    leash_client_free(c);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}

/* The control: an answer whose TTL (1 s) ran out serves nothing; with
 * DNS silent, the reconnect waits for it and the acquire ends ECONN. */
TEST(an_answer_past_its_ttl_does_not_serve) {
    test_redis r;
    test_dns d;
    struct ev_loop *loop = new_loop();
    leash_options o;
    leash_client *c;
    leash_lock *l;
    fx_result res = {0};

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    CHECK_EQ_INT(test_dns_start(&d), 0);
    CHECK_EQ_INT(test_dns_set(&d, NAME, "127.0.0.1"), 0);
    CHECK_EQ_INT(test_dns_ttl(&d, 1), 0);
    name_options(&o, &r, &d, NAME, 5000);
    o.connect_timeout_ms = 2000;
    c = fx_client_opts(loop, &o);
    roundtrip(loop, c, &r, "while-dns-is-up");
    fx_run_for(loop, 1100);
    CHECK_EQ_INT(test_dns_delay(&d, 600000), 0);
    CHECK(test_redis_int(&r, "CLIENT KILL TYPE normal") >= 1);
    l = leash_lock_new(c, "after-the-ttl");
    CHECK(l != NULL);
    CHECK_EQ_INT(leash_acquire(l, 2500, fx_acquire_cb, &res), LEASH_OK);
    fx_run_until(loop, &res, 4000);
    CHECK_EQ_INT(res.status, LEASH_ECONN);
    CHECK(!fx_log_contains("using its last answer"));
    leash_lock_free(l);
    leash_client_free(c);
    test_dns_stop(&d);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}

/* (e) A failed lookup is ECONN within the connect timeout, and the log
 * names the host and the resolver's error. */
static void lookup_fails(const char *servers, const char *host, const char *says) {
    struct ev_loop *loop = new_loop();
    leash_options o;
    leash_client *c;
    int64_t t0, took;

    /* The name never resolves: the port is never tried. */
    fx_fault_options(&o, 1, 5000);
    o.host = host;
    o.dns_servers = servers;
    o.connect_timeout_ms = 1000;
    o.command_timeout_ms = 1000;
    t0 = test_now_ms();
    c = fx_client_opts(loop, &o);
    took = econn_after(loop, c, "unresolved", t0);
    CHECK_MSG(took <= 1000 + TEST_SLACK_MS, "ECONN %lld ms after the start", (long long)took);
    CHECK_MSG(fx_log_contains(says), "no log line \"%s\"", says);
    leash_client_free(c);
    ev_loop_destroy(loop);
}

TEST(nxdomain_is_econn_with_the_resolvers_error) {
    test_dns d;

    CHECK_EQ_INT(test_dns_start(&d), 0);
    lookup_fails(d.servers, "nx.leash.test", "cannot resolve nx.leash.test: Domain name not found");
    CHECK(test_dns_queries(&d, "nx.leash.test") >= 1);
    test_dns_stop(&d);
}

TEST(a_dead_dns_server_is_econn_with_the_resolvers_error) {
    test_dns d;
    char servers[sizeof d.servers];

    /* A port where no DNS server listens any more. */
    CHECK_EQ_INT(test_dns_start(&d), 0);
    snprintf(servers, sizeof(servers), "%s", d.servers);
    test_dns_stop(&d);
    lookup_fails(servers, "dead.leash.test",
                 "cannot resolve dead.leash.test: Could not contact DNS servers");
}

TEST(a_server_list_is_checked) {
    leash_options o;
    leash_client *c = NULL;

    leash_options_init(&o);
    o.log_cb = fx_log_cb;
    o.dns_servers = "not-an-address";
    CHECK_EQ_INT(leash_client_new(&c, &o), LEASH_EINVAL);
    CHECK(c == NULL);
    CHECK(fx_log_contains("dns_servers \"not-an-address\""));
    o.dns_servers = "127.0.0.1,127.0.0.2:5353,[::1]:53";
    CHECK_EQ_INT(leash_client_new(&c, &o), LEASH_OK);
    leash_client_free(c);
}

/* A cluster whose nodes announce a host name (cluster-announce-hostname):
 * leash reaches every master through that name, by the same path. */
TEST(cluster_nodes_announced_by_name) {
    test_cluster cl;
    test_cluster_config cfg = {0};
    test_dns d;
    struct ev_loop *loop = new_loop();
    leash_options o;
    leash_client *c;
    char seed[32];
    const char *seeds[1] = {seed};

    cfg.masters = 3;
    cfg.replicas = TEST_CLUSTER_NO_REPLICAS;
    cfg.extra = "cluster-announce-hostname node.leash.test\n"
                "cluster-preferred-endpoint-type hostname";
    CHECK_EQ_INT(test_cluster_start(&cl, &cfg), 0);
    CHECK_EQ_INT(test_dns_start(&d), 0);
    CHECK_EQ_INT(test_dns_set(&d, "node.leash.test", "127.0.0.1"), 0);
    leash_options_init(&o);
    o.log_cb = fx_log_cb;
    o.log_level = LEASH_LOG_DEBUG;
    o.lease_ms = 5000;
    snprintf(seed, sizeof(seed), "127.0.0.1:%d", test_cluster_port(&cl, 0));
    o.topology = LEASH_TOPOLOGY_CLUSTER;
    o.nodes = seeds;
    o.nodes_count = 1;
    o.dns_servers = d.servers;
    c = fx_client_opts(loop, &o);
    /* Names whose slots belong to each of the three masters. */
    for (int i = 0; i < 3; i++) {
        char key[80];
        leash_lock *l;
        CHECK(test_cluster_key_in_slot(TEST_CLUSTER_SLOTS / 3 * i + 1, "leash:", key,
                                       sizeof(key)) == 0);
        l = leash_lock_new(c, key + strlen("leash:"));
        CHECK_EQ_INT(fx_acquire_sync(loop, l, 0, 5000), LEASH_OK);
        CHECK_EQ_INT(fx_release_sync(loop, l, 5000), LEASH_OK);
        leash_lock_free(l);
    }
    CHECK(test_dns_queries(&d, "node.leash.test") >= 2);
    leash_client_free(c);
    test_dns_stop(&d);
    test_cluster_stop(&cl);
    ev_loop_destroy(loop);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(a_name_resolves_and_locks_work),
        TEST_CASE(a_slow_lookup_never_stalls_the_loop),
        TEST_CASE(the_connect_timeout_covers_the_lookup),
        TEST_CASE(a_tls_handshake_cut_short_by_a_slow_lookup_is_econn),
        TEST_CASE(client_free_while_resolving),
        TEST_CASE(a_hosts_file_answer_comes_from_the_loop),
        TEST_CASE(a_name_that_moves_is_followed),
        TEST_CASE(every_address_is_tried_in_order),
        TEST_CASE(ipv6_then_ipv4),
        TEST_CASE(no_address_answers),
        TEST_CASE(a_first_address_that_drops_syns_does_not_hold_the_name),
        TEST_CASE(the_tls_handshake_runs_on_the_winner),
        TEST_CASE(a_frozen_first_address_does_not_hold_the_name),
        TEST_CASE(a_frozen_first_address_does_not_hold_the_name_tls),
        TEST_CASE(a_dead_first_dns_server_leaves_time_to_connect),
        TEST_CASE(a_query_outlives_its_connect_attempt),
        TEST_CASE(the_last_answer_serves_while_dns_is_down),
        TEST_CASE(an_answer_past_its_ttl_does_not_serve),
        TEST_CASE(nxdomain_is_econn_with_the_resolvers_error),
        TEST_CASE(a_dead_dns_server_is_econn_with_the_resolvers_error),
        TEST_CASE(a_server_list_is_checked),
        TEST_CASE_T(cluster_nodes_announced_by_name, 90),
        {0},
    };
    return test_main(argc, argv, cases);
}
