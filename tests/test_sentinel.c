/* SPDX-License-Identifier: MIT */
/*
 * leash through Redis Sentinel (tests/support/redis_sentinel.h: one
 * master, two replicas, three sentinels on loopback, down-after 2000 ms):
 * discovery, failovers asked for and forced, the old master back as a
 * replica, credentials on both sides and TLS to both (one fixture); and
 * with a fake sentinel of the case's own, a replica named as the master
 * (ROLE), a master demoted under a connected client (-READONLY), and a
 * discovery answer that arrives after a +switch-master.
 */
#define _GNU_SOURCE /* MAP_ANONYMOUS, strcasecmp */

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "fixture.h"
#include "redis_sentinel.h"

/* How long a killed master takes to be replaced (down-after 2000 ms, the
 * vote, the promotion), with room for a slow machine. */
#define FAILOVER_MS 20000

typedef struct sworld {
    test_sentinel t;
    fx_loop *loop;
    const char *nodes[TEST_SENTINEL_MAX_SENTINELS];
    char text[TEST_SENTINEL_MAX_SENTINELS][32];
} sworld;

static void sw_up(sworld *w, const test_sentinel_config *cfg) {
    int i;

    memset(w, 0, sizeof *w);
    CHECK_EQ_INT(test_sentinel_start(&w->t, cfg), 0);
    w->loop = fx_loop_new();
    for (i = 0; i < w->t.nsentinels; i++)
        w->nodes[i] = test_sentinel_addr(&w->t, i, w->text[i], sizeof w->text[i]);
}

static void sw_down(sworld *w) {
    fx_loop_free(w->loop);
    test_sentinel_stop(&w->t);
}

static void sw_options(sworld *w, leash_options *o, int64_t lease_ms, int wait_replicas) {
    fx_fault_options(o, 1, lease_ms);
    o->command_timeout_ms = 1000;
    o->connect_timeout_ms = 1000;
    o->topology = LEASH_TOPOLOGY_SENTINEL;
    o->nodes = w->nodes;
    o->nodes_count = w->t.nsentinels;
    o->sentinel_master = TEST_SENTINEL_MASTER;
    o->sentinel_password = w->t.cfg.sentinel_password;
    o->username = w->t.cfg.data_user;
    o->password = w->t.cfg.data_password;
    o->wait_replicas = wait_replicas;
    o->wait_timeout_ms = 200;
    if (w->t.cfg.tls_dir != NULL) {
        o->tls = 1;
        o->tls_ca_file = test_tls_file(0, "ca.pem");
    }
}

static leash_client *sw_client(sworld *w, int64_t lease_ms, int wait_replicas) {
    leash_options o;
    leash_client *c;

    sw_options(w, &o, lease_ms, wait_replicas);
    c = fx_client_opts(w->loop, &o);
    fx_wait_connected(w->loop, c, 10000);
    return c;
}

static long long script_calls(test_redis *r) {
    long long a = test_redis_calls(r, "evalsha"), b = test_redis_calls(r, "eval");
    return (a < 0 ? 0 : a) + (b < 0 ? 0 : b);
}

/* A second client that tries the lock once every 100 ms while the test
 * runs the loop, and notes a grant while the holder is still valid. */
typedef struct prober {
    leash_lock *l, *holder;
    fx_result res;
    int64_t next;
    int grants, violations;
    int pending;
} prober;

static void probe_cb(leash_lock *l, int status, void *arg) {
    prober *p = arg;

    p->pending = 0;
    p->res.status = status;
    if (status != LEASH_OK)
        return;
    p->grants++;
    if (leash_held(p->holder) && leash_valid_ms(p->holder) > 0) {
        p->violations++;
        fprintf(stderr, "two valid holders: the holder has %lld ms left\n",
                (long long)leash_valid_ms(p->holder));
    }
    (void)leash_release(l, NULL, NULL);
}

static void probe_for(sworld *w, prober *p, int64_t ms) {
    int64_t until = test_now_ms() + ms;

    while (test_now_ms() < until) {
        if (test_now_ms() >= p->next && !p->pending && !leash_held(p->l) &&
            leash_acquire(p->l, 0, probe_cb, p) == LEASH_OK) {
            p->pending = 1;
            p->next = test_now_ms() + 100;
        }
        fx_run_for(w->loop, 20);
    }
}

#ifdef LEASH_TEST_CLI
/* The leash tool with args in a process of its own, its output (and
 * errors) into path: for `watch`, which runs until it is stopped. */
static pid_t cli_start(const char *args, const char *path) {
    char cmd[2048];
    pid_t pid;

    snprintf(cmd, sizeof cmd, "exec %s %s > '%s' 2>&1", LEASH_TEST_CLI, args, path);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Stops it (SIGTERM: it ends as on Ctrl-C) and reads what it wrote. */
static void cli_stop(pid_t pid, const char *path, char *out, size_t cap) {
    FILE *f;
    size_t n = 0;

    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    f = fopen(path, "r");
    if (f != NULL) {
        n = fread(out, 1, cap - 1, f);
        fclose(f);
    }
    out[n] = '\0';
}
#endif

/* The guidelines' first step: any one sentinel that answers will do. */
TEST(discovery_through_any_one_sentinel_while_the_others_are_down) {
    sworld w;
    leash_client *c;
    leash_lock *l;
    int m;

    sw_up(&w, NULL);
    m = test_sentinel_master(&w.t);
    CHECK(m >= 0);
    test_redis_kill(&w.t.sentinel[0]);
    test_redis_kill(&w.t.sentinel[1]);
    CHECK_EQ_INT(test_redis_int(&w.t.data[m], "CONFIG RESETSTAT") == -1, 1);
    fx_log_clear();
    c = sw_client(&w, 5000, 0);
    l = leash_lock_new(c, "found");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 5000), LEASH_OK);
    CHECK(script_calls(&w.t.data[m]) > 0);
    CHECK(fx_log_contains("master mymaster is at"));
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    leash_lock_free(l);
    leash_client_free(c);
    sw_down(&w);
}

/* leash_client_lock_state through the sentinels: the master's view. */
typedef struct state_seen {
    int done, status, held, nholders;
    int64_t ttl_ms, subscribers;
    uint64_t fence;
    char holder[64];
} state_seen;

static void on_state(const leash_state *st, int status, void *arg) {
    state_seen *s = arg;

    s->done = 1;
    s->status = status;
    if (st == NULL)
        return;
    s->held = st->held;
    s->nholders = (int)st->nholders;
    s->ttl_ms = st->ttl_ms;
    s->subscribers = st->subscribers;
    s->fence = st->fence;
    if (st->nholders > 0)
        snprintf(s->holder, sizeof s->holder, "%s", st->holders[0].owner);
}

