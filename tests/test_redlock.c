/* SPDX-License-Identifier: MIT */
#define _DEFAULT_SOURCE 1 /* usleep */
/*
 * Redlock (LEASH_TOPOLOGY_REDLOCK) on 5 real redis-servers that each case
 * starts: exclusion and fences, servers killed and frozen under a hold, a
 * split vote, and fences across many handoffs while servers die and come
 * back after the delayed restart the Redlock algorithm asks for; the same
 * on servers whose clocks are 10 s ahead and behind, and where fences go
 * back then (docs/redlock.md "Redlock").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "check.h"
#include "fixture.h"
#include "proxy.h"

enum {
    N = 5
};

typedef struct rworld {
    test_redis s[N];
    fx_loop *loop;
    const char *seeds[N];
    char text[N][32];
} rworld;

static void rw_up(rworld *w) {
    int i;

    memset(w, 0, sizeof(*w));
    for (i = 0; i < N; i++)
        CHECK_EQ_INT(test_redis_start(&w->s[i], NULL), 0);
    w->loop = fx_loop_new();
}

static void rw_down(rworld *w) {
    int i;

    fx_loop_free(w->loop);
    for (i = 0; i < N; i++)
        test_redis_stop(&w->s[i]);
}

/* Options for a client of the N servers, through ports[] (the servers' own
 * ports, or proxies in front of them). */
static void redlock_options(rworld *w, leash_options *o, const int *ports, int64_t lease_ms) {
    int i;

    fx_fault_options(o, ports[0], lease_ms);
    o->command_timeout_ms = 500;
    o->connect_timeout_ms = 500;
    for (i = 0; i < N; i++) {
        snprintf(w->text[i], sizeof(w->text[i]), "127.0.0.1:%d", ports[i]);
        w->seeds[i] = w->text[i];
    }
    o->topology = LEASH_TOPOLOGY_REDLOCK;
    o->nodes = w->seeds;
    o->nodes_count = N;
}

static leash_client *rw_client_of(rworld *w, int64_t lease_ms, int dialect) {
    leash_options o;
    int ports[N], i;
    leash_client *c;

    for (i = 0; i < N; i++)
        ports[i] = w->s[i].port;
    redlock_options(w, &o, ports, lease_ms);
    o.dialect = dialect;
    c = fx_client_opts(w->loop, &o);
    fx_wait_every_server(w->loop, c, N, 5000);
    return c;
}

static leash_client *rw_client(rworld *w, int64_t lease_ms) {
    return rw_client_of(w, lease_ms, LEASH_DIALECT_LEASH);
}

/* Runs the loop until l was renewed once more than `renewals` times, at
 * most ms: the renewal a check waits for, not a fixed sleep past it. */
static void run_until_renewed(rworld *w, leash_lock *l, uint64_t renewals, int64_t ms) {
    int64_t end = test_now_ms() + ms;

    while (leash_renewals(l) <= renewals && test_now_ms() < end)
        fx_run_for(w->loop, 10);
}

/* Servers whose lock key `key` holds a value. */
static int holding_servers(rworld *w, const char *key) {
    int i, n = 0;

    for (i = 0; i < N; i++)
        if (w->s[i].pid != 0 && test_redis_int(&w->s[i], "EXISTS %s", key) == 1)
            n++;
    return n;
}

/* A storage stand-in that refuses writes with a fence below the largest it
 * has seen. */
static uint64_t storage_fence;
static int storage_write(uint64_t fence) {
    if (fence < storage_fence)
        return -1;
    storage_fence = fence;
    return 0;
}

TEST(two_clients_exclude_each_other_and_fences_grow) {
    rworld w;
    leash_client *a, *b;
    leash_lock *la, *lb;
    uint64_t last = 0;
    int i, held_on;

    rw_up(&w);
    a = rw_client(&w, 3000);
    b = rw_client(&w, 3000);
    la = leash_lock_new(a, "ex");
    lb = leash_lock_new(b, "ex");
    for (i = 0; i < 50; i++) {
        leash_lock *mine = i % 2 ? lb : la, *theirs = i % 2 ? la : lb;
        CHECK_EQ_INT(fx_acquire_sync(w.loop, mine, 0, 3000), LEASH_OK);
        CHECK_MSG(leash_fence(mine) > last, "fence %llu after %llu",
                  (unsigned long long)leash_fence(mine), (unsigned long long)last);
        last = leash_fence(mine);
        CHECK(leash_valid_ms(mine) > 0 && leash_valid_ms(mine) <= 3000);
        /* A majority decides the grant, and copies not yet written then are
         * dropped (quorum.c, drop_cmds): on a loaded machine the hold may
         * live on 3 or 4 of the 5 (seen, and still so a second later). */
        held_on = holding_servers(&w, "leash:ex");
        CHECK_MSG(held_on > N / 2, "held on %d of %d servers", held_on, N);
        CHECK_EQ_INT(fx_acquire_sync(w.loop, theirs, 0, 3000), LEASH_EBUSY);
        CHECK_EQ_INT(fx_release_sync(w.loop, mine, 3000), LEASH_OK);
    }
    CHECK_EQ_INT(holding_servers(&w, "leash:ex"), 0);
    leash_client_free(a);
    leash_client_free(b);
    rw_down(&w);
}

/* The name of the fence floor of lock key `key` (untagged, under 60
 * bytes): the companion key \0 {key} "fence" (dialect/leash.c). Its
 * length. */
static size_t floor_name(const char *key, char *name) {
    size_t klen = strlen(key), len;

    memcpy(name, key, klen);
    len = klen;
    name[len++] = '\0';
    name[len++] = '{';
    memcpy(name + len, key, klen);
    len += klen;
    name[len++] = '}';
    memcpy(name + len, "fence", 5);
    return len + 5;
}

/* The floor of `key` on server i; 0 when it has none. */
static uint64_t floor_on(rworld *w, int i, const char *key) {
    char name[128];
    size_t len = floor_name(key, name);
    redisReply *r;
    uint64_t v = 0;

    r = test_redis_cmd(&w->s[i], "GET %b", name, len);
    if (r != NULL && r->type == REDIS_REPLY_STRING)
        v = strtoull(r->str, NULL, 10);
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

static void set_floor(rworld *w, int i, const char *key, uint64_t fence) {
    char name[128], val[24];
    size_t len = floor_name(key, name);
    redisReply *r;

    snprintf(val, sizeof(val), "%llu", (unsigned long long)fence);
    r = test_redis_cmd(&w->s[i], "SET %b %s PX 60000", name, len, val);
    CHECK(r != NULL && r->type == REDIS_REPLY_STATUS);
    if (r != NULL)
        freeReplyObject(r);
}

static long long scripts_everywhere(rworld *w) {
    long long n = 0;
    int i;

    for (i = 0; i < N; i++)
        n += test_redis_calls(&w->s[i], "evalsha") + test_redis_calls(&w->s[i], "eval");
    return n;
}

/* Servers whose floor for `key` is at least fence. */
static int floors_at_least(rworld *w, const char *key, uint64_t fence) {
    int i, n = 0;

    for (i = 0; i < N; i++)
        n += floor_on(w, i, key) >= fence;
    return n;
}

/* The attempt proposes one fence to every server, and servers with no
 * floor above it grant it and write it as their floor: a new hold is one
 * round, N scripts, with no fence raise after it (there was one after
 * every grant: N + M..N scripts), and still a majority's floor holds the
 * fence, and the next holder's (another client's) is larger. In both
 * dialects (Redisson's keeps the fence in the floor only). */
TEST(a_grant_whose_fences_agree_takes_no_raise) {
    rworld w;
    leash_client *a, *b;
    leash_lock *la, *lb;
    long long before;
    uint64_t fa;
    int i;

    rw_up(&w);
    a = rw_client(&w, 30000);
    b = rw_client_of(&w, 30000, LEASH_DIALECT_REDISSON);
    la = leash_lock_new(a, "agree");
    lb = leash_lock_new(b, "agree");
    for (i = 0; i < 5; i++) {
        before = scripts_everywhere(&w);
        CHECK_EQ_INT(fx_acquire_sync(w.loop, la, 0, 3000), LEASH_OK);
        fx_run_for(w.loop, 100); /* the copies a majority did not wait for */
        CHECK_EQ_INT(scripts_everywhere(&w) - before, N);
        fa = leash_fence(la);
        CHECK_MSG(floors_at_least(&w, "leash:agree", fa) > N / 2,
                  "fence %llu is the floor of %d servers", (unsigned long long)fa,
                  floors_at_least(&w, "leash:agree", fa));
        CHECK_EQ_INT(fx_release_sync(w.loop, la, 3000), LEASH_OK);
        before = scripts_everywhere(&w);
        CHECK_EQ_INT(fx_acquire_sync(w.loop, lb, 0, 3000), LEASH_OK);
        fx_run_for(w.loop, 100);
        CHECK_EQ_INT(scripts_everywhere(&w) - before, N);
        CHECK_MSG(leash_fence(lb) > fa, "fence %llu after %llu",
                  (unsigned long long)leash_fence(lb), (unsigned long long)fa);
        CHECK_EQ_INT(fx_release_sync(w.loop, lb, 3000), LEASH_OK);
    }
    leash_client_free(a);
    leash_client_free(b);
    rw_down(&w);
}

/* Floors above the proposal that differ on four servers (as after
 * holds that granted different fences there): no three granting servers
 * return one fence, so the hold's fence is the largest of the first
 * majority's, and the others of it are raised to it before the grant
 * counts: a majority's floors hold it. The next hold's fence is larger. */
TEST(fences_that_differ_are_raised_before_the_grant_counts) {
    rworld w;
    leash_client *c;
    leash_lock *l;
    redisReply *t;
    uint64_t x, f;
    int i;

    rw_up(&w);
    c = rw_client(&w, 30000);
    l = leash_lock_new(c, "differ");
    t = test_redis_cmd(&w.s[0], "TIME");
    CHECK(t != NULL && t->type == REDIS_REPLY_ARRAY && t->elements == 2);
    /* An hour ahead of the clocks: above any proposal. */
    x = strtoull(t->element[0]->str, NULL, 10) * 1000000 + 3600ull * 1000000;
    freeReplyObject(t);
    for (i = 0; i < N - 1; i++)
        set_floor(&w, i, "leash:differ", x + 10 * (uint64_t)i);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK);
    f = leash_fence(l);
    CHECK_MSG(f > x, "fence %llu, floors from %llu", (unsigned long long)f, (unsigned long long)x);
    CHECK_MSG(floors_at_least(&w, "leash:differ", f) > N / 2,
              "fence %llu is the floor of %d servers", (unsigned long long)f,
              floors_at_least(&w, "leash:differ", f));
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK);
    CHECK_MSG(leash_fence(l) > f, "fence %llu after %llu", (unsigned long long)leash_fence(l),
              (unsigned long long)f);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    leash_client_free(c);
    rw_down(&w);
}

/* A Redlock multi-lock takes its members in one script per server, all
 * or none there, with one fence per server (dialect/multi.c). Floors of
 * one member that differ above the proposal on four servers: no three
 * return one fence, so the whole's fence is the largest, and the floors
 * of every member on the granting servers below it are raised before the
 * grant counts. Each member's fence is then the floor of a majority, and
 * a mutex of any member's name gets a larger one. */
TEST(a_multi_lock_whose_fences_differ_raises_every_members_floor) {
    static const char *const names[] = {"ma", "mb", "mc"};
    static const char *const keys[] = {"leash:ma", "leash:mb", "leash:mc"};
    rworld w;
    leash_client *c;
    leash_lock *m, *l;
    redisReply *t;
    uint64_t x, f[3];
    int i;

    rw_up(&w);
    c = rw_client(&w, 30000);
    m = leash_multi_lock_new(c, names, 3);
    CHECK(m != NULL);
    t = test_redis_cmd(&w.s[0], "TIME");
    CHECK(t != NULL && t->type == REDIS_REPLY_ARRAY && t->elements == 2);
    x = strtoull(t->element[0]->str, NULL, 10) * 1000000 + 3600ull * 1000000;
    freeReplyObject(t);
    for (i = 0; i < N - 1; i++)
        set_floor(&w, i, "leash:mb", x + 10 * (uint64_t)i);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 3000), LEASH_OK);
    for (i = 0; i < 3; i++) {
        f[i] = leash_multi_fence(m, i);
        CHECK_MSG(f[i] > x, "member %d: fence %llu, floors from %llu", i, (unsigned long long)f[i],
                  (unsigned long long)x);
        CHECK_MSG(floors_at_least(&w, keys[i], f[i]) > N / 2,
                  "member %d: fence %llu is the floor of %d servers", i, (unsigned long long)f[i],
                  floors_at_least(&w, keys[i], f[i]));
    }
    CHECK_EQ_INT(fx_release_sync(w.loop, m, 3000), LEASH_OK);
    for (i = 0; i < 3; i++) {
        l = leash_lock_new(c, names[i]);
        CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK);
        CHECK_MSG(leash_fence(l) > f[i], "%s: the mutex's fence %llu after the member's %llu",
                  names[i], (unsigned long long)leash_fence(l), (unsigned long long)f[i]);
        CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
        leash_lock_free(l);
    }
    leash_client_free(c);
    rw_down(&w);
}

/* Writes a hold of another client for `key` on server i. */
static void foreign_hold(rworld *w, int i, const char *key) {
    redisReply *r = test_redis_cmd(&w->s[i], "SET %s %s PX 20000", key,
                                   "0123456789abcdef0123456789abcdef:0:1:1");

    CHECK(r != NULL && r->type == REDIS_REPLY_STATUS);
    if (r != NULL)
        freeReplyObject(r);
}

/* One member held by another client on three of the five servers: no
 * majority granted every member, so the multi-lock is busy, and the two
 * servers that granted all three (all or none there) are given back by
 * token: nothing of it stays anywhere. On two of the five only: a
 * majority granted all three, the multi-lock holds, and the two busy
 * servers got nothing written by it. */
TEST(a_multi_lock_busy_on_a_majority_leaves_nothing_and_on_a_minority_holds) {
    static const char *const names[] = {"na", "nb", "nc"};
    static const char *const keys[] = {"leash:na", "leash:nb", "leash:nc"};
    rworld w;
    leash_client *c;
    leash_lock *m;
    int i, k, left;
    int64_t end;

    rw_up(&w);
    c = rw_client(&w, 30000);
    m = leash_multi_lock_new(c, names, 3);
    CHECK(m != NULL);
    for (i = 0; i < 3; i++)
        foreign_hold(&w, i, "leash:nb");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 3000), LEASH_EBUSY);
    CHECK(!leash_held(m));
    end = test_now_ms() + 2000;
    do {
        fx_run_for(w.loop, 10);
        left = holding_servers(&w, "leash:na") + holding_servers(&w, "leash:nc") +
               holding_servers(&w, "leash:nb") - 3;
    } while (left > 0 && test_now_ms() < end);
    CHECK_MSG(left == 0, "%d keys of the busy multi-lock are left", left);
    for (i = 0; i < 3; i++)
        CHECK_EQ_INT(test_redis_int(&w.s[i], "EXISTS leash:nb"), 1); /* the other's, kept */

    test_redis_int(&w.s[2], "DEL leash:nb");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 3000), LEASH_OK);
    for (k = 0; k < 3; k++) {
        CHECK_MSG(holding_servers(&w, keys[k]) >= N - 2, "%s on %d servers", keys[k],
                  holding_servers(&w, keys[k]));
        for (i = 0; i < 2; i++)
            if (k != 1)
                CHECK_MSG(test_redis_int(&w.s[i], "EXISTS %s", keys[k]) == 0,
                          "%s written on busy server %d", keys[k], i);
    }
    CHECK_EQ_INT(fx_release_sync(w.loop, m, 3000), LEASH_OK);
    leash_client_free(c);
    rw_down(&w);
}

