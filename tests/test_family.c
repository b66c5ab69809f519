/* SPDX-License-Identifier: MIT */
#define _DEFAULT_SOURCE 1 /* kill, usleep */
/* The lock family against real servers (one server or a cluster; the
 * family refuses Redlock, test_lock.c checks that): the fair lock, the
 * read-write lock and the semaphore, each as leash.h promises it. A
 * stand-in resource counts who uses it at once; crashes are children of
 * the case, each with its own client, killed with SIGKILL. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dialect/dialect.h"
#include "fixture.h"
#include "prim/lock.h"

/* ---- the kinds ---- */

enum kind {
    K_FAIR,
    K_READ,
    K_WRITE,
    K_SEM
};

static const char *kind_name(enum kind k) {
    static const char *const names[] = {"fair lock", "read lock", "write lock", "semaphore"};
    return names[k];
}

static leash_lock *make_lock(leash_client *c, enum kind k, const char *name, int permits) {
    leash_lock *l = NULL;

    switch (k) {
    case K_FAIR:
        l = leash_fair_lock_new(c, name);
        break;
    case K_READ:
        l = leash_read_lock_new(c, name);
        break;
    case K_WRITE:
        l = leash_write_lock_new(c, name);
        break;
    case K_SEM:
        l = leash_semaphore_new(c, name, permits);
        break;
    }
    CHECK_MSG(l != NULL, "no %s handle for %s", kind_name(k), name);
    return l;
}

static leash_lock *fair(leash_client *c, const char *name) {
    return make_lock(c, K_FAIR, name, 0);
}
static leash_lock *reader(leash_client *c, const char *name) {
    return make_lock(c, K_READ, name, 0);
}
static leash_lock *writer(leash_client *c, const char *name) {
    return make_lock(c, K_WRITE, name, 0);
}
static leash_lock *sem(leash_client *c, const char *name, int permits) {
    return make_lock(c, K_SEM, name, permits);
}

/* The renew interval of a lease (the client's default, lease / 3). */
static int64_t interval_of(int64_t lease_ms) {
    return lease_ms / 3;
}

/* Runs the loop until r is done or ms passed, without failing: for
 * "nothing happens meanwhile". */
static void run_for_or_until(fx_world *w, fx_result *r, int64_t ms) {
    fx_run_until_flag(w->loop, &r->done, ms);
}

/* Every key in the server of `key` (a lock's key and its companions
 * share its slot) has a TTL: nothing stays behind for ever. */
static void check_keys_expire(fx_world *w, const char *key) {
    test_redis *r = fx_redis_of(w, key);
    redisReply *rep = test_redis_cmd(r, "KEYS *");
    size_t i;

    CHECK(rep != NULL && rep->type == REDIS_REPLY_ARRAY);
    for (i = 0; i < rep->elements; i++) {
        long long ttl = test_redis_int(r, "PTTL %b", rep->element[i]->str, rep->element[i]->len);
        CHECK_MSG(ttl > 0, "key %s (%zu bytes) has PTTL %lld", rep->element[i]->str,
                  (size_t)rep->element[i]->len, ttl);
    }
    freeReplyObject(rep);
}

/* Nothing is left in Redis within ms once nobody uses the world's names
 * (every key leash writes has a TTL of at most a few leases). */
static void check_nothing_left(fx_world *w, int64_t ms) {
    int64_t end = test_now_ms() + ms;

    while (fx_dbsize(w) > 0 && test_now_ms() < end)
        fx_run_for(w->loop, 10);
    CHECK_MSG(fx_dbsize(w) == 0, "%lld keys left %lld ms after the last user left", fx_dbsize(w),
              (long long)ms);
}

/* Deletes the lock's key and every companion of it (key + NUL + ...), as
 * a server that lost its data would: the keys that start with `key`. */
static long long del_lock_keys(fx_world *w, const char *key) {
    test_redis *r = fx_redis_of(w, key);
    redisReply *rep = test_redis_cmd(r, "KEYS *");
    size_t i, klen = strlen(key);
    long long n = 0;

    CHECK(rep != NULL && rep->type == REDIS_REPLY_ARRAY);
    for (i = 0; i < rep->elements; i++) {
        redisReply *e = rep->element[i];
        if (e->len >= klen && memcmp(e->str, key, klen) == 0)
            n += test_redis_int(r, "DEL %b", e->str, e->len);
    }
    freeReplyObject(rep);
    return n;
}

/* ---- a stand-in resource, and contenders that use it in cycles ---- */

#define FENCES_MAX 4096

typedef struct resource {
    int limit;   /* most users allowed at once (exclusive users: alone) */
    int readers; /* shared users now */
    int writers; /* exclusive users now */
    int peak;    /* most users at once */
    int peak_readers;
    int violations;       /* grants that broke the limit */
    uint64_t last_fence;  /* exclusive grants: each fence above the last */
    int fence_violations; /* exclusive grants whose fence did not grow */
    int nfences;
    uint64_t fences[FENCES_MAX]; /* every grant's fence */
} resource;

static void resource_enter(resource *r, int exclusive, uint64_t fence) {
    int users;

    if (exclusive)
        r->writers++;
    else
        r->readers++;
    users = r->readers + r->writers;
    if (users > r->peak)
        r->peak = users;
    if (r->readers > r->peak_readers)
        r->peak_readers = r->readers;
    if (r->writers > 1 || (r->writers == 1 && r->readers > 0) || users > r->limit)
        r->violations++;
    if (exclusive) {
        if (fence <= r->last_fence)
            r->fence_violations++;
        r->last_fence = fence;
    }
    if (r->nfences < FENCES_MAX)
        r->fences[r->nfences++] = fence;
}

static void resource_leave(resource *r, int exclusive) {
    if (exclusive)
        r->writers--;
    else
        r->readers--;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Every grant had a fence of its own. */
static void check_fences_distinct(resource *r) {
    int i;

    qsort(r->fences, (size_t)r->nfences, sizeof(r->fences[0]), cmp_u64);
    for (i = 0; i < r->nfences; i++) {
        CHECK(r->fences[i] != 0);
        CHECK_MSG(i == 0 || r->fences[i] != r->fences[i - 1], "fence %llu given twice",
                  (unsigned long long)r->fences[i]);
    }
}

enum {
    C_IDLE,
    C_WAITING,
    C_HOLDING,
    C_RELEASING,
    C_DONE
};

typedef struct contender {
    leash_lock *l;
    resource *res;
    int exclusive;
    int state;
    int cycles_left;
    int grants;
    int64_t hold_ms;
    int64_t hold_until;
    int64_t wait_ms;
    int64_t start_at;   /* first acquire not before this */
    int64_t granted_at; /* the last grant */
    int errors;
    int last_error;
    int losses; /* lost callbacks */
    int last_loss;
} contender;

static void contender_lost(leash_lock *l, int reason, void *arg) {
    contender *k = arg;

    (void)l;
    k->losses++;
    k->last_loss = reason;
    if (k->state == C_HOLDING) {
        resource_leave(k->res, k->exclusive);
        k->state = k->cycles_left > 0 ? C_IDLE : C_DONE;
    }
}

static void contender_init(contender *k, leash_lock *l, resource *res, int exclusive, int cycles,
                           int64_t hold_ms) {
    memset(k, 0, sizeof(*k));
    k->l = l;
    k->res = res;
    k->exclusive = exclusive;
    k->cycles_left = cycles;
    k->hold_ms = hold_ms;
    k->wait_ms = LEASH_WAIT_FOREVER;
    k->state = cycles > 0 ? C_IDLE : C_DONE;
    leash_on_lost(l, contender_lost, k);
}

static void contender_granted(leash_lock *l, int status, void *arg) {
    contender *k = arg;

    if (status != LEASH_OK) {
        k->errors++;
        k->last_error = status;
        k->state = k->cycles_left > 0 ? C_IDLE : C_DONE;
        return;
    }
    resource_enter(k->res, k->exclusive, leash_fence(l));
    k->grants++;
    k->state = C_HOLDING;
    k->granted_at = test_now_ms();
    k->hold_until = k->granted_at + k->hold_ms;
}

static void contender_released(leash_lock *l, int status, void *arg) {
    contender *k = arg;

    (void)l;
    if (status != LEASH_OK) {
        k->errors++;
        k->last_error = status;
    }
    k->state = k->cycles_left > 0 ? C_IDLE : C_DONE;
}

static void contender_step(contender *k) {
    int64_t now = test_now_ms();

    if (k->state == C_IDLE && k->cycles_left > 0 && now >= k->start_at) {
        k->cycles_left--;
        k->state = C_WAITING;
        CHECK_EQ_INT(leash_acquire(k->l, k->wait_ms, contender_granted, k), LEASH_OK);
    } else if (k->state == C_HOLDING && now >= k->hold_until) {
        /* The user stops using the resource, then gives the lock back. */
        resource_leave(k->res, k->exclusive);
        k->state = C_RELEASING;
        CHECK_EQ_INT(leash_release(k->l, contender_released, k), LEASH_OK);
    }
}

/* Steps the contenders for ms (until all are done when ms < 0, failing
 * after timeout_ms). */
static void drive(fx_world *w, contender *ks, int n, int64_t ms, int64_t timeout_ms) {
    int64_t end = test_now_ms() + (ms >= 0 ? ms : timeout_ms);
    int i, busy;

    for (;;) {
        busy = 0;
        for (i = 0; i < n; i++) {
            contender_step(&ks[i]);
            busy |= ks[i].state != C_DONE;
        }
        if (ms < 0 && !busy)
            return;
        if (test_now_ms() >= end)
            break;
        fx_run_for(w->loop, 1);
    }
    if (ms < 0) {
        for (i = 0; i < n; i++)
            CHECK_MSG(ks[i].state == C_DONE,
                      "contender %d not done after %lld ms: state %d, %d cycles left, %d grants", i,
                      (long long)timeout_ms, ks[i].state, ks[i].cycles_left, ks[i].grants);
    }
}

/* ---- children: one process, one client, one handle, told what to do ---- */

/* What a child tells the case, one atomic write each. */
typedef struct kid_msg {
    char ev;             /* 'C' ready, 'A' acquire sent, 'G' granted, 'N' renewed,
                            'R' released, 'E' acquire failed */
    int id;              /* the child's */
    int status;          /* of 'E' */
    uint64_t fence;      /* leash_fence at the event */
    int64_t at_ms;       /* test_now_ms() at the event (one clock for all processes) */
    int64_t deadline_ms; /* at_ms + leash_valid_ms while held, else 0 */
} kid_msg;

typedef struct kid_plan {
    enum kind kind;
    const char *name;
    int permits;
    int64_t lease_ms;
    int64_t hold_ms; /* after a grant, release after this; < 0: hold until told */
} kid_plan;

typedef struct kid {
    pid_t pid;
    int cmd_fd; /* commands to the child: 'a' acquire, 'r' release, 'x' exit */
    int id;
} kid;

/* The events of every child of the case, in the order they arrived. */
#define EVLOG_MAX 2048
static kid_msg evlog[EVLOG_MAX];
static char evlog_used[EVLOG_MAX];
static int evlog_n;
static int kid_ev[2] = {-1, -1}; /* one pipe from all children */
static char ev_buf[sizeof(kid_msg) * 64];
static size_t ev_buf_len;

static void kids_init(void) {
    CHECK_EQ_INT(pipe(kid_ev), 0);
    CHECK(fcntl(kid_ev[0], F_SETFL, O_NONBLOCK) == 0);
    evlog_n = 0;
    ev_buf_len = 0;
}

typedef struct kid_state {
    int id;
    leash_lock *l;
    int64_t hold_ms;
    int holding;
    int64_t hold_until;
    uint64_t renewals;
} kid_state;

static void kid_send(kid_state *s, char ev, int status) {
    kid_msg m;
    ssize_t n;

    memset(&m, 0, sizeof(m));
    m.ev = ev;
    m.id = s->id;
    m.status = status;
    m.fence = s->l != NULL ? leash_fence(s->l) : 0;
    m.at_ms = test_now_ms();
    if (s->l != NULL && leash_held(s->l))
        m.deadline_ms = m.at_ms + leash_valid_ms(s->l);
    n = write(kid_ev[1], &m, sizeof(m));
    CHECK_EQ_INT(n, (long long)sizeof(m));
}

static void kid_granted(leash_lock *l, int status, void *arg) {
    kid_state *s = arg;

    if (status != LEASH_OK) {
        kid_send(s, 'E', status);
        return;
    }
    s->holding = 1;
    s->renewals = leash_renewals(l);
    s->hold_until = s->hold_ms >= 0 ? test_now_ms() + s->hold_ms : INT64_MAX;
    kid_send(s, 'G', status);
}

static void kid_release(kid_state *s) {
    s->holding = 0;
    CHECK_EQ_INT(leash_release(s->l, NULL, NULL), LEASH_OK);
    kid_send(s, 'R', 0);
}

static void kid_main(fx_world *w, const kid_plan *p, int id, int cmd_fd) {
    fx_loop *loop = fx_loop_new();
    leash_options o;
    leash_client *c;
    kid_state s;

    memset(&s, 0, sizeof(s));
    s.id = id;
    s.hold_ms = p->hold_ms;
    fx_world_options(w, &o, p->lease_ms);
    c = fx_client_opts(loop, &o);
    fx_wait_connected(loop, c, 5000);
    s.l = make_lock(c, p->kind, p->name, p->permits);
    kid_send(&s, 'C', 0);
    for (;;) {
        char cmd;
        ssize_t n = read(cmd_fd, &cmd, 1);

        if (n == 0)
            _exit(0); /* the case is gone */
        if (n == 1) {
            if (cmd == 'a') {
                CHECK_EQ_INT(leash_acquire(s.l, LEASH_WAIT_FOREVER, kid_granted, &s), LEASH_OK);
                kid_send(&s, 'A', 0);
            } else if (cmd == 'r') {
                kid_release(&s);
            } else if (cmd == 'x') {
                leash_client_free(c);
                _exit(0);
            }
        }
        if (s.holding && test_now_ms() >= s.hold_until)
            kid_release(&s);
        if (s.holding && leash_renewals(s.l) != s.renewals) {
            s.renewals = leash_renewals(s.l);
            kid_send(&s, 'N', 0);
        }
        fx_run_for(loop, 1);
    }
}

static void kid_poll(void) {
    for (;;) {
        ssize_t n = read(kid_ev[0], ev_buf + ev_buf_len, sizeof(ev_buf) - ev_buf_len);
        size_t off = 0;

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        ev_buf_len += (size_t)n;
        while (ev_buf_len - off >= sizeof(kid_msg)) {
            CHECK_MSG(evlog_n < EVLOG_MAX, "more than %d events from the children", EVLOG_MAX);
            memcpy(&evlog[evlog_n], ev_buf + off, sizeof(kid_msg));
            evlog_used[evlog_n] = 0;
            evlog_n++;
            off += sizeof(kid_msg);
        }
        memmove(ev_buf, ev_buf + off, ev_buf_len - off);
        ev_buf_len -= off;
    }
}

/* The first event `ev` of child `id` not taken yet, or NULL. */
static kid_msg *kid_take(int id, char ev) {
    int i;

    kid_poll();
    for (i = 0; i < evlog_n; i++) {
        if (!evlog_used[i] && evlog[i].id == id && evlog[i].ev == ev) {
            evlog_used[i] = 1;
            return &evlog[i];
        }
    }
    return NULL;
}

/* Runs the case's loop until child `id` reports `ev` (taking it). */
static kid_msg *kid_wait(fx_world *w, int id, char ev, int64_t timeout_ms) {
    int64_t end = test_now_ms() + timeout_ms;
    kid_msg *m;

    while ((m = kid_take(id, ev)) == NULL) {
        CHECK_MSG(test_now_ms() < end, "child %d did not report '%c' within %lld ms", id, ev,
                  (long long)timeout_ms);
        fx_run_for(w->loop, 2);
    }
    return m;
}

/* How many events `ev` arrived (taken or not). */
static int kid_count(char ev) {
    int i, n = 0;

    kid_poll();
    for (i = 0; i < evlog_n; i++)
        n += evlog[i].ev == ev;
    return n;
}

/* The latest local deadline child `id` reported for its hold: Redis
 * keeps the hold at least until then (leash_valid_ms is conservative). */
static int64_t kid_deadline(int id) {
    int64_t d = 0;
    int i;

    kid_poll();
    for (i = 0; i < evlog_n; i++)
        if (evlog[i].id == id && evlog[i].deadline_ms > d)
            d = evlog[i].deadline_ms;
    return d;
}

static kid kid_start(fx_world *w, const kid_plan *p, int id) {
    int cmd[2];
    pid_t parent = getpid(), pid;
    kid k;

    CHECK_EQ_INT(pipe(cmd), 0);
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        close(cmd[1]);
        close(kid_ev[0]);
        CHECK(fcntl(cmd[0], F_SETFL, O_NONBLOCK) == 0);
        kid_main(w, p, id, cmd[0]);
        _exit(0);
    }
    close(cmd[0]);
    k.pid = pid;
    k.cmd_fd = cmd[1];
    k.id = id;
    kid_wait(w, id, 'C', 10000);
    return k;
}