/* Reads lock `name` on c and checks it is held by holder, its fence. */
static void check_state_held(sworld *w, leash_client *c, const char *name, leash_lock *holder) {
    state_seen s = {0};

    CHECK_EQ_INT(leash_client_lock_state(c, name, on_state, &s), LEASH_OK);
    CHECK_EQ_INT(s.done, 0);
    CHECK_EQ_INT(fx_run_until_flag(w->loop, &s.done, 5000), 0);
    CHECK_EQ_INT(s.status, LEASH_OK);
    CHECK_EQ_INT(s.held, 1);
    CHECK_EQ_INT(s.nholders, 1);
    CHECK(s.fence == leash_fence(holder));
    CHECK(s.ttl_ms > 0 && s.ttl_ms <= 3000);
    CHECK(s.subscribers >= 1); /* the waiter's client (and `leash watch`) */
}

/* SENTINEL FAILOVER while a lock is held with wait_replicas = 1: the hold
 * is kept, renewals go to the new master, and a waiter queued before the
 * failover is woken by the release after it. leash_client_lock_state
 * reads the hold on the master before and after. */
TEST(a_failover_asked_for_keeps_the_hold_and_wakes_the_waiter) {
    sworld w;
    leash_client *a, *b;
    leash_lock *holder, *waiter;
    fx_result lost = {0}, woken = {0};
    int m, n;
    int64_t released_at;
#ifdef LEASH_TEST_CLI
    char path[600], args[512], out[16384];
    pid_t watcher;
#endif

    sw_up(&w, NULL);
    a = sw_client(&w, 3000, 1);
    b = sw_client(&w, 3000, 1);
    holder = leash_lock_new(a, "moved");
    waiter = leash_lock_new(b, "moved");
    leash_on_lost(holder, fx_lost_cb, &lost);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(waiter, LEASH_WAIT_FOREVER, fx_acquire_cb, &woken), LEASH_OK);
#ifdef LEASH_TEST_CLI
    /* `leash watch` through the sentinels follows the failover too. */
    snprintf(path, sizeof path, "%s/watch.out", test_tmpdir());
    snprintf(args, sizeof args, "-u redis+sentinel://%s,%s,%s/%s watch moved --json", w.text[0],
             w.text[1], w.text[2], TEST_SENTINEL_MASTER);
    watcher = cli_start(args, path);
#endif
    fx_run_for(w.loop, 300);
    CHECK_EQ_INT(woken.calls, 0);
    check_state_held(&w, a, "moved", holder);
    m = test_sentinel_master(&w.t);
    fx_log_clear();
    n = test_sentinel_failover(&w.t, FAILOVER_MS);
    CHECK(n >= 0 && n != m);
    CHECK_EQ_INT(test_redis_int(&w.t.data[n], "CONFIG RESETSTAT") == -1, 1);
    /* Two leases: several renewals, every one at the new master. */
    fx_run_for(w.loop, 6000);
    CHECK_EQ_INT(lost.calls, 0);
    CHECK(leash_held(holder));
    CHECK(script_calls(&w.t.data[n]) > 0);
    CHECK(fx_log_contains("+switch-master") || fx_log_contains("master mymaster is at"));
    CHECK_EQ_INT(woken.calls, 0);
    check_state_held(&w, b, "moved", holder); /* on the new master */
    released_at = test_now_ms();
    CHECK_EQ_INT(fx_release_sync(w.loop, holder, 5000), LEASH_OK);
    fx_run_until(w.loop, &woken, 5000);
    CHECK_EQ_INT(woken.status, LEASH_OK);
    CHECK(woken.at_ms - released_at < 1000 + TEST_SLACK_MS);
    CHECK_EQ_INT(fx_release_sync(w.loop, waiter, 5000), LEASH_OK);
#ifdef LEASH_TEST_CLI
    fx_run_for(w.loop, 300);
    cli_stop(watcher, path, out, sizeof out);
    snprintf(args, sizeof args,
             "\"event\":\"master\",\"source\":\"sentinel\",\"lock\":\"moved\","
             "\"address\":\"127.0.0.1:%d\"",
             w.t.data[n].port);
    CHECK_MSG(strstr(out, args) != NULL, "watch said: %s", out);
    CHECK_MSG(strstr(out, "\"event\":\"released\"") != NULL, "watch said: %s", out);
    CHECK_MSG(strstr(out, "\"event\":\"expired\"") == NULL, "watch said: %s", out);
#endif
    leash_lock_free(holder);
    leash_lock_free(waiter);
    leash_client_free(a);
    leash_client_free(b);
    sw_down(&w);
}

/* The master SIGKILLed mid-hold with wait_replicas = 1: the replica that
 * is promoted acknowledged the hold, which is kept past the lease it had
 * at the kill; a second client that tries all along never gets it
 * meanwhile. The old master comes back (empty) once the new one is named,
 * and is made a replica: no lock command lands there. It comes back while
 * the hold still runs on what it had at the kill, because Sentinel makes
 * a returning master a replica only 8 s after it first reports itself a
 * master (4 x SENTINEL_PUBLISH_PERIOD, fixed), and waiting out the lease
 * first and those 8 s after it took this case 30 s. */