/* A server that answered busy wrote nothing: an all-busy multi-lock's
 * give-back goes only to the servers whose answers the decision did not
 * wait for (N - M = 2 here, one give-back per member), not each member's
 * release on all N servers, now and after the late copies (30 scripts
 * here for the 5 of the attempt). */
TEST(a_multi_lock_busy_everywhere_sends_no_give_back) {
    static const char *const names[] = {"na", "nb", "nc"};
    rworld w;
    leash_client *c;
    leash_lock *m;
    long long before, sent;
    int i;

    rw_up(&w);
    c = rw_client(&w, 30000);
    m = leash_multi_lock_new(c, names, 3);
    CHECK(m != NULL);
    for (i = 0; i < N; i++)
        foreign_hold(&w, i, "leash:nb");
    before = scripts_everywhere(&w);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 3000), LEASH_EBUSY);
    fx_run_for(w.loop, 1500); /* past the give-back after the late copies */
    sent = scripts_everywhere(&w) - before;
    CHECK_MSG(sent <= N + 3 * (N - (N / 2 + 1)), "%lld scripts for a busy attempt, wanted %d", sent,
              N + 3 * (N - (N / 2 + 1)));
    leash_lock_free(m);
    leash_client_free(c);
    rw_down(&w);
}

/* Keys of `keys` on the servers that are up, after up to ms for the
 * give-backs: CHECKed 0. */
static void no_keys_within(rworld *w, const char *how, const char *const *keys, int n, int ms) {
    int64_t end = test_now_ms() + ms;
    int left, k;

    do {
        fx_run_for(w->loop, 10);
        for (left = 0, k = 0; k < n; k++)
            left += holding_servers(w, keys[k]);
    } while (left > 0 && test_now_ms() < end);
    CHECK_MSG(left == 0, "%s: %d keys left on the servers that are up", how, left);
}

/* The live servers of a quorum that cannot form (3 of 5 down) grant at
 * once; the attempt's decision waits for the dead ones' copies. */
static void live_servers_granted(rworld *w, const char *const *keys, int n) {
    int64_t end = test_now_ms() + 1000;
    int got, k;

    do {
        fx_run_for(w->loop, 5);
        for (got = 0, k = 0; k < n; k++)
            got += holding_servers(w, keys[k]);
    } while (got < 2 * n && test_now_ms() < end);
    CHECK_MSG(got == 2 * n, "%d keys granted by the 2 live servers", got);
}

static void on_closed(int status, void *arg) {
    (void)status;
    *(int *)arg = 1;
}

/* Three of five servers down: the two live ones grant a multi-lock's one
 * script at once, and the quorum waits for the dead ones' copies. An
 * acquire that ends meanwhile (its wait, a cancel, a try-once's
 * deadline, a free, a client close) gives those grants back: nothing
 * stays for the lease (20 s). */
TEST(a_multi_lock_ended_before_its_quorum_decided_leaves_no_keys) {
    static const char *const names[] = {"qa", "qb"};
    static const char *const keys[] = {"leash:qa", "leash:qb"};
    rworld w;
    leash_client *c;
    leash_lock *m;
    fx_result res;
    int i, closed = 0;

    rw_up(&w);
    c = rw_client(&w, 20000);
    for (i = 0; i < 3; i++)
        CHECK_EQ_INT(test_redis_kill(&w.s[i]), 0);
    fx_run_for(w.loop, 50);
    m = leash_multi_lock_new(c, names, 2);
    CHECK(m != NULL);

    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 150, 3000), LEASH_ETIMEDOUT);
    no_keys_within(&w, "a wait of 150 ms", keys, 2, 1000);

    memset(&res, 0, sizeof(res));
    CHECK_EQ_INT(leash_acquire(m, 5000, fx_acquire_cb, &res), LEASH_OK);
    live_servers_granted(&w, keys, 2);
    CHECK_EQ_INT(leash_cancel(m), LEASH_OK);
    fx_run_until(w.loop, &res, 3000);
    CHECK_EQ_INT(res.status, LEASH_ECANCELED);
    no_keys_within(&w, "a cancel", keys, 2, 1000);

    CHECK_EQ_INT(fx_acquire_sync(w.loop, m, 0, 3000), LEASH_ECONN);
    no_keys_within(&w, "a try-once", keys, 2, 1000);

    memset(&res, 0, sizeof(res));
    CHECK_EQ_INT(leash_acquire(m, 5000, fx_acquire_cb, &res), LEASH_OK);
    live_servers_granted(&w, keys, 2);
    leash_lock_free(m);
    CHECK_EQ_INT(res.status, LEASH_ECANCELED);
    no_keys_within(&w, "a free", keys, 2, 1000);

    /* A close: the acquire's callback is owed until the free. */
    m = leash_multi_lock_new(c, names, 2);
    CHECK(m != NULL);
    memset(&res, 0, sizeof(res));
    CHECK_EQ_INT(leash_acquire(m, 5000, fx_acquire_cb, &res), LEASH_OK);
    live_servers_granted(&w, keys, 2);
    CHECK_EQ_INT(leash_client_close(c, on_closed, &closed), LEASH_OK);
    no_keys_within(&w, "a client close", keys, 2, 1000);
    if (!closed)
        leash_client_free(c); /* a close that ended freed it */
    CHECK_EQ_INT(res.status, LEASH_ECANCELED);
    rw_down(&w);
}

/* The same for a mutex: its cancel while the quorum is open gives back
 * what the live servers granted (the quorum said "written" only for
 * copies still out, not for those that had answered). */
TEST(a_mutex_cancelled_before_its_quorum_decided_leaves_no_keys) {
    static const char *const keys[] = {"leash:qm"};
    rworld w;
    leash_client *c;
    leash_lock *l;
    fx_result res = {0};
    int i;

    rw_up(&w);
    c = rw_client(&w, 20000);
    for (i = 0; i < 3; i++)
        CHECK_EQ_INT(test_redis_kill(&w.s[i]), 0);
    fx_run_for(w.loop, 50);
    l = leash_lock_new(c, "qm");
    CHECK_EQ_INT(leash_acquire(l, 5000, fx_acquire_cb, &res), LEASH_OK);
    live_servers_granted(&w, keys, 1);
    CHECK_EQ_INT(leash_cancel(l), LEASH_OK);
    fx_run_until(w.loop, &res, 3000);
    CHECK_EQ_INT(res.status, LEASH_ECANCELED);
    no_keys_within(&w, "a mutex's cancel", keys, 1, 1000);
    leash_client_free(c);
    rw_down(&w);
}

/* A multi-lock's grant whose majority answered after the lease (three
 * servers' replies held 500 ms, lease 300 ms) is given back, and a wait
 * with time left tries again, as a mutex's does: it holds (it ended
 * LEASH_ECONN). */
TEST(a_late_multi_grant_of_a_waiting_acquire_tries_again) {
    static const char *const names[] = {"la", "lb"};
    rworld w;
    fault_proxy p[N];
    leash_options o;
    leash_client *c;
    leash_lock *m;
    fx_result res = {0};
    int ports[N], i;
    int64_t t0;

    rw_up(&w);
    for (i = 0; i < N; i++) {
        CHECK_EQ_INT(fp_start(&p[i], w.s[i].port), 0);
        ports[i] = p[i].port;
    }
    redlock_options(&w, &o, ports, 300);
    o.command_timeout_ms = 2000; /* the held replies are no timeout */
    c = fx_client_opts(w.loop, &o);
    fx_wait_every_server(w.loop, c, N, 5000);
    m = leash_multi_lock_new(c, names, 2);
    CHECK(m != NULL);
    for (i = 2; i < N; i++)
        CHECK_EQ_INT(fp_stall(&p[i], FP_ALL, FP_DOWN, 1), 0);
    t0 = test_now_ms();
    CHECK_EQ_INT(leash_acquire(m, 5000, fx_acquire_cb, &res), LEASH_OK);
    fx_run_for(w.loop, 500);
    CHECK_EQ_INT(res.calls, 0);
    for (i = 2; i < N; i++)
        CHECK_EQ_INT(fp_stall(&p[i], FP_ALL, FP_DOWN, 0), 0);
    fx_run_until(w.loop, &res, 5000);
    CHECK_EQ_INT(res.calls, 1);
    CHECK_MSG(res.status == LEASH_OK, "acquire %s after %lld ms", leash_strerror(res.status),
              (long long)(res.at_ms - t0));
    CHECK(leash_held(m));
    CHECK_EQ_INT(fx_release_sync(w.loop, m, 3000), LEASH_OK);
    leash_client_free(c);
    for (i = 0; i < N; i++)
        fp_stop(&p[i]);
    rw_down(&w);
}

/* The calls a server counted for the lock scripts' work (INFO
 * commandstats: from Redis 7.0 the calls a script makes count too). */
typedef struct lock_calls {
    long long get, all, publish;
} lock_calls;

static lock_calls lock_calls_on(test_redis *r) {
    static const char *const inner[] = {"evalsha", "eval", "time", "set", "del", "pexpire", "pttl"};
    lock_calls c;
    size_t i;

    c.get = test_redis_calls(r, "get");
    c.publish = test_redis_calls(r, "publish") + test_redis_calls(r, "spublish");
    c.all = c.get + c.publish;
    for (i = 0; i < sizeof(inner) / sizeof(inner[0]); i++)
        c.all += test_redis_calls(r, inner[i]);
    return c;
}

/* An uncontended cycle costs each server at most 8 Redis calls: the
 * acquire's EVALSHA, TIME, the fence floor's GET, the lock's SET NX GET
 * and the floor's SET, and the release's EVALSHA, GET, DEL. The floor is
 * read before the first write (scripts check before they write; issue 35
 * keeps that for Redlock). The release publishes nothing: nobody waited
 * (section 5 of the design). A grant copy dropped once a majority decided
 * (quorum.c) costs a server less, never more. */
TEST(an_uncontended_cycle_costs_each_server_eight_calls_and_no_publish) {
    enum {
        CYCLES = 20,
        PER_CYCLE = 8
    };
    rworld w;
    leash_client *c;
    leash_lock *l;
    lock_calls before[N], after;
    int i;

    rw_up(&w);
    c = rw_client(&w, 30000);
    l = leash_lock_new(c, "counted");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK); /* scripts loaded */
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    fx_run_for(w.loop, 50);
    for (i = 0; i < N; i++)
        before[i] = lock_calls_on(&w.s[i]);
    for (i = 0; i < CYCLES; i++) {
        CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK);
        CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    }
    fx_run_for(w.loop, 100); /* the copies after each majority */
    for (i = 0; i < N; i++) {
        after = lock_calls_on(&w.s[i]);
        CHECK_MSG(after.all - before[i].all <= (long long)PER_CYCLE * CYCLES,
                  "server %d: %lld calls for %d cycles", i, after.all - before[i].all, CYCLES);
        CHECK_EQ_INT(after.publish - before[i].publish, 0);
    }
    leash_client_free(c);
    rw_down(&w);
}

/* A force release from a client that just started (an operator's tool):
 * its copies go out as each connection gets ready, and it is done only
 * when every server had its say, so no majority of the hold is left. */
TEST(a_force_release_from_a_new_client_reaches_every_server) {
    rworld w;
    leash_client *holder, *op;
    leash_lock *h, *f;
    leash_options o;
    int ports[N], i;
    fx_result done = {0};

    rw_up(&w);
    holder = rw_client(&w, 10000);
    h = leash_lock_new(holder, "forced");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 3000), LEASH_OK);
    fx_run_for(w.loop, 100); /* copies of the grant still unwritten reach their servers */
    CHECK_EQ_INT(holding_servers(&w, "leash:forced"), N);
    for (i = 0; i < N; i++)
        ports[i] = w.s[i].port;
    redlock_options(&w, &o, ports, 10000);
    /* Two servers slow to answer the new client's handshake: three
     * removals come first. */
    test_redis_freeze(&w.s[3]);
    test_redis_freeze(&w.s[4]);
    op = fx_client_opts(w.loop, &o); /* not waited for: connecting */
    f = leash_lock_new(op, "forced");
    CHECK_EQ_INT(leash_force_release(f, fx_release_cb, &done), LEASH_OK);
    fx_run_for(w.loop, 200);
    test_redis_thaw(&w.s[3]);
    test_redis_thaw(&w.s[4]);
    fx_run_until(w.loop, &done, 5000);
    CHECK_EQ_INT(done.status, LEASH_OK);
    CHECK_EQ_INT(holding_servers(&w, "leash:forced"), 0);
    leash_client_free(op);
    leash_client_free(holder);
    rw_down(&w);
}

static int lost_calls, lost_reason;
static int64_t lost_at;
static void on_lost(leash_lock *l, int reason, void *arg) {
    (void)l, (void)arg;
    lost_calls++;
    lost_reason = reason;
    lost_at = test_now_ms();
}

/* Two of five killed while held: the hold is kept (a majority renews it)
 * and new locks are still granted. A third killed: the holder is lost
 * UNREACHABLE by its deadline, acquires end in time; all comes back. */
TEST(two_servers_killed_keep_the_hold_a_third_loses_it) {
    rworld w;
    leash_client *a, *b;
    leash_lock *held, *other, *late;
    fx_result res = {0};
    uint64_t renewals;
    int64_t deadline, t0;
    int i;

    rw_up(&w);
    a = rw_client(&w, 1500); /* renewals every 500 ms */
    b = rw_client(&w, 1500);
    lost_calls = 0;
    held = leash_lock_new(a, "killed");
    leash_on_lost(held, on_lost, NULL);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, held, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(test_redis_kill(&w.s[0]), 0);
    CHECK_EQ_INT(test_redis_kill(&w.s[1]), 0);
    renewals = leash_renewals(held);
    run_until_renewed(&w, held, renewals, 1200);
    CHECK_MSG(leash_renewals(held) > renewals, "no renewal on the three left");
    CHECK(leash_held(held));
    CHECK_EQ_INT(lost_calls, 0);
    other = leash_lock_new(b, "other");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, other, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, other, 3000), LEASH_OK);

    CHECK_EQ_INT(test_redis_kill(&w.s[2]), 0);
    deadline = test_now_ms() + leash_valid_ms(held);
    t0 = test_now_ms();
    CHECK_EQ_INT(leash_acquire(other, 300, fx_acquire_cb, &res), LEASH_OK);
    fx_run_until(w.loop, &res, 3000);
    CHECK(res.status == LEASH_ETIMEDOUT || res.status == LEASH_ECONN);
    CHECK(res.at_ms - t0 <= 300 + 500 + TEST_SLACK_MS);
    while (lost_calls == 0 && test_now_ms() < deadline + 1000)
        fx_run_for(w.loop, 10);
    CHECK_EQ_INT(lost_calls, 1);
    CHECK_EQ_INT(lost_reason, LEASH_LOST_UNREACHABLE);
    CHECK(lost_at <= deadline + TEST_SLACK_MS);

    /* The delayed restart: a server that lost its data stays down for a
     * lease before it comes back (here it has been down longer). */
    for (i = 0; i < 3; i++)
        CHECK_EQ_INT(test_redis_restart(&w.s[i]), 0);
    late = leash_lock_new(b, "killed");
    memset(&res, 0, sizeof(res));
    CHECK_EQ_INT(leash_acquire(late, 5000, fx_acquire_cb, &res), LEASH_OK);
    fx_run_until(w.loop, &res, 6000);
    CHECK_EQ_INT(res.status, LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, late, 3000), LEASH_OK);
    leash_client_free(a);
    leash_client_free(b);
    rw_down(&w);
}