static void kid_cmd(kid *k, char cmd) {
    CHECK_EQ_INT(write(k->cmd_fd, &cmd, 1), 1);
}

/* SIGKILL, reaped: returns the time it was surely dead. */
static int64_t kid_kill(kid *k) {
    if (k->pid > 0) {
        kill(k->pid, SIGKILL);
        while (waitpid(k->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        k->pid = 0;
    }
    if (k->cmd_fd >= 0)
        close(k->cmd_fd);
    k->cmd_fd = -1;
    return test_now_ms();
}

/* ================= fair lock ================= */

TEST(fair_lock_excludes_across_clients_over_many_cycles_and_fences_grow) {
    fx_world w;
    leash_client *cs[3];
    contender ks[6];
    resource res;
    int i;

    memset(&res, 0, sizeof(res));
    res.limit = 1;
    fx_world_up(&w, 2000, 0);
    cs[0] = w.c;
    cs[1] = fx_world_client(&w, 2000);
    cs[2] = fx_world_client(&w, 2000);
    fx_wait_connected(w.loop, cs[1], 5000);
    fx_wait_connected(w.loop, cs[2], 5000);
    for (i = 0; i < 6; i++)
        contender_init(&ks[i], fair(cs[i % 3], "fair-excl"), &res, 1, 10, 3);
    drive(&w, ks, 6, -1, 20000);
    for (i = 0; i < 6; i++) {
        CHECK_EQ_INT(ks[i].errors, 0);
        CHECK_MSG(ks[i].losses == 0, "contender %d lost %d holds (last: %s)", i, ks[i].losses,
                  leash_lost_reason_name(ks[i].last_loss));
        CHECK_EQ_INT(ks[i].grants, 10);
    }
    CHECK_EQ_INT(res.violations, 0);
    CHECK_EQ_INT(res.peak, 1);
    CHECK_EQ_INT(res.fence_violations, 0);
    check_fences_distinct(&res);
    fx_run_for(w.loop, 20);
    check_keys_expire(&w, "leash:fair-excl");
    leash_client_free(cs[1]);
    leash_client_free(cs[2]);
    fx_world_down(&w);
}

/* Handoffs while the waiters' places are being renewed: short leases keep
 * a place renewal on the wire often when the lock is handed over, and its
 * answer ("place renewed") must not end the hold the handoff began. */
TEST(fair_lock_handoff_racing_a_place_renewal_keeps_the_new_hold) {
    const int64_t lease = 60; /* places and holds renewed every 20 ms */
    fx_world w;
    leash_client *cs[3];
    contender ks[3];
    resource res;
    int i;

    memset(&res, 0, sizeof(res));
    res.limit = 1;
    fx_world_up(&w, lease, 0);
    cs[0] = w.c;
    cs[1] = fx_world_client(&w, lease);
    cs[2] = fx_world_client(&w, lease);
    fx_wait_connected(w.loop, cs[1], 5000);
    fx_wait_connected(w.loop, cs[2], 5000);
    for (i = 0; i < 3; i++)
        contender_init(&ks[i], fair(cs[i], "fair-race"), &res, 1, 60, 2);
    drive(&w, ks, 3, -1, 20000);
    for (i = 0; i < 3; i++) {
        CHECK_EQ_INT(ks[i].errors, 0);
        CHECK_MSG(ks[i].losses == 0, "contender %d lost %d holds (last: %s)", i, ks[i].losses,
                  leash_lost_reason_name(ks[i].last_loss));
        CHECK_EQ_INT(ks[i].grants, 60);
    }
    CHECK_EQ_INT(res.violations, 0);
    CHECK_EQ_INT(res.fence_violations, 0);
    leash_client_free(cs[1]);
    leash_client_free(cs[2]);
    fx_world_down(&w);
}

/* A holder's token that Redis has only queued (its hold removed by a
 * copy its handle never heard of, a late copy of its own attempt queueing
 * the token again behind the next holder) is no hold: the holder's next
 * renewal, answered "queued", loses it. Only a renewal sent before the
 * token was let in may answer "queued" for a hold (the case above). The
 * scripts run here as those copies would. */
TEST(fair_lock_holder_whose_token_is_queued_again_is_lost) {
    const leash__script *release = leash__dialect_leash.scripts[LEASH__LEASH_SCRIPT_FAMILY_RELEASE];
    const leash__script *acquire = leash__dialect_leash.scripts[LEASH__LEASH_SCRIPT_FAMILY_ACQUIRE];
    const int64_t lease = 300; /* renewed every 100 ms */
    fx_world w;
    leash_client *c2;
    leash_lock *a, *b;
    fx_result lost = {0};
    test_redis *r;
    redisReply *rep;
    char tok[LEASH__TOKEN_LEN + 1], field[LEASH__TOKEN_LEN + 2], client[64];

    leash__dialects_init();
    fx_world_up(&w, lease, 0);
    c2 = fx_world_client(&w, lease);
    fx_wait_connected(w.loop, c2, 5000);
    a = fair(w.c, "fair-requeued");
    b = fair(c2, "fair-requeued");
    leash_on_lost(a, fx_lost_cb, &lost);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    memcpy(tok, a->hold.token, LEASH__TOKEN_LEN);
    tok[LEASH__TOKEN_LEN] = '\0';
    r = fx_redis_of(&w, "leash:fair-requeued");
    /* a's client, as its attempts carry it: "<mode>:<count>:<fence>:<client>:<expiry>". */
    snprintf(field, sizeof(field), "h%s", tok);
    rep = test_redis_cmd(r, "HGET leash:fair-requeued %s", field);
    CHECK(rep != NULL && rep->type == REDIS_REPLY_STRING);
    CHECK_EQ_INT(sscanf(rep->str, "%*[^:]:%*[^:]:%*[^:]:%63[^:]:", client), 1);
    freeReplyObject(rep);
    rep = test_redis_cmd(r, "EVAL %b 1 leash:fair-requeued %s 0 chan publish 0", release->src,
                         release->len, tok);
    CHECK(rep != NULL && rep->type == REDIS_REPLY_INTEGER && rep->integer == 0);
    freeReplyObject(rep);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, b, 0, 5000), LEASH_OK);
    rep = test_redis_cmd(r, "EVAL %b 1 leash:fair-requeued %s 30000 f %s 0 0 1 chan publish %s 0",
                         acquire->src, acquire->len, tok, client, "");
    CHECK(rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements == 5);
    CHECK_EQ_INT(rep->element[0]->integer, 0); /* queued behind b */
    freeReplyObject(rep);
    fx_run_for(w.loop, 2 * lease);
    CHECK_MSG(lost.calls == 1, "a renewed a hold Redis gives b (%d lost callbacks)", lost.calls);
    CHECK_EQ_INT(lost.status, LEASH_LOST_EXPIRED);
    CHECK(!leash_held(a));
    CHECK(leash_held(b));
    /* The loss gave a's place back at once: it would otherwise wait in
     * the queue, ahead of everyone, until its place expires. */
    fx_run_for(w.loop, 50);
    snprintf(field, sizeof(field), "q%s", tok);
    CHECK_EQ_INT(test_redis_int(r, "HEXISTS leash:fair-requeued %s", field), 0);
    CHECK_EQ_INT(fx_release_sync(w.loop, b, 2000), LEASH_OK);
    leash_lock_free(a);
    leash_lock_free(b);
    leash_client_free(c2);
    fx_world_down(&w);
}

/* A holder of another client, in the copies the tests below run. */
#define OTHER_TOKEN "0123456789abcdef0123456789abcdef"

/* What the copies handle a never heard of do to its hold at key: one gives
 * the hold back, another client's holder goes in (a higher fence), and a
 * late copy of a's attempt queues a's token (copied to tok) behind it. The
 * scripts run here as those copies would. Returns the key's server. */
static test_redis *requeue_behind_another(fx_world *w, leash_lock *a, const char *key, char *tok) {
    const leash__script *release = leash__dialect_leash.scripts[LEASH__LEASH_SCRIPT_FAMILY_RELEASE];
    const leash__script *acquire = leash__dialect_leash.scripts[LEASH__LEASH_SCRIPT_FAMILY_ACQUIRE];
    const char *turns[] = {OTHER_TOKEN, tok};
    test_redis *r = fx_redis_of(w, key);
    redisReply *rep;
    int i;

    memcpy(tok, a->hold.token, LEASH__TOKEN_LEN);
    tok[LEASH__TOKEN_LEN] = '\0';
    rep =
        test_redis_cmd(r, "EVAL %b 1 %s %s 0 chan publish 0", release->src, release->len, key, tok);
    CHECK(rep != NULL && rep->type == REDIS_REPLY_INTEGER && rep->integer == 0);
    freeReplyObject(rep);
    for (i = 0; i < 2; i++) {
        rep = test_redis_cmd(r, "EVAL %b 1 %s %s 30000 f abcd 0 0 1 chan publish %s 0",
                             acquire->src, acquire->len, key, turns[i], "");
        /* The other holds, then tok waits behind it (and a mark). */
        CHECK(rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements == (size_t)(4 + i));
        CHECK_EQ_INT(rep->element[0]->integer, i == 0);
        CHECK(i == 1 || (uint64_t)rep->element[1]->integer > leash_fence(a));
        freeReplyObject(rep);
    }
    return r;
}

/* The extra (reentrant) hold's attempt is the first to meet a holder's
 * token that Redis has only queued again: answered "gone", the hold is
 * lost EXPIRED, and its place goes back at once, as when the renewal
 * finds it. */
TEST(fair_lock_extra_hold_that_finds_its_token_queued_again_gives_the_place_back) {
    fx_world w;
    leash_lock *a;
    fx_result lost = {0}, extra = {0};
    test_redis *r;
    char tok[LEASH__TOKEN_LEN + 1], field[LEASH__TOKEN_LEN + 2];

    leash__dialects_init();
    fx_world_up(&w, 300, 0);
    a = fair(w.c, "fair-extra-requeued");
    leash_on_lost(a, fx_lost_cb, &lost);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    r = requeue_behind_another(&w, a, "leash:fair-extra-requeued", tok);
    CHECK_EQ_INT(leash_acquire(a, 0, fx_acquire_cb, &extra), LEASH_OK);
    fx_run_until(w.loop, &extra, 2000);
    CHECK_EQ_INT(extra.status, LEASH_EBUSY);
    CHECK_EQ_INT(lost.calls, 1);
    CHECK_EQ_INT(lost.status, LEASH_LOST_EXPIRED);
    fx_run_for(w.loop, 50 + TEST_SLACK_MS);
    snprintf(field, sizeof(field), "q%s", tok);
    CHECK_MSG(test_redis_int(r, "HEXISTS leash:fair-extra-requeued %s", field) == 0,
              "a's token still waits in the queue after its loss");
    leash_lock_free(a);
    fx_world_down(&w);
}

/* The same copies, and the holder's renewal comes only after the token was
 * let in again: Redis answers with the new hold's fence, and another held
 * the lock in between. The hold the handle had ended there: lost. */