TEST(a_killed_master_keeps_the_hold_with_wait_replicas) {
    sworld w;
    leash_client *a, *b;
    leash_lock *holder;
    prober p;
    fx_result lost = {0};
    int m, n = -1, i;
    int64_t valid_until;
#ifdef LEASH_TEST_CLI
    char path[600], args[512], out[16384];
    pid_t watcher;
#endif

    sw_up(&w, NULL);
    a = sw_client(&w, 10000, 1);
    b = sw_client(&w, 10000, 0);
    holder = leash_lock_new(a, "kept");
    leash_on_lost(holder, fx_lost_cb, &lost);
    memset(&p, 0, sizeof p);
    p.l = leash_lock_new(b, "kept");
    p.holder = holder;
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
#ifdef LEASH_TEST_CLI
    /* `leash watch` loses its master and asks the sentinels again. */
    snprintf(path, sizeof path, "%s/watch-kill.out", test_tmpdir());
    snprintf(args, sizeof args, "-u redis+sentinel://%s,%s,%s/%s watch kept --json", w.text[0],
             w.text[1], w.text[2], TEST_SENTINEL_MASTER);
    watcher = cli_start(args, path);
    probe_for(&w, &p, 300);
#endif
    m = test_sentinel_master(&w.t);
    valid_until = test_now_ms() + leash_valid_ms(holder);
    CHECK_EQ_INT(test_redis_kill(&w.t.data[m]), 0);
    for (i = 0; i < FAILOVER_MS / 100 && (n = test_sentinel_new_master(&w.t, m)) < 0; i++)
        probe_for(&w, &p, 100);
    CHECK(n >= 0 && n != m);

    /* The old master returns empty, as a master, until Sentinel makes it
     * a replica: leash never takes it for the master. */
    CHECK_EQ_INT(test_redis_restart(&w.t.data[m]), 0);
    CHECK_EQ_INT(test_redis_int(&w.t.data[m], "CONFIG RESETSTAT") == -1, 1);
    /* Past the lease it had at the kill (a late lost timer included). */
    probe_for(&w, &p, valid_until + 1000 - test_now_ms());
    CHECK_EQ_INT(lost.calls, 0);
    CHECK(leash_held(holder));
    CHECK_EQ_INT(p.violations, 0);
    CHECK_EQ_INT(p.grants, 0);
    for (i = 0; i < FAILOVER_MS / 100 && !test_sentinel_is_replica(&w.t, m); i++)
        probe_for(&w, &p, 100);
    CHECK(test_sentinel_is_replica(&w.t, m));
    probe_for(&w, &p, 1000);
    CHECK_EQ_INT(fx_release_sync(w.loop, holder, 5000), LEASH_OK);
    probe_for(&w, &p, 1000);
    CHECK(p.grants > 0);
    CHECK_EQ_INT(p.violations, 0);
    CHECK_EQ_INT(script_calls(&w.t.data[m]), 0);
#ifdef LEASH_TEST_CLI
    cli_stop(watcher, path, out, sizeof out);
    snprintf(args, sizeof args,
             "\"event\":\"master\",\"source\":\"sentinel\",\"lock\":\"kept\","
             "\"address\":\"127.0.0.1:%d\"",
             w.t.data[n].port);
    CHECK_MSG(strstr(out, args) != NULL, "watch said: %s", out);
    CHECK_MSG(strstr(out, "\"event\":\"released\"") != NULL, "watch said: %s", out);
    CHECK_MSG(strstr(out, "\"event\":\"expired\"") == NULL, "watch said: %s", out);
#endif
    leash_lock_free(holder);
    leash_lock_free(p.l);
    leash_client_free(a);
    leash_client_free(b);
    sw_down(&w);
}

/* Without wait_replicas, a master killed before its replicas had the
 * grant: the promoted replica lacks the hold, and the holder learns it at
 * its next renewal (LEASH_LOST_EXPIRED), within the lease. */
TEST(a_killed_master_without_wait_replicas_loses_the_hold_it_lacked) {
    sworld w;
    leash_client *a;
    leash_lock *holder;
    fx_result lost = {0};
    int m, n = -1, i;
    int64_t killed_at;

    sw_up(&w, NULL);
    a = sw_client(&w, 8000, 0);
    holder = leash_lock_new(a, "lacked");
    leash_on_lost(holder, fx_lost_cb, &lost);
    m = test_sentinel_master(&w.t);
    /* The replicas do not get the grant: frozen, their links cut by the
     * master (the stream stops there, no kernel buffer holds the grant),
     * and the master dies before they thaw. */
    for (i = 0; i < w.t.ndata; i++)
        if (i != m)
            test_redis_freeze(&w.t.data[i]);
    freeReplyObject(test_redis_cmd(&w.t.data[m], "CLIENT KILL TYPE replica"));
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(test_redis_kill(&w.t.data[m]), 0);
    killed_at = test_now_ms();
    for (i = 0; i < w.t.ndata; i++)
        if (i != m)
            test_redis_thaw(&w.t.data[i]);
    for (i = 0; i < FAILOVER_MS / 100 && (n = test_sentinel_new_master(&w.t, m)) < 0; i++)
        fx_run_for(w.loop, 100);
    CHECK(n >= 0 && n != m);
    fx_run_until(w.loop, &lost, 8000 + TEST_SLACK_MS);
    CHECK_EQ_INT(lost.status, LEASH_LOST_EXPIRED);
    CHECK(lost.at_ms - killed_at < FAILOVER_MS + 8000);
    CHECK(!leash_held(holder));
    leash_lock_free(holder);
    leash_client_free(a);
    sw_down(&w);
}

/* What a killed master's failover costs a hold with wait_replicas = 1,
 * in ms after the kill: the sentinels name the new master, the other
 * replica is linked to it, and the first renewal that counts (a replica
 * acknowledged it) lands there. Watched for watch_ms, or less once all
 * three came and the hold is past the lease it had at the kill (and a
 * late lost timer): by then its losing it could no longer be missed. */
typedef struct follow_times {
    int64_t named, linked, counted, lost;
} follow_times;

static void kill_and_follow(sworld *w, leash_lock *holder, fx_result *lost, int64_t watch_ms,
                            follow_times *ft) {
    leash_lock_stats st;
    uint64_t renewals;
    int64_t killed_at, now, valid_until;
    int m, n = -1, other = -1, i;

    memset(ft, 0, sizeof *ft);
    m = test_sentinel_master(&w->t);
    CHECK(m >= 0);
    valid_until = test_now_ms() + leash_valid_ms(holder);
    CHECK_EQ_INT(test_redis_kill(&w->t.data[m]), 0);
    killed_at = test_now_ms();
    /* An answer the master sent before it died is not the new master's. */
    fx_run_for(w->loop, 5);
    leash_lock_stats(holder, &st);
    renewals = st.renewals;
    while ((now = test_now_ms()) < killed_at + watch_ms) {
        if (n < 0 && (n = test_sentinel_new_master(&w->t, m)) >= 0) {
            ft->named = now - killed_at;
            for (i = 0; i < w->t.ndata; i++)
                if (i != m && i != n)
                    other = i;
        }
        if (other >= 0 && ft->linked == 0 && test_sentinel_is_replica(&w->t, other))
            ft->linked = now - killed_at;
        leash_lock_stats(holder, &st);
        if (ft->counted == 0 && st.renewals > renewals)
            ft->counted = now - killed_at;
        if (lost->calls > 0 && ft->lost == 0)
            ft->lost = lost->at_ms - killed_at;
        if (ft->named > 0 && ft->linked > 0 && ft->counted > 0 && now > valid_until + 1000)
            break;
        fx_run_for(w->loop, 10);
    }
    fprintf(stderr,
            "failover: named %lld ms, other replica linked %lld ms, first renewal that counted "
            "%lld ms after the kill%s\n",
            (long long)ft->named, (long long)ft->linked, (long long)ft->counted,
            ft->lost ? " (the hold was lost)" : "");
    if (ft->lost)
        fprintf(stderr, "lost %d at %lld ms\n", lost->status, (long long)ft->lost);
}

/* A client of options o whose acquire fails `status`, with a log line
 * naming the first sentinel. */