/* Two of five servers down and a third still held by a holder that
 * crashed: no majority can be had until that key expires. A waiting
 * acquire does not hang on the dead servers' copies (each gives up after
 * the command timeout), does not spin, and takes the lock once the key
 * expires, never before. */
TEST(two_servers_down_and_a_crashed_holder_on_a_third_is_waited_out) {
    rworld w;
    leash_client *c;
    leash_lock *l;
    fx_result res = {0};
    int64_t t0, expires_at;
    long long calls;

    rw_up(&w);
    c = rw_client(&w, 5000);
    CHECK_EQ_INT(test_redis_kill(&w.s[0]), 0);
    CHECK_EQ_INT(test_redis_kill(&w.s[1]), 0);
    CHECK_EQ_INT(test_redis_int(&w.s[2], "SET leash:waited-out %s:0:1:1 PX 1500",
                                "dead0000000000000000000000000000"),
                 -1); /* +OK, not an integer */
    expires_at = test_now_ms() + 1500;
    l = leash_lock_new(c, "waited-out");
    t0 = test_now_ms();
    calls = test_redis_calls(&w.s[3], "evalsha") + test_redis_calls(&w.s[3], "eval");
    CHECK_EQ_INT(leash_acquire(l, LEASH_WAIT_FOREVER, fx_acquire_cb, &res), LEASH_OK);
    fx_run_until(w.loop, &res, 1500 + 500 + 2000);
    CHECK_EQ_INT(res.calls, 1);
    CHECK_EQ_INT(res.status, LEASH_OK);
    CHECK_MSG(res.at_ms >= expires_at, "granted %lld ms before the key expired",
              (long long)(expires_at - res.at_ms));
    CHECK_MSG(res.at_ms - t0 <= 1500 + 500 + TEST_SLACK_MS, "granted after %lld ms",
              (long long)(res.at_ms - t0));
    /* A live server saw a handful of scripts (attempts, give-backs, the
     * raise), not a loop. */
    calls = test_redis_calls(&w.s[3], "evalsha") + test_redis_calls(&w.s[3], "eval") - calls;
    CHECK_MSG(calls <= 8, "%lld scripts on a live server", calls);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    leash_client_free(c);
    rw_down(&w);
}

static long long scripts_on(test_redis *r) {
    return test_redis_calls(r, "evalsha") + test_redis_calls(r, "eval");
}

/* wait_replicas on servers without replicas: every grant is short of its
 * WAIT. A try-once and a LEASH_WAIT_FOREVER acquire both end
 * LEASH_EREPLICAS, at once, and nothing is retried in a loop (a review
 * found the wait trying again without a pause for ever). */
TEST(grants_short_of_replicas_end_ereplicas_without_a_retry_loop) {
    rworld w;
    leash_options o;
    leash_client *c;
    leash_lock *l;
    fx_result res = {0};
    int ports[N], i;
    long long before;

    rw_up(&w);
    for (i = 0; i < N; i++)
        ports[i] = w.s[i].port;
    redlock_options(&w, &o, ports, 5000);
    o.wait_replicas = 1;
    o.wait_timeout_ms = 1;
    c = fx_client_opts(w.loop, &o);
    fx_wait_connected(w.loop, c, 5000);
    l = leash_lock_new(c, "unreplicated");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_EREPLICAS);
    /* That attempt's give-backs go out from the loop after its callback:
     * they are not the second attempt's. */
    fx_run_for(w.loop, 100);
    before = scripts_on(&w.s[0]);
    CHECK_EQ_INT(leash_acquire(l, LEASH_WAIT_FOREVER, fx_acquire_cb, &res), LEASH_OK);
    fx_run_until(w.loop, &res, 1000);
    CHECK_EQ_INT(res.status, LEASH_EREPLICAS);
    fx_run_for(w.loop, 100);
    /* The attempt and its give-backs (the primitive's and the quorum's). */
    CHECK_MSG(scripts_on(&w.s[0]) - before <= 3, "%lld scripts on a server",
              scripts_on(&w.s[0]) - before);
    CHECK_EQ_INT(holding_servers(&w, "leash:unreplicated"), 0);
    leash_client_free(c);
    rw_down(&w);
}

/* A majority down: try-once ends LEASH_ECONN after the command timeout; a
 * wait attempts again each command timeout (as one server's attempt waits
 * for its connection) and ends LEASH_ECONN (not ETIMEDOUT, which says the
 * lock was busy) at its own end, whatever order the timers fire in; the
 * servers that are up see an attempt and its give-backs per command
 * timeout, no more. */
TEST(a_wait_with_no_majority_reachable_ends_econn) {
    static const int64_t waits[] = {0, 200, 450, 700, 1300};
    rworld w;
    leash_client *c;
    leash_lock *l;
    long long before, attempts = 0;
    size_t i;
    int64_t t0;

    rw_up(&w);
    c = rw_client(&w, 5000);
    l = leash_lock_new(c, "majority-down");
    for (i = 0; i < 3; i++)
        CHECK_EQ_INT(test_redis_kill(&w.s[i]), 0);
    fx_run_for(w.loop, 50);
    before = scripts_on(&w.s[3]);
    for (i = 0; i < sizeof(waits) / sizeof(waits[0]); i++) {
        int64_t bound = waits[i] == 0 ? 500 : waits[i];
        t0 = test_now_ms();
        CHECK_EQ_INT(fx_acquire_sync(w.loop, l, waits[i], 3000), LEASH_ECONN);
        CHECK_MSG(test_now_ms() - t0 >= bound, "wait %lld ended after %lld ms", (long long)waits[i],
                  (long long)(test_now_ms() - t0));
        CHECK_MSG(test_now_ms() - t0 <= bound + TEST_SLACK_MS, "wait %lld ended after %lld ms",
                  (long long)waits[i], (long long)(test_now_ms() - t0));
        attempts += bound / 500 + 1;
    }
    fx_run_for(w.loop, 50); /* the last give-backs */
    /* Each attempt, and its give-backs: the quorum's, the primitive's now
     * and after the late copies (a command timeout later: the last ones
     * not yet). */
    CHECK_MSG(scripts_on(&w.s[3]) - before <= 4 * attempts, "%lld scripts for %lld attempts",
              scripts_on(&w.s[3]) - before, attempts);
    leash_client_free(c);
    rw_down(&w);
}

/* Three of five servers restart (killed, back 1.5 s later) while an
 * acquire waits up to 5 s: each attempt's copies to them give up after the
 * command timeout (500 ms), and the acquire attempts again until a
 * majority grants, as one server's attempt waits for its connection
 * (it ended LEASH_ECONN at the first attempt's command timeout). */
TEST(an_acquire_attempts_again_while_a_majority_reconnects) {
    rworld w;
    leash_client *c;
    leash_lock *l;
    fx_result res = {0};
    int64_t t0;
    int i;

    rw_up(&w);
    c = rw_client(&w, 5000);
    l = leash_lock_new(c, "restarting");
    for (i = 0; i < 3; i++)
        CHECK_EQ_INT(test_redis_kill(&w.s[i]), 0);
    fx_run_for(w.loop, 50);
    t0 = test_now_ms();
    CHECK_EQ_INT(leash_acquire(l, 5000, fx_acquire_cb, &res), LEASH_OK);
    fx_run_for(w.loop, 1500);
    CHECK_MSG(res.calls == 0, "acquire ended %s after %lld ms", leash_strerror(res.status),
              (long long)(res.at_ms - t0));
    for (i = 0; i < 3; i++)
        CHECK_EQ_INT(test_redis_restart(&w.s[i]), 0);
    fx_run_until(w.loop, &res, 5000);
    CHECK_EQ_INT(res.calls, 1);
    CHECK_MSG(res.status == LEASH_OK, "acquire %s after %lld ms", leash_strerror(res.status),
              (long long)(res.at_ms - t0));
    CHECK(res.at_ms - t0 < 5000);
    CHECK(holding_servers(&w, "leash:restarting") > N / 2);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    leash_client_free(c);
    rw_down(&w);
}

/* A busy key without expiry (PERSISTed, or SET by a tool) on one server
 * and two servers that fail at once (OOM here): the waiter looks again
 * after a lease, as on one server, not every millisecond. */
TEST(a_key_without_expiry_and_failing_servers_make_no_retry_loop) {
    rworld w;
    leash_client *c;
    leash_lock *l;
    fx_result res = {0};
    long long before;
    int i;

    rw_up(&w);
    c = rw_client(&w, 5000);
    l = leash_lock_new(c, "persisted");
    CHECK_EQ_INT(
        test_redis_int(&w.s[0], "SET leash:persisted %s:0:1:1", "dead0000000000000000000000000000"),
        -1); /* +OK */
    for (i = 3; i < 5; i++)
        CHECK_EQ_INT(test_redis_int(&w.s[i], "CONFIG SET maxmemory 1"), -1);
    before = scripts_on(&w.s[1]);
    CHECK_EQ_INT(leash_acquire(l, 1000, fx_acquire_cb, &res), LEASH_OK);
    fx_run_until(w.loop, &res, 3000);
    CHECK_EQ_INT(res.status, LEASH_ETIMEDOUT);
    CHECK_MSG(scripts_on(&w.s[1]) - before <= 6, "%lld scripts in one 1 s wait",
              scripts_on(&w.s[1]) - before);
    for (i = 3; i < 5; i++)
        CHECK_EQ_INT(test_redis_int(&w.s[i], "CONFIG SET maxmemory 0"), -1);
    leash_client_free(c);
    rw_down(&w);
}

/* An extra (reentrant) hold that a majority refuses (OOM) fails alone:
 * the hold it was added to stays on every server and stays held (its
 * attempt carries the hold's own token, which must not be given back). */
TEST(a_failed_extra_hold_leaves_the_hold_alone) {
    rworld w;
    leash_client *c;
    leash_lock *l;
    int i, held_on;

    rw_up(&w);
    c = rw_client(&w, 5000);
    l = leash_lock_new(c, "extra");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK);
    /* The grant counts with a majority; a copy to a server whose
     * connection was still loading its scripts on a busy machine may have
     * come too late and done nothing. The extra hold must not change who
     * holds. */
    for (i = 0; i < 10 && holding_servers(&w, "leash:extra") < N; i++)
        fx_run_for(w.loop, 50);
    held_on = holding_servers(&w, "leash:extra");
    CHECK(held_on > N / 2);
    for (i = 0; i < 3; i++)
        CHECK_EQ_INT(test_redis_int(&w.s[i], "CONFIG SET maxmemory 1"), -1);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_EREDIS);
    for (i = 0; i < 3; i++)
        CHECK_EQ_INT(test_redis_int(&w.s[i], "CONFIG SET maxmemory 0"), -1);
    fx_run_for(w.loop, 100);
    CHECK(leash_held(l));
    CHECK_EQ_INT(holding_servers(&w, "leash:extra"), held_on);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    CHECK_EQ_INT(holding_servers(&w, "leash:extra"), 0);
    leash_client_free(c);
    rw_down(&w);
}

static int64_t released_at;
static void note_released(leash_lock *l, int status, void *arg) {
    (void)l, (void)arg;
    CHECK_EQ_INT(status, LEASH_OK);
    released_at = test_now_ms();
}

static int cmp_ms(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* A release hands the lock to the one waiter at once: no random pause
 * (that is for waiters that met a split vote). The median of 11 handoffs
 * is well under the pause's 30 ms mean (the bench measured 30 ms p50 with
 * the pause on every wake). */
TEST(a_handoff_to_the_only_waiter_takes_no_random_pause) {
    enum {
        ROUNDS = 11
    };
    rworld w;
    leash_client *a, *b;
    leash_lock *la, *lb, *holder, *waiter;
    int64_t took[ROUNDS];
    int i;

    rw_up(&w);
    a = rw_client(&w, 5000);
    b = rw_client(&w, 5000);
    la = leash_lock_new(a, "handoff");
    lb = leash_lock_new(b, "handoff");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, la, 0, 3000), LEASH_OK);
    holder = la;
    waiter = lb;
    for (i = 0; i < ROUNDS; i++) {
        fx_result got = {0};
        leash_lock *t;
        CHECK_EQ_INT(leash_acquire(waiter, 5000, fx_acquire_cb, &got), LEASH_OK);
        fx_run_for(w.loop, 30); /* busy, parked */
        CHECK_EQ_INT(got.calls, 0);
        CHECK_EQ_INT(leash_release(holder, note_released, NULL), LEASH_OK);
        fx_run_until(w.loop, &got, 3000);
        CHECK_EQ_INT(got.status, LEASH_OK);
        took[i] = got.at_ms - released_at;
        t = holder;
        holder = waiter;
        waiter = t;
    }
    qsort(took, ROUNDS, sizeof(took[0]), cmp_ms);
    CHECK_MSG(took[ROUNDS / 2] <= 10, "handoff median %lld ms (min %lld, max %lld)",
              (long long)took[ROUNDS / 2], (long long)took[0], (long long)took[ROUNDS - 1]);
    CHECK_EQ_INT(fx_release_sync(w.loop, holder, 3000), LEASH_OK);
    leash_client_free(a);
    leash_client_free(b);
    rw_down(&w);
}

/* With every server well, a renewal is one copy per server: a server that
 * answered after the majority had is not sent it again (the bench saw 7
 * copies per renewal on 5 servers). */
TEST(a_renewal_goes_once_to_each_server_when_all_are_well) {
    rworld w;
    leash_client *c;
    leash_lock *l;
    long long before = 0, after = 0;
    uint64_t renewals;
    int i;

    rw_up(&w);
    c = rw_client(&w, 300); /* renewals every 100 ms */
    l = leash_lock_new(c, "renewed");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK);
    fx_run_for(w.loop, 50);
    renewals = leash_renewals(l);
    for (i = 0; i < N; i++)
        before += scripts_on(&w.s[i]);
    fx_run_for(w.loop, 1000);
    for (i = 0; i < N; i++)
        after += scripts_on(&w.s[i]);
    renewals = leash_renewals(l) - renewals;
    CHECK(renewals >= 5);
    /* A renewal in flight at either end may count on some servers only. */
    CHECK_MSG(after - before <= (long long)(N * (renewals + 1)),
              "%lld scripts on the servers for %llu renewals", after - before,
              (unsigned long long)renewals);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    leash_client_free(c);
    rw_down(&w);
}

/* The value of `key` on server i, into buf ("" when it has none). */
static void value_on(rworld *w, int i, const char *key, char *buf, size_t size) {
    redisReply *r = test_redis_cmd(&w->s[i], "GET %s", key);

    buf[0] = '\0';
    if (r != NULL && r->type == REDIS_REPLY_STRING)
        snprintf(buf, size, "%s", r->str);
    if (r != NULL)
        freeReplyObject(r);
}

/* Script calls that failed on server i (INFO commandstats, Redis 6.2
 * on); -1 before. */
static long long failed_scripts(rworld *w, int i) {
    redisReply *r = test_redis_cmd(&w->s[i], "INFO commandstats");
    const char *p =
        r != NULL && r->type == REDIS_REPLY_STRING ? strstr(r->str, "cmdstat_evalsha:") : NULL;
    long long n = -1;

    if (p != NULL && (p = strstr(p, "failed_calls=")) != NULL)
        n = strtoll(p + strlen("failed_calls="), NULL, 10);
    if (r != NULL)
        freeReplyObject(r);
    return n;
}

/* Servers 3 and 4 hold `key` for another client's token for px ms (the
 * last holder's key, which its release has not reached yet there). */
static void another_holds_on_the_last_two(rworld *w, const char *key, int px) {
    int i;

    for (i = 3; i < N; i++)
        freeReplyObject(test_redis_cmd(&w->s[i], "SET %s %s PX %d", key,
                                       "0123456789abcdef0123456789abcdef:0:1:17", px));
}