TEST(fair_lock_holder_whose_token_is_let_in_again_under_a_new_fence_is_lost) {
    const leash__script *release = leash__dialect_leash.scripts[LEASH__LEASH_SCRIPT_FAMILY_RELEASE];
    const int64_t lease = 300; /* renewed every 100 ms */
    fx_world w;
    leash_lock *a;
    fx_result lost = {0};
    test_redis *r;
    redisReply *rep;
    char tok[LEASH__TOKEN_LEN + 1];

    leash__dialects_init();
    fx_world_up(&w, lease, 0);
    a = fair(w.c, "fair-let-in-again");
    leash_on_lost(a, fx_lost_cb, &lost);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    r = requeue_behind_another(&w, a, "leash:fair-let-in-again", tok);
    /* The other releases: a's token goes in again, under a new fence. */
    rep = test_redis_cmd(r, "EVAL %b 1 leash:fair-let-in-again %s 0 chan publish 0", release->src,
                         release->len, OTHER_TOKEN);
    CHECK(rep != NULL && rep->type == REDIS_REPLY_INTEGER && rep->integer == 0);
    freeReplyObject(rep);
    fx_run_for(w.loop, 2 * lease);
    CHECK_MSG(lost.calls == 1,
              "a still holds under fence %llu though another held the lock since (%d lost)",
              (unsigned long long)leash_fence(a), lost.calls);
    CHECK(!leash_held(a));
    leash_lock_free(a);
    fx_world_down(&w);
}

/* The same race made certain: the waiter's place renewal is answered, and
 * its answer is still unread when the handoff message arrives (the holder
 * lives on a second loop, so the waiter's loop stands still meanwhile);
 * both are read in one turn of the loop. Whichever is read first, the
 * handoff is a hold, and the answer about the place ends nothing. */
TEST(fair_lock_place_renewal_answered_before_the_handoff_but_read_after_it) {
    const int64_t lease = 300; /* places renewed every 100 ms */
    fx_world w;
    fx_loop *loop2;
    leash_options o;
    leash_client *c2;
    leash_lock *h, *waiter;
    fx_result got = {0}, lost = {0}, rel = {0};
    leash_stats st;
    uint64_t renews;
    int64_t end;

    fx_world_up(&w, lease, 0);
    loop2 = fx_loop_new();
    fx_world_options(&w, &o, lease);
    c2 = fx_client_opts(loop2, &o);
    fx_wait_connected(loop2, c2, 5000);
    h = fair(c2, "fair-late-answer");
    CHECK_EQ_INT(leash_lock_set_fixed_lease(h, 5000), LEASH_OK); /* loop2 may stand still */
    CHECK_EQ_INT(fx_acquire_sync(loop2, h, 0, 5000), LEASH_OK);
    waiter = fair(w.c, "fair-late-answer");
    leash_on_lost(waiter, fx_lost_cb, &lost);
    CHECK_EQ_INT(leash_acquire(waiter, 5000, fx_acquire_cb, &got), LEASH_OK);
    fx_run_for(w.loop, 20); /* queued */
    leash_client_stats(w.c, &st);
    renews = st.renew_commands;
    /* Until the place renewal is written, and no further. */
    end = test_now_ms() + 1000;
    while (st.renew_commands == renews && test_now_ms() < end) {
        usleep(200);
        fx_run_nowait(w.loop);
        leash_client_stats(w.c, &st);
    }
    CHECK_MSG(st.renew_commands > renews, "the waiter's place was not renewed within a lease");
    usleep(20 * 1000); /* answered; the answer waits in the socket */
    CHECK_EQ_INT(leash_release(h, fx_release_cb, &rel), LEASH_OK);
    fx_run_until(loop2, &rel, 2000);
    CHECK_EQ_INT(rel.status, LEASH_OK);
    usleep(20 * 1000); /* the handoff message waits too */
    fx_run_until(w.loop, &got, 2000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    fx_run_for(w.loop, 2 * lease);
    CHECK_MSG(lost.calls == 0, "the new holder was lost (%s) %lld ms after its grant",
              leash_lost_reason_name(lost.status), (long long)(lost.at_ms - got.at_ms));
    CHECK(leash_held(waiter));
    CHECK_EQ_INT(fx_release_sync(w.loop, waiter, 2000), LEASH_OK);
    leash_client_free(c2);
    fx_loop_free(loop2);
    fx_world_down(&w);
}

TEST(fair_lock_grants_three_processes_in_arrival_order) {
    fx_world w;
    leash_lock *h;
    kid k[3];
    kid_msg *g[3], *r[3];
    const kid_plan plan = {K_FAIR, "fair-fifo", 0, 400, 40};
    fx_result rel = {0};
    int i;

    fx_world_up(&w, 400, 0);
    kids_init();
    h = fair(w.c, "fair-fifo");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 5000), LEASH_OK);
    for (i = 0; i < 3; i++)
        k[i] = kid_start(&w, &plan, i + 1);
    /* They queue one after the other: each asks once the one before it
     * has waited 100 ms (on loopback, long queued). */
    for (i = 0; i < 3; i++) {
        kid_cmd(&k[i], 'a');
        kid_wait(&w, i + 1, 'A', 2000);
        fx_run_for(w.loop, 100);
    }
    /* More than a lease in the queue: nobody is evicted meanwhile. */
    fx_run_for(w.loop, 500);
    CHECK_EQ_INT(kid_count('G'), 0);
    CHECK_EQ_INT(kid_count('E'), 0);
    CHECK_EQ_INT(leash_release(h, fx_release_cb, &rel), LEASH_OK);
    fx_run_until(w.loop, &rel, 2000);
    CHECK_EQ_INT(rel.status, LEASH_OK);
    for (i = 0; i < 3; i++) {
        g[i] = kid_wait(&w, i + 1, 'G', 3000);
        r[i] = kid_wait(&w, i + 1, 'R', 3000);
    }
    CHECK_EQ_INT(kid_count('E'), 0);
    /* The order the grants arrived in (one pipe) is the order of the
     * queue; each grant came after the one before was released. */
    CHECK_MSG(g[0] < g[1] && g[1] < g[2], "grants arrived in the order %d %d %d",
              (int)(g[0] - evlog), (int)(g[1] - evlog), (int)(g[2] - evlog));
    CHECK_MSG(g[0]->at_ms - rel.at_ms <= TEST_SLACK_MS, "the head got it %lld ms after the release",
              (long long)(g[0]->at_ms - rel.at_ms));
    for (i = 1; i < 3; i++) {
        CHECK(g[i]->at_ms >= r[i - 1]->at_ms);
        CHECK_MSG(g[i]->at_ms - r[i - 1]->at_ms <= TEST_SLACK_MS,
                  "child %d got it %lld ms after child %d released", i + 1,
                  (long long)(g[i]->at_ms - r[i - 1]->at_ms), i);
        CHECK(g[i]->fence > g[i - 1]->fence);
    }
    CHECK(g[0]->fence > leash_fence(h));
    for (i = 0; i < 3; i++)
        kid_kill(&k[i]);
    fx_world_down(&w);
}

TEST(fair_lock_live_waiter_waiting_many_leases_is_never_evicted) {
    fx_world w;
    leash_client *c2, *c3;
    leash_lock *h, *w1, *w2;
    fx_result g1 = {0}, g2 = {0}, rel = {0};

    fx_world_up(&w, 300, 0); /* places renewed every 100 ms */
    c2 = fx_world_client(&w, 300);
    c3 = fx_world_client(&w, 300);
    h = fair(c2, "fair-live");
    w1 = fair(w.c, "fair-live");
    w2 = fair(c3, "fair-live");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(w1, LEASH_WAIT_FOREVER, fx_acquire_cb, &g1), LEASH_OK);
    fx_run_for(w.loop, 50);
    CHECK_EQ_INT(leash_acquire(w2, LEASH_WAIT_FOREVER, fx_acquire_cb, &g2), LEASH_OK);
    fx_run_for(w.loop, 2400); /* eight leases */
    CHECK_EQ_INT(g1.calls + g2.calls, 0);
    CHECK(leash_held(h));
    CHECK_EQ_INT(leash_release(h, fx_release_cb, &rel), LEASH_OK);
    fx_run_until(w.loop, &g1, 2000);
    CHECK_EQ_INT(g1.status, LEASH_OK);
    fx_run_until(w.loop, &rel, 1000);
    CHECK_EQ_INT(rel.status, LEASH_OK);
    CHECK_MSG(g1.at_ms - rel.at_ms <= TEST_SLACK_MS,
              "first in line got it %lld ms after the release", (long long)(g1.at_ms - rel.at_ms));
    run_for_or_until(&w, &g2, 150);
    CHECK_EQ_INT(g2.calls, 0); /* still behind w1 */
    CHECK_EQ_INT(fx_release_sync(w.loop, w1, 2000), LEASH_OK);
    fx_run_until(w.loop, &g2, 2000);
    CHECK_EQ_INT(g2.status, LEASH_OK);
    CHECK(leash_fence(w2) > leash_fence(w1));
    CHECK_EQ_INT(fx_release_sync(w.loop, w2, 2000), LEASH_OK);
    leash_client_free(c2);
    leash_client_free(c3);
    fx_world_down(&w);
}

/* A child holds the lock and is killed; the case's waiter gets it after
 * the hold's lease ran out (never before the child's last local deadline)
 * and at the latest a renew interval later (the head's renewal notices). */
static void crashed_holder_case(enum kind holder_kind, enum kind waiter_kind, int permits) {
    const int64_t lease = 450;
    fx_world w;
    leash_lock *waiter, *others[4] = {NULL, NULL, NULL, NULL};
    kid k;
    kid_msg *g;
    kid_plan plan = {holder_kind, "crashed", permits, lease, -1};
    fx_result got = {0};
    int64_t killed, deadline;
    int i;

    CHECK(permits <= 5);
    fx_world_up(&w, lease, 0);
    kids_init();
    /* The other permits are taken here, by live holders. */
    for (i = 0; i < permits - 1; i++) {
        others[i] = sem(w.c, "crashed", permits);
        CHECK_EQ_INT(fx_acquire_sync(w.loop, others[i], 0, 5000), LEASH_OK);
    }
    k = kid_start(&w, &plan, 1);
    kid_cmd(&k, 'a');
    g = kid_wait(&w, 1, 'G', 3000);
    CHECK(g->deadline_ms > 0);
    waiter = make_lock(w.c, waiter_kind, "crashed", permits);
    CHECK_EQ_INT(leash_acquire(waiter, 5000, fx_acquire_cb, &got), LEASH_OK);
    fx_run_for(w.loop, 2 * lease); /* the child renews; the waiter waits */
    CHECK_EQ_INT(got.calls, 0);
    CHECK_MSG(kid_count('N') >= 2, "the child renewed %d times in two leases", kid_count('N'));
    deadline = kid_deadline(1);
    killed = kid_kill(&k);
    fx_run_until(w.loop, &got, 3000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK_MSG(got.at_ms >= deadline, "got it %lld ms before the dead holder's deadline",
              (long long)(deadline - got.at_ms));
    CHECK_MSG(got.at_ms - killed <= lease + interval_of(lease) + TEST_SLACK_MS,
              "got it %lld ms after the holder was killed (lease %lld)",
              (long long)(got.at_ms - killed), (long long)lease);
    CHECK(leash_fence(waiter) > g->fence);
    CHECK(leash_held(waiter));
    /* The dead holder's entries go too. */
    CHECK_EQ_INT(fx_release_sync(w.loop, waiter, 2000), LEASH_OK);
    for (i = 0; i < permits - 1; i++)
        CHECK_EQ_INT(fx_release_sync(w.loop, others[i], 2000), LEASH_OK);
    check_nothing_left(&w, 3 * lease);
    fx_world_down(&w);
}

TEST(fair_lock_crashed_holder_is_recovered_after_one_lease) {
    crashed_holder_case(K_FAIR, K_FAIR, 0);
}

/* A child waits in the queue and is killed; the holder then leaves: the
 * dead head's place runs out within a lease and the one behind it goes
 * in. k is a kind that excludes (a semaphore has one permit). */
static void crashed_waiter_case(enum kind kd) {
    const int64_t lease = 450;
    fx_world w;
    leash_client *c2;
    leash_lock *h, *behind;
    kid k;
    kid_plan plan = {kd, "dead-waiter", 1, lease, 20};
    fx_result got = {0};
    int64_t killed;

    fx_world_up(&w, lease, 0);
    kids_init();
    c2 = fx_world_client(&w, lease);
    h = make_lock(w.c, kd, "dead-waiter", 1);
    behind = make_lock(c2, kd, "dead-waiter", 1);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 5000), LEASH_OK);
    k = kid_start(&w, &plan, 1);
    kid_cmd(&k, 'a');
    kid_wait(&w, 1, 'A', 2000);
    fx_run_for(w.loop, 100);
    CHECK_EQ_INT(leash_acquire(behind, 5000, fx_acquire_cb, &got), LEASH_OK);
    fx_run_for(w.loop, lease); /* both keep their places */
    CHECK_EQ_INT(got.calls, 0);
    CHECK_EQ_INT(kid_count('G'), 0);
    killed = kid_kill(&k);
    /* The holder leaves at once: the dead head is next, and its place
     * runs out within a lease. */
    CHECK_EQ_INT(fx_release_sync(w.loop, h, 2000), LEASH_OK);
    fx_run_until(w.loop, &got, 3000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK_MSG(got.at_ms - killed <= lease + interval_of(lease) + TEST_SLACK_MS,
              "the one behind got it %lld ms after the head was killed (lease %lld)",
              (long long)(got.at_ms - killed), (long long)lease);
    /* Not at once: the dead head's place was renewed within an interval of
     * its death, and lives a lease from then (half of what is left of it
     * here, so that a late timer in the child does not matter). */
    CHECK_MSG(got.at_ms - killed >= (lease - interval_of(lease)) / 2,
              "the one behind got it %lld ms after the head was killed: before the head's "
              "place ran out",
              (long long)(got.at_ms - killed));
    CHECK(leash_held(behind));
    CHECK_EQ_INT(fx_release_sync(w.loop, behind, 2000), LEASH_OK);
    check_nothing_left(&w, 3 * lease);
    leash_client_free(c2);
    fx_world_down(&w);
}

TEST(fair_lock_crashed_waiter_drops_out_and_the_one_behind_gets_it) {
    crashed_waiter_case(K_FAIR);
}