static void refused_by_sentinels(sworld *w, const leash_options *o, int status) {
    leash_client *c;
    leash_lock *l;
    char name[96];

    fx_log_clear();
    c = fx_client_opts(w->loop, o);
    l = leash_lock_new(c, "refused");
    CHECK_EQ_INT(fx_acquire_sync(w->loop, l, 0, 8000), status);
    snprintf(name, sizeof name, "sentinel connection to 127.0.0.1:%d: ",
             w->t.cfg.tls_dir != NULL ? w->t.sentinel[0].tls_port : w->t.sentinel[0].port);
    CHECK(fx_log_contains(name));
    leash_lock_free(l);
    leash_client_free(c);
}

/* Sentinels with a password of their own, data nodes with an ACL user,
 * TLS to both (the sentinels name the data nodes' TLS ports): each side
 * takes its own credentials; a wrong sentinel password is LEASH_EAUTH,
 * and a CA that did not sign the sentinels' certificates LEASH_ETLS, each
 * with a log line naming the sentinel. */
TEST(sentinel_and_data_credentials_are_separate_over_tls) {
    test_sentinel_config cfg = {0};
    sworld w;
    leash_options o;
    leash_client *c;
    leash_lock *l;
    char name[96];
    int m;

    cfg.sentinel_password = "watchers-secret";
    cfg.data_user = "locker";
    cfg.data_password = "data-secret";
    cfg.tls_dir = test_tls_certs();
    CHECK(cfg.tls_dir != NULL);
    sw_up(&w, &cfg);
    m = test_sentinel_master(&w.t);
    CHECK(m >= 0);
    fx_log_clear();
    c = sw_client(&w, 5000, 1);
    l = leash_lock_new(c, "authed");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 5000), LEASH_OK);
    CHECK(script_calls(&w.t.data[m]) > 0);
    snprintf(name, sizeof name, "sentinel connection to 127.0.0.1:%d ready",
             w.t.sentinel[0].tls_port);
    CHECK(fx_log_contains(name));
    snprintf(name, sizeof name, "command connection to 127.0.0.1:%d ready", w.t.data[m].tls_port);
    CHECK(fx_log_contains(name));
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    leash_lock_free(l);
    leash_client_free(c);

    /* Another CA: no sentinel is trusted. */
    sw_options(&w, &o, 5000, 0);
    o.tls_ca_file = test_tls_file(1, "other-ca.pem");
    refused_by_sentinels(&w, &o, LEASH_ETLS);
    CHECK(fx_log_contains("certificate verify failed"));

    /* Wrong sentinel password. */
    sw_options(&w, &o, 5000, 0);
    o.sentinel_password = "wrong";
    refused_by_sentinels(&w, &o, LEASH_EAUTH);

    /* Right sentinel password, wrong data password. */
    sw_options(&w, &o, 5000, 0);
    o.password = "wrong";
    c = fx_client_opts(w.loop, &o);
    l = leash_lock_new(c, "authed");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 8000), LEASH_EAUTH);
    leash_lock_free(l);
    leash_client_free(c);
    sw_down(&w);
}

/* ---- a fake sentinel: it names whatever port the test says ---- */

/* What the test and the fake sentinel's process share (MAP_SHARED). */
typedef struct fake_shared {
    volatile int master_port; /* what get-master-addr-by-name names */
    /* The get-master-addr-by-name question of this number (1: the
     * first) is held, its answer made then, until the test sets
     * release: an answer on its way while a switch happens. 0: none. */
    volatile int hold_question;
    volatile int held;    /* 1 while the held question waits */
    volatile int release; /* set by the test: send the held answer */
    volatile int publish; /* bumped by the test: message to the subscribers */
    volatile int asked;   /* get-master-addr-by-name questions, every connection */
    char message[128];    /* a +switch-master message */
} fake_shared;

/* A process of the case's own that answers as a sentinel would: SENTINEL
 * get-master-addr-by-name names 127.0.0.1:master_port, SENTINEL sentinels
 * is empty, SUBSCRIBE is confirmed (and +switch-master messages come when
 * the test says), anything else is +OK. It lets a case name a replica as
 * the master, which real sentinels never do on purpose, and order a
 * switch and an answer as it likes. */
typedef struct fake_sentinel {
    pid_t pid;
    int port;
    fake_shared *sh;
} fake_sentinel;

static void fake_write(int fd, const char *out, int n) {
    if (n > 0 && write(fd, out, (size_t)n) != n)
        return;
}

static int fake_addr(char *out, size_t cap, int master_port) {
    char port[16];

    snprintf(port, sizeof port, "%d", master_port);
    return snprintf(out, cap, "*2\r\n$9\r\n127.0.0.1\r\n$%zu\r\n%s\r\n", strlen(port), port);
}

typedef struct fake_state {
    int questions;      /* get-master-addr-by-name questions so far */
    int held_fd;        /* -1, or where the held answer goes */
    int held_port;      /* what it names: the master when it was asked */
    int subscribed[16]; /* per connection, as struct pollfd p[] */
} fake_state;

static void fake_answer(fake_shared *sh, fake_state *st, int slot, int fd, const redisReply *r) {
    char out[256];
    int n;
    size_t i;

    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1)
        return;
    if (r->elements >= 2 && strcasecmp(r->element[0]->str, "SENTINEL") == 0 &&
        strcasecmp(r->element[1]->str, "get-master-addr-by-name") == 0) {
        sh->asked++;
        if (++st->questions == sh->hold_question) {
            st->held_fd = fd;
            st->held_port = sh->master_port;
            sh->held = 1;
            return;
        }
        n = fake_addr(out, sizeof out, sh->master_port);
    } else if (strcasecmp(r->element[0]->str, "SENTINEL") == 0) {
        n = snprintf(out, sizeof out, "*0\r\n");
    } else if (strcasecmp(r->element[0]->str, "SUBSCRIBE") == 0) {
        st->subscribed[slot] = 1;
        for (i = 1; i < r->elements; i++) {
            n = snprintf(out, sizeof out, "*3\r\n$9\r\nsubscribe\r\n$%zu\r\n%s\r\n:%zu\r\n",
                         r->element[i]->len, r->element[i]->str, i);
            fake_write(fd, out, n);
        }
        return;
    } else {
        n = snprintf(out, sizeof out, "+OK\r\n");
    }
    fake_write(fd, out, n);
}

/* What the test asked for since the last look: the held answer, a
 * message to every subscriber. */
static void fake_poke(fake_shared *sh, fake_state *st, const struct pollfd *p, int n,
                      int *published) {
    char out[256];
    int i, len;

    if (st->held_fd >= 0 && sh->release) {
        fake_write(st->held_fd, out, fake_addr(out, sizeof out, st->held_port));
        st->held_fd = -1;
        sh->held = 0;
    }
    if (*published == sh->publish)
        return;
    *published = sh->publish;
    len =
        snprintf(out, sizeof out, "*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n$%zu\r\n%s\r\n",
                 strlen(sh->message), sh->message);
    for (i = 1; i < n; i++)
        if (st->subscribed[i])
            fake_write(p[i].fd, out, len);
}