/* Locks `spreading` (key `key`) and `other` of one client, granted together
 * (their renewals fall due together: hold.c's grid, so they share renew
 * commands). Servers 3 and 4 still hold `key` for another client at the
 * grant, so `spreading` is granted by the first three; then the last
 * holder's release reaches the two (DEL), well before the first renewal
 * (a third of the lease after the grant). */
static void grant_by_three(rworld *w, leash_lock *spreading, leash_lock *other, const char *key) {
    fx_result got = {0}, got_other = {0};
    char first[128], v[128];
    int i;

    another_holds_on_the_last_two(w, key, 30000);
    leash_on_lost(spreading, on_lost, NULL);
    leash_on_lost(other, on_lost, NULL);
    CHECK_EQ_INT(leash_acquire(other, 0, fx_acquire_cb, &got_other), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(spreading, 0, fx_acquire_cb, &got), LEASH_OK);
    fx_run_until(w->loop, &got_other, 3000);
    fx_run_until(w->loop, &got, 3000);
    CHECK_EQ_INT(got_other.status, LEASH_OK);
    CHECK_EQ_INT(got.status, LEASH_OK);
    value_on(w, 0, key, first, sizeof(first));
    value_on(w, 3, key, v, sizeof(v));
    CHECK_MSG(strncmp(v, first, 32) != 0, "server 3 granted: %s", v);
    for (i = 3; i < N; i++)
        CHECK_EQ_INT(test_redis_int(&w->s[i], "DEL %s", key), 1);
}

/* Servers whose memory is full (maxmemory, no eviction) still renew a
 * hold: a renewal extends a key and keeps a floor that is there, which
 * takes no memory, and Redis refuses only a script whose first write is
 * one that may (a SET): the renewal extends the hold's key first. A spread
 * they refuse (another hold of the client, in the same commands, granted
 * without servers 3 and 4) fails no other lock of the batch there. */
TEST(a_hold_outlives_servers_whose_memory_is_full) {
    rworld w;
    leash_client *a;
    leash_lock *l, *sp;
    long long failed[N];
    uint64_t renewals;
    int i;

    rw_up(&w);
    a = rw_client(&w, 1500); /* renewals every 500 ms */
    lost_calls = 0;
    sp = leash_lock_new(a, "full-spread");
    l = leash_lock_new(a, "full");
    grant_by_three(&w, sp, l, "leash:full-spread");
    renewals = leash_renewals(l);
    for (i = 0; i < N; i++) {
        failed[i] = failed_scripts(&w, i);
        CHECK_EQ_INT(test_redis_int(&w.s[i], "CONFIG SET maxmemory 1"), -1);
    }
    fx_run_for(w.loop, 2000);
    for (i = 0; i < N; i++) {
        CHECK_EQ_INT(test_redis_int(&w.s[i], "CONFIG SET maxmemory 0"), -1);
        if (failed[i] >= 0)
            CHECK_MSG(failed_scripts(&w, i) == failed[i], "server %d: %lld scripts failed", i,
                      failed_scripts(&w, i) - failed[i]);
    }
    CHECK(leash_held(l));
    CHECK(leash_held(sp));
    CHECK_EQ_INT(lost_calls, 0);
    CHECK(leash_renewals(l) > renewals);
    if (leash_held(l))
        CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    if (leash_held(sp))
        CHECK_EQ_INT(fx_release_sync(w.loop, sp, 3000), LEASH_OK);
    leash_client_free(a);
    rw_down(&w);
}

/* Two servers still hold the last holder's key when the attempt reaches
 * them (its release had not yet: the waiter woke on the first server's
 * message), so three grant: a bare majority. Their renewal spreads the
 * hold onto the two once their key is gone, and the hold then survives two
 * of its three first servers killed, as Redlock promises for any two of
 * five. Another hold of the client, on all five, renews in the same
 * commands (each spreading lock takes two keys of the script's). */
TEST(a_hold_granted_by_a_bare_majority_spreads_and_survives_two_kills) {
    rworld w;
    leash_client *a;
    leash_lock *held, *other;
    char first[128], v[128];
    uint64_t renewals;
    int i;

    rw_up(&w);
    a = rw_client(&w, 1500); /* renewals every 500 ms */
    lost_calls = 0;
    other = leash_lock_new(a, "spread-other");
    held = leash_lock_new(a, "spread");
    grant_by_three(&w, held, other, "leash:spread");
    value_on(&w, 0, "leash:spread", first, sizeof(first));
    fx_run_for(w.loop, 1200);
    for (i = 0; i < N; i++) {
        value_on(&w, i, "leash:spread", v, sizeof(v));
        CHECK_MSG(strncmp(v, first, 33) == 0, "server %d holds %s, not %s", i, v, first);
        CHECK_EQ_INT(floor_on(&w, i, "leash:spread") >= leash_fence(held), 1);
    }
    CHECK_EQ_INT(test_redis_kill(&w.s[0]), 0);
    CHECK_EQ_INT(test_redis_kill(&w.s[1]), 0);
    renewals = leash_renewals(held);
    run_until_renewed(&w, held, renewals, 1200);
    CHECK_MSG(leash_renewals(held) > renewals, "no renewal on the three left");
    CHECK(leash_held(held));
    CHECK(leash_held(other));
    CHECK_EQ_INT(lost_calls, 0);
    CHECK_EQ_INT(fx_release_sync(w.loop, held, 3000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, other, 3000), LEASH_OK);
    CHECK_EQ_INT(holding_servers(&w, "leash:spread"), 0);
    leash_client_free(a);
    rw_down(&w);
}

/* A lock's fence floor of another type on one server (not leash's doing)
 * spoils neither that lock's renewals elsewhere nor the other locks'
 * renewals in the same commands on that server: the spread passes it by. */
TEST(a_floor_of_another_type_spoils_no_renewal_of_the_batch) {
    rworld w;
    leash_client *a;
    leash_lock *odd, *plain;
    fx_result got = {0}, got_plain = {0};
    char name[128];
    size_t len = floor_name("leash:odd", name);
    long long errors;

    rw_up(&w);
    a = rw_client(&w, 1500); /* renewals every 500 ms */
    freeReplyObject(test_redis_cmd(&w.s[4], "RPUSH %b x", name, len));
    odd = leash_lock_new(a, "odd");
    plain = leash_lock_new(a, "plain");
    CHECK_EQ_INT(leash_acquire(odd, 0, fx_acquire_cb, &got), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(plain, 0, fx_acquire_cb, &got_plain), LEASH_OK);
    fx_run_until(w.loop, &got, 3000);
    fx_run_until(w.loop, &got_plain, 3000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK_EQ_INT(got_plain.status, LEASH_OK);
    CHECK_EQ_INT(test_redis_int(&w.s[4], "EXISTS leash:odd"), 0); /* its grant failed there */
    errors = failed_scripts(&w, 4);
    fx_run_for(w.loop, 1200);
    if (errors >= 0)
        CHECK_MSG(failed_scripts(&w, 4) == errors, "renewals failed on server 4: %lld",
                  failed_scripts(&w, 4) - errors);
    CHECK(leash_held(odd));
    CHECK(leash_held(plain));
    /* Renewed on server 4 within the last renew interval (and a margin). */
    CHECK_MSG(test_redis_int(&w.s[4], "PTTL leash:plain") > 1500 - 500 - 300,
              "server 4 stopped renewing: PTTL %lld", test_redis_int(&w.s[4], "PTTL leash:plain"));
    CHECK_EQ_INT(test_redis_int(&w.s[4], "EXISTS leash:odd"), 0);
    CHECK_EQ_INT(fx_release_sync(w.loop, odd, 3000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, plain, 3000), LEASH_OK);
    leash_client_free(a);
    rw_down(&w);
}

/* Lock `name`, held by h on `held_on` servers, force-released by another
 * client: h's next renewal must not spread it back, h is lost EXPIRED,
 * and nothing is left on any server. */
static void force_and_see_it_lost(rworld *w, leash_client *op, leash_lock *h, const char *name,
                                  const char *key, int held_on) {
    leash_lock *f = leash_lock_new(op, name);
    fx_result done = {0};

    CHECK_EQ_INT(holding_servers(w, key), held_on);
    CHECK_EQ_INT(leash_force_release(f, fx_release_cb, &done), LEASH_OK);
    fx_run_until(w->loop, &done, 3000);
    CHECK_EQ_INT(done.status, LEASH_OK);
    fx_run_for(w->loop, 1000); /* two renewals due */
    CHECK_EQ_INT(lost_calls, 1);
    CHECK_EQ_INT(lost_reason, LEASH_LOST_EXPIRED);
    CHECK(!leash_held(h));
    CHECK_MSG(holding_servers(w, key) == 0, "left on %d servers", holding_servers(w, key));
    leash_lock_free(f);
}

/* A force release removes the hold from every server; the holder's next
 * renewal must not spread it back (every server had it: its floor is the
 * hold's fence). */
TEST(a_force_released_hold_is_lost_at_its_renewal_not_spread_again) {
    rworld w;
    leash_client *holder, *op;
    leash_lock *h;

    rw_up(&w);
    holder = rw_client(&w, 1500);
    op = rw_client(&w, 1500);
    lost_calls = 0;
    h = leash_lock_new(holder, "forced");
    leash_on_lost(h, on_lost, NULL);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 3000), LEASH_OK);
    fx_run_for(w.loop, 100);
    force_and_see_it_lost(&w, op, h, "forced", "leash:forced", N);
    leash_client_free(op);
    leash_client_free(holder);
    rw_down(&w);
}

/* A force release that reaches two of five servers (the operator's client
 * cannot reach the other three; the holder can): the holder renews on the
 * three, so this is no force release, and it says so (LEASH_ECONN, not
 * LEASH_OK). Where it removed the hold, the floor stays: once the floors
 * the grant wrote there have expired (made short here), the holder's
 * spreading renewal (every quarter of the floor's life: 15 s) must not
 * write the removed hold back; it keeps the floor instead. */
TEST(a_force_release_that_reaches_two_of_five_is_an_error_and_stays) {
    rworld w;
    fault_proxy p[N];
    leash_options o;
    leash_client *holder, *op;
    leash_lock *h, *f;
    fx_result done = {0};
    char name[128];
    size_t len = floor_name("leash:partial", name);
    int ports[N], i;

    rw_up(&w);
    holder = rw_client(&w, 1500); /* renewals every 500 ms; floors live 60 s */
    for (i = 0; i < N; i++) {
        CHECK_EQ_INT(fp_start(&p[i], w.s[i].port), 0);
        ports[i] = p[i].port;
    }
    redlock_options(&w, &o, ports, 1500);
    op = fx_client_opts(w.loop, &o);
    fx_wait_every_server(w.loop, op, N, 5000);
    lost_calls = 0;
    h = leash_lock_new(holder, "partial");
    leash_on_lost(h, on_lost, NULL);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 3000), LEASH_OK);
    fx_run_for(w.loop, 700); /* the first renewal spread (nothing to do) */
    for (i = 2; i < N; i++)
        CHECK_EQ_INT(fp_blackhole(&p[i], FP_ALL, FP_BOTH, 1), 0);
    /* The floors on the two it reaches are old: a few seconds left. */
    for (i = 0; i < 2; i++)
        CHECK_EQ_INT(test_redis_int(&w.s[i], "PEXPIRE %b 5000", name, len), 1);
    f = leash_lock_new(op, "partial");
    CHECK_EQ_INT(leash_force_release(f, fx_release_cb, &done), LEASH_OK);
    fx_run_until(w.loop, &done, 3000);
    CHECK_EQ_INT(holding_servers(&w, "leash:partial"), N - 2);
    /* Past the next spreading renewal, a quarter floor (15 s) after the
     * first, at about 500 ms. */
    fx_run_for(w.loop, 15000 + 1500);
    CHECK(leash_held(h));
    CHECK_EQ_INT(lost_calls, 0);
    CHECK_MSG(holding_servers(&w, "leash:partial") == N - 2,
              "the removed hold is back: on %d servers", holding_servers(&w, "leash:partial"));
    for (i = 0; i < 2; i++) /* kept by that renewal, not only by the force */
        CHECK_MSG(floor_on(&w, i, "leash:partial") >= leash_fence(h) &&
                      test_redis_int(&w.s[i], "PTTL %b", name, len) > 50000,
                  "server %d: the floor's PTTL is %lld", i,
                  test_redis_int(&w.s[i], "PTTL %b", name, len));
    CHECK_MSG(done.status == LEASH_ECONN, "a force release that reached 2 of 5 answered %s",
              leash_strerror(done.status));
    CHECK_EQ_INT(fx_release_sync(w.loop, h, 3000), LEASH_OK);
    leash_lock_free(f);
    leash_client_free(op);
    leash_client_free(holder);
    for (i = 0; i < N; i++)
        fp_stop(&p[i]);
    rw_down(&w);
}

/* The shape of the two cases below: the last holder's key (fence 17)
 * still stands on servers 3 and 4 when a hold is granted; a force release
 * from another client does not reach the two silent servers and removes
 * the hold on removed_on; past the holder's first renewal (it spreads) and
 * one more, the force release is partial (LEASH_ECONN) and the hold is not
 * back where it was removed. */
typedef struct force_case {
    const char *name;     /* the lock; its key is "leash:<name>" */
    int old_key_released; /* the last holder's release reaches 3 and 4 after the grant */
    int silent[2];        /* servers the force release does not reach */
    int removed_on;       /* a server where it removes the hold */
    const char *what;     /* the force release, for the message */
} force_case;

static void force_is_partial(const force_case *fc) {
    rworld w;
    fault_proxy p[N];
    leash_options o;
    leash_client *holder, *op;
    leash_lock *h, *f;
    fx_result done = {0};
    char key[64];
    int ports[N], i;
    uint64_t renewals;

    snprintf(key, sizeof(key), "leash:%s", fc->name);
    rw_up(&w);
    holder = rw_client(&w, 6000); /* the first renewal at about 2 s */
    for (i = 0; i < N; i++) {
        CHECK_EQ_INT(fp_start(&p[i], w.s[i].port), 0);
        ports[i] = p[i].port;
    }
    redlock_options(&w, &o, ports, 6000);
    op = fx_client_opts(w.loop, &o);
    fx_wait_every_server(w.loop, op, N, 5000);
    lost_calls = 0;
    another_holds_on_the_last_two(&w, key, 30000);
    h = leash_lock_new(holder, fc->name);
    leash_on_lost(h, on_lost, NULL);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 3000), LEASH_OK);
    if (fc->old_key_released) {
        for (i = 3; i < N; i++)
            CHECK_EQ_INT(test_redis_int(&w.s[i], "DEL %s", key), 1);
        CHECK_EQ_INT(holding_servers(&w, key), 3);
    } else {
        CHECK(leash_fence(h) > 17);
        CHECK_EQ_INT(holding_servers(&w, key), N);
    }
    for (i = 0; i < 2; i++)
        CHECK_EQ_INT(fp_blackhole(&p[fc->silent[i]], FP_ALL, FP_BOTH, 1), 0);
    f = leash_lock_new(op, fc->name);
    renewals = leash_renewals(h);
    CHECK_EQ_INT(leash_force_release(f, fx_release_cb, &done), LEASH_OK);
    fx_run_until(w.loop, &done, 3000);
    CHECK_EQ_INT(test_redis_int(&w.s[fc->removed_on], "EXISTS %s", key), 0);
    /* Past the first renewal (it spreads) and one more, and their copies
     * to the servers that answered after the majority. */
    run_until_renewed(&w, h, renewals + 1, 2000 + 2000 + 500);
    fx_run_for(w.loop, 200);
    CHECK_MSG(done.status != LEASH_OK || !leash_held(h),
              "force release answered OK, and the holder still holds it on %d servers",
              holding_servers(&w, key));
    CHECK_MSG(done.status == LEASH_ECONN, "a force release that %s answered %s", fc->what,
              leash_strerror(done.status));
    CHECK_MSG(test_redis_int(&w.s[fc->removed_on], "EXISTS %s", key) == 0,
              "the removed hold is back on server %d", fc->removed_on);
    if (leash_held(h))
        CHECK_EQ_INT(fx_release_sync(w.loop, h, 3000), LEASH_OK);
    leash_lock_free(f);
    leash_client_free(op);
    leash_client_free(holder);
    for (i = 0; i < N; i++)
        fp_stop(&p[i]);
    rw_down(&w);
}