TEST(rw_crashed_writer_waiting_drops_out_and_the_one_behind_gets_it) {
    crashed_waiter_case(K_WRITE);
}

TEST(semaphore_crashed_waiter_drops_out_and_the_one_behind_gets_it) {
    crashed_waiter_case(K_SEM);
}

/* A handle that excludes every other handle of its name: a fair lock, a
 * writer, a semaphore of one permit. */
static leash_lock *excl(leash_client *c, enum kind k, const char *name) {
    return make_lock(c, k, name, 1);
}

/* Waiters that time out or are cancelled leave the queue at once: the one
 * behind them is next when the holder releases, not a lease later. */
static void leave_queue_case(enum kind k) {
    /* A lease of 3 s: a place left behind would hold the line that long. */
    const int64_t lease = 3000;
    fx_world w;
    leash_client *c2, *c3;
    leash_lock *h, *quitter, *canceller, *last;
    fx_result timed = {0}, cancelled = {0}, got = {0}, rel = {0};
    int64_t t0, took;

    fx_world_up(&w, lease, 0);
    c2 = fx_world_client(&w, lease);
    c3 = fx_world_client(&w, lease);
    h = excl(w.c, k, "leave");
    quitter = excl(c2, k, "leave");
    canceller = excl(c3, k, "leave");
    last = excl(c2, k, "leave");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 5000), LEASH_OK);
    t0 = test_now_ms();
    CHECK_EQ_INT(leash_acquire(quitter, 300, fx_acquire_cb, &timed), LEASH_OK);
    fx_run_for(w.loop, 50);
    CHECK_EQ_INT(leash_acquire(canceller, LEASH_WAIT_FOREVER, fx_acquire_cb, &cancelled), LEASH_OK);
    fx_run_for(w.loop, 50);
    CHECK_EQ_INT(leash_acquire(last, 10000, fx_acquire_cb, &got), LEASH_OK);
    fx_run_until(w.loop, &timed, 2000);
    CHECK_EQ_INT(timed.status, LEASH_ETIMEDOUT);
    took = timed.at_ms - t0;
    CHECK_MSG(took >= 300 && took <= 300 + TEST_SLACK_MS, "timed out after %lld ms, wanted 300",
              (long long)took);
    CHECK(!leash_held(quitter));
    CHECK_EQ_INT(leash_cancel(canceller), LEASH_OK);
    CHECK_EQ_INT(cancelled.calls, 0); /* not inside the call */
    fx_run_until(w.loop, &cancelled, 1000);
    CHECK_EQ_INT(cancelled.status, LEASH_ECANCELED);
    fx_run_for(w.loop, 50);
    CHECK_EQ_INT(got.calls, 0);
    /* The two ahead of `last` are gone: it is next, not a lease later. */
    CHECK_EQ_INT(leash_release(h, fx_release_cb, &rel), LEASH_OK);
    fx_run_until(w.loop, &got, lease);
    CHECK_EQ_INT(got.status, LEASH_OK);
    fx_run_until(w.loop, &rel, 1000);
    CHECK_MSG(got.at_ms - rel.at_ms <= TEST_SLACK_MS, "got it %lld ms after the release",
              (long long)(got.at_ms - rel.at_ms));
    CHECK_EQ_INT(timed.calls, 1);
    CHECK_EQ_INT(cancelled.calls, 1);
    CHECK(!leash_held(canceller));
    /* Both handles are usable again, and wait behind `last` as newcomers. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, quitter, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(fx_release_sync(w.loop, last, 2000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, canceller, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, canceller, 2000), LEASH_OK);
    leash_client_free(c2);
    leash_client_free(c3);
    fx_world_down(&w);
}

TEST(fair_lock_waiters_that_time_out_or_cancel_leave_the_queue_at_once) {
    leave_queue_case(K_FAIR);
}

TEST(rw_writers_that_time_out_or_cancel_leave_the_queue_at_once) {
    leave_queue_case(K_WRITE);
}

TEST(semaphore_waiters_that_time_out_or_cancel_leave_the_queue_at_once) {
    leave_queue_case(K_SEM);
}

/* Freeing a handle idle, queued or held, and a client with a queued
 * handle: callbacks fire ECANCELED inside the free, places and holds go
 * with them, and the next in line goes in at once. */
static void free_case(enum kind k) {
    const int64_t lease = 3000;
    fx_world w;
    leash_client *c2, *c3, *c4;
    leash_lock *idle, *used, *h, *queued, *in_freed_client, *next, *last;
    fx_result q = {0}, qc = {0}, gn = {0}, gl = {0}, rel = {0};
    int64_t freed_at;

    fx_world_up(&w, lease, 0);
    c2 = fx_world_client(&w, lease);
    c3 = fx_world_client(&w, lease);
    c4 = fx_world_client(&w, lease);
    /* Idle: never used, and used then released. */
    idle = excl(w.c, k, "free");
    leash_lock_free(idle);
    used = excl(w.c, k, "free");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, used, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, used, 5000), LEASH_OK);
    leash_lock_free(used);

    /* Queued: its callback fires ECANCELED inside the free, and its place
     * goes with it; so does the place of a handle whose client is freed. */
    h = excl(w.c, k, "free");
    queued = excl(c2, k, "free");
    in_freed_client = excl(c4, k, "free");
    next = excl(c3, k, "free");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(queued, LEASH_WAIT_FOREVER, fx_acquire_cb, &q), LEASH_OK);
    fx_run_for(w.loop, 50);
    CHECK_EQ_INT(leash_acquire(in_freed_client, LEASH_WAIT_FOREVER, fx_acquire_cb, &qc), LEASH_OK);
    fx_run_for(w.loop, 50);
    CHECK_EQ_INT(leash_acquire(next, LEASH_WAIT_FOREVER, fx_acquire_cb, &gn), LEASH_OK);
    fx_run_for(w.loop, 50);
    leash_lock_free(queued);
    CHECK_EQ_INT(q.calls, 1);
    CHECK_EQ_INT(q.status, LEASH_ECANCELED);
    leash_client_free(c4);
    CHECK_EQ_INT(qc.calls, 1);
    CHECK_EQ_INT(qc.status, LEASH_ECANCELED);
    fx_run_for(w.loop, 50);
    CHECK_EQ_INT(gn.calls, 0);
    CHECK_EQ_INT(leash_release(h, fx_release_cb, &rel), LEASH_OK);
    fx_run_until(w.loop, &gn, 2000);
    CHECK_EQ_INT(gn.status, LEASH_OK);
    fx_run_until(w.loop, &rel, 1000);
    CHECK_MSG(gn.at_ms - rel.at_ms <= TEST_SLACK_MS, "next got it %lld ms after the release",
              (long long)(gn.at_ms - rel.at_ms));

    /* Held: released in the background, the next in line goes in. */
    last = excl(w.c, k, "free");
    CHECK_EQ_INT(leash_acquire(last, LEASH_WAIT_FOREVER, fx_acquire_cb, &gl), LEASH_OK);
    fx_run_for(w.loop, 50);
    CHECK_EQ_INT(gl.calls, 0);
    freed_at = test_now_ms();
    leash_lock_free(next);
    fx_run_until(w.loop, &gl, 2000);
    CHECK_EQ_INT(gl.status, LEASH_OK);
    CHECK_MSG(gl.at_ms - freed_at <= TEST_SLACK_MS, "got it %lld ms after the holder was freed",
              (long long)(gl.at_ms - freed_at));
    leash_lock_free(last);
    fx_run_for(w.loop, 50);
    /* Nobody holds it: anyone gets it at once. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, h, 5000), LEASH_OK);
    leash_client_free(c2);
    leash_client_free(c3);
    fx_world_down(&w);
}

TEST(fair_lock_free_in_every_state_idle_queued_and_held) {
    free_case(K_FAIR);
}

TEST(rw_writer_free_in_every_state_idle_queued_and_held) {
    free_case(K_WRITE);
}

TEST(semaphore_free_in_every_state_idle_queued_and_held) {
    free_case(K_SEM);
}

TEST(fair_lock_force_release_makes_the_holder_lost_and_lets_the_next_in) {
    const int64_t lease = 300; /* renewed every 100 ms */
    fx_world w;
    leash_client *c2, *c3;
    leash_lock *h, *admin, *waiter;
    fx_result lost = {0}, forced = {0}, got = {0}, waiter_lost = {0};

    fx_world_up(&w, lease, 0);
    c2 = fx_world_client(&w, lease);
    c3 = fx_world_client(&w, lease);
    h = fair(w.c, "fair-lost");
    admin = fair(c2, "fair-lost");
    waiter = fair(c3, "fair-lost");
    leash_on_lost(h, fx_lost_cb, &lost);
    leash_on_lost(waiter, fx_lost_cb, &waiter_lost);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(waiter, 5000, fx_acquire_cb, &got), LEASH_OK);
    fx_run_for(w.loop, 100);
    CHECK_EQ_INT(got.calls, 0);
    CHECK_EQ_INT(leash_force_release(admin, fx_release_cb, &forced), LEASH_OK);
    fx_run_until(w.loop, &forced, 2000);
    CHECK_EQ_INT(forced.status, LEASH_OK);
    fx_run_until(w.loop, &lost, 2000);
    CHECK_EQ_INT(lost.status, LEASH_LOST_EXPIRED);
    CHECK_MSG(lost.at_ms - forced.at_ms <= interval_of(lease) + TEST_SLACK_MS,
              "lost %lld ms after the force release", (long long)(lost.at_ms - forced.at_ms));
    CHECK(!leash_held(h));
    /* Woken as by a release. */
    fx_run_until(w.loop, &got, 2000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK_MSG(got.at_ms - forced.at_ms <= TEST_SLACK_MS, "the waiter got it %lld ms after",
              (long long)(got.at_ms - forced.at_ms));
    CHECK(leash_fence(waiter) > leash_fence(h));
    fx_run_for(w.loop, 2 * lease); /* the new hold is renewed on */
    CHECK_EQ_INT(lost.calls, 1);
    CHECK_MSG(waiter_lost.calls == 0, "the new holder was lost (%s) %lld ms after its grant",
              leash_lost_reason_name(waiter_lost.status),
              (long long)(waiter_lost.at_ms - got.at_ms));
    CHECK(leash_held(waiter));
    CHECK_EQ_INT(fx_release_sync(w.loop, waiter, 2000), LEASH_OK);
    leash_client_free(c2);
    leash_client_free(c3);
    fx_world_down(&w);
}

TEST(fair_lock_deleted_keys_make_the_holder_lost_and_fences_still_grow) {
    const int64_t lease = 300;
    fx_world w;
    leash_lock *h, *again;
    fx_result lost = {0};
    int64_t deleted;
    uint64_t fence;

    fx_world_up(&w, lease, 0);
    h = fair(w.c, "fair-del");
    leash_on_lost(h, fx_lost_cb, &lost);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 5000), LEASH_OK);
    fence = leash_fence(h);
    fx_run_for(w.loop, 150);
    CHECK(leash_held(h));
    CHECK_MSG(del_lock_keys(&w, "leash:fair-del") >= 1, "no key of the lock to delete");
    deleted = test_now_ms();
    fx_run_until(w.loop, &lost, 2000);
    CHECK_EQ_INT(lost.status, LEASH_LOST_EXPIRED);
    CHECK_MSG(lost.at_ms - deleted <= interval_of(lease) + TEST_SLACK_MS,
              "lost %lld ms after the keys were deleted", (long long)(lost.at_ms - deleted));
    CHECK(!leash_held(h));
    CHECK_EQ_INT(leash_release(h, NULL, NULL), LEASH_ESTATE);
    again = fair(w.c, "fair-del");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, again, 0, 5000), LEASH_OK);
    CHECK(leash_fence(again) > fence);
    fx_run_for(w.loop, 200);
    CHECK_EQ_INT(lost.calls, 1);
    CHECK_EQ_INT(fx_release_sync(w.loop, again, 2000), LEASH_OK);
    fx_world_down(&w);
}

/* The lock's key is overwritten by something else while held: the release
 * answers EREDIS and leaves that key alone; the hold is over anyway. */
TEST(fair_lock_release_over_a_wrong_type_key_gives_eredis_and_leaves_it) {
    fx_world w;
    leash_lock *h;
    test_redis *r;
    redisReply *rep;

    fx_world_up(&w, 5000, 0); /* no renewal during the case */
    h = fair(w.c, "fair-overwritten");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 5000), LEASH_OK);
    r = fx_redis_of(&w, "leash:fair-overwritten");
    CHECK_EQ_INT(fx_key_cmd(&w, "leash:fair-overwritten", "SET leash:fair-overwritten precious"),
                 1);
    fx_log_clear();
    CHECK_EQ_INT(fx_release_sync(w.loop, h, 2000), LEASH_EREDIS);
    CHECK(fx_log_contains("WRONGTYPE"));
    CHECK(!leash_held(h));
    rep = test_redis_cmd(r, "GET leash:fair-overwritten");
    CHECK(rep != NULL && rep->type == REDIS_REPLY_STRING);
    CHECK_STR_EQ(rep->str, "precious");
    freeReplyObject(rep);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 5000), LEASH_EREDIS);
    fx_world_down(&w);
}

TEST(fair_lock_try_once_is_busy_when_held_or_when_someone_waits) {
    fx_world w;
    leash_client *c2, *c3;
    leash_lock *h, *x, *waiter;
    fx_result got = {0};

    fx_world_up(&w, 2000, 0);
    c2 = fx_world_client(&w, 2000);
    c3 = fx_world_client(&w, 2000);
    h = fair(w.c, "fair-try");
    x = fair(c2, "fair-try");
    waiter = fair(c3, "fair-try");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, x, 0, 5000), LEASH_EBUSY);
    CHECK(!leash_held(x));
    CHECK_EQ_INT(leash_acquire(waiter, 5000, fx_acquire_cb, &got), LEASH_OK);
    fx_run_for(w.loop, 50);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, x, 0, 5000), LEASH_EBUSY);
    /* The try-once did not queue: the waiter is next, and alone. */
    CHECK_EQ_INT(fx_release_sync(w.loop, h, 2000), LEASH_OK);
    fx_run_until(w.loop, &got, 2000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, x, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(fx_release_sync(w.loop, waiter, 2000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, x, 0, 5000), LEASH_OK);
    CHECK(leash_fence(x) > leash_fence(waiter));
    CHECK(leash_fence(waiter) > leash_fence(h));
    CHECK_EQ_INT(fx_release_sync(w.loop, x, 2000), LEASH_OK);
    leash_client_free(c2);
    leash_client_free(c3);
    fx_world_down(&w);
}