static void fake_serve(int lfd, fake_shared *sh) {
    struct pollfd p[16];
    redisReader *rd[16];
    fake_state st = {0, -1, 0, {0}};
    int n = 1, i, published = 0;

    p[0].fd = lfd;
    p[0].events = POLLIN;
    for (;;) {
        /* Every 5 ms a look at what the test asked for. */
        if (poll(p, (nfds_t)n, 5) < 0)
            continue;
        fake_poke(sh, &st, p, n, &published);
        if ((p[0].revents & POLLIN) && n < 16) {
            int fd = accept(lfd, NULL, NULL);
            if (fd >= 0) {
                p[n].fd = fd;
                p[n].events = POLLIN;
                p[n].revents = 0;
                rd[n] = redisReaderCreate();
                st.subscribed[n] = 0;
                n++;
            }
        }
        for (i = 1; i < n; i++) {
            char buf[4096];
            ssize_t got;
            void *reply;
            if (!(p[i].revents & (POLLIN | POLLHUP)))
                continue;
            got = read(p[i].fd, buf, sizeof buf);
            if (got <= 0) {
                if (p[i].fd == st.held_fd)
                    st.held_fd = -1;
                close(p[i].fd);
                redisReaderFree(rd[i]);
                p[i] = p[n - 1];
                rd[i] = rd[n - 1];
                st.subscribed[i] = st.subscribed[n - 1];
                n--;
                i--;
                continue;
            }
            redisReaderFeed(rd[i], buf, (size_t)got);
            while (redisReaderGetReply(rd[i], &reply) == REDIS_OK && reply != NULL) {
                fake_answer(sh, &st, i, p[i].fd, reply);
                freeReplyObject(reply);
            }
        }
    }
}

static void fake_start(fake_sentinel *f, int master_port) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    pid_t parent = getpid();

    CHECK(lfd >= 0);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(lfd, 16) == 0);
    CHECK(getsockname(lfd, (struct sockaddr *)&a, &len) == 0);
    f->port = ntohs(a.sin_port);
    f->sh = mmap(NULL, sizeof *f->sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(f->sh != MAP_FAILED);
    memset(f->sh, 0, sizeof *f->sh);
    f->sh->master_port = master_port;
    f->pid = fork();
    CHECK(f->pid >= 0);
    if (f->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(0);
        fake_serve(lfd, f->sh);
        _exit(0);
    }
    close(lfd);
}

static void fake_stop(fake_sentinel *f) {
    kill(f->pid, SIGKILL);
    waitpid(f->pid, NULL, 0);
    munmap(f->sh, sizeof *f->sh);
}

/* A client of one fake sentinel, with pub/sub as asked. */
static leash_client *fake_client(fx_loop *loop, const fake_sentinel *f, char *node, size_t cap,
                                 const char **nodes, int pubsub) {
    leash_options o;

    snprintf(node, cap, "127.0.0.1:%d", f->port);
    nodes[0] = node;
    fx_fault_options(&o, 1, 5000);
    o.pubsub = pubsub;
    o.topology = LEASH_TOPOLOGY_SENTINEL;
    o.nodes = nodes;
    o.nodes_count = 1;
    o.sentinel_master = "mymaster";
    return fx_client_opts(loop, &o);
}

/* A replica named as the master: ROLE refuses it before any lock command,
 * and the client asks again until the sentinel names the master. Then the
 * master demoted under a connected client: -READONLY answers its script,
 * the connection goes back to the sentinel, and the acquire is granted at
 * the new master. */
TEST(a_replica_named_as_master_is_refused_and_readonly_sends_back) {
    test_redis master, replica;
    test_redis_config rc = {0};
    char extra[128], node[32];
    const char *nodes[1] = {node};
    fake_sentinel f;
    fx_loop *loop = fx_loop_new();
    leash_client *c;
    leash_lock *l;
    fx_result res = {0};

    CHECK_EQ_INT(test_redis_start(&master, NULL), 0);
    snprintf(extra, sizeof extra, "replicaof 127.0.0.1 %d", master.port);
    rc.extra = extra;
    CHECK_EQ_INT(test_redis_start(&replica, &rc), 0);
    fake_start(&f, replica.port);
    fx_log_clear();
    c = fake_client(loop, &f, node, sizeof node, nodes, LEASH_PUBSUB_AUTO);
    l = leash_lock_new(c, "refused");
    CHECK_EQ_INT(leash_acquire(l, 5000, fx_acquire_cb, &res), LEASH_OK);
    fx_run_for(loop, 500);
    CHECK_EQ_INT(res.calls, 0);
    CHECK(fx_log_contains("ROLE says slave, not master"));
    CHECK_EQ_INT(script_calls(&replica), 0);
    f.sh->master_port = master.port;
    fx_run_until(loop, &res, 5000);
    CHECK_EQ_INT(res.status, LEASH_OK);
    CHECK(script_calls(&master) > 0);
    CHECK_EQ_INT(fx_release_sync(loop, l, 3000), LEASH_OK);

    /* The master becomes a replica of the other, which becomes a master;
     * the sentinel names it. */
    freeReplyObject(test_redis_cmd(&replica, "REPLICAOF NO ONE"));
    freeReplyObject(test_redis_cmd(&master, "REPLICAOF 127.0.0.1 %d", replica.port));
    f.sh->master_port = replica.port;
    fx_log_clear();
    memset(&res, 0, sizeof res);
    CHECK_EQ_INT(leash_acquire(l, 5000, fx_acquire_cb, &res), LEASH_OK);
    fx_run_until(loop, &res, 5000);
    CHECK_EQ_INT(res.status, LEASH_OK);
    CHECK(script_calls(&replica) > 0);
    CHECK(fx_log_contains("READONLY"));
    CHECK_EQ_INT(fx_release_sync(loop, l, 3000), LEASH_OK);
    leash_lock_free(l);
    leash_client_free(c);
    fx_loop_free(loop);
    fake_stop(&f);
    test_redis_stop(&replica);
    test_redis_stop(&master);
}

/* Runs the loop until *flag is want, at most timeout_ms. */
static void run_until_flag(fx_loop *loop, volatile int *flag, int want, int64_t timeout_ms) {
    int64_t until = test_now_ms() + timeout_ms;

    while (*flag != want && test_now_ms() < until)
        fx_run_for(loop, 5);
}

/* A get-master-addr-by-name answer made before a +switch-master and read
 * after it names the old master, which (a failover of a live master)
 * still takes writes until the sentinels reconfigure it: the client must
 * stay at the master the switch named. Two independent masters stand for
 * the old and the new one. */