/* A hold granted by three of five (servers 3 and 4 still held the last
 * holder's key, whose release then reaches them: they never had the hold,
 * and no floor there knows its fence) is force-released by a client that
 * reaches server 0 (removed) and the two that never had it ("nobody");
 * servers 1 and 2 do not answer it. Counting the two "nobody" answers
 * toward the majority made this LEASH_OK, and then the holder's first
 * renewal spread the hold onto servers 3 and 4 and kept it on four: a
 * "nobody" counts only where the server's floor keeps the removed hold
 * out. So this is a partial force release (LEASH_ECONN), and where it
 * removed the hold, the hold does not come back. */
TEST(a_force_release_is_no_ok_where_nobody_answers_could_take_the_hold) {
    static const force_case fc = {
        "nobody", 1, {1, 2}, 0, "reached one holding server and two that never had the hold"};
    force_is_partial(&fc);
}

/* The last holder's key (fence 17) still stands on servers 3 and 4 (its
 * release has not reached them) when a hold of fence F > 17 is granted by
 * servers 0..2 (floors F there). A force release reaches server 1 (removes
 * the hold, floor F) and servers 3 and 4 (remove the old key, floor 17);
 * servers 0 and 2 do not answer it. Counting every removal made this
 * LEASH_OK, and then the holder's first renewal spread the hold onto
 * servers 3 and 4 (key gone, floor 17 < F) and held it on four: a server
 * counts only where its floor is at least the M-th largest of the N, the
 * two silent ones taken as above all (here F, server 1's). So this is a
 * partial force release (LEASH_ECONN), and the hold does not come back on
 * server 1. */
TEST(a_force_release_is_no_ok_where_an_older_hold_was_removed) {
    static const force_case fc = {
        "older", 0, {0, 2}, 1, "removed the hold on one server and an older hold on two"};
    force_is_partial(&fc);
}

/* Every server that had a hold keeps its fence as floor for as long as the
 * hold lives: else, once the floors' TTL (LEASH__FENCE_FLOOR_LEASES leases,
 * at least a minute) ran out under a long hold, a force release is undone
 * by the holder's next renewal, which spreads the hold back onto every
 * server (seen: lease 1.5 s, held 62 s, force-released: held again on all
 * five, never lost). So a renewal keeps the floors alive: after two of
 * them, each floor's TTL is longer than the grant's floor has left. */
TEST(a_renewed_hold_keeps_its_fence_floors_alive) {
    rworld w;
    leash_client *c;
    leash_lock *h;
    char name[128];
    size_t len = floor_name("leash:aged", name);
    int64_t granted;
    int i;

    rw_up(&w);
    c = rw_client(&w, 1500); /* renewals every 500 ms; floors live 60 s */
    h = leash_lock_new(c, "aged");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 3000), LEASH_OK);
    granted = test_now_ms();
    fx_run_for(w.loop, 1100);
    for (i = 0; i < N; i++) {
        redisReply *r = test_redis_cmd(&w.s[i], "PTTL %b", name, len);
        int64_t left = 60000 - (test_now_ms() - granted);
        CHECK(r != NULL && r->type == REDIS_REPLY_INTEGER);
        CHECK_MSG(r->integer > left + 300, "server %d: floor PTTL %lld, the grant's has %lld left",
                  i, r->integer, (long long)left);
        freeReplyObject(r);
    }
    CHECK_EQ_INT(fx_release_sync(w.loop, h, 3000), LEASH_OK);
    leash_client_free(c);
    rw_down(&w);
}

/* A hold granted by a bare majority is force-released before its first
 * renewal: the two servers it never reached have floors below its fence,
 * and the holder's renewal writes it there while the three that had it
 * say "not ours". The holder is lost EXPIRED; nothing may be left (a
 * force release that reported OK, then the key on two servers for a
 * lease nobody releases). */
TEST(a_force_release_before_the_first_renewal_leaves_nothing) {
    rworld w;
    leash_client *holder, *op;
    leash_lock *h;
    int i;

    rw_up(&w);
    holder = rw_client(&w, 1500); /* the first renewal at about 500 ms */
    op = rw_client(&w, 1500);
    lost_calls = 0;
    for (i = 3; i < N; i++)
        freeReplyObject(test_redis_cmd(&w.s[i], "SET leash:early %s PX 30000",
                                       "0123456789abcdef0123456789abcdef:0:1:17"));
    h = leash_lock_new(holder, "early");
    leash_on_lost(h, on_lost, NULL);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 3000), LEASH_OK);
    for (i = 3; i < N; i++) /* the last holder's release reaches them */
        CHECK_EQ_INT(test_redis_int(&w.s[i], "DEL leash:early"), 1);
    force_and_see_it_lost(&w, op, h, "early", "leash:early", 3);
    leash_client_free(op);
    leash_client_free(holder);
    rw_down(&w);
}

/* Several Redlock holds of one client renew in one command (the watchdog
 * batches the holds due together; a Redlock route has one batch key).
 * A spreading item has two keys, its lock and its floor: every hold must
 * stay held through several renewals, and every server keep every lock's
 * key a lock (never a floor's number). */
TEST(holds_renewed_in_one_batch_all_stay_held) {
    enum {
        LOCKS = 4
    };
    rworld w;
    leash_client *c;
    leash_lock *l[LOCKS];
    fx_result res[LOCKS];
    char name[LOCKS][16], key[32], v[64];
    uint64_t renewals[LOCKS];
    int i, s;

    rw_up(&w);
    c = rw_client(&w, 600); /* renewals every 200 ms */
    lost_calls = 0;
    memset(res, 0, sizeof(res));
    for (i = 0; i < LOCKS; i++) {
        snprintf(name[i], sizeof(name[i]), "batch%d", i);
        l[i] = leash_lock_new(c, name[i]);
        leash_on_lost(l[i], on_lost, NULL);
        /* All in one loop turn: the grants come back together, and so
         * their renewals fall due together. */
        CHECK_EQ_INT(leash_acquire(l[i], 0, fx_acquire_cb, &res[i]), LEASH_OK);
    }
    for (i = 0; i < LOCKS; i++) {
        fx_run_until(w.loop, &res[i], 3000);
        CHECK_EQ_INT(res[i].status, LEASH_OK);
        renewals[i] = leash_renewals(l[i]);
    }
    fx_run_for(w.loop, 1000);
    CHECK_EQ_INT(lost_calls, 0);
    for (i = 0; i < LOCKS; i++) {
        CHECK_MSG(leash_held(l[i]), "lock %d lost", i);
        CHECK_MSG(leash_renewals(l[i]) > renewals[i], "lock %d not renewed", i);
        snprintf(key, sizeof(key), "leash:batch%d", i);
        for (s = 0; s < N; s++) {
            value_on(&w, s, key, v, sizeof(v));
            CHECK_MSG(strlen(v) > 33 && v[32] == ':', "server %d: %s is \"%s\"", s, key, v);
        }
    }
    for (i = 0; i < LOCKS; i++)
        if (leash_held(l[i]))
            CHECK_EQ_INT(fx_release_sync(w.loop, l[i], 3000), LEASH_OK);
    leash_client_free(c);
    rw_down(&w);
}

/* One server frozen (SIGSTOP) under a hold: the others keep it. While it
 * is frozen the lock changes hands twice; when it thaws, the commands that
 * waited in its socket run, and none of them leaves a hold nobody owns. */
TEST(a_frozen_server_creates_no_orphan_hold_when_it_thaws) {
    rworld w;
    leash_client *a, *b;
    leash_lock *la, *lb;
    uint64_t renewals;

    rw_up(&w);
    a = rw_client(&w, 1500);
    b = rw_client(&w, 1500);
    lost_calls = 0;
    la = leash_lock_new(a, "frozen");
    lb = leash_lock_new(b, "frozen");
    leash_on_lost(la, on_lost, NULL);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, la, 0, 3000), LEASH_OK);
    test_redis_freeze(&w.s[0]);
    renewals = leash_renewals(la);
    fx_run_for(w.loop, 1200);
    CHECK_MSG(leash_renewals(la) > renewals, "no renewal with one server frozen");
    CHECK(leash_held(la));
    CHECK_EQ_INT(lost_calls, 0);
    CHECK_EQ_INT(fx_release_sync(w.loop, la, 3000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, lb, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, lb, 3000), LEASH_OK);
    /* Longer than every command's not-after: copies that sat in the frozen
     * server's socket are void when it runs them. */
    fx_run_for(w.loop, 700);
    test_redis_thaw(&w.s[0]);
    fx_run_for(w.loop, 500);
    CHECK_MSG(test_redis_int(&w.s[0], "EXISTS leash:frozen") == 0,
              "the thawed server holds a lock nobody owns");
    CHECK_EQ_INT(holding_servers(&w, "leash:frozen"), 0);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, la, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(holding_servers(&w, "leash:frozen"), N);
    CHECK_EQ_INT(fx_release_sync(w.loop, la, 3000), LEASH_OK);
    leash_client_free(a);
    leash_client_free(b);
    rw_down(&w);
}

/* Server s refuses new connections (maxclients 1: the test's own
 * connection) and drops leash's. */
static void refuse_connections(rworld *w, int s) {
    freeReplyObject(test_redis_cmd(&w->s[s], "CONFIG SET maxclients 1"));
    freeReplyObject(test_redis_cmd(&w->s[s], "CLIENT KILL TYPE normal SKIPME yes"));
    freeReplyObject(test_redis_cmd(&w->s[s], "CLIENT KILL TYPE pubsub"));
}

static void accept_connections(rworld *w, int s) {
    freeReplyObject(test_redis_cmd(&w->s[s], "CONFIG SET maxclients 10000"));
}

/* At the release one server refuses connections for a while: a majority
 * releases, and the release reports at once, OK (never "not held"). The
 * copy for that server is its duty all the same: once the server takes
 * connections again the key is gone there, before its lease would end, so
 * a minority left down afterwards (two of five killed) cannot keep a new
 * acquire waiting for that lease. */
TEST(a_release_reaches_a_server_that_was_unreachable_at_the_release) {
    rworld w;
    leash_client *a, *b;
    leash_lock *la, *lb;
    fx_result res = {0};
    int64_t t0, end;
    int round;

    rw_up(&w);
    a = rw_client(&w, 10000);
    b = rw_client(&w, 10000);
    la = leash_lock_new(a, "unreached");
    lb = leash_lock_new(b, "unreached");
    for (round = 0; round < 5; round++) {
        CHECK_EQ_INT(fx_acquire_sync(w.loop, la, 0, 3000), LEASH_OK);
        CHECK_EQ_INT(holding_servers(&w, "leash:unreached"), N);
        refuse_connections(&w, N - 1);
        t0 = test_now_ms();
        memset(&res, 0, sizeof(res));
        CHECK_EQ_INT(leash_release(la, fx_release_cb, &res), LEASH_OK);
        fx_run_until(w.loop, &res, 5000);
        CHECK_MSG(res.status == LEASH_OK, "round %d: release %s after %lld ms", round,
                  leash_strerror(res.status), (long long)(res.at_ms - t0));
        CHECK_MSG(res.at_ms - t0 < 400, "round %d: release reported after %lld ms", round,
                  (long long)(res.at_ms - t0));
        CHECK_EQ_INT(test_redis_int(&w.s[N - 1], "EXISTS leash:unreached"), 1);
        fx_run_for(w.loop, 300);
        accept_connections(&w, N - 1);
        end = test_now_ms() + 3000;
        while (test_redis_int(&w.s[N - 1], "EXISTS leash:unreached") == 1 && test_now_ms() < end)
            fx_run_for(w.loop, 20);
        CHECK_MSG(test_redis_int(&w.s[N - 1], "EXISTS leash:unreached") == 0,
                  "round %d: the release never reached the server that came back (PTTL %lld)",
                  round, test_redis_int(&w.s[N - 1], "PTTL leash:unreached"));
    }
    /* Two of five down: the three left have no stale hold. */
    CHECK_EQ_INT(test_redis_kill(&w.s[0]), 0);
    CHECK_EQ_INT(test_redis_kill(&w.s[1]), 0);
    t0 = test_now_ms();
    memset(&res, 0, sizeof(res));
    CHECK_EQ_INT(leash_acquire(lb, 30000, fx_acquire_cb, &res), LEASH_OK);
    fx_run_until(w.loop, &res, 31000);
    CHECK_EQ_INT(res.status, LEASH_OK);
    CHECK_MSG(res.at_ms - t0 < 1500, "granted %lld ms after asking", (long long)(res.at_ms - t0));
    leash_client_free(a);
    leash_client_free(b);
    rw_down(&w);
}

/* Runs the loop until c has made `connects` command connections ready. */
static void wait_connects(rworld *w, leash_client *c, uint64_t connects) {
    int64_t deadline = test_now_ms() + 5000;
    leash_stats st;

    for (;;) {
        leash_client_stats(c, &st);
        if (st.connects >= connects)
            break;
        CHECK_MSG(test_now_ms() < deadline, "%llu of %llu connections",
                  (unsigned long long)st.connects, (unsigned long long)connects);
        fx_run_for(w->loop, 2);
    }
}

/* A fresh client's first hold is granted by servers 0, 1, 2 while its
 * connections to 3 and 4 still wait for their handshake's answers: their
 * grant copies are dropped, they never have the hold. The release then
 * hears "released" from 0 and "not ours" from 3 and 4, while 1 and 2 drop
 * the client's connections. Servers that never had the hold are no sign
 * that it was gone: a release of a valid hold is LEASH_OK, at once (it was
 * LEASH_ENOTHELD at the hold's deadline). The copies for 1 and 2 still
 * reach them once they take connections again. */