/* The family's machine is traced like the mutex's (the one state setter,
 * prim/holding.c), its own events named: a waiter let in by the holder's
 * release goes to HELD on the handoff, whatever it went through before. */
TEST(fair_lock_debug_log_traces_each_change_of_state_and_the_handoff) {
    static const char *const path[] = {
        "STATE: IDLE => ATTEMPT (ACQUIRE) lock fair-traced\n",
        " => HELD (HANDOFF) lock fair-traced\n",
        "STATE: HELD => IDLE (RELEASE) lock fair-traced\n",
    };
    fx_world w;
    leash_client *c2;
    leash_lock *h, *x;
    fx_result got = {0};

    fx_world_up(&w, 2000, 0);
    c2 = fx_world_client(&w, 2000);
    h = fair(w.c, "fair-traced");
    x = fair(c2, "fair-traced");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h, 0, 5000), LEASH_OK);
    fx_log_clear();
    CHECK_EQ_INT(leash_acquire(x, 5000, fx_acquire_cb, &got), LEASH_OK);
    fx_run_for(w.loop, 100); /* x has its place, and sleeps */
    CHECK_EQ_INT(fx_release_sync(w.loop, h, 2000), LEASH_OK);
    fx_run_until(w.loop, &got, 2000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, x, 2000), LEASH_OK);
    /* Both handles' lines: h's release, and x's path. */
    CHECK(fx_log_state_path("fair-traced", path, sizeof(path) / sizeof(path[0])) >= 4);
    leash_client_free(c2);
    fx_world_down(&w);
}

TEST(fair_lock_reentrant_holds_are_counted) {
    fx_world w;
    leash_client *c2;
    leash_lock *a, *other;

    fx_world_up(&w, 2000, 0);
    c2 = fx_world_client(&w, 2000);
    a = fair(w.c, "fair-again");
    other = fair(c2, "fair-again");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_hold_count(a), 2);
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 5000), LEASH_OK);
    CHECK(leash_held(a));
    CHECK_EQ_INT(fx_acquire_sync(w.loop, other, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 5000), LEASH_OK);
    CHECK(!leash_held(a));
    CHECK_EQ_INT(fx_acquire_sync(w.loop, other, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, other, 5000), LEASH_OK);
    leash_client_free(c2);
    fx_world_down(&w);
}

/* ================= read-write lock ================= */

TEST(rw_many_readers_hold_at_once_and_keep_writers_out) {
    fx_world w;
    leash_client *cs[3], *wc;
    leash_lock *rs[6], *wr;
    fx_result got = {0};
    uint64_t last = 0;
    int i;

    fx_world_up(&w, 2000, 0);
    cs[0] = w.c;
    cs[1] = fx_world_client(&w, 2000);
    cs[2] = fx_world_client(&w, 2000);
    wc = fx_world_client(&w, 2000);
    for (i = 0; i < 6; i++) {
        rs[i] = reader(cs[i % 3], "rw-many");
        CHECK_EQ_INT(fx_acquire_sync(w.loop, rs[i], 0, 5000), LEASH_OK);
        /* Each read hold has its own fence, above every earlier one. */
        CHECK(leash_fence(rs[i]) > last);
        last = leash_fence(rs[i]);
    }
    for (i = 0; i < 6; i++)
        CHECK(leash_held(rs[i]));
    wr = writer(wc, "rw-many");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, wr, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, wr, 200, 5000), LEASH_ETIMEDOUT);
    CHECK_EQ_INT(leash_acquire(wr, 5000, fx_acquire_cb, &got), LEASH_OK);
    for (i = 0; i < 5; i++)
        CHECK_EQ_INT(fx_release_sync(w.loop, rs[i], 2000), LEASH_OK);
    run_for_or_until(&w, &got, 100);
    CHECK_EQ_INT(got.calls, 0); /* one reader is still in */
    CHECK_EQ_INT(fx_release_sync(w.loop, rs[5], 2000), LEASH_OK);
    fx_run_until(w.loop, &got, 2000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK(leash_fence(wr) > last);
    CHECK_EQ_INT(fx_release_sync(w.loop, wr, 2000), LEASH_OK);
    leash_client_free(wc);
    leash_client_free(cs[1]);
    leash_client_free(cs[2]);
    fx_world_down(&w);
}

TEST(rw_writer_excludes_readers_and_writers_over_many_cycles) {
    fx_world w;
    leash_client *cs[5];
    contender ks[7];
    resource res;
    leash_lock *wr, *r, *w2;
    int i;

    memset(&res, 0, sizeof(res));
    res.limit = 100;
    fx_world_up(&w, 2000, 0);
    cs[0] = w.c;
    for (i = 1; i < 5; i++)
        cs[i] = fx_world_client(&w, 2000);
    /* A writer in, readers and writers of other clients out. */
    wr = writer(cs[0], "rw-excl");
    r = reader(cs[1], "rw-excl");
    w2 = writer(cs[2], "rw-excl");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, wr, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, w2, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r, 150, 5000), LEASH_ETIMEDOUT);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, w2, 150, 5000), LEASH_ETIMEDOUT);
    CHECK_EQ_INT(fx_release_sync(w.loop, wr, 2000), LEASH_OK);
    leash_lock_free(wr);
    leash_lock_free(r);
    leash_lock_free(w2);

    /* Three writers and four readers, two of them in writers' clients, in
     * cycles: a writer is always alone. */
    for (i = 0; i < 7; i++)
        contender_init(&ks[i], i < 3 ? writer(cs[i], "rw-excl") : reader(cs[i % 5], "rw-excl"),
                       &res, i < 3, 8, i < 3 ? 3 : 8);
    drive(&w, ks, 7, -1, 20000);
    for (i = 0; i < 7; i++) {
        CHECK_EQ_INT(ks[i].errors, 0);
        CHECK_MSG(ks[i].losses == 0, "contender %d lost %d holds (last: %s)", i, ks[i].losses,
                  leash_lost_reason_name(ks[i].last_loss));
        CHECK_EQ_INT(ks[i].grants, 8);
    }
    CHECK_EQ_INT(res.violations, 0);
    CHECK_EQ_INT(res.fence_violations, 0);
    check_fences_distinct(&res);
    for (i = 1; i < 5; i++)
        leash_client_free(cs[i]);
    fx_world_down(&w);
}

TEST(rw_writer_is_not_starved_by_a_stream_of_overlapping_readers) {
    const int64_t read_hold = 200;
    fx_world w;
    leash_client *cs[2];
    contender ks[5]; /* four readers, then the writer */
    resource res;
    int i, reads_before[4];
    int64_t asked, took;

    memset(&res, 0, sizeof(res));
    res.limit = 100;
    fx_world_up(&w, 2000, 0);
    cs[0] = fx_world_client(&w, 2000);
    cs[1] = fx_world_client(&w, 2000);
    fx_wait_connected(w.loop, cs[0], 5000);
    fx_wait_connected(w.loop, cs[1], 5000);
    /* Four readers, each in again as soon as it left, staggered by 50 ms:
     * the lock is never without a reader. */
    for (i = 0; i < 4; i++) {
        contender_init(&ks[i], reader(cs[i % 2], "rw-starve"), &res, 0, 1000, read_hold);
        ks[i].start_at = test_now_ms() + 50 * i;
    }
    contender_init(&ks[4], writer(w.c, "rw-starve"), &res, 1, 0, 100);
    drive(&w, ks, 5, 700, 0);
    CHECK_MSG(res.peak_readers >= 3, "at most %d readers at once", res.peak_readers);
    /* The writer asks while readers hold (on a loaded machine the stream
     * may bunch up: wait for the next reader in). */
    for (i = 0; i < 500 && res.readers == 0; i++)
        drive(&w, ks, 5, 1, 0);
    CHECK(res.readers > 0);
    for (i = 0; i < 4; i++)
        reads_before[i] = ks[i].grants;

    /* The writer asks while readers hold and more keep coming. */
    ks[4].cycles_left = 1;
    ks[4].state = C_IDLE;
    ks[4].wait_ms = 3000;
    asked = test_now_ms();
    for (i = 0; i < 1000 && ks[4].grants == 0 && ks[4].errors == 0; i++)
        drive(&w, ks, 5, 5, 0);
    CHECK_MSG(ks[4].errors == 0, "the writer's acquire ended %s",
              leash_status_name(ks[4].last_error));
    CHECK_EQ_INT(ks[4].grants, 1);
    took = ks[4].granted_at - asked;
    CHECK_MSG(took <= read_hold + TEST_SLACK_MS,
              "the writer waited %lld ms; the readers in when it asked held %lld ms",
              (long long)took, (long long)read_hold);
    /* Every reader comes again after the writer left (once at least: on a
     * loaded machine a second round may not fit in the time). */
    drive(&w, ks, 5, 500, 0);
    for (i = 0; i < 4; i++) {
        CHECK_MSG(ks[i].grants > reads_before[i], "reader %d: %d reads before the writer, %d after",
                  i, reads_before[i], ks[i].grants);
        ks[i].cycles_left = 0;
    }
    drive(&w, ks, 5, -1, 5000);
    for (i = 0; i < 5; i++) {
        CHECK_EQ_INT(ks[i].errors, 0);
        CHECK_MSG(ks[i].losses == 0, "contender %d lost %d holds (last: %s)", i, ks[i].losses,
                  leash_lost_reason_name(ks[i].last_loss));
    }
    CHECK_EQ_INT(res.violations, 0);
    leash_client_free(cs[0]);
    leash_client_free(cs[1]);
    fx_world_down(&w);
}

TEST(rw_readers_queued_behind_a_writer_go_in_together_up_to_the_next_writer) {
    fx_world w;
    leash_client *cs[4];
    leash_lock *wr, *rs[3], *w2, *late;
    fx_result g[3], gw2 = {0}, glate = {0}, rel = {0};
    int i;

    memset(g, 0, sizeof(g));
    fx_world_up(&w, 2000, 0);
    cs[0] = w.c;
    for (i = 1; i < 4; i++)
        cs[i] = fx_world_client(&w, 2000);
    wr = writer(cs[0], "rw-batch");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, wr, 0, 5000), LEASH_OK);
    for (i = 0; i < 3; i++) {
        rs[i] = reader(cs[1 + i % 2], "rw-batch");
        CHECK_EQ_INT(leash_acquire(rs[i], 5000, fx_acquire_cb, &g[i]), LEASH_OK);
        fx_run_for(w.loop, 30);
    }
    w2 = writer(cs[3], "rw-batch");
    CHECK_EQ_INT(leash_acquire(w2, 5000, fx_acquire_cb, &gw2), LEASH_OK);
    fx_run_for(w.loop, 30);
    late = reader(cs[2], "rw-batch");
    CHECK_EQ_INT(leash_acquire(late, 5000, fx_acquire_cb, &glate), LEASH_OK);
    fx_run_for(w.loop, 100);
    CHECK_EQ_INT(g[0].calls + g[1].calls + g[2].calls + gw2.calls + glate.calls, 0);

    CHECK_EQ_INT(leash_release(wr, fx_release_cb, &rel), LEASH_OK);
    for (i = 0; i < 3; i++) {
        fx_run_until(w.loop, &g[i], 2000);
        CHECK_EQ_INT(g[i].status, LEASH_OK);
    }
    fx_run_until(w.loop, &rel, 1000);
    for (i = 0; i < 3; i++) {
        CHECK_MSG(g[i].at_ms - rel.at_ms <= TEST_SLACK_MS, "reader %d in %lld ms after the release",
                  i, (long long)(g[i].at_ms - rel.at_ms));
        CHECK(leash_held(rs[i])); /* all three at once */
    }
    /* Let in by one script, in one microsecond of the server's clock: each
     * its own fence all the same, above the writer's, in queue order. */
    CHECK(leash_fence(rs[0]) > leash_fence(wr));
    CHECK(leash_fence(rs[1]) > leash_fence(rs[0]));
    CHECK(leash_fence(rs[2]) > leash_fence(rs[1]));
    /* The writer behind them waits, and so does the reader behind it. */
    run_for_or_until(&w, &glate, 150);
    CHECK_EQ_INT(gw2.calls + glate.calls, 0);
    for (i = 0; i < 3; i++)
        CHECK_EQ_INT(fx_release_sync(w.loop, rs[i], 2000), LEASH_OK);
    fx_run_until(w.loop, &gw2, 2000);
    CHECK_EQ_INT(gw2.status, LEASH_OK);
    run_for_or_until(&w, &glate, 150);
    CHECK_EQ_INT(glate.calls, 0);
    CHECK_EQ_INT(fx_release_sync(w.loop, w2, 2000), LEASH_OK);
    fx_run_until(w.loop, &glate, 2000);
    CHECK_EQ_INT(glate.status, LEASH_OK);
    CHECK(leash_fence(late) > leash_fence(w2));
    CHECK(leash_fence(w2) > leash_fence(rs[0]));
    CHECK_EQ_INT(fx_release_sync(w.loop, late, 2000), LEASH_OK);
    for (i = 1; i < 4; i++)
        leash_client_free(cs[i]);
    fx_world_down(&w);
}