TEST(a_discovery_answer_from_before_a_switch_is_not_followed) {
    test_redis old_master, new_master;
    char node[32], says[128];
    const char *nodes[1];
    fake_sentinel f;
    fx_loop *loop = fx_loop_new();
    leash_client *c;
    leash_lock *l;
    int64_t until;

    CHECK_EQ_INT(test_redis_start(&old_master, NULL), 0);
    CHECK_EQ_INT(test_redis_start(&new_master, NULL), 0);
    fake_start(&f, old_master.port);
    /* The first question finds the old master; the second, asked when the
     * subscription is confirmed, is the one whose answer is late. */
    f.sh->hold_question = 2;
    fx_log_clear();
    c = fake_client(loop, &f, node, sizeof node, nodes, LEASH_PUBSUB_AUTO);
    run_until_flag(loop, &f.sh->held, 1, 5000);
    CHECK_EQ_INT(f.sh->held, 1);

    snprintf((char *)f.sh->message, sizeof f.sh->message, "mymaster 127.0.0.1 %d 127.0.0.1 %d",
             old_master.port, new_master.port);
    f.sh->master_port = new_master.port;
    f.sh->publish++;
    until = test_now_ms() + 5000;
    while (!fx_log_contains("+switch-master") && test_now_ms() < until)
        fx_run_for(loop, 5);
    CHECK(fx_log_contains("+switch-master"));
    f.sh->release = 1;
    run_until_flag(loop, &f.sh->held, 0, 5000);
    CHECK_EQ_INT(f.sh->held, 0);
    fx_run_for(loop, 300);

    l = leash_lock_new(c, "switched");
    CHECK_EQ_INT(fx_acquire_sync(loop, l, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(script_calls(&old_master), 0);
    CHECK(script_calls(&new_master) > 0);
    snprintf(says, sizeof says, "answered 127.0.0.1:%d, asked before the switch", old_master.port);
    CHECK(fx_log_contains(says));
    CHECK_EQ_INT(fx_release_sync(loop, l, 3000), LEASH_OK);
    leash_lock_free(l);
    leash_client_free(c);
    fx_loop_free(loop);
    fake_stop(&f);
    test_redis_stop(&new_master);
    test_redis_stop(&old_master);
}

/* LEASH_PUBSUB_SHARDED through Sentinel: the master's subscriptions and
 * the locks' messages go by one choice, so a release's SPUBLISH reaches
 * the other client's SSUBSCRIBE and lets its waiter in at once, not when
 * the lease (5000 ms, renewed) runs out. */
TEST(sharded_pubsub_through_sentinel_wakes_the_waiter_at_once) {
    test_redis master;
    char node_a[32], node_b[32];
    const char *nodes_a[1], *nodes_b[1];
    fake_sentinel f;
    fx_loop *loop = fx_loop_new();
    leash_client *a, *b;
    leash_lock *holder, *waiter;
    fx_result woken = {0};
    int64_t released_at;

    CHECK_EQ_INT(test_redis_start(&master, NULL), 0);
    fake_start(&f, master.port);
    a = fake_client(loop, &f, node_a, sizeof node_a, nodes_a, LEASH_PUBSUB_SHARDED);
    b = fake_client(loop, &f, node_b, sizeof node_b, nodes_b, LEASH_PUBSUB_SHARDED);
    holder = leash_lock_new(a, "sharded");
    waiter = leash_lock_new(b, "sharded");
    CHECK_EQ_INT(fx_acquire_sync(loop, holder, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(waiter, LEASH_WAIT_FOREVER, fx_acquire_cb, &woken), LEASH_OK);
    fx_run_for(loop, 500);
    CHECK_EQ_INT(woken.calls, 0);
    released_at = test_now_ms();
    CHECK_EQ_INT(fx_release_sync(loop, holder, 3000), LEASH_OK);
    fx_run_until(loop, &woken, 8000);
    CHECK_EQ_INT(woken.status, LEASH_OK);
    CHECK(woken.at_ms - released_at < 1000 + TEST_SLACK_MS);
    CHECK_EQ_INT(fx_release_sync(loop, waiter, 3000), LEASH_OK);
    leash_lock_free(waiter);
    leash_lock_free(holder);
    leash_client_free(b);
    leash_client_free(a);
    fx_loop_free(loop);
    fake_stop(&f);
    test_redis_stop(&master);
}

/* LEASH_PUBSUB_OFF through Sentinel: no subscriber connection to the
 * master (also after the sentinels named it), the waiter polls and gets
 * the lock within the backoff of the release. */
TEST(polling_through_sentinel_finds_the_release) {
    test_redis master;
    char node_a[32], node_b[32];
    const char *nodes_a[1], *nodes_b[1];
    fake_sentinel f;
    fx_loop *loop = fx_loop_new();
    leash_client *a, *b;
    leash_lock *holder, *waiter;
    fx_result woken = {0};
    leash_stats st;
    int64_t released_at;

    CHECK_EQ_INT(test_redis_start(&master, NULL), 0);
    fake_start(&f, master.port);
    a = fake_client(loop, &f, node_a, sizeof node_a, nodes_a, LEASH_PUBSUB_AUTO);
    b = fake_client(loop, &f, node_b, sizeof node_b, nodes_b, LEASH_PUBSUB_OFF);
    holder = leash_lock_new(a, "polled");
    waiter = leash_lock_new(b, "polled");
    CHECK_EQ_INT(fx_acquire_sync(loop, holder, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(waiter, LEASH_WAIT_FOREVER, fx_acquire_cb, &woken), LEASH_OK);
    fx_run_for(loop, 1000);
    CHECK_EQ_INT(woken.calls, 0);
    leash_client_stats(b, &st);
    CHECK_EQ_INT((long long)st.subscriptions, 0);
    /* The only subscriber connection is the one to the sentinel (its
     * +switch-master); the master saw no SUBSCRIBE. */
    CHECK(st.sub_connects <= 1);
    CHECK_EQ_INT(test_redis_calls(&master, "subscribe"), 0);
    CHECK(st.polls >= 3);
    released_at = test_now_ms();
    CHECK_EQ_INT(fx_release_sync(loop, holder, 3000), LEASH_OK);
    fx_run_until(loop, &woken, 3000);
    CHECK_EQ_INT(woken.status, LEASH_OK);
    CHECK(woken.at_ms - released_at < LEASH_POLL_MAX_MS + TEST_SLACK_MS);
    CHECK_EQ_INT(fx_release_sync(loop, waiter, 3000), LEASH_OK);
    leash_lock_free(waiter);
    leash_lock_free(holder);
    leash_client_free(b);
    leash_client_free(a);
    fx_loop_free(loop);
    fake_stop(&f);
    test_redis_stop(&master);
}

#ifdef LEASH_TEST_CLI
/* Runs the leash tool with args; its exit status, its output in out. */
static int run_cli(const char *args, char *out, size_t cap) {
    char cmd[1024];
    FILE *f;
    size_t n;
    int st;

    snprintf(cmd, sizeof cmd, "%s %s 2>&1", LEASH_TEST_CLI, args);
    f = popen(cmd, "r");
    CHECK(f != NULL);
    n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A multi-lock through Sentinel is on one server: its members go in one
 * script, all or none, and come back to the master's Redis as mutexes. */
TEST(a_multi_lock_through_sentinel_takes_its_members_in_one_script) {
    const char *names[] = {"debit", "credit", "ledger"};
    sworld w;
    leash_client *c;
    leash_lock *m, *other;
    int master;

    sw_up(&w, NULL);
    master = test_sentinel_master(&w.t);
    CHECK(master >= 0);
    c = sw_client(&w, 5000, 0);
    m = leash_multi_lock_new(c, names, 3);
    other = leash_lock_new(c, "credit");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 5000), LEASH_OK); /* the script is loaded */
    CHECK_EQ_INT(fx_release_sync(w.loop, m, 5000), LEASH_OK);
    CHECK_EQ_INT(test_redis_int(&w.t.data[master], "CONFIG RESETSTAT") == -1, 1);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(script_calls(&w.t.data[master]), 1);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, other, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(fx_release_sync(w.loop, m, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, other, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(fx_release_sync(w.loop, other, 5000), LEASH_OK);
    leash_lock_free(m);
    leash_lock_free(other);
    leash_client_free(c);
    sw_down(&w);
}

/* The tool through a redis+sentinel:// URL (the first sentinel down):
 * ls, show and release --force reach the master the sentinels name. */
TEST(the_tool_reads_and_releases_through_sentinel) {
    sworld w;
    leash_client *a;
    leash_lock *holder;
    fx_result lost = {0};
    char url[256], args[512], out[8192];

    sw_up(&w, NULL);
    a = sw_client(&w, 10000, 0);
    holder = leash_lock_new(a, "cli-held");
    leash_on_lost(holder, fx_lost_cb, &lost);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
    test_redis_kill(&w.t.sentinel[0]);
    snprintf(url, sizeof url, "redis+sentinel://%s,%s,%s/%s", w.text[0], w.text[1], w.text[2],
             TEST_SENTINEL_MASTER);
    snprintf(args, sizeof args, "-u %s ls", url);
    CHECK_EQ_INT(run_cli(args, out, sizeof out), 0);
    CHECK_MSG(strstr(out, "cli-held") != NULL, "ls said: %s", out);
    snprintf(args, sizeof args, "-u %s show cli-held", url);
    CHECK_EQ_INT(run_cli(args, out, sizeof out), 0);
    snprintf(args, sizeof args, "-u %s release --force --yes cli-held < /dev/null", url);
    CHECK_EQ_INT(run_cli(args, out, sizeof out), 0);
    fx_run_until(w.loop, &lost, 10000 + TEST_SLACK_MS);
    CHECK_EQ_INT(lost.status, LEASH_LOST_EXPIRED);
    snprintf(args, sizeof args, "-u redis+sentinel://%s/nosuchmaster ls", w.text[1]);
    CHECK_EQ_INT(run_cli(args, out, sizeof out), 3);
    leash_lock_free(holder);
    leash_client_free(a);
    sw_down(&w);
}
#endif

/* A sentinel that names a wrong master, listed first: a replica (ROLE
 * refuses it), then a dead address. The client asks the others and is
 * granted at the master they name, the liar asked again only after them;
 * the tool, through the same list, tries the next sentinel too. */
TEST(a_sentinel_naming_a_wrong_master_goes_behind_the_others) {
    sworld w;
    fake_sentinel f;
    const char *nodes[TEST_SENTINEL_MAX_SENTINELS + 1];
    char liar[32];
    leash_options o;
    leash_client *c;
    leash_lock *l;
    int m, r, i, k, dead;
#ifdef LEASH_TEST_CLI
    char args[512], out[8192];
#endif

    sw_up(&w, NULL);
    m = test_sentinel_master(&w.t);
    CHECK(m >= 0);
    r = m == 0 ? 1 : 0;
    dead = test_redis_free_port();
    fake_start(&f, w.t.data[r].port);
    snprintf(liar, sizeof liar, "127.0.0.1:%d", f.port);
    nodes[0] = liar;
    for (i = 0; i < w.t.nsentinels; i++)
        nodes[i + 1] = w.nodes[i];
    for (k = 0; k < 2; k++) {
        /* k 0: a replica; k 1: an address where nothing listens. */
        f.sh->master_port = k == 0 ? w.t.data[r].port : dead;
        f.sh->asked = 0;
        sw_options(&w, &o, 5000, 0);
        o.nodes = nodes;
        o.nodes_count = w.t.nsentinels + 1;
        fx_log_clear();
        c = fx_client_opts(w.loop, &o);
        l = leash_lock_new(c, "liar");
        CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 10000, 12000), LEASH_OK);
        CHECK(fx_log_contains("asked after the others now"));
        CHECK_MSG(f.sh->asked <= 2, "the liar was asked %d times", f.sh->asked);
        CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
        leash_lock_free(l);
        leash_client_free(c);
    }
    CHECK(script_calls(&w.t.data[m]) > 0);
    CHECK_EQ_INT(script_calls(&w.t.data[r]), 0);
#ifdef LEASH_TEST_CLI
    c = fx_client_opts(w.loop, &o);
    l = leash_lock_new(c, "liar");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 10000, 12000), LEASH_OK);
    for (k = 0; k < 2; k++) {
        f.sh->master_port = k == 0 ? w.t.data[r].port : dead;
        snprintf(args, sizeof args, "-u redis+sentinel://%s,%s,%s/%s show liar", liar, w.text[0],
                 w.text[1], TEST_SENTINEL_MASTER);
        i = run_cli(args, out, sizeof out);
        CHECK_MSG(i == 0, "show exit %d: %s", i, out);
    }
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    leash_lock_free(l);
    leash_client_free(c);
#endif
    fake_stop(&f);
    sw_down(&w);
}

/* Refusals of the +switch-master subscription at ERROR level. */
static int subscribe_errors;

static void count_subscribe_errors(int level, const char *msg, void *arg) {
    if (level == LEASH_LOG_ERROR && strstr(msg, "refused SUBSCRIBE") != NULL)
        subscribe_errors++;
    fx_log_cb(level, msg, arg);
}

/* Discovery rounds in the case's log. */
static int rounds_in_log(void) {
    const char *p = fx_log_text();
    int n = 0;

    while ((p = strstr(p, "=> ASK (")) != NULL) {
        n++;
        p++;
    }
    return n;
}

/* The sentinels' ACL user as the README said before channels were named:
 * Redis 7 users start with resetchannels (said here for 6.2, whose default
 * is allchannels), so SUBSCRIBE +switch-master gets NOPERM. That is one error line, then the
 * subscription is tried again after a backoff, without a reset or a discovery round each time
 * (which polled the sentinels); the channels the README names now let it in. */
TEST(a_sentinel_user_without_channels_is_one_error_not_a_discovery_loop) {
    sworld w;
    leash_options o;
    leash_client *c;
    leash_lock *l;
    int i, rounds;
    redisReply *r;
    int64_t until;
#ifdef LEASH_TEST_CLI
    char path[600], args[512], out[16384];
    const char *p;
    pid_t watcher;
#endif

    sw_up(&w, NULL);
    for (i = 0; i < w.t.nsentinels; i++) {
        r = test_redis_cmd(&w.t.sentinel[i],
                           "ACL SETUSER watcher on >watch-secret resetchannels "
                           "+sentinel|get-master-addr-by-name +sentinel|sentinels +subscribe");
        CHECK(r != NULL && r->type == REDIS_REPLY_STATUS);
        freeReplyObject(r);
    }
    sw_options(&w, &o, 5000, 0);
    o.sentinel_username = "watcher";
    o.sentinel_password = "watch-secret";
    o.reconnect_max_ms = 1000;
    o.log_cb = count_subscribe_errors;
    subscribe_errors = 0;
    fx_log_clear();
    c = fx_client_opts(w.loop, &o);
    l = leash_lock_new(c, "acl");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 5000), LEASH_OK);