TEST(a_release_is_ok_where_servers_never_had_the_hold) {
    rworld w;
    fault_proxy p[N];
    leash_options o;
    leash_client *a;
    leash_lock *la;
    fx_result res = {0};
    int ports[N], i;
    int64_t t0, end;

    rw_up(&w);
    for (i = 0; i < N; i++) {
        CHECK_EQ_INT(fp_start(&p[i], w.s[i].port), 0);
        ports[i] = p[i].port;
    }
    CHECK_EQ_INT(fp_stall(&p[3], FP_ALL, FP_DOWN, 1), 0);
    CHECK_EQ_INT(fp_stall(&p[4], FP_ALL, FP_DOWN, 1), 0);
    /* The hold's first renewal (which spreads it) comes 3.3 s on. */
    redlock_options(&w, &o, ports, 10000);
    o.connect_timeout_ms = 2000; /* the stalled handshakes wait, not reconnect */
    a = fx_client_opts(w.loop, &o);
    la = leash_lock_new(a, "never-had");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, la, 3000, 3000), LEASH_OK);
    CHECK_EQ_INT(fp_clear(&p[3]), 0);
    CHECK_EQ_INT(fp_clear(&p[4]), 0);
    wait_connects(&w, a, N);
    fx_run_for(w.loop, 50);
    for (i = 0; i < N; i++)
        CHECK_MSG(test_redis_int(&w.s[i], "EXISTS leash:never-had") == (i < 3),
                  "server %d: EXISTS %lld", i, test_redis_int(&w.s[i], "EXISTS leash:never-had"));
    for (i = 1; i < 3; i++) {
        CHECK_EQ_INT(fp_refuse(&p[i], FP_ALL, 1), 0);
        CHECK_EQ_INT(fp_cut(&p[i], FP_ALL), 0);
    }
    t0 = test_now_ms();
    CHECK(leash_valid_ms(la) > 8000);
    CHECK_EQ_INT(leash_release(la, fx_release_cb, &res), LEASH_OK);
    fx_run_until(w.loop, &res, 12000);
    CHECK_MSG(res.status == LEASH_OK, "release %s after %lld ms", leash_strerror(res.status),
              (long long)(res.at_ms - t0));
    CHECK_MSG(res.at_ms - t0 <= 300 + TEST_SLACK_MS, "release reported after %lld ms",
              (long long)(res.at_ms - t0));
    CHECK_EQ_INT(test_redis_int(&w.s[0], "EXISTS leash:never-had"), 0);
    for (i = 1; i < 3; i++)
        CHECK_EQ_INT(fp_refuse(&p[i], FP_ALL, 0), 0);
    end = test_now_ms() + 3000;
    while (holding_servers(&w, "leash:never-had") > 0 && test_now_ms() < end)
        fx_run_for(w.loop, 20);
    CHECK_EQ_INT(holding_servers(&w, "leash:never-had"), 0);
    leash_lock_free(la);
    leash_client_free(a);
    for (i = 0; i < N; i++)
        fp_stop(&p[i]);
    rw_down(&w);
}

/* A read-only script that keeps server s busy (every other client is
 * answered BUSY once lua-time-limit passed) until SCRIPT KILL; on a
 * connection of its own, whose reply the caller reads after the kill. */
static redisContext *start_busy_script(rworld *w, int s) {
    redisContext *busy = redisConnect("127.0.0.1", w->s[s].port);
    int done = 0;

    CHECK(busy != NULL && busy->err == 0);
    freeReplyObject(test_redis_cmd(&w->s[s], "CONFIG SET lua-time-limit 10"));
    CHECK_EQ_INT(redisAppendCommand(busy, "EVAL %s 0", "local i = 0 while true do i = i + 1 end"),
                 REDIS_OK);
    while (!done)
        CHECK_EQ_INT(redisBufferWrite(busy, &done), REDIS_OK);
    usleep(50 * 1000); /* past lua-time-limit: others get BUSY */
    return busy;
}

static void stop_busy_script(rworld *w, int s, redisContext *busy) {
    void *reply = NULL;

    freeReplyObject(test_redis_cmd(&w->s[s], "SCRIPT KILL"));
    (void)redisGetReply(busy, &reply); /* the script's error */
    freeReplyObject(reply);
    redisFree(busy);
}

/* A hold granted by three of five (two still held the last holder's key)
 * whose first renewal fails: its three servers answer BUSY (a long
 * script), the two still hold that key. The renewal that succeeds after it
 * must spread the hold onto the two, whose key is gone by then: the
 * spreading layout goes with the first renewal that succeeds, not with the
 * first one sent. Else the hold runs on a bare majority for a quarter of
 * its floor's life (15 s here), where losing one of its three servers
 * loses it. */
TEST(a_failed_first_renewal_does_not_put_off_the_spread) {
    rworld w;
    leash_client *a;
    leash_lock *l;
    redisContext *busy[3];
    char first[128], v[128];
    int i;

    rw_up(&w);
    a = rw_client(&w, 1500); /* renewals every 500 ms */
    lost_calls = 0;
    another_holds_on_the_last_two(&w, "leash:late", 30000);
    l = leash_lock_new(a, "late");
    leash_on_lost(l, on_lost, NULL);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK);
    value_on(&w, 0, "leash:late", first, sizeof(first));
    value_on(&w, 3, "leash:late", v, sizeof(v));
    CHECK_MSG(strncmp(v, first, 33) != 0, "server 3 granted: %s", v);
    for (i = 0; i < 3; i++)
        busy[i] = start_busy_script(&w, i);
    fx_run_for(w.loop, 600); /* the first renewal, at 500 ms, fails */
    for (i = 3; i < N; i++)  /* the last holder's release reaches them */
        CHECK_EQ_INT(test_redis_int(&w.s[i], "DEL leash:late"), 1);
    for (i = 0; i < 3; i++)
        stop_busy_script(&w, i, busy[i]);
    fx_run_for(w.loop, 1200);
    CHECK(leash_held(l));
    CHECK_EQ_INT(lost_calls, 0);
    for (i = 0; i < N; i++) {
        value_on(&w, i, "leash:late", v, sizeof(v));
        CHECK_MSG(strncmp(v, first, 33) == 0, "server %d holds '%s', not '%s'", i, v, first);
    }
    if (leash_held(l))
        CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    leash_client_free(a);
    rw_down(&w);
}

/* A hold granted by three of five (two still held the last holder's key,
 * whose release then reaches them) whose first renewal counts while one of
 * the two answers BUSY (a long script): the spread took on server 4, not on
 * server 3. The renewals after it must spread again until every server
 * that is up has the hold (or refused it for good): not a quarter of the
 * floor's life later (15 s here), while losing one of its first three
 * servers and one more loses it. */
TEST(a_spread_that_missed_a_busy_server_is_tried_again) {
    rworld w;
    leash_client *a;
    leash_lock *l;
    redisContext *busy;
    char first[128], v[128];
    uint64_t renewals;
    int64_t end;
    int i;

    rw_up(&w);
    a = rw_client(&w, 1500); /* renewals every 500 ms */
    lost_calls = 0;
    another_holds_on_the_last_two(&w, "leash:missed", 30000);
    l = leash_lock_new(a, "missed");
    leash_on_lost(l, on_lost, NULL);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK);
    value_on(&w, 0, "leash:missed", first, sizeof(first));
    value_on(&w, 3, "leash:missed", v, sizeof(v));
    CHECK_MSG(strncmp(v, first, 33) != 0, "server 3 granted: %s", v);
    for (i = 3; i < N; i++) /* the last holder's release reaches them */
        CHECK_EQ_INT(test_redis_int(&w.s[i], "DEL leash:missed"), 1);
    busy = start_busy_script(&w, 3);
    renewals = leash_renewals(l);
    end = test_now_ms() + 1000 + TEST_SLACK_MS;
    while (leash_renewals(l) == renewals && test_now_ms() < end)
        fx_run_for(w.loop, 5);
    CHECK_MSG(leash_renewals(l) > renewals, "no first renewal");
    fx_run_for(w.loop, 100); /* the plain resend to server 3 bounces too */
    stop_busy_script(&w, 3, busy);
    /* Three renewals more. */
    renewals = leash_renewals(l);
    end = test_now_ms() + 3000 + TEST_SLACK_MS;
    while (leash_renewals(l) < renewals + 3 && test_now_ms() < end)
        fx_run_for(w.loop, 10);
    CHECK(leash_held(l));
    CHECK_EQ_INT(lost_calls, 0);
    for (i = 0; i < N; i++) {
        value_on(&w, i, "leash:missed", v, sizeof(v));
        CHECK_MSG(strncmp(v, first, 33) == 0, "server %d holds '%s', not '%s'", i, v, first);
    }
    /* And it survives two of its first three servers killed. */
    CHECK_EQ_INT(test_redis_kill(&w.s[0]), 0);
    CHECK_EQ_INT(test_redis_kill(&w.s[1]), 0);
    renewals = leash_renewals(l);
    fx_run_for(w.loop, 2000);
    CHECK_MSG(leash_renewals(l) > renewals, "no renewal on the three left");
    CHECK(leash_held(l));
    CHECK_EQ_INT(lost_calls, 0);
    if (leash_held(l))
        CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    leash_client_free(a);
    rw_down(&w);
}

/* Five servers, the last with a clock that a test can step
 * (test_redis_step_clock; it starts 1 ms ahead). */
static void rw_up_steppable(rworld *w) {
    test_redis_config cfg;
    int i;

    memset(w, 0, sizeof(*w));
    memset(&cfg, 0, sizeof(cfg));
    cfg.clock_shift_ms = 1;
    for (i = 0; i < N; i++)
        CHECK_EQ_INT(test_redis_start(&w->s[i], i == N - 1 ? &cfg : NULL), 0);
    w->loop = fx_loop_new();
}

/* The server's clock (TIME) in ms. */
static int64_t server_ms(test_redis *r) {
    redisReply *t = test_redis_cmd(r, "TIME");
    int64_t ms = 0;

    if (t != NULL && t->type == REDIS_REPLY_ARRAY && t->elements == 2)
        ms = strtoll(t->element[0]->str, NULL, 10) * 1000 +
             strtoll(t->element[1]->str, NULL, 10) / 1000;
    if (t != NULL)
        freeReplyObject(t);
    return ms;
}

/* Server 4's clock steps back 5 s. `hold`: a lock held meanwhile (its
 * renewals' replies carry the server's time), or NULL (an idle client:
 * its offset is older than a lease at the next acquire). Then server 4
 * freezes through a grant and a release; when it thaws after more than
 * the grant's command timeout (but less than the step), the grant copy
 * that waited in its socket must do nothing: its "not after" stamp comes
 * from the offset measured after the step, not the largest one ever. */
static void step_back_then_freeze(rworld *w, leash_client *a, leash_lock *hold) {
    leash_lock *l = leash_lock_new(a, "stepped");
    int64_t end;

    if (hold != NULL)
        CHECK_EQ_INT(fx_acquire_sync(w->loop, hold, 0, 3000), LEASH_OK);
    fx_run_for(w->loop, 200);
    CHECK_EQ_INT(test_redis_step_clock(&w->s[N - 1], -5000), 0);
    /* Two renewals of the hold; or, idle, longer than a lease. */
    fx_run_for(w->loop, hold != NULL ? 1100 : 1600);
    if (hold != NULL) /* seen in a renewal's reply */
        CHECK(fx_log_contains("the server's clock went back by at least"));
    CHECK_MSG(server_ms(&w->s[0]) - server_ms(&w->s[N - 1]) > 4500, "the clock did not step");
    test_redis_freeze(&w->s[N - 1]);
    CHECK_EQ_INT(fx_acquire_sync(w->loop, l, 0, 3000), LEASH_OK);
    /* The grant copy sits in the frozen server's socket; its connection
     * falls silent and breaks, so the release copy is owed, not written
     * (until the hold's deadline). */
    fx_run_for(w->loop, 700);
    CHECK_EQ_INT(fx_release_sync(w->loop, l, 3000), LEASH_OK);
    /* Past the grant's not-after (the command timeout, 500 ms) and the
     * release's due (the hold's deadline, 1.5 s), within the step. */
    fx_run_for(w->loop, 2000);
    test_redis_thaw(&w->s[N - 1]);
    end = test_now_ms() + 500;
    while (test_now_ms() < end) {
        fx_run_for(w->loop, 20);
        CHECK_MSG(test_redis_int(&w->s[N - 1], "EXISTS leash:stepped") == 0,
                  "a late grant copy set the key on the stepped server (PTTL %lld ms)",
                  test_redis_int(&w->s[N - 1], "PTTL leash:stepped"));
    }
    if (hold != NULL && leash_held(hold))
        CHECK_EQ_INT(fx_release_sync(w->loop, hold, 3000), LEASH_OK);
    leash_lock_free(l);
}

TEST(a_clock_stepped_back_under_a_hold_voids_late_copies) {
    rworld w;
    leash_client *a;

    rw_up_steppable(&w);
    a = rw_client(&w, 1500); /* renewals every 500 ms */
    step_back_then_freeze(&w, a, leash_lock_new(a, "renewing"));
    leash_client_free(a);
    rw_down(&w);
}

TEST(a_clock_stepped_back_while_idle_voids_late_copies) {
    rworld w;
    leash_client *a;

    rw_up_steppable(&w);
    a = rw_client(&w, 1500);
    step_back_then_freeze(&w, a, NULL);
    leash_client_free(a);
    rw_down(&w);
}

/* The same with the last holder's key still on servers 3 and 4 at the
 * first renewal (its release reaches them only after it): "not ours"
 * there is for now only (that key is an older hold's, below the hold's
 * fence, and goes), so the renewals after it spread again, and the hold
 * is on all five two renewals after the old key went. */
TEST(a_spread_that_met_an_older_hold_is_tried_again) {
    rworld w;
    leash_client *a;
    leash_lock *l;
    char first[128], v[128];
    uint64_t renewals;
    int64_t end;
    int i;

    rw_up(&w);
    a = rw_client(&w, 1500); /* renewals every 500 ms */
    lost_calls = 0;
    another_holds_on_the_last_two(&w, "leash:older", 30000);
    l = leash_lock_new(a, "older");
    leash_on_lost(l, on_lost, NULL);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK);
    value_on(&w, 0, "leash:older", first, sizeof(first));
    renewals = leash_renewals(l);
    end = test_now_ms() + 1000 + TEST_SLACK_MS;
    while (leash_renewals(l) == renewals && test_now_ms() < end)
        fx_run_for(w.loop, 5);
    CHECK_MSG(leash_renewals(l) > renewals, "no first renewal");
    for (i = 3; i < N; i++) /* the last holder's release reaches them now */
        CHECK_EQ_INT(test_redis_int(&w.s[i], "DEL leash:older"), 1);
    renewals = leash_renewals(l);
    end = test_now_ms() + 2000 + TEST_SLACK_MS;
    while (leash_renewals(l) < renewals + 2 && test_now_ms() < end)
        fx_run_for(w.loop, 10);
    CHECK(leash_held(l));
    CHECK_EQ_INT(lost_calls, 0);
    for (i = 0; i < N; i++) {
        value_on(&w, i, "leash:older", v, sizeof(v));
        CHECK_MSG(strncmp(v, first, 33) == 0, "server %d holds '%s', not '%s'", i, v, first);
    }
    if (leash_held(l))
        CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    leash_client_free(a);
    rw_down(&w);
}

/* One of three servers frozen (SIGSTOP: its connection stays "ready")
 * through a hold's first renewal, which spreads, with a command timeout
 * longer than the lease has left then: the two others renew it at once,
 * and that is the decision. Waiting for the frozen server's answer (so as
 * to say whether the spread is done) held the decision until its
 * connection broke for silence, past the hold's deadline: lost
 * UNREACHABLE with a majority renewed. The spread is reported not done
 * instead, and the next renewal spreads again. */
TEST(a_frozen_server_does_not_hold_up_a_spreading_renewal) {
    rworld w;
    leash_options o;
    leash_client *c;
    leash_lock *l;
    int ports[N], i;
    uint64_t renewals;

    rw_up(&w);
    for (i = 0; i < N; i++)
        ports[i] = w.s[i].port;
    redlock_options(&w, &o, ports, 3000); /* the first renewal at about 1 s */
    o.nodes_count = 3;
    o.command_timeout_ms = 2800; /* longer than the lease has left then */
    c = fx_client_opts(w.loop, &o);
    fx_wait_every_server(w.loop, c, 3, 5000);
    lost_calls = 0;
    l = leash_lock_new(c, "thaw");
    leash_on_lost(l, on_lost, NULL);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK);
    test_redis_freeze(&w.s[2]);
    renewals = leash_renewals(l);
    fx_run_for(w.loop, 4200); /* past the frozen connection's break (about 3.8 s) */
    CHECK_MSG(lost_calls == 0, "lost (reason %d) with two of three servers renewing", lost_reason);
    CHECK(leash_held(l));
    CHECK_MSG(leash_renewals(l) >= renewals + 2, "%llu renewals in 4.2 s",
              (unsigned long long)(leash_renewals(l) - renewals));
    test_redis_thaw(&w.s[2]);
    if (leash_held(l))
        CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    leash_client_free(c);
    rw_down(&w);
}