TEST(rw_write_release_wakes_one_writer_only) {
    fx_world w;
    leash_client *c2, *c3;
    leash_lock *wr, *w2, *w3;
    fx_result g2 = {0}, g3 = {0};

    fx_world_up(&w, 2000, 0);
    c2 = fx_world_client(&w, 2000);
    c3 = fx_world_client(&w, 2000);
    wr = writer(w.c, "rw-one-writer");
    w2 = writer(c2, "rw-one-writer");
    w3 = writer(c3, "rw-one-writer");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, wr, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(w2, 5000, fx_acquire_cb, &g2), LEASH_OK);
    fx_run_for(w.loop, 30);
    CHECK_EQ_INT(leash_acquire(w3, 5000, fx_acquire_cb, &g3), LEASH_OK);
    fx_run_for(w.loop, 50);
    CHECK_EQ_INT(fx_release_sync(w.loop, wr, 2000), LEASH_OK);
    fx_run_until(w.loop, &g2, 2000);
    CHECK_EQ_INT(g2.status, LEASH_OK);
    run_for_or_until(&w, &g3, 200);
    CHECK_EQ_INT(g3.calls, 0);
    CHECK_EQ_INT(fx_release_sync(w.loop, w2, 2000), LEASH_OK);
    fx_run_until(w.loop, &g3, 2000);
    CHECK_EQ_INT(g3.status, LEASH_OK);
    CHECK(leash_fence(w3) > leash_fence(w2));
    CHECK_EQ_INT(fx_release_sync(w.loop, w3, 2000), LEASH_OK);
    leash_client_free(c2);
    leash_client_free(c3);
    fx_world_down(&w);
}

TEST(rw_try_once_reader_is_busy_while_a_writer_waits) {
    fx_world w;
    leash_client *c2, *c3;
    leash_lock *r1, *r2, *wr;
    fx_result gw = {0};

    fx_world_up(&w, 2000, 0);
    c2 = fx_world_client(&w, 2000);
    c3 = fx_world_client(&w, 2000);
    r1 = reader(w.c, "rw-try");
    r2 = reader(c2, "rw-try");
    wr = writer(c3, "rw-try");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r1, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(wr, 5000, fx_acquire_cb, &gw), LEASH_OK);
    fx_run_for(w.loop, 50);
    /* Only readers hold, but a writer waits: a new reader does not jump it. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r2, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(fx_release_sync(w.loop, r1, 2000), LEASH_OK);
    fx_run_until(w.loop, &gw, 2000);
    CHECK_EQ_INT(gw.status, LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r2, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(fx_release_sync(w.loop, wr, 2000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r2, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, r2, 2000), LEASH_OK);
    leash_client_free(c2);
    leash_client_free(c3);
    fx_world_down(&w);
}

TEST(rw_reentrant_holds_are_counted_per_handle) {
    fx_world w;
    leash_client *c2;
    leash_lock *r, *wr, *other_r, *other_w;

    fx_world_up(&w, 2000, 0);
    c2 = fx_world_client(&w, 2000);
    r = reader(w.c, "rw-again");
    wr = writer(c2, "rw-again");
    other_r = reader(c2, "rw-again");
    other_w = writer(w.c, "rw-again");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_hold_count(r), 2);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, wr, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(fx_release_sync(w.loop, r, 2000), LEASH_OK);
    CHECK(leash_held(r));
    CHECK_EQ_INT(leash_hold_count(r), 1);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, wr, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(fx_release_sync(w.loop, r, 2000), LEASH_OK);
    CHECK(!leash_held(r));

    CHECK_EQ_INT(fx_acquire_sync(w.loop, wr, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, wr, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, wr, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_hold_count(wr), 3);
    CHECK_EQ_INT(fx_release_sync(w.loop, wr, 2000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, wr, 2000), LEASH_OK);
    CHECK(leash_held(wr));
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, other_w, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(fx_release_sync(w.loop, wr, 2000), LEASH_OK);
    CHECK(!leash_held(wr));
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, other_r, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, r, 2000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, other_r, 2000), LEASH_OK);
    leash_client_free(c2);
    fx_world_down(&w);
}

TEST(rw_pair_needs_a_read_and_a_write_handle_of_one_name_and_client) {
    fx_world w;
    leash_client *c2;
    leash_lock *r, *wr, *r2, *w2, *other_name, *other_client, *fl;

    fx_world_up(&w, 2000, 0);
    c2 = fx_world_client(&w, 2000);
    r = reader(w.c, "rw-pair");
    wr = writer(w.c, "rw-pair");
    r2 = reader(w.c, "rw-pair");
    w2 = writer(w.c, "rw-pair");
    other_name = writer(w.c, "rw-pair-2");
    other_client = writer(c2, "rw-pair");
    fl = fair(w.c, "rw-pair");
    CHECK_EQ_INT(leash_rw_lock_pair(NULL, wr), LEASH_EINVAL);
    CHECK_EQ_INT(leash_rw_lock_pair(r, NULL), LEASH_EINVAL);
    CHECK_EQ_INT(leash_rw_lock_pair(wr, r), LEASH_EINVAL); /* the wrong way round */
    CHECK_EQ_INT(leash_rw_lock_pair(r, r2), LEASH_EINVAL);
    CHECK_EQ_INT(leash_rw_lock_pair(w2, wr), LEASH_EINVAL);
    CHECK_EQ_INT(leash_rw_lock_pair(r, other_name), LEASH_EINVAL);
    CHECK_EQ_INT(leash_rw_lock_pair(r, other_client), LEASH_EINVAL);
    CHECK_EQ_INT(leash_rw_lock_pair(r, fl), LEASH_EINVAL);
    CHECK_EQ_INT(leash_rw_lock_pair(r, wr), LEASH_OK);
    CHECK_EQ_INT(leash_rw_lock_pair(r, wr), LEASH_OK);
    leash_client_free(c2);
    fx_world_down(&w);
}

/* A name's holders are of one kind at a time: a read lock and a semaphore
 * of one name exclude each other like strangers, either way round and
 * whatever permits are left. */
TEST(a_semaphore_and_a_read_lock_of_one_name_exclude_each_other) {
    fx_world w;
    leash_client *c2;
    leash_lock *s1, *s2, *r;

    fx_world_up(&w, 2000, 0);
    c2 = fx_world_client(&w, 2000);
    s1 = sem(w.c, "sem-read", 2);
    s2 = sem(c2, "sem-read", 2);
    r = reader(c2, "sem-read");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, s1, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(fx_release_sync(w.loop, s1, 2000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, s2, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(fx_release_sync(w.loop, r, 2000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, s2, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, s2, 2000), LEASH_OK);
    leash_client_free(c2);
    fx_world_down(&w);
}

TEST(rw_handles_of_one_client_exclude_each_other_like_strangers) {
    fx_world w;
    leash_lock *wr, *r;
    fx_result got = {0};

    fx_world_up(&w, 2000, 0);
    wr = writer(w.c, "rw-same-client");
    r = reader(w.c, "rw-same-client");
    /* Unpaired: a read handle waits behind its client's writer... */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, wr, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(leash_acquire(r, 5000, fx_acquire_cb, &got), LEASH_OK);
    run_for_or_until(&w, &got, 100);
    CHECK_EQ_INT(got.calls, 0);
    CHECK_EQ_INT(fx_release_sync(w.loop, wr, 2000), LEASH_OK);
    fx_run_until(w.loop, &got, 2000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    /* ...and a write handle behind its client's reader: it waits, it is
     * not refused. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, wr, 0, 5000), LEASH_EBUSY);
    got = (fx_result){0};
    CHECK_EQ_INT(leash_acquire(wr, 5000, fx_acquire_cb, &got), LEASH_OK);
    run_for_or_until(&w, &got, 100);
    CHECK_EQ_INT(got.calls, 0);
    CHECK_EQ_INT(fx_release_sync(w.loop, r, 2000), LEASH_OK);
    fx_run_until(w.loop, &got, 2000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, wr, 2000), LEASH_OK);
    fx_world_down(&w);
}

TEST(rw_downgrade_paired_read_handle_goes_in_at_once_beside_its_writer) {
    fx_world w;
    leash_client *c2, *c3;
    leash_lock *wr, *r, *unpaired, *stranger_r, *stranger_w;
    fx_result wait_r = {0};

    fx_world_up(&w, 2000, 0);
    c2 = fx_world_client(&w, 2000);
    c3 = fx_world_client(&w, 2000);
    wr = writer(w.c, "rw-down");
    r = reader(w.c, "rw-down");
    unpaired = reader(w.c, "rw-down");
    stranger_r = reader(c2, "rw-down");
    stranger_w = writer(c3, "rw-down");
    CHECK_EQ_INT(leash_rw_lock_pair(r, wr), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, wr, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, stranger_r, 0, 5000), LEASH_EBUSY);
    /* A reader waits; the paired one still goes in at once, try-once. */
    CHECK_EQ_INT(leash_acquire(stranger_r, 5000, fx_acquire_cb, &wait_r), LEASH_OK);
    fx_run_for(w.loop, 50);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r, 0, 5000), LEASH_OK);
    CHECK(leash_held(wr));
    CHECK(leash_held(r));
    CHECK(leash_fence(r) > leash_fence(wr));
    /* Still written: others stay out, its own client's unpaired reader too. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, unpaired, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(wait_r.calls, 0);
    CHECK_EQ_INT(fx_release_sync(w.loop, wr, 2000), LEASH_OK);
    CHECK(leash_held(r));
    /* Now only read: the waiting reader in, writers out. */
    fx_run_until(w.loop, &wait_r, 2000);
    CHECK_EQ_INT(wait_r.status, LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, stranger_w, 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(fx_release_sync(w.loop, r, 2000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, stranger_r, 2000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, stranger_w, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, stranger_w, 2000), LEASH_OK);
    leash_client_free(c2);
    leash_client_free(c3);
    fx_world_down(&w);
}

TEST(rw_upgrade_is_refused_with_estate_while_the_paired_read_holds_or_waits) {
    fx_world w;
    leash_client *c2;
    leash_lock *r, *wr, *stranger_w, *other_w;
    fx_result never = {0}, queued = {0}, other = {0};

    fx_world_up(&w, 2000, 0);
    c2 = fx_world_client(&w, 2000);
    r = reader(w.c, "rw-up");
    wr = writer(w.c, "rw-up");
    other_w = writer(w.c, "rw-up");
    stranger_w = writer(c2, "rw-up");
    CHECK_EQ_INT(leash_rw_lock_pair(r, wr), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r, 0, 5000), LEASH_OK);
    /* A writer of the same client that is not paired queues as anyone's. */
    CHECK_EQ_INT(leash_acquire(other_w, 2000, fx_acquire_cb, &other), LEASH_OK);
    fx_run_for(w.loop, 50);
    CHECK_EQ_INT(other.calls, 0);
    CHECK_EQ_INT(leash_cancel(other_w), LEASH_OK);
    fx_run_until(w.loop, &other, 1000);
    CHECK_EQ_INT(other.status, LEASH_ECANCELED);
    CHECK_EQ_INT(leash_acquire(wr, 0, fx_acquire_cb, &never), LEASH_ESTATE);
    CHECK_EQ_INT(leash_acquire(wr, 1000, fx_acquire_cb, &never), LEASH_ESTATE);
    CHECK_EQ_INT(leash_acquire(wr, LEASH_WAIT_FOREVER, fx_acquire_cb, &never), LEASH_ESTATE);
    CHECK(leash_held(r));
    CHECK(!leash_held(wr));
    CHECK_EQ_INT(fx_release_sync(w.loop, r, 2000), LEASH_OK);
    /* Its read is gone: the writer may go in. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, wr, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, wr, 2000), LEASH_OK);

    /* A paired read that waits (behind a stranger's write) refuses it too. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, stranger_w, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(r, LEASH_WAIT_FOREVER, fx_acquire_cb, &queued), LEASH_OK);
    fx_run_for(w.loop, 50);
    CHECK_EQ_INT(leash_acquire(wr, 1000, fx_acquire_cb, &never), LEASH_ESTATE);
    CHECK_EQ_INT(leash_cancel(r), LEASH_OK);
    fx_run_until(w.loop, &queued, 1000);
    CHECK_EQ_INT(queued.status, LEASH_ECANCELED);
    fx_run_for(w.loop, 50);
    CHECK_EQ_INT(never.calls, 0); /* refused calls never call back */
    CHECK_EQ_INT(fx_release_sync(w.loop, stranger_w, 2000), LEASH_OK);
    /* Freeing the read handle ends the pair: the writer is free to wait. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r, 0, 5000), LEASH_OK);
    leash_lock_free(r);
    fx_run_for(w.loop, 50);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, wr, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, wr, 2000), LEASH_OK);
    leash_client_free(c2);
    fx_world_down(&w);
}

TEST(rw_each_read_hold_has_its_own_lease_fence_and_lost_callback) {
    const int64_t lease = 300;
    fx_world w;
    leash_client *c2, *c3;
    leash_lock *r1, *r2, *r3, *admin, *wr;
    fx_result l1 = {0}, l2 = {0}, l3 = {0}, forced = {0};
    int64_t t2;

    fx_world_up(&w, lease, 0);
    c2 = fx_world_client(&w, lease);
    c3 = fx_world_client(&w, lease);
    r1 = reader(w.c, "rw-own");
    r2 = reader(c2, "rw-own");
    r3 = reader(w.c, "rw-own");
    CHECK_EQ_INT(leash_lock_set_fixed_lease(r2, 400), LEASH_OK);
    leash_on_lost(r1, fx_lost_cb, &l1);
    leash_on_lost(r2, fx_lost_cb, &l2);
    leash_on_lost(r3, fx_lost_cb, &l3);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r1, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r2, 0, 5000), LEASH_OK);
    t2 = test_now_ms();
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r3, 0, 5000), LEASH_OK);
    CHECK(leash_fence(r2) > leash_fence(r1));
    CHECK(leash_fence(r3) > leash_fence(r2));
    /* r2's fixed lease ends; r1 and r3 are renewed on. */
    fx_run_until(w.loop, &l2, 2000);
    CHECK_EQ_INT(l2.status, LEASH_LOST_FIXED_LEASE);
    CHECK_MSG(l2.at_ms - t2 <= 400 + TEST_SLACK_MS, "fixed lease lost after %lld ms",
              (long long)(l2.at_ms - t2));
    fx_run_for(w.loop, 2 * lease);
    CHECK_EQ_INT(l1.calls + l3.calls, 0);
    CHECK(leash_held(r1) && leash_held(r3));
    CHECK(!leash_held(r2));
    CHECK(leash_renewals(r1) >= 2);
    /* A force release ends both, each told once. */
    admin = reader(c3, "rw-own");
    CHECK_EQ_INT(leash_force_release(admin, fx_release_cb, &forced), LEASH_OK);
    fx_run_until(w.loop, &forced, 2000);
    CHECK_EQ_INT(forced.status, LEASH_OK);
    fx_run_until(w.loop, &l1, 2000);
    fx_run_until(w.loop, &l3, 2000);
    CHECK_EQ_INT(l1.status, LEASH_LOST_EXPIRED);
    CHECK_EQ_INT(l3.status, LEASH_LOST_EXPIRED);
    CHECK_MSG(l1.at_ms - forced.at_ms <= interval_of(lease) + TEST_SLACK_MS &&
                  l3.at_ms - forced.at_ms <= interval_of(lease) + TEST_SLACK_MS,
              "lost %lld and %lld ms after the force release", (long long)(l1.at_ms - forced.at_ms),
              (long long)(l3.at_ms - forced.at_ms));
    fx_run_for(w.loop, 200);
    CHECK_EQ_INT(l1.calls, 1);
    CHECK_EQ_INT(l2.calls, 1);
    CHECK_EQ_INT(l3.calls, 1);
    wr = writer(c3, "rw-own");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, wr, 0, 5000), LEASH_OK);
    CHECK(leash_fence(wr) > leash_fence(r3));
    CHECK_EQ_INT(fx_release_sync(w.loop, wr, 2000), LEASH_OK);
    leash_client_free(c2);
    leash_client_free(c3);
    fx_world_down(&w);
}