#ifdef LEASH_TEST_CLI
    /* `leash watch` with the same user: said once, asked again later. */
    snprintf(path, sizeof path, "%s/watch-acl.out", test_tmpdir());
    snprintf(
        args, sizeof args,
        "-u 'redis+sentinel://%s,%s,%s/%s?sentinel_user=watcher&sentinel_password=watch-secret' "
        "watch acl",
        w.text[0], w.text[1], w.text[2], TEST_SENTINEL_MASTER);
    watcher = cli_start(args, path);
#endif
    fx_run_for(w.loop, 6000);
    rounds = rounds_in_log();
#ifdef LEASH_TEST_CLI
    cli_stop(watcher, path, out, sizeof out);
    for (i = 0, p = out; (p = strstr(p, "NOPERM")) != NULL; p++)
        i++;
    CHECK_MSG(i == 1, "watch said NOPERM %d times: %s", i, out);
#endif
    CHECK_MSG(subscribe_errors == 1, "%d ERROR lines for the refused SUBSCRIBE", subscribe_errors);
    CHECK(fx_log_contains("NOPERM"));
    CHECK(fx_log_contains("the sentinel user needs &+switch-master &+promoted-slave"));
    CHECK_MSG(rounds <= 2, "%d discovery rounds in 6 s", rounds);

    /* The README's line: the retry is let in. */
    for (i = 0; i < w.t.nsentinels; i++) {
        r = test_redis_cmd(&w.t.sentinel[i],
                           "ACL SETUSER watcher &+switch-master &+promoted-slave");
        CHECK(r != NULL && r->type == REDIS_REPLY_STATUS);
        freeReplyObject(r);
    }
    until = test_now_ms() + 9000 + TEST_SLACK_MS;
    while (!fx_log_contains("accepted now") && test_now_ms() < until)
        fx_run_for(w.loop, 20);
    CHECK(fx_log_contains("accepted now"));
    CHECK_EQ_INT(subscribe_errors, 1);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    leash_lock_free(l);
    leash_client_free(c);
    sw_down(&w);
}