/* With every server well, a hold's first renewal spreads (it carries the
 * fence, and the floor is read and kept: two reads a server) and the
 * ones after it only extend (one read), until the quarterly spread. A
 * spread reported not done when the majority answered, before the others
 * had (always, on five servers that are well), made every renewal spread. */
TEST(a_hold_on_servers_that_are_well_spreads_once) {
    rworld w;
    leash_client *c;
    leash_lock *l;
    long long before = 0, after = 0;
    uint64_t renewals;
    int i;

    rw_up(&w);
    c = rw_client(&w, 600); /* renewals every 200 ms */
    l = leash_lock_new(c, "once");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK);
    fx_run_for(w.loop, 300); /* past the first renewal */
    renewals = leash_renewals(l);
    for (i = 0; i < N; i++)
        before += test_redis_calls(&w.s[i], "get");
    fx_run_for(w.loop, 1200);
    for (i = 0; i < N; i++)
        after += test_redis_calls(&w.s[i], "get");
    renewals = leash_renewals(l) - renewals;
    CHECK(renewals >= 4);
    /* One read a renewal and server; one renewal at either end may count
     * on some servers only, and may be the spreading one. */
    CHECK_MSG(after - before <= (long long)(N * (renewals + 3)),
              "%lld reads on the servers for %llu renewals: they spread", after - before,
              (unsigned long long)renewals);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    leash_client_free(c);
    rw_down(&w);
}

/* One server answers BUSY (a long script) while a majority grants: its
 * grant copy waits out the BUSY pauses (25, 50, 100 ms...). The holder
 * releases as soon as the script ends: that server's release copy runs
 * first (nothing there yet). The grant copy that comes after it must not
 * leave the key behind on that server: nobody holds it, nobody will
 * release it, and with two more servers down it keeps every new acquire
 * waiting for its lease. */
TEST(a_grant_copy_retried_after_busy_does_not_outlive_the_release) {
    rworld w;
    leash_client *a;
    leash_lock *la;
    redisContext *busy;
    int64_t end;

    rw_up(&w);
    a = rw_client(&w, 10000);
    la = leash_lock_new(a, "busy-copy");
    busy = start_busy_script(&w, N - 1);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, la, 0, 3000), LEASH_OK);
    /* The grant copy has bounced off BUSY at about 0, 25 and 75 ms; its
     * next try comes at about 175 ms. */
    fx_run_for(w.loop, 100);
    stop_busy_script(&w, N - 1, busy);
    CHECK_EQ_INT(fx_release_sync(w.loop, la, 3000), LEASH_OK);
    CHECK_EQ_INT(holding_servers(&w, "leash:busy-copy"), 0);
    /* Past every pause the grant copy's deadline (the command timeout,
     * 500 ms) allows. */
    end = test_now_ms() + 700;
    while (test_now_ms() < end) {
        fx_run_for(w.loop, 20);
        CHECK_MSG(test_redis_int(&w.s[N - 1], "EXISTS leash:busy-copy") == 0,
                  "a grant copy set the key after the release (PTTL %lld ms)",
                  test_redis_int(&w.s[N - 1], "PTTL leash:busy-copy"));
    }
    leash_lock_free(la);
    leash_client_free(a);
    rw_down(&w);
}

/* Server s forgets its scripts (SCRIPT FLUSH) under a hold of c's, whose
 * release then caches the release script there again (NOSCRIPT, then
 * EVAL), not the acquire script. */
static void flush_all_but_release(rworld *w, leash_client *c, int s) {
    leash_lock *l = leash_lock_new(c, "warm");
    long long evals;
    int64_t end;

    CHECK_EQ_INT(fx_acquire_sync(w->loop, l, 0, 3000), LEASH_OK);
    fx_run_for(w->loop, 100); /* the grant's copies a majority did not wait for */
    freeReplyObject(test_redis_cmd(&w->s[s], "SCRIPT FLUSH"));
    evals = test_redis_calls(&w->s[s], "eval");
    CHECK_EQ_INT(fx_release_sync(w->loop, l, 3000), LEASH_OK);
    end = test_now_ms() + 2000;
    while (test_redis_calls(&w->s[s], "eval") == evals && test_now_ms() < end)
        fx_run_for(w->loop, 10);
    CHECK_MSG(test_redis_calls(&w->s[s], "eval") == evals + 1, "%lld EVAL on server %d",
              test_redis_calls(&w->s[s], "eval") - evals, s);
    CHECK_EQ_INT(holding_servers(w, "leash:warm"), 0);
    leash_lock_free(l);
}

/* Server s never has `key` for the next ms milliseconds. */
static void never_on(rworld *w, int s, const char *key, int64_t ms) {
    int64_t end = test_now_ms() + ms;

    while (test_now_ms() < end) {
        fx_run_for(w->loop, 20);
        CHECK_MSG(test_redis_int(&w->s[s], "EXISTS %s", key) == 0,
                  "server %d holds %s, nobody's (PTTL %lld ms)", s, key,
                  test_redis_int(&w->s[s], "PTTL %s", key));
    }
}

/* The last server forgot the acquire script (SCRIPT FLUSH; the release
 * script is cached again) and answers slowly (200 ms away). A grant copy
 * there is dropped at the decision and answered NOSCRIPT after the copies
 * written behind it went: the release of the hold, or the give-back of an
 * attempt that missed its majority. Sent again as EVAL, it would run after
 * them and leave a key with a full lease that nobody holds. */
TEST(a_dropped_grant_copy_answered_noscript_is_not_sent_again) {
    rworld w;
    fault_proxy p;
    leash_options o;
    leash_client *a;
    leash_lock *la, *lb;
    int ports[N], i;

    rw_up(&w);
    CHECK_EQ_INT(fp_start(&p, w.s[N - 1].port), 0);
    for (i = 0; i < N; i++)
        ports[i] = i == N - 1 ? p.port : w.s[i].port;
    redlock_options(&w, &o, ports, 10000);
    a = fx_client_opts(w.loop, &o);
    fx_wait_every_server(w.loop, a, N, 5000);
    la = leash_lock_new(a, "noscript-release");
    lb = leash_lock_new(a, "noscript-giveback");

    /* The release. */
    flush_all_but_release(&w, a, N - 1);
    CHECK_EQ_INT(fp_delay(&p, FP_ALL, FP_UP, 200), 0);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, la, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, la, 3000), LEASH_OK);
    never_on(&w, N - 1, "leash:noscript-release", 800);
    CHECK_EQ_INT(holding_servers(&w, "leash:noscript-release"), 0);

    /* The give-back: three servers hold the key for another client. */
    CHECK_EQ_INT(fp_delay(&p, FP_ALL, FP_UP, 0), 0);
    flush_all_but_release(&w, a, N - 1);
    CHECK_EQ_INT(fp_delay(&p, FP_ALL, FP_UP, 200), 0);
    for (i = 0; i < 3; i++)
        freeReplyObject(test_redis_cmd(&w.s[i], "SET %s %s PX %d", "leash:noscript-giveback",
                                       "0123456789abcdef0123456789abcdef:0:1:17", 30000));
    CHECK_EQ_INT(fx_acquire_sync(w.loop, lb, 0, 3000), LEASH_EBUSY);
    never_on(&w, N - 1, "leash:noscript-giveback", 800);
    CHECK_EQ_INT(test_redis_int(&w.s[3], "EXISTS leash:noscript-giveback"), 0);

    leash_lock_free(la);
    leash_lock_free(lb);
    leash_client_free(a);
    fp_stop(&p);
    rw_down(&w);
}

/* One server answers BUSY through the grant (its copy is dropped: it never
 * had the hold, its floor is below the hold's fence) and at the first
 * renewal, whose copy there bounces before the majority (10 ms further
 * away) renewed, and waits out the BUSY pause (25 ms) in the delayed list.
 * The holder releases as soon as the renewal counts, and the script ends:
 * the release runs there first (nothing to remove). The renewal copy that
 * comes after it must not spread the hold onto that server: nobody holds
 * it any more. */
TEST(a_renewal_copy_retried_after_busy_does_not_spread_after_the_release) {
    rworld w;
    fault_proxy p[N - 1];
    leash_options o;
    leash_client *a;
    leash_lock *la;
    redisContext *busy;
    uint64_t renewals;
    int64_t end;
    int ports[N], i;

    rw_up(&w);
    for (i = 0; i < N - 1; i++) {
        CHECK_EQ_INT(fp_start(&p[i], w.s[i].port), 0);
        CHECK_EQ_INT(fp_delay(&p[i], FP_ALL, FP_UP, 10), 0);
        ports[i] = p[i].port;
    }
    ports[N - 1] = w.s[N - 1].port;
    redlock_options(&w, &o, ports, 1500); /* renewals every 500 ms */
    a = fx_client_opts(w.loop, &o);
    fx_wait_every_server(w.loop, a, N, 5000);
    la = leash_lock_new(a, "busy-renew");
    busy = start_busy_script(&w, N - 1);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, la, 0, 3000), LEASH_OK);
    renewals = leash_renewals(la);
    end = test_now_ms() + 1000;
    while (leash_renewals(la) == renewals && test_now_ms() < end)
        fx_run_for(w.loop, 1);
    CHECK_MSG(leash_renewals(la) > renewals, "no renewal");
    stop_busy_script(&w, N - 1, busy);
    CHECK_EQ_INT(fx_release_sync(w.loop, la, 3000), LEASH_OK);
    end = test_now_ms() + 600;
    while (test_now_ms() < end) {
        fx_run_for(w.loop, 20);
        CHECK_MSG(test_redis_int(&w.s[N - 1], "EXISTS leash:busy-renew") == 0,
                  "a renewal copy set the key after the release (PTTL %lld ms)",
                  test_redis_int(&w.s[N - 1], "PTTL leash:busy-renew"));
    }
    CHECK_EQ_INT(holding_servers(&w, "leash:busy-renew"), 0);
    leash_lock_free(la);
    leash_client_free(a);
    for (i = 0; i < N - 1; i++)
        fp_stop(&p[i]);
    rw_down(&w);
}

/* Three clients race for one lock, each closer to different servers (the
 * fault proxy delays the others): votes split. At most one holds at any
 * moment, the others try again, and each gets it in turn. */
enum {
    RACERS = 3
};

typedef struct racer {
    leash_client *c;
    leash_lock *l;
    fx_result res;
    int holds;
    fault_proxy p[N];
} racer;

TEST(a_split_vote_resolves_with_at_most_one_holder) {
    rworld w;
    racer r[RACERS];
    int i, s, rounds = 0, done = 0;
    int64_t end;

    rw_up(&w);
    memset(r, 0, sizeof(r));
    for (i = 0; i < RACERS; i++) {
        leash_options o;
        int ports[N];
        for (s = 0; s < N; s++) {
            CHECK_EQ_INT(fp_start(&r[i].p[s], w.s[s].port), 0);
            /* Racer i is near servers i and i + 3 (mod 5), far from the rest. */
            if (s != i && s != (i + 3) % N)
                CHECK_EQ_INT(fp_delay(&r[i].p[s], FP_ALL, FP_UP, 15), 0);
            ports[s] = r[i].p[s].port;
        }
        redlock_options(&w, &o, ports, 3000);
        r[i].c = fx_client_opts(w.loop, &o);
        fx_wait_connected(w.loop, r[i].c, 5000);
        r[i].l = leash_lock_new(r[i].c, "split");
    }
    for (i = 0; i < RACERS; i++)
        CHECK_EQ_INT(leash_acquire(r[i].l, 10000, fx_acquire_cb, &r[i].res), LEASH_OK);
    end = test_now_ms() + 15000;
    while (done < RACERS && test_now_ms() < end) {
        int holders = 0;
        fx_run_for(w.loop, 2);
        for (i = 0; i < RACERS; i++)
            holders += leash_held(r[i].l) != 0;
        CHECK_MSG(holders <= 1, "%d holders at once", holders);
        for (i = 0; i < RACERS; i++) {
            if (r[i].res.calls == 1 && r[i].holds == 0) {
                CHECK_EQ_INT(r[i].res.status, LEASH_OK);
                r[i].holds = 1;
                rounds++;
                fx_run_for(w.loop, 20); /* the others stay out meanwhile */
                for (s = 0; s < RACERS; s++)
                    CHECK(s == i || !leash_held(r[s].l));
                CHECK_EQ_INT(fx_release_sync(w.loop, r[i].l, 3000), LEASH_OK);
                done++;
            }
        }
    }
    CHECK_EQ_INT(done, RACERS);
    for (i = 0; i < RACERS; i++) {
        leash_client_free(r[i].c);
        for (s = 0; s < N; s++)
            fp_stop(&r[i].p[s]);
    }
    rw_down(&w);
}

/* 1 000 handoffs between two clients while, now and then, a server is
 * killed and brought back empty after a lease (the delayed restart): a
 * storage that refuses smaller fences never refuses a holder's write. */
TEST(fences_never_go_back_across_handoffs_while_servers_restart) {
    rworld w;
    leash_client *a, *b;
    leash_lock *la, *lb;
    int i, down = -1, busy = 0;
    int64_t down_since = 0;
    const int64_t lease = 400;

    rw_up(&w);
    a = rw_client(&w, lease);
    b = rw_client(&w, lease);
    la = leash_lock_new(a, "fenced");
    lb = leash_lock_new(b, "fenced");
    storage_fence = 0;
    for (i = 0; i < 1000; i++) {
        leash_lock *l = i % 2 ? lb : la;
        int rc = fx_acquire_sync(w.loop, l, 2000, 5000);
        if (rc != LEASH_OK) {
            busy++;
            continue;
        }
        CHECK_MSG(storage_write(leash_fence(l)) == 0,
                  "handoff %d: fence %llu below %llu written before", i,
                  (unsigned long long)leash_fence(l), (unsigned long long)storage_fence);
        CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
        if (down < 0 && i % 100 == 50) {
            down = (i / 100) % N;
            CHECK_EQ_INT(test_redis_kill(&w.s[down]), 0);
            down_since = test_now_ms();
        } else if (down >= 0 && test_now_ms() - down_since > lease + TEST_SLACK_MS) {
            CHECK_EQ_INT(test_redis_restart(&w.s[down]), 0);
            down = -1;
        }
    }
    printf("  1000 handoffs, %d not granted in time, last fence %llu\n", busy,
           (unsigned long long)storage_fence);
    CHECK(busy < 50);
    leash_client_free(a);
    leash_client_free(b);
    rw_down(&w);
}

/* ---- servers whose clocks differ ---- */

/* Server AHEAD's clock runs SKEW_MS ahead of the machine's, BEHIND's
 * SKEW_MS behind, servers 2, 3 and 4 are on time (support/clock_shift.c).
 * The clients reach each server through a fault proxy, so that a case
 * decides which servers a grant can reach (the others refuse connections
 * and keep their data) apart from which servers lose their data (killed,
 * restarted empty). */
enum {
    AHEAD = 0,
    BEHIND = 1,
    SKEW_MS = 10000,
    SKEW_CLIENTS = 3
};
#define ALL_SERVERS ((1u << N) - 1)
#define THREE(a, b, c) ((1u << (a)) | (1u << (b)) | (1u << (c)))

typedef struct skewed {
    rworld w;
    fault_proxy p[N];
    unsigned up; /* bit i: w.s[i] is reachable */
    int64_t lease_ms;
    leash_client *c[SKEW_CLIENTS];
    uint64_t connects[SKEW_CLIENTS]; /* command connections each has made once ready */
    int clients;
    /* A run of handoffs of one name between the first two clients. */
    leash_lock *turn[2];
    uint64_t last;
    int handoffs;
} skewed;