TEST(rw_crashed_reader_share_comes_back_after_one_lease) {
    crashed_holder_case(K_READ, K_WRITE, 0);
}

TEST(rw_crashed_writer_is_recovered_after_one_lease) {
    crashed_holder_case(K_WRITE, K_READ, 0);
}

/* ================= semaphore ================= */

TEST(semaphore_three_permits_eight_contenders_peak_is_exactly_three) {
    fx_world w;
    leash_client *cs[4];
    contender ks[8];
    resource res;
    int i;

    memset(&res, 0, sizeof(res));
    res.limit = 3;
    fx_world_up(&w, 2000, 0);
    cs[0] = w.c;
    for (i = 1; i < 4; i++) {
        cs[i] = fx_world_client(&w, 2000);
        fx_wait_connected(w.loop, cs[i], 5000);
    }
    for (i = 0; i < 8; i++)
        contender_init(&ks[i], sem(cs[i % 4], "sem-8", 3), &res, 0, 8, 10);
    drive(&w, ks, 8, -1, 20000);
    for (i = 0; i < 8; i++) {
        CHECK_EQ_INT(ks[i].errors, 0);
        CHECK_MSG(ks[i].losses == 0, "contender %d lost %d holds (last: %s)", i, ks[i].losses,
                  leash_lost_reason_name(ks[i].last_loss));
        CHECK_EQ_INT(ks[i].grants, 8);
    }
    CHECK_EQ_INT(res.violations, 0);
    CHECK_EQ_INT(res.peak, 3);
    check_fences_distinct(&res);
    fx_run_for(w.loop, 20);
    check_keys_expire(&w, "leash:sem-8");
    for (i = 1; i < 4; i++)
        leash_client_free(cs[i]);
    fx_world_down(&w);
}

TEST(semaphore_permits_out_of_range_give_no_handle) {
    fx_world w;
    leash_lock *l;

    fx_world_up(&w, 2000, 0);
    CHECK(leash_semaphore_new(w.c, "sem-range", 0) == NULL);
    CHECK(leash_semaphore_new(w.c, "sem-range", -1) == NULL);
    CHECK(leash_semaphore_new(w.c, "sem-range", LEASH_PERMITS_MAX + 1) == NULL);
    CHECK(leash_semaphore_new(NULL, "sem-range", 3) == NULL);
    CHECK(leash_semaphore_new(w.c, "", 3) == NULL);
    CHECK(leash_fair_lock_new(NULL, "x") == NULL);
    CHECK(leash_read_lock_new(w.c, NULL) == NULL);
    CHECK(leash_write_lock_new(w.c, "") == NULL);
    l = leash_semaphore_new(w.c, "sem-range", LEASH_PERMITS_MAX);
    CHECK(l != NULL);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 2000), LEASH_OK);
    l = leash_semaphore_new(w.c, "sem-one", 1);
    CHECK(l != NULL);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, sem(w.c, "sem-one", 1), 0, 5000), LEASH_EBUSY);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 2000), LEASH_OK);
    fx_world_down(&w);
}

TEST(semaphore_permits_mismatch_on_a_name_in_use_fails_einval) {
    fx_world w;
    leash_client *c2;
    leash_lock *three, *five, *five_waiting;

    fx_world_up(&w, 2000, 0);
    c2 = fx_world_client(&w, 2000);
    three = sem(w.c, "sem-mismatch", 3);
    five = sem(c2, "sem-mismatch", 5);
    five_waiting = sem(c2, "sem-mismatch", 5);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, three, 0, 5000), LEASH_OK);
    fx_log_clear();
    CHECK_EQ_INT(fx_acquire_sync(w.loop, five, 0, 5000), LEASH_EINVAL);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, five_waiting, 2000, 5000), LEASH_EINVAL);
    CHECK(!leash_held(five));
    CHECK(!leash_held(five_waiting));
    CHECK(leash_held(three));
    /* The limit did not change: three permits, one taken. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, sem(c2, "sem-mismatch", 3), 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, sem(c2, "sem-mismatch", 3), 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, sem(c2, "sem-mismatch", 3), 0, 5000), LEASH_EBUSY);
    leash_client_free(c2); /* gives its two permits back */
    CHECK_EQ_INT(fx_release_sync(w.loop, three, 2000), LEASH_OK);
    fx_run_for(w.loop, 100);
    /* Nobody uses the name any more: another count is fine now. */
    c2 = fx_world_client(&w, 2000);
    five = sem(c2, "sem-mismatch", 5);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, five, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, three, 0, 5000), LEASH_EINVAL);
    CHECK_EQ_INT(fx_release_sync(w.loop, five, 2000), LEASH_OK);
    leash_client_free(c2);
    fx_world_down(&w);
}

TEST(semaphore_crashed_holder_permit_comes_back_after_one_lease) {
    crashed_holder_case(K_SEM, K_SEM, 2);
}

TEST(semaphore_each_permit_has_its_own_lease_and_lost_callback) {
    const int64_t lease = 300;
    fx_world w;
    leash_client *c2, *c3;
    leash_lock *p1, *p2, *p3, *waiter, *admin;
    fx_result l1 = {0}, l2 = {0}, l3 = {0}, lw = {0}, got = {0}, forced = {0};
    int64_t t2;

    fx_world_up(&w, lease, 0);
    c2 = fx_world_client(&w, lease);
    c3 = fx_world_client(&w, lease);
    p1 = sem(w.c, "sem-own", 3);
    p2 = sem(c2, "sem-own", 3);
    p3 = sem(w.c, "sem-own", 3);
    waiter = sem(c3, "sem-own", 3);
    CHECK_EQ_INT(leash_lock_set_fixed_lease(p2, 400), LEASH_OK);
    leash_on_lost(p1, fx_lost_cb, &l1);
    leash_on_lost(p2, fx_lost_cb, &l2);
    leash_on_lost(p3, fx_lost_cb, &l3);
    leash_on_lost(waiter, fx_lost_cb, &lw);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, p1, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, p2, 0, 5000), LEASH_OK);
    t2 = test_now_ms();
    CHECK_EQ_INT(fx_acquire_sync(w.loop, p3, 0, 5000), LEASH_OK);
    CHECK(leash_fence(p3) > leash_fence(p2) && leash_fence(p2) > leash_fence(p1));
    CHECK_EQ_INT(leash_acquire(waiter, 5000, fx_acquire_cb, &got), LEASH_OK);
    /* p2's fixed lease ends: its permit comes back to the waiter (noticed
     * at the latest by the waiter's next renewal of its place). */
    fx_run_until(w.loop, &l2, 2000);
    CHECK_EQ_INT(l2.status, LEASH_LOST_FIXED_LEASE);
    CHECK_MSG(l2.at_ms - t2 <= 400 + TEST_SLACK_MS, "fixed lease lost after %lld ms",
              (long long)(l2.at_ms - t2));
    fx_run_until(w.loop, &got, 2000);
    CHECK_EQ_INT(got.status, LEASH_OK);
    CHECK_MSG(got.at_ms - t2 <= 400 + interval_of(lease) + TEST_SLACK_MS,
              "the waiter got the permit %lld ms after the fixed lease began",
              (long long)(got.at_ms - t2));
    CHECK(!leash_held(p2));
    fx_run_for(w.loop, 2 * lease);
    CHECK_EQ_INT(l1.calls + l3.calls + lw.calls, 0);
    CHECK(leash_held(p1) && leash_held(p3) && leash_held(waiter));
    /* A force release ends the three left, each told once. */
    admin = sem(c3, "sem-own", 3);
    CHECK_EQ_INT(leash_force_release(admin, fx_release_cb, &forced), LEASH_OK);
    fx_run_until(w.loop, &forced, 2000);
    CHECK_EQ_INT(forced.status, LEASH_OK);
    fx_run_until(w.loop, &l1, 2000);
    fx_run_until(w.loop, &l3, 2000);
    fx_run_until(w.loop, &lw, 2000);
    CHECK_EQ_INT(l1.status, LEASH_LOST_EXPIRED);
    CHECK_EQ_INT(l3.status, LEASH_LOST_EXPIRED);
    CHECK_EQ_INT(lw.status, LEASH_LOST_EXPIRED);
    fx_run_for(w.loop, 200);
    CHECK_EQ_INT(l1.calls + l2.calls + l3.calls + lw.calls, 4);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, admin, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, admin, 2000), LEASH_OK);
    leash_client_free(c2);
    leash_client_free(c3);
    fx_world_down(&w);
}

static char sem_order[8];
static int sem_order_len;
static void note_sem_order(leash_lock *l, int status, void *arg) {
    (void)l;
    CHECK_EQ_INT(status, LEASH_OK);
    sem_order[sem_order_len++] = *(const char *)arg;
}

TEST(semaphore_waiters_go_in_fifo_as_many_as_permits_came_free) {
    fx_world w;
    leash_client *cs[4];
    leash_lock *h1, *h2, *q[4];
    static const char ids[] = "1234";
    int i, n;

    fx_world_up(&w, 2000, 0);
    for (i = 0; i < 4; i++)
        cs[i] = fx_world_client(&w, 2000);
    h1 = sem(w.c, "sem-fifo", 2);
    h2 = sem(w.c, "sem-fifo", 2);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h1, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, h2, 0, 5000), LEASH_OK);
    for (i = 0; i < 4; i++) {
        q[i] = sem(cs[i], "sem-fifo", 2);
        CHECK_EQ_INT(leash_acquire(q[i], 5000, note_sem_order, (void *)&ids[i]), LEASH_OK);
        fx_run_for(w.loop, 30);
    }
    fx_run_for(w.loop, 50);
    CHECK_EQ_INT(sem_order_len, 0);
    /* One permit free: the first in line, alone. */
    CHECK_EQ_INT(fx_release_sync(w.loop, h1, 2000), LEASH_OK);
    for (n = 0; n < 100 && sem_order_len < 1; n++)
        fx_run_for(w.loop, 2);
    fx_run_for(w.loop, 150);
    CHECK_EQ_INT(sem_order_len, 1);
    CHECK(sem_order[0] == '1');
    CHECK_EQ_INT(fx_release_sync(w.loop, h2, 2000), LEASH_OK);
    for (n = 0; n < 100 && sem_order_len < 2; n++)
        fx_run_for(w.loop, 2);
    fx_run_for(w.loop, 150);
    CHECK_EQ_INT(sem_order_len, 2);
    CHECK(sem_order[1] == '2');
    /* Two permits free at once: the next two. */
    leash_release(q[0], NULL, NULL);
    leash_release(q[1], NULL, NULL);
    for (n = 0; n < 250 && sem_order_len < 4; n++)
        fx_run_for(w.loop, 2);
    CHECK_EQ_INT(sem_order_len, 4);
    CHECK(memcmp(sem_order + 2, "34", 2) == 0 || memcmp(sem_order + 2, "43", 2) == 0);
    CHECK(leash_held(q[2]) && leash_held(q[3]));
    CHECK(leash_fence(q[2]) > leash_fence(q[1]) && leash_fence(q[3]) > leash_fence(q[1]));
    for (i = 0; i < 4; i++)
        leash_client_free(cs[i]);
    fx_world_down(&w);
}

/* ================= every kind ================= */

/* A key at the lock's name that is not the kind's own: the scripts answer
 * WRONGTYPE, write nothing, and leave the key as it was. */
TEST(every_kind_on_a_wrong_type_key_gives_eredis_and_writes_nothing) {
    static const enum kind kinds[] = {K_FAIR, K_READ, K_WRITE, K_SEM};
    fx_world w;
    char name[64], key[80];
    leash_lock *l, *fine;
    /* The last: the hash an older leash's family lock (its sorted sets
     * beside it) left: a fence, no count of holders. Its holder must not
     * be joined by one that cannot see it. */
    static const char *const types[] = {"string", "list", "hash", "older family lock"};
    long long keys = 0;
    size_t i;
    int type;

    fx_world_up(&w, 2000, 0);
    for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        for (type = 0; type < 4; type++) {
            test_redis *r;
            redisReply *rep;

            snprintf(name, sizeof(name), "wrongtype-%zu-%s", i, types[type]);
            snprintf(key, sizeof(key), "leash:%s", name);
            r = fx_redis_of(&w, key);
            if (type == 0)
                CHECK_EQ_INT(fx_key_cmd(&w, key, "SET %s hello", key), 1);
            else if (type == 1)
                CHECK_EQ_INT(test_redis_int(r, "RPUSH %s a b", key), 2);
            else if (type == 2) /* a hash, but not a lock's */
                CHECK_EQ_INT(test_redis_int(r, "HSET %s owner app", key), 1);
            else
                CHECK_EQ_INT(test_redis_int(r, "HSET %s fence 5 seq 0", key), 2);
            keys++;
            l = make_lock(w.c, kinds[i], name, 3);
            fx_log_clear();
            CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 5000), LEASH_EREDIS);
            CHECK(fx_log_contains("WRONGTYPE"));
            CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 1000, 5000), LEASH_EREDIS);
            CHECK(!leash_held(l));
            /* Unchanged, and nothing else written (keys of the other
             * kinds' earlier rounds are the only ones). */
            if (type == 0) {
                rep = test_redis_cmd(r, "GET %s", key);
                CHECK(rep != NULL && rep->type == REDIS_REPLY_STRING);
                CHECK_STR_EQ(rep->str, "hello");
            } else if (type == 1) {
                rep = test_redis_cmd(r, "LRANGE %s 0 -1", key);
                CHECK(rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2);
                CHECK_STR_EQ(rep->element[0]->str, "a");
                CHECK_STR_EQ(rep->element[1]->str, "b");
            } else if (type == 2) {
                rep = test_redis_cmd(r, "HGETALL %s", key);
                CHECK(rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2);
                CHECK_STR_EQ(rep->element[0]->str, "owner");
                CHECK_STR_EQ(rep->element[1]->str, "app");
            } else {
                rep = test_redis_cmd(r, "HGETALL %s", key);
                CHECK(rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements == 4);
            }
            freeReplyObject(rep);
            CHECK_EQ_INT(test_redis_int(r, "PTTL %s", key), -1);
            CHECK_MSG(fx_dbsize(&w) == keys, "%lld keys after %s on a %s, wanted %lld",
                      fx_dbsize(&w), kind_name(kinds[i]), types[type], keys);
            leash_lock_free(l);
        }
    }
    /* The client is fine for other names. */
    fine = fair(w.c, "wrongtype-fine");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, fine, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, fine, 2000), LEASH_OK);
    fx_world_down(&w);
}