/* The failover a hold with wait_replicas = 1 must outlive (docs/sentinel.md "Redis
 * Sentinel"): its renewals count again only once the replica that was not
 * promoted is linked to the new master and acknowledges them, and until
 * then the hold stands on the last renewal that counted before the kill.
 * With down-after 1000 ms, the 6 s lease (renewed every 2 s) keeps
 * it when that takes less than 6000 - 2000 - 62 ms. The case says how long
 * each step took; the first renewal that counts comes right after the
 * other replica is linked (leash is already at the new master). */
TEST(a_killed_master_keeps_a_hold_whose_lease_outlasts_the_failover) {
    test_sentinel_config cfg = {0};
    sworld w;
    leash_client *a;
    leash_lock *holder;
    fx_result lost = {0};
    follow_times ft;

    cfg.down_after_ms = 1000;
    sw_up(&w, &cfg);
    a = sw_client(&w, 6000, 1);
    holder = leash_lock_new(a, "followed");
    leash_on_lost(holder, fx_lost_cb, &lost);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 5000), LEASH_OK);
    /* Anywhere in the renewal interval. */
    fx_run_for(w.loop, 500 + (int64_t)(test_now_ms() % 2000));
    kill_and_follow(&w, holder, &lost, 8000, &ft);
    CHECK_EQ_INT(lost.calls, 0);
    CHECK(leash_held(holder));
    CHECK(ft.named > 0 && ft.linked > 0 && ft.counted > 0);
    CHECK(ft.counted < 6000 - 2000 - 62);
    CHECK(ft.counted + 250 >= ft.linked); /* a poll apart at most */
    CHECK_MSG(ft.counted - ft.linked < 500 + TEST_SLACK_MS,
              "the first renewal that counted came %lld ms after the replica was linked",
              (long long)(ft.counted - ft.linked));
    CHECK_EQ_INT(fx_release_sync(w.loop, holder, 3000), LEASH_OK);
    leash_lock_free(holder);
    leash_client_free(a);
    sw_down(&w);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(discovery_through_any_one_sentinel_while_the_others_are_down),
        TEST_CASE(a_failover_asked_for_keeps_the_hold_and_wakes_the_waiter),
        TEST_CASE(a_killed_master_keeps_the_hold_with_wait_replicas),
        TEST_CASE(a_killed_master_without_wait_replicas_loses_the_hold_it_lacked),
        TEST_CASE(sentinel_and_data_credentials_are_separate_over_tls),
        TEST_CASE(a_replica_named_as_master_is_refused_and_readonly_sends_back),
        TEST_CASE(a_discovery_answer_from_before_a_switch_is_not_followed),
        TEST_CASE(sharded_pubsub_through_sentinel_wakes_the_waiter_at_once),
        TEST_CASE(polling_through_sentinel_finds_the_release),
        TEST_CASE(a_sentinel_naming_a_wrong_master_goes_behind_the_others),
        TEST_CASE(a_sentinel_user_without_channels_is_one_error_not_a_discovery_loop),
        TEST_CASE(a_killed_master_keeps_a_hold_whose_lease_outlasts_the_failover),
#ifdef LEASH_TEST_CLI
        TEST_CASE(a_multi_lock_through_sentinel_takes_its_members_in_one_script),
        TEST_CASE(the_tool_reads_and_releases_through_sentinel),
#endif
        {0},
    };
    return fx_main(argc, argv, cases);
}