/* persistent: the servers that run with appendonly (fsync always). */
static void skewed_up(skewed *k, unsigned persistent, int64_t lease_ms) {
    int i;

    memset(k, 0, sizeof(*k));
    for (i = 0; i < N; i++) {
        test_redis_config cfg = {0};
        cfg.clock_shift_ms = i == AHEAD ? SKEW_MS : i == BEHIND ? -SKEW_MS : 0;
        if (persistent & (1u << i))
            cfg.extra = "appendonly yes\nappendfsync always";
        CHECK_EQ_INT(test_redis_start(&k->w.s[i], &cfg), 0);
        CHECK_EQ_INT(fp_start(&k->p[i], k->w.s[i].port), 0);
    }
    k->w.loop = fx_loop_new();
    k->up = ALL_SERVERS;
    k->lease_ms = lease_ms;
}

static void skewed_down(skewed *k) {
    int i;

    for (i = 0; i < k->clients; i++)
        leash_client_free(k->c[i]);
    for (i = 0; i < N; i++)
        fp_stop(&k->p[i]);
    rw_down(&k->w);
}

static int count_servers(unsigned set) {
    int n = 0;

    for (; set != 0; set &= set - 1)
        n++;
    return n;
}

/* "ahead, 2, 3" for the servers of set, into buf. */
static const char *servers_text(unsigned set, char *buf, size_t cap) {
    size_t len = 0;
    int i;

    buf[0] = '\0';
    for (i = 0; i < N; i++) {
        if (!(set & (1u << i)))
            continue;
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", len ? ", " : "",
                                i == AHEAD    ? "ahead"
                                : i == BEHIND ? "behind"
                                              : "");
        if (i != AHEAD && i != BEHIND)
            len += (size_t)snprintf(buf + len, cap - len, "%d", i);
    }
    return buf;
}

/* Runs the loop until every client's command connections to the servers
 * it reaches are ready (a grant's copy waits for its server's connection
 * no longer than the command timeout). */
static void skewed_wait_connected(skewed *k) {
    int64_t deadline = test_now_ms() + 5000;
    leash_stats st;
    int i;

    for (i = 0; i < k->clients; i++) {
        for (;;) {
            leash_client_stats(k->c[i], &st);
            if (st.connects >= k->connects[i])
                break;
            CHECK_MSG(test_now_ms() < deadline, "client %d: %llu of %llu connections", i,
                      (unsigned long long)st.connects, (unsigned long long)k->connects[i]);
            fx_run_for(k->w.loop, 2);
        }
    }
}

/* A new client of the five, connected to those reachable now (it never
 * reached the others). */
static leash_client *skewed_client(skewed *k) {
    leash_options o;
    int ports[N], i;

    CHECK(k->clients < SKEW_CLIENTS);
    for (i = 0; i < N; i++)
        ports[i] = k->p[i].port;
    redlock_options(&k->w, &o, ports, k->lease_ms);
    k->c[k->clients] = fx_client_opts(k->w.loop, &o);
    k->connects[k->clients] = (uint64_t)count_servers(k->up);
    k->clients++;
    skewed_wait_connected(k);
    return k->c[k->clients - 1];
}

/* Makes exactly the servers of `up` reachable: the others refuse new
 * connections and drop the ones they had (keeping their data). */
static void skewed_reach(skewed *k, unsigned up) {
    unsigned back = up & ~k->up;
    int i;

    for (i = 0; i < N; i++) {
        unsigned bit = 1u << i;
        if ((up & bit) && !(k->up & bit)) {
            CHECK_EQ_INT(fp_refuse(&k->p[i], FP_ALL, 0), 0);
        } else if (!(up & bit) && (k->up & bit)) {
            CHECK_EQ_INT(fp_refuse(&k->p[i], FP_ALL, 1), 0);
            CHECK_EQ_INT(fp_cut(&k->p[i], FP_ALL), 0);
        }
    }
    k->up = up;
    for (i = 0; i < k->clients; i++)
        k->connects[i] += (uint64_t)count_servers(back);
    skewed_wait_connected(k);
}

/* l (whose key is `key`) acquired and released among the servers
 * reachable now, and gone from all of them before anything changes (a
 * release copy still on its way when a majority answered lands first).
 * Its fence. */
static uint64_t take_and_give_back(skewed *k, leash_lock *l, const char *key) {
    int64_t deadline;
    uint64_t fence;

    CHECK_EQ_INT(fx_acquire_sync(k->w.loop, l, 0, 3000), LEASH_OK);
    fence = leash_fence(l);
    CHECK_EQ_INT(fx_release_sync(k->w.loop, l, 3000), LEASH_OK);
    deadline = test_now_ms() + k->lease_ms + 1000;
    while (holding_servers(&k->w, key) > 0) {
        CHECK_MSG(test_now_ms() < deadline, "%s still held after its release", key);
        fx_run_for(k->w.loop, 2);
    }
    return fence;
}

/* The next handoff of the run, among the servers of `up`: a fence above
 * every earlier one. */
static void skewed_handoff(skewed *k, unsigned up) {
    char text[64];
    uint64_t fence;

    skewed_reach(k, up);
    fence = take_and_give_back(k, k->turn[k->handoffs % 2], "leash:skewed");
    CHECK_MSG(fence > k->last, "handoff %d, granted by %s: fence %llu after %llu", k->handoffs,
              servers_text(up, text, sizeof(text)), (unsigned long long)fence,
              (unsigned long long)k->last);
    k->last = fence;
    k->handoffs++;
}

/* 61 handoffs between two clients over five servers whose clocks are up
 * to 20 s apart (one 10 s ahead, one 10 s behind), each granted by servers
 * the case made reachable: fences only grow.
 *
 * First without data loss, the hardest pairs: a majority with the server
 * ahead grants (its fence is its clock, 10 s above the others'), then the
 * majority that shares one server only with it, and no clock ahead: that
 * server's fence floor alone carries the fence. Then each server in turn is
 * killed and restarted empty a lease later (Redlock's delayed restart),
 * while the four left grant the lock. Last, a name nobody took since the
 * server ahead granted it 10 s before, every server having restarted
 * since: a majority without the server ahead grants it a higher fence, as
 * more time has passed than the clocks differ (the next case shows the
 * same a lease later, when not). */
TEST(fences_grow_with_clocks_10s_ahead_and_behind_while_servers_restart) {
    skewed k;
    leash_client *a, *b;
    leash_lock *idle;
    uint64_t idle_fence;
    int64_t idle_at, down_at;
    int x, y, z, kept;

    skewed_up(&k, 0, 500);
    a = skewed_client(&k);
    b = skewed_client(&k);
    k.turn[0] = leash_lock_new(a, "skewed");
    k.turn[1] = leash_lock_new(b, "skewed");
    idle = leash_lock_new(a, "idle");
    skewed_reach(&k, THREE(AHEAD, 2, 3));
    idle_fence = take_and_give_back(&k, idle, "leash:idle");
    idle_at = test_now_ms();

    for (y = 1; y < N; y++)
        for (z = y + 1; z < N; z++)
            for (kept = y; kept <= z; kept += z - y) {
                unsigned with_ahead = THREE(AHEAD, y, z);
                skewed_handoff(&k, with_ahead);
                skewed_handoff(&k, (ALL_SERVERS & ~with_ahead) | (1u << kept));
            }

    for (x = 0; x < N; x++) {
        unsigned others = ALL_SERVERS & ~(1u << x);
        skewed_reach(&k, others);
        CHECK_EQ_INT(test_redis_kill(&k.w.s[x]), 0);
        down_at = test_now_ms();
        for (y = 0; y < N; y++)
            if (y != x)
                skewed_handoff(&k, others & ~(1u << y));
        skewed_handoff(&k, others);
        while (test_now_ms() - down_at < k.lease_ms)
            fx_run_for(k.w.loop, 10);
        CHECK_EQ_INT(test_redis_restart(&k.w.s[x]), 0);
        skewed_handoff(&k, THREE(x, (x + 1) % N, (x + 3) % N));
        skewed_handoff(&k, ALL_SERVERS);
    }

    while (test_now_ms() - idle_at < SKEW_MS + TEST_SLACK_MS)
        fx_run_for(k.w.loop, 20);
    skewed_reach(&k, THREE(BEHIND, 3, 4));
    idle = leash_lock_new(b, "idle");
    CHECK_EQ_INT(fx_acquire_sync(k.w.loop, idle, 0, 3000), LEASH_OK);
    CHECK_MSG(leash_fence(idle) > idle_fence, "fence %llu after %llu, %lld ms after it",
              (unsigned long long)leash_fence(idle), (unsigned long long)idle_fence,
              (long long)(test_now_ms() - idle_at));
    CHECK_EQ_INT(fx_release_sync(k.w.loop, idle, 3000), LEASH_OK);
    printf("  %d handoffs, last fence %llu\n", k.handoffs + 2, (unsigned long long)k.last);
    CHECK(k.handoffs >= 50);
    skewed_down(&k);
}

/* Where fences go back: servers 2 and 3 grant with the server ahead (the
 * fence is its clock, 10 s above theirs), then lose their data and come
 * back a lease later - the delayed restart Redlock asks for, which keeps
 * holds apart - and a majority that shares no other server with that
 * grant takes the lock before the clock difference has passed, through a
 * client that never reached the server ahead: nothing it reaches knows
 * the fence, and every clock it reaches is behind the one that made it.
 * Server 2 came back empty: the fence goes back. Server 3 runs with
 * appendonly (fsync always) and came back with its floor: the fence grows.
 * docs/redlock.md "Redlock" and leash_fence() say so; if this ever grows, they
 * must change with it. */
TEST(a_server_back_empty_sooner_than_the_clocks_differ_can_take_a_fence_back) {
    skewed k;
    leash_client *first, *later;
    leash_lock *l;
    uint64_t on_2, on_3;
    int64_t down_at;

    skewed_up(&k, 1u << 3, 500);
    first = skewed_client(&k);
    skewed_reach(&k, THREE(AHEAD, 2, 3));
    on_2 = take_and_give_back(&k, leash_lock_new(first, "on-2"), "leash:on-2");
    on_3 = take_and_give_back(&k, leash_lock_new(first, "on-3"), "leash:on-3");
    skewed_reach(&k, THREE(AHEAD, BEHIND, 4));
    CHECK_EQ_INT(test_redis_kill(&k.w.s[2]), 0);
    CHECK_EQ_INT(test_redis_kill(&k.w.s[3]), 0);
    down_at = test_now_ms();
    while (test_now_ms() - down_at < k.lease_ms)
        fx_run_for(k.w.loop, 10);
    CHECK_EQ_INT(test_redis_restart(&k.w.s[2]), 0);
    CHECK_EQ_INT(test_redis_restart_keeping_data(&k.w.s[3]), 0);

    skewed_reach(&k, THREE(BEHIND, 2, 4));
    later = skewed_client(&k);
    l = leash_lock_new(later, "on-2");
    CHECK_MSG(
        take_and_give_back(&k, l, "leash:on-2") < on_2,
        "the fence grew: docs/redlock.md \"Redlock\" and leash_fence() say it goes back here");
    skewed_reach(&k, THREE(BEHIND, 3, 4));
    l = leash_lock_new(later, "on-3");
    CHECK_MSG(take_and_give_back(&k, l, "leash:on-3") > on_3,
              "a server that kept its data did not carry the fence on");
    skewed_down(&k);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(two_clients_exclude_each_other_and_fences_grow),
        TEST_CASE(a_grant_whose_fences_agree_takes_no_raise),
        TEST_CASE(fences_that_differ_are_raised_before_the_grant_counts),
        TEST_CASE(a_multi_lock_whose_fences_differ_raises_every_members_floor),
        TEST_CASE(a_multi_lock_busy_on_a_majority_leaves_nothing_and_on_a_minority_holds),
        TEST_CASE(a_multi_lock_busy_everywhere_sends_no_give_back),
        TEST_CASE(a_multi_lock_ended_before_its_quorum_decided_leaves_no_keys),
        TEST_CASE(a_mutex_cancelled_before_its_quorum_decided_leaves_no_keys),
        TEST_CASE(a_late_multi_grant_of_a_waiting_acquire_tries_again),
        TEST_CASE(an_uncontended_cycle_costs_each_server_eight_calls_and_no_publish),
        TEST_CASE(a_force_release_from_a_new_client_reaches_every_server),
        TEST_CASE(two_servers_killed_keep_the_hold_a_third_loses_it),
        TEST_CASE(two_servers_down_and_a_crashed_holder_on_a_third_is_waited_out),
        TEST_CASE(grants_short_of_replicas_end_ereplicas_without_a_retry_loop),
        TEST_CASE(a_wait_with_no_majority_reachable_ends_econn),
        TEST_CASE(an_acquire_attempts_again_while_a_majority_reconnects),
        TEST_CASE(a_key_without_expiry_and_failing_servers_make_no_retry_loop),
        TEST_CASE(a_failed_extra_hold_leaves_the_hold_alone),
        TEST_CASE(a_handoff_to_the_only_waiter_takes_no_random_pause),
        TEST_CASE(a_renewal_goes_once_to_each_server_when_all_are_well),
        TEST_CASE(a_hold_granted_by_a_bare_majority_spreads_and_survives_two_kills),
        TEST_CASE(a_failed_first_renewal_does_not_put_off_the_spread),
        TEST_CASE(a_spread_that_missed_a_busy_server_is_tried_again),
        TEST_CASE(a_spread_that_met_an_older_hold_is_tried_again),
        TEST_CASE(a_frozen_server_does_not_hold_up_a_spreading_renewal),
        TEST_CASE(a_hold_on_servers_that_are_well_spreads_once),
        TEST_CASE(a_hold_outlives_servers_whose_memory_is_full),
        TEST_CASE(a_floor_of_another_type_spoils_no_renewal_of_the_batch),
        TEST_CASE(a_force_released_hold_is_lost_at_its_renewal_not_spread_again),
        TEST_CASE(a_force_release_before_the_first_renewal_leaves_nothing),
        TEST_CASE(a_force_release_that_reaches_two_of_five_is_an_error_and_stays),
        TEST_CASE(a_force_release_is_no_ok_where_nobody_answers_could_take_the_hold),
        TEST_CASE(a_force_release_is_no_ok_where_an_older_hold_was_removed),
        TEST_CASE(holds_renewed_in_one_batch_all_stay_held),
        TEST_CASE(a_renewed_hold_keeps_its_fence_floors_alive),
        TEST_CASE(a_frozen_server_creates_no_orphan_hold_when_it_thaws),
        TEST_CASE(a_clock_stepped_back_under_a_hold_voids_late_copies),
        TEST_CASE(a_clock_stepped_back_while_idle_voids_late_copies),
        TEST_CASE(a_split_vote_resolves_with_at_most_one_holder),
        TEST_CASE(a_release_reaches_a_server_that_was_unreachable_at_the_release),
        TEST_CASE(a_release_is_ok_where_servers_never_had_the_hold),
        TEST_CASE(a_grant_copy_retried_after_busy_does_not_outlive_the_release),
        TEST_CASE(a_dropped_grant_copy_answered_noscript_is_not_sent_again),
        TEST_CASE(a_renewal_copy_retried_after_busy_does_not_spread_after_the_release),
        TEST_CASE_T(fences_never_go_back_across_handoffs_while_servers_restart, 180),
        TEST_CASE(fences_grow_with_clocks_10s_ahead_and_behind_while_servers_restart),
        TEST_CASE(a_server_back_empty_sooner_than_the_clocks_differ_can_take_a_fence_back),
        {0},
    };
    return test_main(argc, argv, cases);
}