/* ---- what each hold costs Redis ---- */

static long long commands_sent(leash_client *const *c, int n) {
    long long sum = 0;
    int i;

    for (i = 0; i < n; i++) {
        leash_stats st;
        leash_client_stats(c[i], &st);
        sum += (long long)st.commands_sent;
    }
    return sum;
}

/* n handles of kind k (permits of them hold at once: 1 for a fair lock)
 * take turns: the oldest holder releases, which lets the head of the queue
 * in, and asks again at the end of the queue. After n turns (each handle
 * waited once, so its client subscribed to its channel), checks the Redis
 * calls and client commands of `turns` more against their bounds. */
static void turns_case(fx_world *w, leash_client *const *c, enum kind k, int n, int permits,
                       int turns, double max_calls, double max_cmds) {
    test_redis *r = fx_redis_of(w, "leash:{cost}turns");
    leash_lock *h[4];
    fx_result res[4];
    int order[4], i, held = permits; /* order: holders first, then the queue */
    long long calls, cmds0 = 0;

    CHECK(n <= 4 && permits < n);
    memset(res, 0, sizeof(res));
    for (i = 0; i < n; i++) {
        h[i] = make_lock(c[i % 2], k, "{cost}turns", permits);
        order[i] = i;
        if (i < held) {
            CHECK_EQ_INT(fx_acquire_sync(w->loop, h[i], 0, 5000), LEASH_OK);
        } else {
            CHECK_EQ_INT(leash_acquire(h[i], LEASH_WAIT_FOREVER, fx_acquire_cb, &res[i]), LEASH_OK);
            fx_run_for(w->loop, 30);
        }
    }
    for (i = 0; i < n + turns; i++) {
        int out = order[0], in = order[held], j;
        if (i == n) { /* every handle has waited once: its client subscribed */
            freeReplyObject(test_redis_cmd(r, "CONFIG RESETSTAT"));
            cmds0 = commands_sent(c, 2);
        }
        CHECK_EQ_INT(fx_release_sync(w->loop, h[out], 2000), LEASH_OK);
        fx_run_until(w->loop, &res[in], 2000);
        CHECK_EQ_INT(res[in].status, LEASH_OK);
        memset(&res[in], 0, sizeof(res[in]));
        CHECK_EQ_INT(leash_acquire(h[out], LEASH_WAIT_FOREVER, fx_acquire_cb, &res[out]), LEASH_OK);
        fx_run_for(w->loop, 30); /* its place is taken */
        CHECK_EQ_INT(res[out].calls, 0);
        for (j = 0; j + 1 < n; j++)
            order[j] = order[j + 1];
        order[n - 1] = out;
    }
    calls = test_redis_lock_calls(r);
    CHECK(calls >= 0);
    CHECK_MSG((double)calls <= max_calls * turns, "%s: %.2f Redis calls per turn, at most %.0f",
              kind_name(k), (double)calls / turns, max_calls);
    CHECK_MSG((double)(commands_sent(c, 2) - cmds0) <= max_cmds * turns,
              "%s: %.2f client commands per turn, at most %.0f", kind_name(k),
              (double)(commands_sent(c, 2) - cmds0) / turns, max_cmds);
    for (i = 0; i < n; i++)
        leash_lock_free(h[i]);
    check_nothing_left(w, 3000);
}

/* The layout's costs (family.c): a read hold records its holder and its
 * expiry in one HSET, and gives them back in one HSET and one HDEL
 * (EVALSHA, TIME, HMGET, HSET; EVALSHA, HMGET, HSET, HDEL); a turn of the
 * fair lock or of a semaphore's permit (a release that lets the head in,
 * and the releaser's place at the end of the queue) costs Redis 11 calls
 * and the clients 2 commands. The bounds leave room for a TTL rewrite. */
TEST(family_holds_and_turns_cost_the_redis_calls_the_layout_needs) {
    fx_world w;
    leash_client *c[2];
    leash_lock *r0, *r1;
    test_redis *r;
    long long calls;
    int i;

    fx_world_up(&w, 6000, 0); /* no renewal while the turns are counted */
    c[0] = w.c;
    c[1] = fx_world_client(&w, 6000);
    fx_wait_connected(w.loop, c[1], 5000);
    r = fx_redis_of(&w, "leash:{cost}read");
    r0 = reader(c[0], "{cost}read");
    r1 = reader(c[1], "{cost}read");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r0, 0, 5000), LEASH_OK);
    /* Once first: c[1]'s connection to the node comes up (its handshake
     * loads the scripts and reads the clock) before the counting. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r1, 0, 5000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, r1, 5000), LEASH_OK);
    freeReplyObject(test_redis_cmd(r, "CONFIG RESETSTAT"));
    for (i = 0; i < 20; i++) {
        CHECK_EQ_INT(fx_acquire_sync(w.loop, r1, 0, 5000), LEASH_OK);
        CHECK_EQ_INT(fx_release_sync(w.loop, r1, 5000), LEASH_OK);
    }
    calls = test_redis_lock_calls(r);
    CHECK(calls >= 0);
    CHECK_MSG(calls <= 20 * 8 + 2, "%.2f Redis calls per read hold beside another, at most 8",
              calls / 20.);
    CHECK_EQ_INT(fx_release_sync(w.loop, r0, 5000), LEASH_OK);
    leash_lock_free(r0);
    leash_lock_free(r1);
    turns_case(&w, c, K_FAIR, 2, 1, 10, 12, 2);
    turns_case(&w, c, K_SEM, 3, 2, 10, 12, 2);
    leash_client_free(c[1]);
    fx_world_down(&w);
}

#ifdef LEASH_TEST_TOPOLOGY_CLUSTER
/* While the locks' slot is MIGRATING (no key moved yet), the scripts run on
 * the old owner, which holds each lock's key: a release that ends the
 * only hold and hands the fair lock over, and the release of the last
 * reader, each run whole. Redis stops a script half-way when it touches a
 * key its own earlier command emptied ("non local key"), so no script may
 * empty a key before its last command. */
TEST(family_scripts_run_whole_while_their_slot_is_migrating) {
    fx_world w;
    leash_client *b;
    leash_lock *holder, *waiter, *r1, *r2;
    fx_result res = {0};
    int slot, from, to, i;

    fx_world_up(&w, 3000, 0);
    b = fx_world_client(&w, 3000);
    fx_wait_connected(w.loop, b, 5000);
    holder = fair(w.c, "{mig}fair");
    waiter = fair(b, "{mig}fair");
    r1 = reader(w.c, "{mig}read");
    r2 = reader(b, "{mig}read");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(waiter, LEASH_WAIT_FOREVER, fx_acquire_cb, &res), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r1, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r2, 0, 3000), LEASH_OK);
    fx_run_for(w.loop, 100);
    CHECK_EQ_INT(res.calls, 0);

    slot = test_cluster_slot_of_key("leash:{mig}fair");
    from = test_cluster_master_of_slot(w.cl, slot);
    for (to = -1, i = 0; i < w.cl->count && to < 0; i++)
        if (i != from && test_cluster_alive(w.cl, i) &&
            test_cluster_role(w.cl, i) == TEST_CLUSTER_MASTER)
            to = i;
    CHECK(from >= 0 && to >= 0);
    CHECK_EQ_INT(test_cluster_migrate_begin(w.cl, slot, to), 0);

    fx_log_clear();
    CHECK_EQ_INT(fx_release_sync(w.loop, holder, 3000), LEASH_OK);
    fx_run_until(w.loop, &res, 3000);
    CHECK_EQ_INT(res.status, LEASH_OK);
    CHECK(leash_held(waiter));
    CHECK_EQ_INT(fx_release_sync(w.loop, r1, 3000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, r2, 3000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, waiter, 3000), LEASH_OK);
    CHECK_MSG(!fx_log_contains("non local"), "a script stopped half-way");

    CHECK_EQ_INT(test_cluster_migrate_finish(w.cl, slot, to), 0);
    /* The slot moved (with no keys left): the names work at the new owner. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, r1, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, r1, 3000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, holder, 3000), LEASH_OK);
    leash_client_free(b);
    fx_world_down(&w);
}
#endif

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(fair_lock_excludes_across_clients_over_many_cycles_and_fences_grow),
        TEST_CASE(fair_lock_handoff_racing_a_place_renewal_keeps_the_new_hold),
        TEST_CASE(fair_lock_place_renewal_answered_before_the_handoff_but_read_after_it),
        TEST_CASE(fair_lock_holder_whose_token_is_queued_again_is_lost),
        TEST_CASE(fair_lock_extra_hold_that_finds_its_token_queued_again_gives_the_place_back),
        TEST_CASE(fair_lock_holder_whose_token_is_let_in_again_under_a_new_fence_is_lost),
        TEST_CASE(fair_lock_grants_three_processes_in_arrival_order),
        TEST_CASE(fair_lock_live_waiter_waiting_many_leases_is_never_evicted),
        TEST_CASE(fair_lock_crashed_holder_is_recovered_after_one_lease),
        TEST_CASE(fair_lock_crashed_waiter_drops_out_and_the_one_behind_gets_it),
        TEST_CASE(rw_crashed_writer_waiting_drops_out_and_the_one_behind_gets_it),
        TEST_CASE(semaphore_crashed_waiter_drops_out_and_the_one_behind_gets_it),
        TEST_CASE(fair_lock_waiters_that_time_out_or_cancel_leave_the_queue_at_once),
        TEST_CASE(rw_writers_that_time_out_or_cancel_leave_the_queue_at_once),
        TEST_CASE(semaphore_waiters_that_time_out_or_cancel_leave_the_queue_at_once),
        TEST_CASE(fair_lock_free_in_every_state_idle_queued_and_held),
        TEST_CASE(rw_writer_free_in_every_state_idle_queued_and_held),
        TEST_CASE(semaphore_free_in_every_state_idle_queued_and_held),
        TEST_CASE(fair_lock_force_release_makes_the_holder_lost_and_lets_the_next_in),
        TEST_CASE(fair_lock_deleted_keys_make_the_holder_lost_and_fences_still_grow),
        TEST_CASE(fair_lock_release_over_a_wrong_type_key_gives_eredis_and_leaves_it),
        TEST_CASE(fair_lock_try_once_is_busy_when_held_or_when_someone_waits),
        TEST_CASE(fair_lock_debug_log_traces_each_change_of_state_and_the_handoff),
        TEST_CASE(fair_lock_reentrant_holds_are_counted),
        TEST_CASE(rw_many_readers_hold_at_once_and_keep_writers_out),
        TEST_CASE(rw_writer_excludes_readers_and_writers_over_many_cycles),
        TEST_CASE(rw_writer_is_not_starved_by_a_stream_of_overlapping_readers),
        TEST_CASE(rw_readers_queued_behind_a_writer_go_in_together_up_to_the_next_writer),
        TEST_CASE(rw_write_release_wakes_one_writer_only),
        TEST_CASE(rw_try_once_reader_is_busy_while_a_writer_waits),
        TEST_CASE(rw_reentrant_holds_are_counted_per_handle),
        TEST_CASE(rw_pair_needs_a_read_and_a_write_handle_of_one_name_and_client),
        TEST_CASE(rw_handles_of_one_client_exclude_each_other_like_strangers),
        TEST_CASE(a_semaphore_and_a_read_lock_of_one_name_exclude_each_other),
        TEST_CASE(rw_downgrade_paired_read_handle_goes_in_at_once_beside_its_writer),
        TEST_CASE(rw_upgrade_is_refused_with_estate_while_the_paired_read_holds_or_waits),
        TEST_CASE(rw_each_read_hold_has_its_own_lease_fence_and_lost_callback),
        TEST_CASE(rw_crashed_reader_share_comes_back_after_one_lease),
        TEST_CASE(rw_crashed_writer_is_recovered_after_one_lease),
        TEST_CASE(semaphore_three_permits_eight_contenders_peak_is_exactly_three),
        TEST_CASE(semaphore_permits_out_of_range_give_no_handle),
        TEST_CASE(semaphore_permits_mismatch_on_a_name_in_use_fails_einval),
        TEST_CASE(semaphore_crashed_holder_permit_comes_back_after_one_lease),
        TEST_CASE(semaphore_each_permit_has_its_own_lease_and_lost_callback),
        TEST_CASE(semaphore_waiters_go_in_fifo_as_many_as_permits_came_free),
        TEST_CASE(every_kind_on_a_wrong_type_key_gives_eredis_and_writes_nothing),
        TEST_CASE(family_holds_and_turns_cost_the_redis_calls_the_layout_needs),
#ifdef LEASH_TEST_TOPOLOGY_CLUSTER
        TEST_CASE(family_scripts_run_whole_while_their_slot_is_migrating),
#endif
        {0},
    };
    return fx_main(argc, argv, cases);
}
