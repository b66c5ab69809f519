/* SPDX-License-Identifier: MIT */
/*
 * leash-demo: three worker processes take turns on one lock.
 *
 *     leash-demo REDIS_URL
 *     leash-demo --cluster HOST:PORT[,HOST:PORT...] [--long-lease]
 *     leash-demo --redlock HOST:PORT[,HOST:PORT...]
 *     leash-demo --sentinel redis+sentinel://HOST:PORT[,HOST:PORT...]/MASTER [--long-lease]
 *
 * REDIS_URL is redis://[[user]:password@]host[:port][/db] or
 * unix://[[user]:password@]/path[?db=N] (leash/url.h).
 * scripts/demo builds this program and runs it against a redis-server of its
 * own; scripts/demo --cluster against a Redis Cluster of its own;
 * scripts/demo --redlock against five independent servers of its own.
 *
 * The parent forks three workers. Each runs its own libev loop with its own
 * leash client and goes round: wait for the lock "nightly-report", do a job of
 * nine writes 200 ms apart (1.8 s, three times the 600 ms lease that the
 * watchdog renews every 200 ms), release, rest a moment, wait again. Every
 * write goes to a pretend storage in shared memory that remembers the highest
 * fencing token that wrote and refuses smaller ones.
 *
 * In the middle of the run the parent freezes the holder with SIGSTOP for
 * 1.5 s. Its lease runs out, a waiter takes over with a higher fence, and when
 * the frozen worker resumes, leash_held() and its lost callback stop it before
 * it writes again.
 *
 * Workers print nothing themselves: they send every event, stamped with
 * CLOCK_MONOTONIC, through a pipe to the parent. The parent prints them in time
 * order, checks them (fences grow, no two holders write while both believe
 * their lease valid, the frozen worker is told it lost the lock) and ends with
 * a summary. Exit status: 0 when all went as it should, 1 when something did
 * not (each problem is printed with "!!") or Redis cannot be used, 2 for a bad
 * command line, 130 when interrupted (Ctrl-C stops the workers in order).
 *
 * With --cluster the workers use a Redis Cluster (LEASH_TOPOLOGY_CLUSTER; the
 * nodes given are the seeds, no password) and a job is 14 writes. Instead
 * of freezing the holder, the parent kills the master of the lock's slot
 * 300 ms into the third hold's job: it finds that master (CLUSTER KEYSLOT and
 * CLUSTER SLOTS on a blocking hiredis connection), reads its pid (INFO
 * server), and sends SIGKILL only when that pid is one that scripts/demo
 * started (LEASH_DEMO_CLUSTER_PIDS="PORT:PID,..."; otherwise it refuses and
 * the run goes on without a failover). The cluster then promotes the master's
 * replica, which the parent watches (CLUSTER NODES, CLUSTER INFO) and puts in
 * the story. The workers send each renewal and the library's info lines too
 * (printed from the kill on: connections lost and made, renewals that
 * failed), so the story shows both sides: the holder's renewals failing, then
 * either the hold kept (a renewal succeeds at the promoted replica) or its
 * lost callback stopping the job before its next write; the waiters waiting
 * on, and the next holder taking over at the new master with a higher fence.
 * An acquire whose attempt waited out the failover can end LEASH_ECONN (its
 * answer came after its lease ran out): the worker waits again. The lease is
 * 600 ms, shorter than a failover (the node timeout is 500 ms, and a replica
 * waits 500 to 1000 ms more before it asks to be elected): the holder loses
 * the lock, and says so. --long-lease makes it 5000 ms, longer than a
 * failover: the promoted replica has the key (replicated asynchronously: the
 * usual case, not a promise), and the holder keeps it. The story tells which
 * of the two happened.
 *
 * With --sentinel the workers go through Redis Sentinel
 * (LEASH_TOPOLOGY_SENTINEL, from a redis+sentinel:// URL, leash/url.h) and the
 * run is that of --cluster with the master the sentinels name in the place of
 * the slot's master: the parent asks the sentinels for it, kills it (only a
 * pid that LEASH_DEMO_SENTINEL_PIDS="PORT:PID,..." names, as scripts/demo
 * --sentinel sets it) and watches the sentinels (SENTINEL master: s_down,
 * o_down, failover_in_progress; SENTINEL get-master-addr-by-name: the switch)
 * into the story: the workers follow +switch-master to the new master.
 *
 * With --redlock the workers use N independent servers (LEASH_TOPOLOGY_REDLOCK:
 * a hold needs a majority, M = N / 2 + 1, 3 of 5). 300 ms into the second
 * hold's job the parent kills N - M of them (two of five), the first in the
 * list: the holder's renewals go on at the majority left and its job ends
 * as usual, and the next holder takes over from its release with a higher
 * fence while they are down. 700 ms into that next hold's job the parent
 * kills one more: no majority is left, the holder's renewals fail, and its
 * lost callback (UNREACHABLE) stops the job by the end of its validity,
 * before its next write. The waiters wait on (nobody can get the lock): an
 * attempt gives up on the dead servers after the command timeout (or the
 * lease, if shorter), no majority having answered, and the acquire
 * attempts again while its wait has time (for ever here; a worker whose
 * acquire ends LEASH_ECONN all the same acquires again at once). 2.5 s
 * after the kill the parent ends the run. Each
 * server is killed only when its pid (INFO server) is one that scripts/demo
 * started (LEASH_DEMO_REDLOCK_PIDS="PORT:PID,..."); otherwise the parent
 * refuses and the run goes on without kills. The workers send each renewal,
 * the servers they reach (their command connections, counted) and the
 * library's other info lines, printed from the first kill on.
 */
#define _DEFAULT_SOURCE /* fork, kill, MAP_ANONYMOUS */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <leash/adapters/libev.h>
#include <leash/leash.h>
#include <leash/url.h>

#define LOCK_NAME "nightly-report"
#define KEY_PREFIX "leash-demo:"

enum {
    WORKERS = 3,
    LEASE_MS = 600,        /* the watchdog's lease ... */
    RENEW_MS = 200,        /* ... renewed this often */
    STEPS = 9,             /* writes per job */
    STEP_MS = 200,         /* between two writes */
    REST_MS = 300,         /* after a job, before waiting again: the others get a turn */
    JOBS_WANTED = 5,       /* completed jobs that end the run ... */
    RUN_LIMIT_MS = 12000,  /* ... or this, whichever comes first */
    FREEZE_HOLD = 3,       /* the holder of the third hold is frozen ... */
    FREEZE_AFTER_MS = 700, /* ... this far into its job ... */
    FREEZE_MS = 1500,      /* ... for this long */
    LOST_WAIT_MS = 1000,   /* after SIGCONT, its lost callback must come within this */
    /* --cluster */
    CLUSTER_STEPS = 14,           /* writes per job: room for the failover in one */
    CLUSTER_JOBS_WANTED = 4,      /* completed jobs that end the run ... */
    CLUSTER_RUN_LIMIT_MS = 25000, /* ... or this */
    KILL_AFTER_MS = 300,          /* hold FREEZE_HOLD's master is killed this far into its job */
    LONG_LEASE_MS = 5000,         /* --long-lease: longer than a failover */
    /* --redlock (KILL_AFTER_MS into hold KILL_HOLD's job: N - M servers killed) */
    KILL_HOLD = 2,
    REDLOCK_JOBS_WANTED = 3,      /* completed jobs that end the run ... */
    REDLOCK_RUN_LIMIT_MS = 20000, /* ... or this */
    LAST_KILL_AFTER_MS = 700,     /* one more, this far into the next hold's job ... */
    NO_MAJORITY_MS = 2500,        /* ... and the run ends this long after: > command_timeout_ms */
    REACH_QUIET_MS = 20,          /* connections that change within this make one report */
    WATCH_MS = 25,                /* after the kill, the parent looks at the replica this often */
    PROMOTE_WAIT_MS = 10000,      /* ... and gives up on it after this */
    ADMIN_TIMEOUT_MS = 500,       /* connect and reply timeout of the parent's connections */
    GRACE_MS = 3000,              /* after the stop, workers must be gone within this */
    REORDER_MS = 50,              /* events are printed this late, sorted by time */
    PROGRESS_EVERY = 3,           /* a progress line every this many writes */
    MAX_HOLDS = 64,
    QUEUE_MAX = 256
};

/* The run, as the command line chose it (set before the workers fork). */
static struct {
    int cluster;      /* --cluster, --sentinel: a master is killed instead of a holder frozen */
    int sentinel;     /* --sentinel: the master the sentinels name (run.cluster is set too) */
    int redlock;      /* --redlock: servers are killed instead of a holder frozen */
    int64_t lease_ms; /* LEASE_MS, or LONG_LEASE_MS with --long-lease */
    int steps;        /* STEPS or CLUSTER_STEPS */
    int jobs_wanted;
    int run_limit_ms;
} run = {0, 0, 0, LEASE_MS, STEPS, JOBS_WANTED, RUN_LIMIT_MS};

/* Servers die in this run (--cluster, --redlock): the workers report their
 * renewals and the library's info lines. */
static int servers_die(void) {
    return run.cluster || run.redlock;
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ------------------------------------------------------------------ */
/* REDIS_URL, or a cluster's nodes, or Redlock's servers               */
/* ------------------------------------------------------------------ */

struct target {
    leash_url url;   /* REDIS_URL; unused with --cluster and --redlock */
    char shown[512]; /* for messages, password masked */
    /* --cluster: the seeds; --redlock: the servers; "host:port" or
     * "[v6addr]:port" each */
    int topology; /* LEASH_TOPOLOGY_* */
    int nnodes;
    const char *nodes[LEASH_NODES_MAX]; /* -> node_text */
    char node_text[LEASH_NODES_MAX][LEASH_NODE_MAX + 1];
    /* --sentinel: the master's name and the sentinels' own credentials
     * (url holds the data nodes' user, password and db) */
    char master[LEASH_SENTINEL_MASTER_MAX + 1];
    char sentinel_user[LEASH_URL_USER_MAX + 1];
    char sentinel_password[LEASH_URL_PASSWORD_MAX + 1];
};

/* A decimal number of 1..9 digits in s[0..len), at most max; -1 if not. */
static long parse_number(const char *s, size_t len, long max) {
    long v = 0;
    size_t i;
    if (len == 0 || len > 9)
        return -1;
    for (i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v <= max ? v : -1;
}

/* "host:port" or "[v6addr]:port" into host (cap bytes) and *port; -1 if it
 * is neither. */
static int split_endpoint(const char *s, char *host, size_t cap, int *port) {
    const char *colon = strrchr(s, ':'), *h = s;
    size_t hl;
    long v;

    if (colon == NULL)
        return -1;
    hl = (size_t)(colon - s);
    if (hl >= 2 && s[0] == '[' && s[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    v = parse_number(colon + 1, strlen(colon + 1), 65535);
    if (hl == 0 || hl >= cap || v < 1)
        return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (int)v;
    return 0;
}

/* Fills *t from a comma-separated list of cluster nodes or Redlock servers
 * (topology); on error returns -1 and points *why at the reason. */
static int parse_nodes(const char *list, int topology, struct target *t, const char **why) {
    const char *p = list;

    memset(t, 0, sizeof(*t));
    t->topology = topology;
    for (;;) {
        size_t len = strcspn(p, ",");
        char host[256];
        int port;

        if (t->nnodes == LEASH_NODES_MAX) {
            *why = "too many nodes";
            return -1;
        }
        if (len == 0 || len > LEASH_NODE_MAX) {
            *why = "a node is empty or too long";
            return -1;
        }
        memcpy(t->node_text[t->nnodes], p, len);
        t->node_text[t->nnodes][len] = '\0';
        if (split_endpoint(t->node_text[t->nnodes], host, sizeof(host), &port) != 0) {
            *why = "each node is host:port, or [v6addr]:port";
            return -1;
        }
        t->nodes[t->nnodes] = t->node_text[t->nnodes];
        t->nnodes++;
        if (p[len] == '\0')
            break;
        p += len + 1;
    }
    if (topology == LEASH_TOPOLOGY_CLUSTER)
        snprintf(t->shown, sizeof(t->shown), "a Redis Cluster (seeds %.400s%s)", list,
                 strlen(list) > 400 ? "..." : "");
    else
        snprintf(t->shown, sizeof(t->shown), "%d Redlock servers (%.400s%s)", t->nnodes, list,
                 strlen(list) > 400 ? "..." : "");
    return 0;
}

/* Client options for the target; strings point into *t. */
static void target_options(const struct target *t, leash_options *o) {
    leash_options_init(o);
    if (t->topology == LEASH_TOPOLOGY_SENTINEL) {
        leash_url_apply(&t->url, o); /* the data nodes' credentials and db */
        o->sentinel_master = t->master;
        o->sentinel_username = t->sentinel_user[0] != '\0' ? t->sentinel_user : NULL;
        o->sentinel_password = t->sentinel_password[0] != '\0' ? t->sentinel_password : NULL;
    }
    if (t->topology != LEASH_TOPOLOGY_SINGLE) {
        o->topology = t->topology;
        o->nodes = t->nodes;
        o->nodes_count = t->nnodes;
    } else {
        leash_url_apply(&t->url, o);
    }
    o->key_prefix = KEY_PREFIX;
}

/* ------------------------------------------------------------------ */
/* Shared memory: the pretend storage                                  */
/* ------------------------------------------------------------------ */

/* Lock-free atomics work between processes on MAP_SHARED memory, and unlike
 * a mutex they cannot be left locked by a worker frozen at the wrong moment. */
struct shared {
    atomic_uint_fast64_t highest_fence; /* the highest fence that wrote */
    atomic_uint_fast64_t accepted, rejected;
    atomic_int jobs_done; /* completed jobs, all workers */
};

/* The storage takes a write only with a fence at least as high as any that
 * wrote before: a holder that stalled past its lease cannot overwrite the
 * work of the one that took over. Returns 1 if accepted. */
static int storage_write(struct shared *s, uint64_t fence) {
    uint_fast64_t top = atomic_load(&s->highest_fence);
    do {
        if (fence < top) {
            atomic_fetch_add(&s->rejected, 1);
            return 0;
        }
    } while (!atomic_compare_exchange_weak(&s->highest_fence, &top, fence));
    atomic_fetch_add(&s->accepted, 1);
    return 1;
}

/* ------------------------------------------------------------------ */
/* Events: workers -> parent, one write() each (atomic below PIPE_BUF)   */
/* ------------------------------------------------------------------ */

enum event_kind {
    /* from a worker */
    E_WAITING,  /* leash_acquire() called */
    E_ACQUIRED, /* fence, valid_ms */
    E_WROTE,    /* step, fence, renewals, valid_ms; status 1 accepted, 0 refused */
    E_SKIPPED,  /* leash_held() said 0: write step + 1 not done */
    E_LOST,     /* the lost callback: status = reason */
    E_RELEASED, /* the release callback: status; asked = when leash_release() was called;
                 * t (the callback) is what the next holder's wake is measured from */
    E_CANCELED, /* the acquire ended with LEASH_ECANCELED at the stop */
    E_FAILED,   /* status = a leash error, text = what failed */
    E_LOG,      /* the log callback: status = level, text */
    E_EXIT,     /* status = the worker's exit code */
    E_RENEWED,  /* servers_die(): the watchdog renewed the hold (renewals, valid_ms) */
    E_OVERDUE,  /* servers_die(): no renewal for asked ns (valid_ms) */
    E_RETRY,    /* the acquire ended with status LEASH_ECONN; waits again */
    E_REACH,    /* --redlock: status servers reached now, step before; t the first change */
    /* from the parent */
    E_NOTE,    /* text */
    E_PROBLEM, /* text */
    E_WAITERS  /* text; the workers still waiting are named when it is printed */
};

struct event {
    int64_t t; /* CLOCK_MONOTONIC, ns */
    int32_t worker;
    int32_t kind;
    int32_t status;
    int32_t step;
    uint64_t fence;
    uint64_t renewals;
    int64_t valid_ms;
    int64_t asked;
    char text[232];
};

static void send_event(int fd, const struct event *e) {
    while (write(fd, e, sizeof(*e)) < 0 && errno == EINTR) {
    }
}

/* ------------------------------------------------------------------ */
/* A worker: its own process, loop and client                          */
/* ------------------------------------------------------------------ */

enum worker_state {
    W_WAITING,   /* an acquire is pending */
    W_WORKING,   /* held: a write every STEP_MS */
    W_LOSING,    /* leash_held() said 0: the lost callback is due */
    W_RELEASING, /* the release is in flight */
    W_RESTING,   /* between jobs */
    W_LAST,      /* did the run's last job: holds on until the stop */
    W_FINISHED
};

struct worker {
    int id;
    struct ev_loop *loop;
    leash_client *client;
    leash_lock *lock;
    ev_timer timer;         /* the job's steps; the rest between jobs */
    ev_io stop;             /* end of file: the parent ends the run */
    ev_prepare renew_watch; /* servers_die(): after each loop iteration, did a renewal succeed? */
    uint64_t renewals_seen;
    int64_t renewed_at;     /* the grant or the last renewal */
    int overdue;            /* E_OVERDUE was sent since */
    ev_prepare reach_watch; /* --redlock: after each loop iteration, did a connection change? */
    ev_timer reach_quiet;   /* ... and have they stopped changing? */
    int64_t reach_changed_at;
    int reach_sent; /* servers reached, as last reported */
    int state;
    int step; /* writes done in this job */
    uint64_t fence;
    int64_t release_asked; /* when leash_release() was called */
    uint64_t renewals;     /* of the hold being released */
    int retried; /* --redlock: an acquire ended LEASH_ECONN (no majority) and went again */
    int stopping;
    int exit_code;
    int events_fd;
    struct shared *shm;
};

static struct event worker_event(const struct worker *w, int kind) {
    struct event e;
    memset(&e, 0, sizeof(e));
    e.t = now_ns();
    e.worker = w->id;
    e.kind = kind;
    e.step = w->step;
    e.fence = w->fence;
    return e;
}

static void report(struct worker *w, int kind, int status, const char *text) {
    struct event e = worker_event(w, kind);
    e.status = status;
    if (w->lock != NULL) {
        e.renewals = leash_renewals(w->lock);
        e.valid_ms = leash_valid_ms(w->lock);
    }
    if (text != NULL)
        snprintf(e.text, sizeof(e.text), "%s", text);
    send_event(w->events_fd, &e);
}

/* Library messages reach us only here (warnings and errors). */
static void worker_log(int level, const char *msg, void *arg) {
    struct worker *w = arg;
    struct event e = worker_event(w, E_LOG);
    e.status = level;
    snprintf(e.text, sizeof(e.text), "%s", msg);
    send_event(w->events_fd, &e);
}

/* Ends the worker: frees the client (which frees the lock), leaves the loop. */
static void worker_finish(struct worker *w, int code) {
    if (w->state == W_FINISHED)
        return;
    w->state = W_FINISHED;
    if (code > w->exit_code)
        w->exit_code = code;
    ev_timer_stop(w->loop, &w->timer);
    ev_io_stop(w->loop, &w->stop);
    ev_prepare_stop(w->loop, &w->renew_watch);
    ev_prepare_stop(w->loop, &w->reach_watch);
    ev_timer_stop(w->loop, &w->reach_quiet);
    leash_client_free(w->client); /* allowed inside the lock's own callbacks */
    w->client = NULL;
    w->lock = NULL;
    ev_break(w->loop, EVBREAK_ALL);
}

static void on_acquired(leash_lock *l, int status, void *arg);
static void on_released(leash_lock *l, int status, void *arg);

static void start_waiting(struct worker *w) {
    int rc = leash_acquire(w->lock, LEASH_WAIT_FOREVER, on_acquired, w);
    if (rc != LEASH_OK) {
        report(w, E_FAILED, rc, "leash_acquire");
        worker_finish(w, 1);
        return;
    }
    w->state = W_WAITING;
    report(w, E_WAITING, 0, NULL);
}

static void rest(struct worker *w) {
    w->state = W_RESTING;
    ev_timer_stop(w->loop, &w->timer);
    ev_timer_set(&w->timer, REST_MS / 1000., 0.);
    ev_timer_start(w->loop, &w->timer);
}

static void give_back(struct worker *w) {
    int rc;
    ev_timer_stop(w->loop, &w->timer);
    w->release_asked = now_ns();
    w->renewals = leash_renewals(w->lock);
    rc = leash_release(w->lock, on_released, w);
    if (rc != LEASH_OK) {
        report(w, E_FAILED, rc, "leash_release");
        worker_finish(w, 1);
        return;
    }
    w->state = W_RELEASING;
}

static void on_acquired(leash_lock *l, int status, void *arg) {
    struct worker *w = arg;

    if (status == LEASH_ECANCELED && w->stopping) {
        report(w, E_CANCELED, status, NULL);
        worker_finish(w, 0);
        return;
    }
    if (status == LEASH_ECONN && run.redlock && !w->stopping) {
        /* No majority of the servers answered (leash decides without the
         * ones that are down after the lease or the command timeout): the
         * worker waits again at once; the story says so the first time. */
        if (!w->retried)
            report(w, E_RETRY, status, NULL);
        w->retried = 1;
        if (leash_acquire(w->lock, LEASH_WAIT_FOREVER, on_acquired, w) != LEASH_OK) {
            report(w, E_FAILED, status, "leash_acquire");
            worker_finish(w, 1);
        }
        return;
    }
    if (status == LEASH_ECONN && run.cluster && !w->stopping) {
        /* An attempt that waited out a failover for the new master can be
         * answered after its lease ran out (the library gives that grant
         * back): wait again, as an application would. */
        report(w, E_RETRY, status, NULL);
        rest(w);
        return;
    }
    if (status != LEASH_OK) {
        report(w, E_FAILED, status, "acquire");
        worker_finish(w, 1);
        return;
    }
    w->fence = leash_fence(l);
    w->step = 0;
    w->renewals_seen = 0;
    w->renewed_at = now_ns();
    w->overdue = 0;
    w->state = W_WORKING;
    report(w, E_ACQUIRED, 0, NULL);
    ev_timer_set(&w->timer, STEP_MS / 1000., STEP_MS / 1000.);
    ev_timer_start(w->loop, &w->timer);
}

/* One write of the job. */
static void do_step(struct worker *w) {
    struct event e;

    /* The lock is only worth something while it is valid. After a stall
     * (here: SIGSTOP) the lease may have run out long ago: then write
     * nothing; the lost callback follows at once. */
    if (!leash_held(w->lock)) {
        ev_timer_stop(w->loop, &w->timer);
        w->state = W_LOSING;
        report(w, E_SKIPPED, 0, NULL);
        return;
    }
    e = worker_event(w, E_WROTE);
    e.valid_ms = leash_valid_ms(w->lock);
    e.renewals = leash_renewals(w->lock);
    e.status = storage_write(w->shm, w->fence);
    e.step = ++w->step;
    send_event(w->events_fd, &e);
    if (w->step < run.steps)
        return;

    ev_timer_stop(w->loop, &w->timer);
    if (atomic_fetch_add(&w->shm->jobs_done, 1) + 1 >= run.jobs_wanted) {
        /* The run's last job: keep the lock (the watchdog still renews it)
         * until the parent says stop, so that nobody starts one more. */
        w->state = W_LAST;
        return;
    }
    give_back(w);
}

static void on_timer(struct ev_loop *loop, ev_timer *t, int revents) {
    struct worker *w = t->data;
    (void)loop, (void)revents;
    if (w->state == W_WORKING) {
        do_step(w);
    } else if (w->state == W_RESTING) {
        ev_timer_stop(w->loop, &w->timer);
        start_waiting(w);
    }
}

static void on_released(leash_lock *l, int status, void *arg) {
    struct worker *w = arg;
    struct event e = worker_event(w, E_RELEASED);
    (void)l;
    e.status = status;
    e.renewals = w->renewals;
    e.asked = w->release_asked;
    send_event(w->events_fd, &e);
    if (w->stopping)
        worker_finish(w, status == LEASH_OK ? 0 : 1);
    else
        rest(w);
}

/* The hold can no longer be trusted: stop writing, and try again later. */
static void on_lost(leash_lock *l, int reason, void *arg) {
    struct worker *w = arg;
    (void)l;
    ev_timer_stop(w->loop, &w->timer);
    report(w, E_LOST, reason, NULL);
    if (w->stopping)
        worker_finish(w, 0);
    else
        rest(w);
}

/* Runs after every loop iteration, before the loop sleeps (servers_die();
 * an ev_check would run only at the next wake-up, before that wake's
 * callbacks): a renewal that succeeded in it is reported, stamped right
 * after its answer was read; so is, once, a renewal half an interval late
 * (seen at the next wake-up: a write, or a timer of the library's). */
static void on_renew_watch(struct ev_loop *loop, ev_prepare *c, int revents) {
    struct worker *w = c->data;
    int64_t now = now_ns();
    uint64_t n;
    (void)loop, (void)revents;

    if (w->lock == NULL || !leash_held(w->lock))
        return;
    n = leash_renewals(w->lock);
    if (n != w->renewals_seen) {
        w->renewals_seen = n;
        w->renewed_at = now;
        w->overdue = 0;
        report(w, E_RENEWED, 0, NULL);
    } else if (!w->overdue && now - w->renewed_at > (int64_t)RENEW_MS * 3 / 2 * 1000000) {
        struct event e = worker_event(w, E_OVERDUE);
        w->overdue = 1;
        e.asked = now - w->renewed_at;
        e.valid_ms = leash_valid_ms(w->lock);
        e.renewals = n;
        send_event(w->events_fd, &e);
    }
}

/* Servers the command connections reach now: those that became ready, less
 * those that broke since. */
static int servers_reached(const struct worker *w) {
    leash_stats st;
    leash_client_stats(w->client, &st);
    return (int)(st.connects - st.disconnects);
}

/* Runs after every loop iteration, before the loop sleeps (--redlock): a
 * change of the servers reached starts a quiet time, so that connections
 * that break (or come back) together make one report. */
static void on_reach_watch(struct ev_loop *loop, ev_prepare *c, int revents) {
    struct worker *w = c->data;
    (void)revents;

    if (w->client == NULL || ev_is_active(&w->reach_quiet) || servers_reached(w) == w->reach_sent)
        return;
    w->reach_changed_at = now_ns();
    /* Set each time: after it fired, libev keeps only what was left of it (nothing). */
    ev_timer_set(&w->reach_quiet, REACH_QUIET_MS / 1000., 0.);
    ev_timer_start(loop, &w->reach_quiet);
}

static void on_reach_quiet(struct ev_loop *loop, ev_timer *t, int revents) {
    struct worker *w = t->data;
    int now = servers_reached(w);
    struct event e;
    (void)loop, (void)revents;

    if (now == w->reach_sent)
        return;
    e = worker_event(w, E_REACH);
    e.t = w->reach_changed_at;
    e.status = now;
    e.step = w->reach_sent;
    w->reach_sent = now;
    send_event(w->events_fd, &e);
}

/* The parent closed its end of our stop pipe: the run is over. */
static void on_stop(struct ev_loop *loop, ev_io *io, int revents) {
    struct worker *w = io->data;
    char byte;
    ssize_t n = read(io->fd, &byte, 1);
    (void)loop, (void)revents;

    if (n > 0 || (n < 0 && (errno == EINTR || errno == EAGAIN)))
        return;
    ev_io_stop(w->loop, io);
    w->stopping = 1;
    switch (w->state) {
    case W_WAITING:
        /* The acquire completes with LEASH_ECANCELED, from the loop. */
        if (leash_cancel(w->lock) != LEASH_OK)
            worker_finish(w, 1);
        break;
    case W_WORKING:
    case W_LAST:
        give_back(w); /* on_released() finishes */
        break;
    case W_RELEASING:
        break; /* on_released() finishes */
    default:
        worker_finish(w, 0);
        break;
    }
}

static int worker_run(int id, const struct target *t, int events_fd, int stop_fd,
                      struct shared *shm) {
    struct worker w;
    struct event bye;
    leash_options opts;
    int rc;

    memset(&w, 0, sizeof(w));
    w.id = id;
    w.events_fd = events_fd;
    w.shm = shm;
    w.loop = ev_loop_new(EVFLAG_AUTO);
    if (w.loop == NULL)
        return 1;

    target_options(t, &opts);
    opts.log_cb = worker_log;
    opts.log_arg = &w;
    /* When servers die the info lines tell the story (a renewal that failed,
     * a connection made to the promoted replica); the parent prints them
     * from the kill on. */
    opts.log_level = servers_die() ? LEASH_LOG_INFO : LEASH_LOG_WARN;
    rc = leash_client_new(&w.client, &opts);
    if (rc == LEASH_OK && (rc = leash_libev_attach(w.loop, w.client)) != LEASH_OK) {
        leash_client_free(w.client);
        w.client = NULL;
    }
    if (rc == LEASH_OK && (w.lock = leash_lock_new(w.client, LOCK_NAME)) == NULL)
        rc = LEASH_ENOMEM;
    /* The watchdog with a short lease, so that a stall shows within a second. */
    if (rc == LEASH_OK)
        rc = leash_lock_set_watchdog(w.lock, run.lease_ms, RENEW_MS);
    if (rc != LEASH_OK) {
        report(&w, E_FAILED, rc, "setting up the client");
        leash_client_free(w.client);
        ev_loop_destroy(w.loop);
        return 1;
    }
    leash_on_lost(w.lock, on_lost, &w);

    ev_timer_init(&w.timer, on_timer, 0., 0.);
    w.timer.data = &w;
    ev_io_init(&w.stop, on_stop, stop_fd, EV_READ);
    w.stop.data = &w;
    ev_io_start(w.loop, &w.stop);
    ev_prepare_init(&w.renew_watch, on_renew_watch);
    w.renew_watch.data = &w;
    if (servers_die())
        ev_prepare_start(w.loop, &w.renew_watch);
    ev_prepare_init(&w.reach_watch, on_reach_watch);
    w.reach_watch.data = &w;
    ev_timer_init(&w.reach_quiet, on_reach_quiet, 0., 0.);
    w.reach_quiet.data = &w;
    if (run.redlock)
        ev_prepare_start(w.loop, &w.reach_watch);

    start_waiting(&w);
    ev_run(w.loop, 0);

    if (w.client != NULL) /* the loop ran dry without a stop: should not happen */
        worker_finish(&w, 1);
    ev_loop_destroy(w.loop);

    bye = worker_event(&w, E_EXIT);
    bye.status = w.exit_code;
    send_event(events_fd, &bye);
    return w.exit_code;
}

/* ------------------------------------------------------------------ */
/* The parent: freezes a holder, prints and checks the timeline         */
/* ------------------------------------------------------------------ */

struct hold {
    int worker;
    uint64_t fence;
    int64_t granted;     /* t of E_ACQUIRED */
    int64_t first_write; /* t of its first write (0 = none) */
    int64_t last_write;
    int64_t valid_until; /* the latest end of validity that any of its writes saw */
    int writes;
    int end; /* 0 while open, else E_RELEASED or E_LOST */
    int64_t ended;
    int reason; /* the lost reason */
    int status; /* the release's status */
    int steps;  /* writes when it ended */
    uint64_t renewals;
};

/* A cluster node, as the parent sees it. */
struct node_info {
    char host[256];
    int port;
    char id[64]; /* its node id ("" when not known) */
    long pid;    /* INFO server's process_id (0 when not known) */
};

/* --cluster: the master of the lock's slot killed, its replica promoted. */
struct failover {
    int allowed; /* LEASH_DEMO_CLUSTER_PIDS is set: a kill may happen */
    int refused; /* the kill was due and did not happen (a problem said) */
    int slot;
    struct node_info master, replica;
    redisContext *watch; /* to the replica, from the kill until it serves */
    int hold;            /* index into holds of the hold whose master was killed */
    int64_t killed_at;   /* 0 = no kill (yet) */
    int64_t pfail_at, fail_at, down_at, promoted_at, up_at; /* as seen at the replica */
    int64_t renewed_at; /* the killed hold's first renewal since, 0 = none */
    int64_t next_grant; /* the first grant since, 0 = none */
    uint64_t next_fence;
    int next_worker;
};

/* --redlock: N - M servers killed, then one more. */
struct quorum_kills {
    int allowed;     /* LEASH_DEMO_REDLOCK_PIDS is set: kills may happen */
    int refused;     /* a kill was due and did not happen (a problem said) */
    int n, majority; /* servers, and how many make a majority */
    struct node_info server[LEASH_NODES_MAX]; /* the first ones die (order_by_hold) */
    int phase;                                /* kills done: 0, 1 (N - M servers), 2 (one more) */
    int count[2];                             /* servers killed by each */
    int hold[2];                              /* index into holds of the hold under each */
    int64_t at[2];                            /* when each was done */
    int64_t renewed_at;                       /* hold[0]'s first renewal since the kill */
    int renewals;                             /* hold[0]'s renewals since the kill */
    int64_t down_grant;                       /* the first grant with N - M down, 0 = none */
    uint64_t down_fence;
    int down_worker;
};

struct parent {
    struct ev_loop *loop;
    struct shared *shm;
    int64_t t0;
    pid_t pid[WORKERS + 1];
    int stop_fd[WORKERS + 1]; /* our ends of the stop pipes; -1 once closed */
    int exited[WORKERS + 1];  /* 1 + exit code, from E_EXIT */
    int events_fd;
    ev_io events;
    ev_timer flush, freeze, thaw, lost_check, limit, grace;
    ev_timer watch, kill_check; /* --cluster */
    ev_timer no_majority;       /* --redlock */
    ev_signal sigint, sigterm;

    char inbuf[8 * sizeof(struct event)];
    size_t inlen;
    struct event queue[QUEUE_MAX]; /* read, not yet printed; sorted by t */
    int nqueue;

    struct hold holds[MAX_HOLDS];
    int nholds;
    int freeze_hold; /* which hold (1-based) to freeze */
    int frozen;      /* the worker frozen (now or earlier), 0 = none yet */
    int is_frozen;
    int frozen_hold; /* its hold, index into holds */
    int64_t frozen_at, thawed_at;
    int frozen_lost; /* its lost callback was reported */
    int taken_over;  /* a waiter took over while it was frozen */
    int jobs_done;
    int last_holder; /* the worker that did the last job and holds on */
    int stopping;
    int stop_holder; /* stopped after the others are gone */
    int interrupted;
    int problems;
    int handoffs; /* grants to another worker than the one before */
    double wake_ms[MAX_HOLDS];
    int nwake;                /* of which woken by a release (wake_ms: how long after it) */
    int takeovers;            /* of which taken over from a frozen holder */
    int after_lost;           /* of which granted after the previous holder lost it */
    int retries;              /* --cluster: acquires that ended LEASH_ECONN after the kill */
    int waiting[WORKERS + 1]; /* as printed so far */
    const struct target *target;
    struct failover fo;
    struct quorum_kills qk;
};

static void parent_note(struct parent *p, int kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void queue_push(struct parent *p, const struct event *e);

static const char *who(int worker, char buf[8]) {
    if (worker == 0)
        return "parent";
    snprintf(buf, 8, "w%d", worker);
    return buf;
}

/* One line of the timeline: time since start, who, what. */
static void say(struct parent *p, int64_t t, int worker, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void say(struct parent *p, int64_t t, int worker, const char *fmt, ...) {
    char name[8];
    va_list ap;
    printf("%6.3f  %-6s  ", (double)(t - p->t0) / 1e9, who(worker, name));
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

/* An event of the parent's own, printed in its place in the timeline. */
static void parent_note(struct parent *p, int kind, const char *fmt, ...) {
    struct event e;
    va_list ap;
    memset(&e, 0, sizeof(e));
    e.t = now_ns();
    e.kind = kind;
    va_start(ap, fmt);
    vsnprintf(e.text, sizeof(e.text), fmt, ap);
    va_end(ap);
    queue_push(p, &e);
}

static struct hold *find_hold(struct parent *p, int worker, uint64_t fence) {
    int i;
    for (i = p->nholds - 1; i >= 0; i--)
        if (p->holds[i].worker == worker && p->holds[i].fence == fence)
            return &p->holds[i];
    return NULL;
}

static void close_stop(struct parent *p, int worker) {
    if (p->stop_fd[worker] >= 0) {
        close(p->stop_fd[worker]);
        p->stop_fd[worker] = -1;
    }
}

/* The holder is told last, once the waiters are gone: its release then
 * wakes nobody, and no worker starts a job after the run is over. */
static void stop_holder_when_alone(struct parent *p) {
    int i;
    if (!p->stopping || p->stop_holder == 0)
        return;
    for (i = 1; i <= WORKERS; i++)
        if (i != p->stop_holder && p->pid[i] > 0 && !p->exited[i])
            return;
    close_stop(p, p->stop_holder);
}

/* Wakes the frozen worker; 1 if there was one. */
static int thaw(struct parent *p) {
    if (!p->is_frozen)
        return 0;
    p->thawed_at = now_ns();
    parent_note(p, E_NOTE, "SIGCONT w%d after %.2f s", p->frozen,
                (double)(p->thawed_at - p->frozen_at) / 1e9);
    kill(p->pid[p->frozen], SIGCONT);
    p->is_frozen = 0;
    return 1;
}

static void begin_stop(struct parent *p, const char *why) {
    int i;
    if (p->stopping)
        return;
    p->stopping = 1;
    parent_note(p, E_NOTE, "%s: the run is over, workers stop (waiters first)", why);
    thaw(p);
    ev_timer_stop(p->loop, &p->limit);
    ev_timer_stop(p->loop, &p->freeze);
    ev_timer_stop(p->loop, &p->thaw);
    ev_timer_start(p->loop, &p->grace);

    p->stop_holder = p->last_holder;
    if (p->stop_holder == 0 && p->nholds > 0 && p->holds[p->nholds - 1].end == 0)
        p->stop_holder = p->holds[p->nholds - 1].worker;
    for (i = 1; i <= WORKERS; i++)
        if (i != p->stop_holder)
            close_stop(p, i);
    stop_holder_when_alone(p);
}

/* The hold that was frozen, or NULL. */
static struct hold *frozen_hold(struct parent *p) {
    return p->frozen != 0 ? &p->holds[p->frozen_hold] : NULL;
}

/* --cluster: the hold whose master was killed, or NULL. */
static struct hold *killed_hold(struct parent *p) {
    return p->fo.killed_at != 0 ? &p->holds[p->fo.hold] : NULL;
}

/* --redlock: the hold under kill k (0: N - M servers, 1: one more), or NULL. */
static struct hold *quorum_hold(struct parent *p, int k) {
    return p->qk.at[k] != 0 ? &p->holds[p->qk.hold[k]] : NULL;
}

/* --redlock: the servers that ran at t. */
static int servers_up_at(const struct parent *p, int64_t t) {
    const struct quorum_kills *qk = &p->qk;
    int up = qk->n, k;

    for (k = 0; k < 2; k++)
        if (qk->at[k] != 0 && t >= qk->at[k])
            up -= qk->count[k];
    return up;
}

/* When the first server was killed (--cluster, --redlock), 0 before. */
static int64_t first_kill(const struct parent *p) {
    return run.redlock ? p->qk.at[0] : p->fo.killed_at;
}

/* How far into the hold's job the parent acts on it. */
static int64_t act_after_ms(const struct parent *p) {
    if (run.cluster)
        return KILL_AFTER_MS;
    if (run.redlock)
        return p->qk.phase == 0 ? KILL_AFTER_MS : LAST_KILL_AFTER_MS;
    return FREEZE_AFTER_MS;
}

/* Seconds from the kill to t. */
static double since_kill(const struct parent *p, int64_t t) {
    return (double)(t - p->fo.killed_at) / 1e9;
}

/* An event read but not printed yet (it happened less than REORDER_MS ago). */
static const struct event *find_queued(const struct parent *p, int kind, int worker,
                                       uint64_t fence) {
    int i;
    for (i = 0; i < p->nqueue; i++)
        if (p->queue[i].kind == kind && p->queue[i].worker == worker && p->queue[i].fence == fence)
            return &p->queue[i];
    return NULL;
}

/* --redlock: a grant e since a kill; what it says about the servers goes
 * into where. None may come while no majority runs. */
static void quorum_granted(struct parent *p, const struct event *e, char *where, size_t cap) {
    struct quorum_kills *qk = &p->qk;
    int up = servers_up_at(p, e->t);

    if (qk->at[0] == 0 || e->t < qk->at[0])
        return;
    if (up < qk->majority) {
        p->problems++;
        snprintf(where, cap, " -- !! while only %d of %d servers run, no majority", up, qk->n);
    } else {
        if (qk->down_grant == 0) {
            qk->down_grant = e->t;
            qk->down_fence = e->fence;
            qk->down_worker = e->worker;
        }
        snprintf(where, cap, ", granted by the %d servers that run (%d of %d down)", up, qk->n - up,
                 qk->n);
    }
}

static void on_granted(struct parent *p, const struct event *e) {
    struct hold *prev = p->nholds > 0 ? &p->holds[p->nholds - 1] : NULL;
    struct hold *h;
    char where[96] = "";

    if (p->nholds == MAX_HOLDS)
        return;
    h = &p->holds[p->nholds++];
    memset(h, 0, sizeof(*h));
    h->worker = e->worker;
    h->fence = e->fence;
    h->granted = e->t;
    if (prev != NULL && prev->worker != e->worker)
        p->handoffs++;
    if (p->fo.killed_at != 0 && p->fo.next_grant == 0 && e->t > p->fo.killed_at) {
        /* The old master is dead: only the promoted replica can grant. */
        p->fo.next_grant = e->t;
        p->fo.next_fence = e->fence;
        p->fo.next_worker = e->worker;
        snprintf(where, sizeof(where), ", from the promoted master %.2f s after the kill",
                 since_kill(p, e->t));
    }
    if (run.redlock)
        quorum_granted(p, e, where, sizeof(where));

    if (prev == NULL) {
        say(p, e->t, e->worker, "ACQUIRED, fence %" PRIu64 "%s", e->fence, where);
    } else if (prev->end == E_RELEASED) {
        double ms = (double)(e->t - prev->ended) / 1e6;
        if (prev->worker != e->worker)
            p->wake_ms[p->nwake++] = ms;
        say(p, e->t, e->worker, "ACQUIRED, fence %" PRIu64 ": woken %.2f ms after w%d released%s",
            e->fence, ms, prev->worker, where);
    } else if (prev->end == E_LOST) {
        if (prev->worker != e->worker)
            p->after_lost++;
        say(p, e->t, e->worker, "ACQUIRED, fence %" PRIu64 ", after w%d lost it%s", e->fence,
            prev->worker, where);
    } else if (prev == frozen_hold(p)) {
        p->takeovers++;
        p->taken_over = 1;
        say(p, e->t, e->worker,
            "TOOK OVER, fence %" PRIu64 ": w%d is frozen, its lease ran out (%.0f ms after the "
            "freeze)",
            e->fence, prev->worker, (double)(e->t - p->frozen_at) / 1e6);
    } else {
        /* The releaser's own callback ran after this grant (its event is
         * among those still queued): the waiter was that quick. */
        const struct event *rel = find_queued(p, E_RELEASED, prev->worker, prev->fence);
        if (rel != NULL && prev->worker != e->worker) {
            double ms = (double)(rel->t - e->t) / 1e6;
            p->wake_ms[p->nwake++] = -ms;
            say(p, e->t, e->worker,
                "ACQUIRED, fence %" PRIu64 ": woken by w%d's release, %.2f ms before w%d's "
                "release callback ran%s",
                e->fence, prev->worker, ms, prev->worker, where);
        } else {
            say(p, e->t, e->worker, "ACQUIRED, fence %" PRIu64 ", handed over by w%d%s", e->fence,
                prev->worker, where);
        }
    }
    if (prev != NULL && e->fence <= prev->fence) {
        p->problems++;
        say(p, e->t, e->worker, "!! fence %" PRIu64 " is not above the previous one, %" PRIu64,
            e->fence, prev->fence);
    }
    if (p->nholds == p->freeze_hold && !p->stopping) {
        double at = (double)(e->t + act_after_ms(p) * 1000000 - now_ns()) / 1e9;
        ev_timer_set(&p->freeze, at > 0 ? at : 0., 0.);
        ev_timer_start(p->loop, &p->freeze);
    }
}

static void on_wrote(struct parent *p, const struct event *e) {
    struct hold *h = find_hold(p, e->worker, e->fence);
    int64_t until = e->t + e->valid_ms * 1000000;
    char up[48] = "";

    if (h == NULL)
        return;
    if (h->writes++ == 0)
        h->first_write = e->t;
    h->last_write = e->t;
    if (until > h->valid_until)
        h->valid_until = until;
    if (!e->status) {
        say(p, e->t, e->worker,
            "!! the storage REFUSED write %d/%d: fence %" PRIu64 " is below the highest", e->step,
            run.steps, e->fence);
        return;
    }
    if (h == killed_hold(p) && e->t > p->fo.killed_at && e->step < run.steps) {
        /* Every write of the hold under the failover: its validity runs down
         * until a renewal gets through. */
        say(p, e->t, e->worker, "wrote %d/%d with fence %" PRIu64 "; %s, valid %" PRId64 " ms",
            e->step, run.steps, e->fence,
            p->fo.renewed_at != 0 && p->fo.renewed_at < e->t ? "renewed since the kill"
                                                             : "no renewal since the kill",
            e->valid_ms);
    } else if (h == quorum_hold(p, 1) && e->t > p->qk.at[1] && e->step < run.steps) {
        /* No majority: its validity runs down to the lost callback. */
        say(p, e->t, e->worker,
            "wrote %d/%d with fence %" PRIu64 "; no renewal since the kill, valid %" PRId64 " ms",
            e->step, run.steps, e->fence, e->valid_ms);
    } else if (e->step == run.steps) {
        if (++p->jobs_done >= run.jobs_wanted) {
            char what[64];
            p->last_holder = e->worker;
            say(p, e->t, e->worker,
                "job done, the last one: keeps the lock until the others have stopped");
            snprintf(what, sizeof(what), "%d jobs done", p->jobs_done);
            begin_stop(p, what);
        }
    } else if (e->step % PROGRESS_EVERY == 0) {
        if (run.redlock && servers_up_at(p, e->t) < p->qk.n)
            snprintf(up, sizeof(up), "; %d of %d servers up", servers_up_at(p, e->t), p->qk.n);
        say(p, e->t, e->worker,
            "wrote %d/%d with fence %" PRIu64 "; lease renewed %" PRIu64 "x, valid %" PRId64
            " ms%s",
            e->step, run.steps, e->fence, e->renewals, e->valid_ms, up);
    }
}

static void on_lost_event(struct parent *p, const struct event *e) {
    struct hold *h = find_hold(p, e->worker, e->fence);

    if (h != NULL) {
        h->end = E_LOST;
        h->ended = e->t;
        h->reason = e->status;
        h->steps = e->step;
        h->renewals = e->renewals;
    }
    if (h != NULL && h == frozen_hold(p)) {
        p->frozen_lost = 1;
        say(p, e->t, e->worker,
            "LOST (%s): the lost callback stops the job at %d/%d, before its next write",
            leash_lost_reason_name(e->status), e->step, run.steps);
    } else if (h != NULL && h == killed_hold(p)) {
        say(p, e->t, e->worker,
            "LOST (%s), %.2f s after the kill: the lost callback stops the job at %d/%d, before "
            "its next write",
            leash_lost_reason_name(e->status), since_kill(p, e->t), e->step, run.steps);
    } else if (h != NULL && h == quorum_hold(p, 1) && e->t > p->qk.at[1]) {
        say(p, e->t, e->worker,
            "LOST (%s), %.2f s after the kill, %.0f ms after its last write: the lost callback "
            "stops the job at %d/%d, before its next write",
            leash_lost_reason_name(e->status), (double)(e->t - p->qk.at[1]) / 1e9,
            (double)(e->t - h->last_write) / 1e6, e->step, run.steps);
    } else {
        say(p, e->t, e->worker, "LOST (%s): the lost callback stops the job at %d/%d",
            leash_lost_reason_name(e->status), e->step, run.steps);
    }
}

static void on_released_event(struct parent *p, const struct event *e) {
    struct hold *h = find_hold(p, e->worker, e->fence);

    if (h != NULL) {
        h->end = E_RELEASED;
        h->ended = e->t;
        h->status = e->status;
        h->steps = e->step;
        h->renewals = e->renewals;
        /* leash_held() is 0 from the call of leash_release() on. */
        if (e->asked < h->valid_until)
            h->valid_until = e->asked;
    }
    if (e->status == LEASH_ENOTHELD && h == frozen_hold(p)) {
        /* Stopped right after the freeze, before its lost callback ran. */
        say(p, e->t, e->worker, "release: %s (its lease ran out while frozen)",
            leash_strerror(e->status));
    } else if (h != NULL && h == killed_hold(p) && e->asked > p->fo.killed_at) {
        /* Only the promoted replica could answer; what it said is the
         * outcome (the summary tells it), not a fault of the demo. */
        say(p, e->t, e->worker, "%s at %d/%d -> release: %s%s",
            e->step == run.steps ? "job done" : "stopped", e->step, run.steps,
            e->status == LEASH_OK ? "OK, the promoted master had the hold"
                                  : leash_strerror(e->status),
            e->status == LEASH_OK ? "" : " (after the kill of its master)");
    } else if (e->status != LEASH_OK) {
        p->problems++;
        say(p, e->t, e->worker, "!! release of fence %" PRIu64 " failed: %s", e->fence,
            leash_strerror(e->status));
    } else if (h != NULL && h == quorum_hold(p, 0) && e->step == run.steps &&
               e->worker != p->last_holder) {
        say(p, e->t, e->worker,
            "job done -> released by the %d servers that run (lease renewed %" PRIu64
            "x, %d times since the kill)",
            servers_up_at(p, e->t), e->renewals, p->qk.renewals);
    } else if (e->step == run.steps && e->worker == p->last_holder) {
        say(p, e->t, e->worker, "released (lease renewed %" PRIu64 "x)", e->renewals);
    } else if (e->step == run.steps) {
        say(p, e->t, e->worker, "job done -> released (lease renewed %" PRIu64 "x)", e->renewals);
    } else {
        say(p, e->t, e->worker, "stopped at %d/%d -> released", e->step, run.steps);
    }
}

static const char *level_name(int level) {
    switch (level) {
    case LEASH_LOG_ERROR:
        return "error";
    case LEASH_LOG_WARN:
        return "warning";
    case LEASH_LOG_INFO:
        return "info";
    }
    return "debug";
}

/* --redlock: a renewal of hold h. The first of the hold under the first
 * kill is news (a majority still runs); one with no majority is wrong. */
static void quorum_renewed(struct parent *p, const struct hold *h, const struct event *e) {
    struct quorum_kills *qk = &p->qk;
    int up = servers_up_at(p, e->t);

    if (h == NULL || qk->at[0] == 0 || e->t < qk->at[0])
        return;
    if (up < qk->majority) {
        p->problems++;
        say(p, e->t, e->worker, "!! RENEWED while only %d of %d servers run, no majority", up,
            qk->n);
        return;
    }
    if (h != quorum_hold(p, 0))
        return;
    qk->renewals++;
    if (qk->renewed_at != 0)
        return;
    qk->renewed_at = e->t;
    say(p, e->t, e->worker,
        "RENEWED by the %d servers that run, a majority, %.2f s after the kill: valid %" PRId64
        " ms",
        up, (double)(e->t - qk->at[0]) / 1e9, e->valid_ms);
}

/* --cluster: a renewal; the killed hold's first one since the kill is news. */
static void on_renewed(struct parent *p, const struct event *e) {
    struct hold *h = find_hold(p, e->worker, e->fence);

    if (run.redlock) {
        quorum_renewed(p, h, e);
        return;
    }

    /* An answer the old master sent before it died is read within
     * microseconds on loopback; one read 50 ms after the kill came from
     * the promoted replica (a failover takes the 500 ms node timeout at
     * least). */
    if (h == NULL || h != killed_hold(p) || p->fo.renewed_at != 0 ||
        e->t < p->fo.killed_at + 50 * 1000000)
        return;
    p->fo.renewed_at = e->t;
    say(p, e->t, e->worker,
        "RENEWED at the promoted master, %.2f s after the kill: it has the hold, valid %" PRId64
        " ms",
        since_kill(p, e->t), e->valid_ms);
}

/* The workers waiting now, as "w1 and w3", into buf. */
static const char *waiting_list(const struct parent *p, char *buf, size_t cap) {
    int i, n = 0, count = 0;
    size_t used = 0;

    for (i = 1; i <= WORKERS; i++)
        count += p->waiting[i];
    buf[0] = '\0';
    for (i = 1; i <= WORKERS && used < cap; i++) {
        if (!p->waiting[i])
            continue;
        n++;
        used += (size_t)snprintf(buf + used, cap - used, "%sw%d",
                                 n == 1       ? ""
                                 : n == count ? " and "
                                              : ", ",
                                 i);
    }
    return buf;
}

static void handle(struct parent *p, const struct event *e) {
    char list[64];

    switch (e->kind) {
    case E_WAITING:
        if (e->worker >= 1 && e->worker <= WORKERS)
            p->waiting[e->worker] = 1;
        say(p, e->t, e->worker, "waiting for the lock");
        break;
    case E_ACQUIRED:
        if (e->worker >= 1 && e->worker <= WORKERS)
            p->waiting[e->worker] = 0;
        on_granted(p, e);
        break;
    case E_WROTE:
        on_wrote(p, e);
        break;
    case E_SKIPPED:
        say(p, e->t, e->worker, "%sleash_held() = 0, so write %d/%d is NOT done",
            servers_die() ? "" : "resumes: ", e->step + 1, run.steps);
        break;
    case E_RENEWED:
        on_renewed(p, e);
        break;
    case E_OVERDUE:
        say(p, e->t, e->worker,
            "renewals get no answer: none for %.0f ms (one is due every %d ms), valid %" PRId64
            " ms",
            (double)e->asked / 1e6, RENEW_MS, e->valid_ms);
        break;
    case E_RETRY:
        if (run.redlock && first_kill(p) != 0 && e->t > first_kill(p)) {
            p->retries++; /* it went on waiting */
            say(p, e->t, e->worker,
                "acquire ended: %s (%s): no majority of the servers answered -> waits again at "
                "once (and again each time it ends so)",
                leash_status_name(e->status), leash_strerror(e->status));
            break;
        }
        if (e->worker >= 1 && e->worker <= WORKERS)
            p->waiting[e->worker] = 0;
        if (p->fo.killed_at != 0 && e->t > p->fo.killed_at) {
            p->retries++;
            say(p, e->t, e->worker, "acquire ended: %s (%s) -> waits again in %d ms",
                leash_status_name(e->status), leash_strerror(e->status), REST_MS);
        } else {
            p->problems++;
            say(p, e->t, e->worker, "!! acquire failed: %s", leash_strerror(e->status));
        }
        break;
    case E_LOST:
        on_lost_event(p, e);
        break;
    case E_RELEASED:
        on_released_event(p, e);
        break;
    case E_CANCELED:
        if (e->worker >= 1 && e->worker <= WORKERS)
            p->waiting[e->worker] = 0;
        say(p, e->t, e->worker, "stops waiting (acquire canceled)");
        break;
    case E_FAILED:
        if (e->worker >= 1 && e->worker <= WORKERS)
            p->waiting[e->worker] = 0;
        p->problems++;
        say(p, e->t, e->worker, "!! %s failed: %s", e->text, leash_strerror(e->status));
        break;
    case E_REACH:
        if (first_kill(p) == 0 || e->t < first_kill(p))
            break; /* the connections being made */
        if (e->status < e->step)
            say(p, e->t, e->worker,
                "connections to %d server%s broke: %d of %d reached, leash reconnects in the "
                "background",
                e->step - e->status, e->step - e->status == 1 ? "" : "s", e->status, p->qk.n);
        else
            say(p, e->t, e->worker, "connected again: %d of %d servers reached", e->status,
                p->qk.n);
        break;
    case E_LOG:
        /* Info lines (when servers die) tell the story; before the first
         * kill they are the connections being made. */
        if (e->status >= LEASH_LOG_INFO && (first_kill(p) == 0 || e->t < first_kill(p)))
            break;
        /* With Redlock each worker has two connections to each server:
         * their lines, times five, would bury the story; E_REACH tells it. */
        if (run.redlock && strstr(e->text, " connection to ") != NULL)
            break;
        say(p, e->t, e->worker, "leash %s: %s", level_name(e->status), e->text);
        break;
    case E_EXIT:
        if (e->worker >= 1 && e->worker <= WORKERS)
            p->exited[e->worker] = 1 + e->status;
        if (e->status != 0) {
            p->problems++;
            say(p, e->t, e->worker, "!! exits with status %d", e->status);
        }
        stop_holder_when_alone(p);
        break;
    case E_NOTE:
        say(p, e->t, 0, "%s", e->text);
        break;
    case E_PROBLEM:
        p->problems++;
        say(p, e->t, 0, "!! %s", e->text);
        break;
    case E_WAITERS:
        waiting_list(p, list, sizeof(list));
        say(p, e->t, 0, "%s%s%s%s", e->text, list[0] ? "; " : "", list,
            list[0] == '\0'             ? ""
            : strchr(list, ' ') == NULL ? " still waits"
                                        : " still wait");
        break;
    }
}

/* ---- the reorder queue: events wait REORDER_MS, then print in time order ---- */

static void arm_flush(struct parent *p) {
    double delay;
    ev_timer_stop(p->loop, &p->flush);
    if (p->nqueue == 0)
        return;
    delay = (double)(p->queue[0].t + (int64_t)REORDER_MS * 1000000 - now_ns()) / 1e9;
    ev_timer_set(&p->flush, delay > 0 ? delay : 0., 0.);
    ev_timer_start(p->loop, &p->flush);
}

static void flush_queue(struct parent *p, int all) {
    int64_t cutoff = now_ns() - (int64_t)REORDER_MS * 1000000;
    while (p->nqueue > 0 && (all || p->queue[0].t <= cutoff)) {
        struct event e = p->queue[0];
        p->nqueue--;
        memmove(&p->queue[0], &p->queue[1], (size_t)p->nqueue * sizeof(p->queue[0]));
        handle(p, &e);
    }
    fflush(stdout);
    arm_flush(p);
}

static void queue_push(struct parent *p, const struct event *e) {
    int i;
    if (p->nqueue == QUEUE_MAX) { /* cannot happen at this pace; stay correct anyway */
        struct event first = p->queue[0];
        p->nqueue--;
        memmove(&p->queue[0], &p->queue[1], (size_t)p->nqueue * sizeof(p->queue[0]));
        handle(p, &first);
    }
    for (i = p->nqueue; i > 0 && p->queue[i - 1].t > e->t; i--)
        p->queue[i] = p->queue[i - 1];
    p->queue[i] = *e;
    p->nqueue++;
    if (i == 0)
        arm_flush(p);
}

static void on_flush(struct ev_loop *loop, ev_timer *t, int revents) {
    (void)loop, (void)revents;
    flush_queue(t->data, 0);
}

static void parent_done(struct parent *p) {
    ev_io_stop(p->loop, &p->events);
    flush_queue(p, 1);
    ev_timer_stop(p->loop, &p->flush);
    ev_timer_stop(p->loop, &p->freeze);
    ev_timer_stop(p->loop, &p->thaw);
    ev_timer_stop(p->loop, &p->lost_check);
    ev_timer_stop(p->loop, &p->limit);
    ev_timer_stop(p->loop, &p->grace);
    ev_timer_stop(p->loop, &p->watch);
    ev_timer_stop(p->loop, &p->kill_check);
    ev_timer_stop(p->loop, &p->no_majority);
    if (p->fo.watch != NULL) {
        redisFree(p->fo.watch);
        p->fo.watch = NULL;
    }
    ev_signal_stop(p->loop, &p->sigint);
    ev_signal_stop(p->loop, &p->sigterm);
    ev_break(p->loop, EVBREAK_ALL);
}

static void on_events(struct ev_loop *loop, ev_io *io, int revents) {
    struct parent *p = io->data;
    (void)loop, (void)revents;

    for (;;) {
        ssize_t n = read(p->events_fd, p->inbuf + p->inlen, sizeof(p->inbuf) - p->inlen);
        if (n > 0) {
            p->inlen += (size_t)n;
            while (p->inlen >= sizeof(struct event)) {
                struct event e;
                memcpy(&e, p->inbuf, sizeof(e));
                p->inlen -= sizeof(e);
                memmove(p->inbuf, p->inbuf + sizeof(e), p->inlen);
                queue_push(p, &e);
            }
        } else if (n == 0) {
            parent_done(p); /* every worker has closed its end: all gone */
            return;
        } else if (errno != EINTR) {
            return; /* EAGAIN: read it all */
        }
    }
}

/* ---- --cluster: the master of the lock's slot is killed ---- */

/* A blocking connection for the parent's look at the cluster, or NULL. */
static redisContext *admin_connect(const char *host, int port) {
    struct timeval tv;
    redisContext *c;

    tv.tv_sec = ADMIN_TIMEOUT_MS / 1000;
    tv.tv_usec = (ADMIN_TIMEOUT_MS % 1000) * 1000;
    c = redisConnectWithTimeout(host, port, tv);
    if (c != NULL && c->err == 0 && redisSetTimeout(c, tv) == REDIS_OK)
        return c;
    redisFree(c);
    return NULL;
}

/* The text of a bulk string reply (CLUSTER NODES, INFO), or NULL; the reply
 * is the caller's to free either way. */
static const char *reply_text(const redisReply *r) {
    return r != NULL && r->type == REDIS_REPLY_STRING ? r->str : NULL;
}

/* The value of the line "name:value" of an INFO-style text into out;
 * 0 when there is no such line. */
static int info_value(const char *text, const char *name, char *out, size_t cap) {
    size_t n = strlen(name);
    const char *line = text;

    while (line != NULL && *line != '\0') {
        if (strncmp(line, name, n) == 0 && line[n] == ':') {
            size_t len = strcspn(line + n + 1, "\r\n");
            if (len >= cap)
                len = cap - 1;
            memcpy(out, line + n + 1, len);
            out[len] = '\0';
            return 1;
        }
        line = strchr(line, '\n');
        if (line != NULL)
            line++;
    }
    return 0;
}

/* INFO server's process_id of the node at the other end of c; 0 if not said. */
static long node_pid(redisContext *c) {
    redisReply *r = redisCommand(c, "INFO server");
    char value[32];
    long pid = 0;

    if (reply_text(r) != NULL && info_value(r->str, "process_id", value, sizeof(value)))
        pid = strtol(value, NULL, 10);
    freeReplyObject(r);
    return pid;
}

/* One node of a CLUSTER SLOTS entry, [host, port, id, ...], into *n; an
 * empty host is the node that was asked. 0, or -1 for another shape. */
static int slots_node(const redisReply *r, const char *asked, struct node_info *n) {
    memset(n, 0, sizeof(*n));
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_INTEGER)
        return -1;
    snprintf(n->host, sizeof(n->host), "%s",
             r->element[0]->len > 0 && strcmp(r->element[0]->str, "?") != 0 ? r->element[0]->str
                                                                            : asked);
    n->port = (int)r->element[1]->integer;
    if (r->elements > 2 && r->element[2]->type == REDIS_REPLY_STRING)
        snprintf(n->id, sizeof(n->id), "%s", r->element[2]->str);
    return 0;
}

/* Finds the lock's slot, its master and that master's first replica, asking
 * the seeds in turn. 0, or -1 with the reason in why. */
static int find_slot_master(const struct target *t, struct failover *fo, char *why, size_t cap) {
    int i;

    snprintf(why, cap, "no seed answered CLUSTER KEYSLOT and CLUSTER SLOTS");
    for (i = 0; i < t->nnodes; i++) {
        char host[256];
        int port, found = 0;
        size_t j;
        redisContext *c;
        redisReply *r;

        if (split_endpoint(t->nodes[i], host, sizeof(host), &port) != 0 ||
            (c = admin_connect(host, port)) == NULL)
            continue;
        r = redisCommand(c, "CLUSTER KEYSLOT %s", KEY_PREFIX LOCK_NAME);
        if (r != NULL && r->type == REDIS_REPLY_INTEGER) {
            fo->slot = (int)r->integer;
            freeReplyObject(r);
            r = redisCommand(c, "CLUSTER SLOTS");
            for (j = 0; r != NULL && r->type == REDIS_REPLY_ARRAY && j < r->elements; j++) {
                const redisReply *range = r->element[j];
                if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
                    range->element[0]->type != REDIS_REPLY_INTEGER ||
                    range->element[1]->type != REDIS_REPLY_INTEGER ||
                    fo->slot < range->element[0]->integer || fo->slot > range->element[1]->integer)
                    continue;
                found = slots_node(range->element[2], host, &fo->master) == 0;
                if (found && range->elements > 3)
                    slots_node(range->element[3], host, &fo->replica);
                break;
            }
        }
        freeReplyObject(r);
        redisFree(c);
        if (found)
            return 0;
        snprintf(why, cap, "%s:%d does not say who serves slot %d", host, port, fo->slot);
    }
    return -1;
}

/* 1 when the variable env ("PORT:PID,...": LEASH_DEMO_CLUSTER_PIDS or
 * LEASH_DEMO_REDLOCK_PIDS) names pid at port. */
static int started_by_script(const char *env, int port, long pid) {
    const char *s = getenv(env);

    while (s != NULL && *s != '\0') {
        char *end;
        long a = strtol(s, &end, 10), b = 0;
        if (*end == ':')
            b = strtol(end + 1, &end, 10);
        if (a == port && b == pid && pid > 0)
            return 1;
        s = strchr(end, ',');
        if (s != NULL)
            s++;
    }
    return 0;
}

/* --sentinel: a connection to the first sentinel that takes one, with
 * its password; NULL when none does. */
/* A connection to sentinel i of t, logged in; NULL when it cannot be had. */
static redisContext *sentinel_connect_to(const struct target *t, int i) {
    char host[256];
    int port;
    redisContext *c;
    redisReply *r = NULL;

    if (split_endpoint(t->nodes[i], host, sizeof(host), &port) != 0 ||
        (c = admin_connect(host, port)) == NULL)
        return NULL;
    if (t->sentinel_password[0] == '\0')
        return c;
    r = t->sentinel_user[0] != '\0'
            ? redisCommand(c, "AUTH %s %s", t->sentinel_user, t->sentinel_password)
            : redisCommand(c, "AUTH %s", t->sentinel_password);
    if (r != NULL && r->type != REDIS_REPLY_ERROR) {
        freeReplyObject(r);
        return c;
    }
    freeReplyObject(r);
    redisFree(c);
    return NULL;
}

static redisContext *sentinel_connect(const struct target *t) {
    redisContext *c = NULL;
    int i;

    for (i = 0; i < t->nnodes && c == NULL; i++)
        c = sentinel_connect_to(t, i);
    return c;
}

/* Once the demo's failover is done: the sentinels (which scripts/demo
 * started, or the master would not have been killed) wait CALM_DOWN_MS
 * before they call the new master down. Their down-after of 1000 ms makes
 * the demo's failover quick, but on a loaded machine a master that stalls
 * for a second is then failed over again, to the other replica, which may
 * not have synced from it yet: the hold granted there is lost with it
 * (docs/sentinel.md: wait_replicas), and that failover is no part
 * of this story. */
#define CALM_DOWN_MS 10000
static void calm_sentinels(const struct target *t) {
    int i;

    for (i = 0; i < t->nnodes; i++) {
        redisContext *c = sentinel_connect_to(t, i);
        if (c == NULL)
            continue;
        freeReplyObject(
            redisCommand(c, "SENTINEL SET %s down-after-milliseconds %d", t->master, CALM_DOWN_MS));
        redisFree(c);
    }
}

/* --sentinel: the master the sentinels name now into *n (its pid
 * unknown). 0, or -1. */
static int sentinel_master(const struct target *t, struct node_info *n) {
    redisContext *c = sentinel_connect(t);
    redisReply *r;
    int rc = -1;

    if (c == NULL)
        return -1;
    r = redisCommand(c, "SENTINEL get-master-addr-by-name %s", t->master);
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING) {
        memset(n, 0, sizeof(*n));
        snprintf(n->host, sizeof(n->host), "%s", r->element[0]->str);
        n->port = atoi(r->element[1]->str);
        rc = 0;
    }
    freeReplyObject(r);
    redisFree(c);
    return rc;
}

/* The master killed, for the notes: "the master of slot N" or "the master
 * mymaster". */
static const char *master_role(const struct parent *p, char *buf, size_t cap) {
    if (run.sentinel)
        snprintf(buf, cap, "the master %s", p->target->master);
    else
        snprintf(buf, cap, "the master of slot %d", p->fo.slot);
    return buf;
}

/* During hold freeze_hold's job: finds the master of the lock's slot (or
 * the one the sentinels name), checks that scripts/demo started it, and
 * kills it. */
static void kill_master(struct parent *p, struct hold *h) {
    struct failover *fo = &p->fo;
    const char *pids = run.sentinel ? "LEASH_DEMO_SENTINEL_PIDS" : "LEASH_DEMO_CLUSTER_PIDS";
    redisContext *c;
    char why[320], role[300];

    fo->refused = 1; /* until the signal went */
    if (run.sentinel && sentinel_master(p->target, &fo->master) != 0) {
        parent_note(p, E_PROBLEM, "no sentinel named the master %s", p->target->master);
        return;
    }
    if (!run.sentinel && find_slot_master(p->target, fo, why, sizeof(why)) != 0) {
        parent_note(p, E_PROBLEM, "cannot find the master of the lock's slot: %s", why);
        return;
    }
    if ((c = admin_connect(fo->master.host, fo->master.port)) != NULL) {
        fo->master.pid = node_pid(c);
        redisFree(c);
    }
    master_role(p, role, sizeof(role));
    if (!started_by_script(pids, fo->master.port, fo->master.pid)) {
        parent_note(p, E_PROBLEM,
                    "refusing to kill %s:%d (pid %ld), %s: %s does not name it as started by "
                    "scripts/demo",
                    fo->master.host, fo->master.port, fo->master.pid, role, pids);
        return;
    }
    if (run.sentinel) {
        parent_note(p, E_NOTE,
                    "SIGKILL %s:%d (pid %ld), %s, where w%d holds fence %" PRIu64
                    "; the sentinels are to promote a replica",
                    fo->master.host, fo->master.port, fo->master.pid, role, h->worker, h->fence);
    } else if (fo->replica.port == 0) {
        parent_note(p, E_PROBLEM, "%s:%d, the master of slot %d, has no replica: no kill",
                    fo->master.host, fo->master.port, fo->slot);
        return;
    }
    if (!run.sentinel) {
        /* Watched from before the kill: the connection is ready when it counts. */
        fo->watch = admin_connect(fo->replica.host, fo->replica.port);
        if (fo->watch != NULL)
            fo->replica.pid = node_pid(fo->watch);
        /* The note first: its time stamp comes before anything the kill causes. */
        parent_note(p, E_NOTE,
                    "SIGKILL %s:%d (pid %ld), %s, where w%d holds fence %" PRIu64
                    "; its replica %s:%d (pid %ld) is to take over",
                    fo->master.host, fo->master.port, fo->master.pid, role, h->worker, h->fence,
                    fo->replica.host, fo->replica.port, fo->replica.pid);
    } else {
        fo->watch = sentinel_connect(p->target);
    }
    fo->killed_at = now_ns();
    fo->hold = (int)(h - p->holds);
    if (kill((pid_t)fo->master.pid, SIGKILL) != 0) {
        parent_note(p, E_PROBLEM, "SIGKILL pid %ld: %s", fo->master.pid, strerror(errno));
        fo->killed_at = 0;
        return;
    }
    fo->refused = 0;
    ev_timer_start(p->loop, &p->watch);
    ev_timer_set(&p->kill_check, (double)(run.lease_ms + LOST_WAIT_MS) / 1000., 0.);
    ev_timer_start(p->loop, &p->kill_check);
}

/* 1 when the comma-separated flags of a CLUSTER NODES line hold flag. */
static int has_flag(const char *flags, size_t len, const char *flag) {
    size_t n = strlen(flag), i = 0;

    while (i < len) {
        size_t k = i;
        while (k < len && flags[k] != ',')
            k++;
        if (k - i == n && memcmp(flags + i, flag, n) == 0)
            return 1;
        i = k + 1;
    }
    return 0;
}

/* Reads the replica's CLUSTER NODES: how it sees the dead master and itself. */
static void watch_nodes(struct parent *p, const char *text) {
    struct failover *fo = &p->fo;
    const char *line = text;

    while (line != NULL && *line != '\0') {
        /* <id> <ip:port@cport> <flags> <master> ... */
        const char *id = line, *addr, *flags;
        size_t idlen = strcspn(id, " \n"), flen;

        addr = id + idlen + (id[idlen] == ' ');
        flags = addr + strcspn(addr, " \n");
        flags += *flags == ' ';
        flen = strcspn(flags, " \n");
        if (fo->master.id[0] != '\0' && idlen == strlen(fo->master.id) &&
            memcmp(id, fo->master.id, idlen) == 0) {
            if (fo->pfail_at == 0 && fo->fail_at == 0 && has_flag(flags, flen, "fail?")) {
                fo->pfail_at = now_ns();
                parent_note(p, E_NOTE,
                            "the replica has not heard from the master for the node timeout: "
                            "PFAIL, %.2f s after the kill",
                            since_kill(p, fo->pfail_at));
            }
            if (fo->fail_at == 0 && has_flag(flags, flen, "fail")) {
                fo->fail_at = now_ns();
                parent_note(p, E_NOTE,
                            "the masters agree that %s:%d is down: FAIL, %.2f s after the kill",
                            fo->master.host, fo->master.port, since_kill(p, fo->fail_at));
            }
        }
        if (fo->promoted_at == 0 && has_flag(flags, flen, "myself") &&
            has_flag(flags, flen, "master")) {
            fo->promoted_at = now_ns();
            parent_note(p, E_WAITERS,
                        "%s:%d (pid %ld) won the election: the master of slot %d, %.2f s after "
                        "the kill",
                        fo->replica.host, fo->replica.port, fo->replica.pid, fo->slot,
                        since_kill(p, fo->promoted_at));
        }
        line = strchr(line, '\n');
        if (line != NULL)
            line++;
    }
}

/* The value of key in a flat [key, value, ...] reply into out; 0 if none. */
static int pair_value(const redisReply *r, const char *key, char *out, size_t cap) {
    size_t i;

    for (i = 0; r != NULL && r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2)
        if (r->element[i]->type == REDIS_REPLY_STRING && strcmp(r->element[i]->str, key) == 0 &&
            r->element[i + 1]->type == REDIS_REPLY_STRING) {
            snprintf(out, cap, "%s", r->element[i + 1]->str);
            return 1;
        }
    return 0;
}

/* --sentinel, after the kill, every WATCH_MS: the failover as a sentinel
 * sees it (pfail_at: s_down, fail_at: o_down, down_at: the failover
 * started, promoted_at = up_at: another master named). */
static void watch_sentinel(struct parent *p) {
    struct failover *fo = &p->fo;
    redisReply *r;
    char flags[256];
    struct node_info now;

    if (fo->watch == NULL)
        fo->watch = sentinel_connect(p->target);
    if (fo->watch == NULL)
        return;
    r = redisCommand(fo->watch, "SENTINEL master %s", p->target->master);
    if (pair_value(r, "flags", flags, sizeof(flags))) {
        if (fo->pfail_at == 0 && strstr(flags, "s_down") != NULL) {
            fo->pfail_at = now_ns();
            parent_note(p, E_NOTE,
                        "a sentinel has not heard from the master for down-after-milliseconds: "
                        "+sdown, %.2f s after the kill",
                        since_kill(p, fo->pfail_at));
        }
        if (fo->fail_at == 0 && strstr(flags, "o_down") != NULL) {
            fo->fail_at = now_ns();
            parent_note(p, E_NOTE,
                        "a quorum of sentinels agree that %s:%d is down: +odown, %.2f "
                        "s after the kill",
                        fo->master.host, fo->master.port, since_kill(p, fo->fail_at));
        }
        if (fo->down_at == 0 && strstr(flags, "failover_in_progress") != NULL) {
            fo->down_at = now_ns();
            parent_note(p, E_NOTE,
                        "the sentinels elected a leader: failover in progress, %.2f s "
                        "after the kill",
                        since_kill(p, fo->down_at));
        }
    }
    freeReplyObject(r);
    if (fo->promoted_at == 0 && sentinel_master(p->target, &now) == 0 &&
        (now.port != fo->master.port || strcmp(now.host, fo->master.host) != 0)) {
        redisContext *c = admin_connect(now.host, now.port);
        fo->replica = now;
        if (c != NULL) {
            fo->replica.pid = node_pid(c);
            redisFree(c);
        }
        fo->promoted_at = fo->up_at = now_ns();
        parent_note(p, E_WAITERS,
                    "+switch-master: the sentinels name %s:%d (pid %ld) the master %s, %.2f s "
                    "after the kill",
                    fo->replica.host, fo->replica.port, fo->replica.pid, p->target->master,
                    since_kill(p, fo->promoted_at));
        calm_sentinels(p->target);
    }
}

/* After the kill, every WATCH_MS: the failover as the replica (or a
 * sentinel) sees it. */
static void on_watch(struct ev_loop *loop, ev_timer *t, int revents) {
    struct parent *p = t->data;
    struct failover *fo = &p->fo;
    redisReply *r;
    char state[16];
    (void)loop, (void)revents;

    if (run.sentinel) {
        watch_sentinel(p);
        goto next;
    }

    if (fo->watch == NULL)
        fo->watch = admin_connect(fo->replica.host, fo->replica.port);
    if (fo->watch != NULL) {
        r = redisCommand(fo->watch, "CLUSTER NODES");
        if (reply_text(r) != NULL)
            watch_nodes(p, r->str);
        freeReplyObject(r);
    }
    if (fo->watch != NULL && fo->watch->err == 0) {
        r = redisCommand(fo->watch, "CLUSTER INFO");
        if (reply_text(r) != NULL && info_value(r->str, "cluster_state", state, sizeof(state))) {
            if (fo->down_at == 0 && strcmp(state, "fail") == 0) {
                fo->down_at = now_ns();
                parent_note(p, E_NOTE,
                            "cluster_state:fail at the replica: slot %d has no master that "
                            "answers",
                            fo->slot);
            } else if (fo->promoted_at != 0 && fo->up_at == 0 && strcmp(state, "ok") == 0) {
                fo->up_at = now_ns();
                parent_note(p, E_NOTE, "cluster_state:ok at %s:%d, %.2f s after the kill",
                            fo->replica.host, fo->replica.port, since_kill(p, fo->up_at));
            }
        }
        freeReplyObject(r);
    }
next:
    if (fo->watch != NULL && fo->watch->err != 0) { /* try again next time */
        redisFree(fo->watch);
        fo->watch = NULL;
    }
    if (fo->promoted_at != 0 && fo->up_at != 0) {
        ev_timer_stop(p->loop, t);
    } else if (now_ns() - fo->killed_at > (int64_t)PROMOTE_WAIT_MS * 1000000) {
        if (run.sentinel)
            parent_note(p, E_PROBLEM, "the sentinels named no new master %d ms after the kill",
                        PROMOTE_WAIT_MS);
        else
            parent_note(p, E_PROBLEM, "%s:%d was not seen serving slot %d %d ms after the kill",
                        fo->replica.host, fo->replica.port, fo->slot, PROMOTE_WAIT_MS);
        ev_timer_stop(p->loop, t);
    }
    if (!ev_is_active(t) && fo->watch != NULL) {
        redisFree(fo->watch);
        fo->watch = NULL;
    }
}

/* The lease of the killed hold has run out since the kill: by now it was
 * renewed at the promoted replica, or it ended (released, or lost). */
static void on_kill_check(struct ev_loop *loop, ev_timer *t, int revents) {
    struct parent *p = t->data;
    struct hold *h = killed_hold(p);
    (void)loop, (void)revents;

    flush_queue(p, 0); /* what happened up to REORDER_MS ago decides */
    if (h != NULL && h->end == 0 && p->fo.renewed_at == 0)
        parent_note(p, E_PROBLEM,
                    "w%d: no renewal since the kill %.1f s ago, longer than its %" PRId64
                    " ms lease, and no lost callback",
                    h->worker, since_kill(p, now_ns()), run.lease_ms);
}

/* ---- --redlock: servers killed ---- */

/* The servers [from, to) of the list, as "host:port (pid N) and ..." into
 * buf. */
static const char *server_list(const struct parent *p, int from, int to, char *buf, size_t cap) {
    size_t used = 0;
    int i;

    buf[0] = '\0';
    for (i = from; i < to && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%s:%d (pid %ld)",
                                 i == from     ? ""
                                 : i == to - 1 ? " and "
                                               : ", ",
                                 p->qk.server[i].host, p->qk.server[i].port, p->qk.server[i].pid);
    return buf;
}

/* Reads the pids of servers [from, to) (INFO server); 0 when scripts/demo
 * started every one, else -1 (said). */
static int check_servers(struct parent *p, int from, int to) {
    int i;

    for (i = from; i < to; i++) {
        struct node_info *s = &p->qk.server[i];
        redisContext *c = admin_connect(s->host, s->port);
        s->pid = 0;
        if (c != NULL) {
            s->pid = node_pid(c);
            redisFree(c);
        }
        if (!started_by_script("LEASH_DEMO_REDLOCK_PIDS", s->port, s->pid)) {
            parent_note(p, E_PROBLEM,
                        "refusing to kill %s:%d (pid %ld): LEASH_DEMO_REDLOCK_PIDS does not name "
                        "it as started by scripts/demo",
                        s->host, s->port, s->pid);
            return -1;
        }
    }
    return 0;
}

/* Whether server s holds hold h: its key names h's fence
 * ("<token>:<w>:<count>:<fence>"). 1 when it cannot be read: a server
 * that may hold it is killed last. */
static int holds_fence(const struct node_info *s, uint64_t fence) {
    redisContext *c = admin_connect(s->host, s->port);
    redisReply *r = c != NULL ? redisCommand(c, "GET %s", KEY_PREFIX LOCK_NAME) : NULL;
    unsigned long long f = 0;
    int holds = 1;

    if (r != NULL && r->type == REDIS_REPLY_NIL)
        holds = 0;
    else if (r != NULL && r->type == REDIS_REPLY_STRING)
        holds = sscanf(r->str, "%*[0-9a-f]:%*d:%*d:%llu", &f) == 1 && f == fence;
    if (r != NULL)
        freeReplyObject(r);
    if (c != NULL)
        redisFree(c);
    return holds;
}

/* A Redlock grant needs a majority, not every server: a waiter woken by
 * the release's first message can find the lock still held on a server
 * the release has not reached yet, and then holds on a bare majority
 * until its first renewal spreads it to the rest (docs/redlock.md). A
 * kill may come before that: the servers it holds on go last, so that the
 * first kill leaves the hold its majority, as the story says. */
static void order_by_hold(struct quorum_kills *qk, uint64_t fence) {
    struct node_info spare[LEASH_NODES_MAX], held[LEASH_NODES_MAX];
    int i, ns = 0, nh = 0;

    for (i = 0; i < qk->n; i++) {
        if (holds_fence(&qk->server[i], fence))
            held[nh++] = qk->server[i];
        else
            spare[ns++] = qk->server[i];
    }
    memcpy(qk->server, spare, (size_t)ns * sizeof(spare[0]));
    memcpy(qk->server + ns, held, (size_t)nh * sizeof(held[0]));
}

/* During hold h's job: the first time kills N - M servers (a majority is
 * left; N >= 3, so at least one), those h does not hold on first; the
 * second time one more (none is left). Every one must be a server that
 * scripts/demo started, or none is killed. */
static void kill_servers(struct parent *p, struct hold *h) {
    struct quorum_kills *qk = &p->qk;
    int k = qk->phase, from = k == 0 ? 0 : qk->count[0];
    int to = k == 0 ? qk->n - qk->majority : from + 1, up = qk->n - to, i;
    char list[160];

    qk->refused = 1; /* until the signals went */
    if (k == 0)
        order_by_hold(qk, h->fence);
    if (check_servers(p, from, to) != 0)
        return;
    /* The note first: its time stamp comes before anything the kill causes. */
    parent_note(p, E_NOTE, "SIGKILL %s: %d of %d servers left, %s; w%d holds fence %" PRIu64,
                server_list(p, from, to, list, sizeof(list)), up, qk->n,
                up >= qk->majority ? "still a majority" : "no majority", h->worker, h->fence);
    qk->at[k] = now_ns();
    qk->hold[k] = (int)(h - p->holds);
    for (i = from; i < to; i++) {
        if (kill((pid_t)qk->server[i].pid, SIGKILL) != 0) {
            parent_note(p, E_PROBLEM, "SIGKILL pid %ld: %s", qk->server[i].pid, strerror(errno));
            to = i;
            break;
        }
    }
    qk->count[k] = to - from;
    if (to - from == 0) {
        qk->at[k] = 0;
        return;
    }
    qk->refused = 0;
    qk->phase++;
    if (k == 0) {
        p->freeze_hold = p->nholds + 1; /* the next hold's job: one more */
        return;
    }
    ev_timer_start(p->loop, &p->no_majority);
}

/* NO_MAJORITY_MS after the last kill: the holder's lost callback has come
 * (the summary tells whether in time), nobody got the lock, and the
 * waiters still wait; the run ends. */
static void on_no_majority(struct ev_loop *loop, ev_timer *t, int revents) {
    struct parent *p = t->data;
    struct hold *h = quorum_hold(p, 1);
    int up = servers_up_at(p, now_ns());
    (void)loop, (void)revents;

    flush_queue(p, 0); /* what happened up to REORDER_MS ago decides */
    if (h != NULL && h->end == 0)
        parent_note(p, E_PROBLEM,
                    "w%d: no majority since the kill %.1f s ago, longer than its %" PRId64
                    " ms lease, and no lost callback",
                    h->worker, (double)(now_ns() - p->qk.at[1]) / 1e9, run.lease_ms);
    parent_note(p, E_WAITERS,
                "%.1f s since the kill, %d of %d servers run: nobody can get the lock",
                (double)(now_ns() - p->qk.at[1]) / 1e9, up, p->qk.n);
    begin_stop(p, "no majority");
}

static void on_freeze(struct ev_loop *loop, ev_timer *t, int revents) {
    struct parent *p = t->data;
    struct hold *h = &p->holds[p->freeze_hold - 1];
    (void)loop, (void)revents;

    if (p->stopping)
        return;
    if (h->end != 0) { /* its job ended already: freeze the next holder */
        p->freeze_hold = p->nholds + 1;
        return;
    }
    if (run.cluster) {
        if (p->fo.allowed)
            kill_master(p, h);
        return;
    }
    if (run.redlock) {
        if (p->qk.allowed && !p->qk.refused && p->qk.phase < 2)
            kill_servers(p, h);
        return;
    }
    /* The note first: its time stamp comes before anything the signal causes. */
    parent_note(p, E_NOTE, "SIGSTOP w%d (pid %d): frozen mid-job, holding fence %" PRIu64,
                h->worker, (int)p->pid[h->worker], h->fence);
    p->frozen_at = now_ns();
    if (kill(p->pid[h->worker], SIGSTOP) != 0) {
        parent_note(p, E_PROBLEM, "SIGSTOP w%d: %s", h->worker, strerror(errno));
        return;
    }
    p->frozen = h->worker;
    p->is_frozen = 1;
    p->frozen_hold = p->freeze_hold - 1;
    ev_timer_start(p->loop, &p->thaw);
}

static void on_thaw(struct ev_loop *loop, ev_timer *t, int revents) {
    struct parent *p = t->data;
    (void)loop, (void)revents;

    if (thaw(p))
        ev_timer_start(p->loop, &p->lost_check);
}

static void on_lost_check(struct ev_loop *loop, ev_timer *t, int revents) {
    struct parent *p = t->data;
    (void)loop, (void)revents;
    flush_queue(p, 0); /* what happened up to REORDER_MS ago decides */
    if (!p->frozen_lost)
        parent_note(p, E_PROBLEM,
                    "w%d resumed %d ms ago, its lease is long gone, and its lost callback has "
                    "not fired",
                    p->frozen, LOST_WAIT_MS);
}

static void on_limit(struct ev_loop *loop, ev_timer *t, int revents) {
    (void)loop, (void)revents;
    begin_stop(t->data, "time limit reached");
}

static void on_grace(struct ev_loop *loop, ev_timer *t, int revents) {
    struct parent *p = t->data;
    int i;
    (void)loop, (void)revents;

    parent_note(p, E_PROBLEM, "workers still running %d ms after the stop: killing them", GRACE_MS);
    for (i = 1; i <= WORKERS; i++) {
        if (p->pid[i] > 0 && !p->exited[i]) {
            kill(p->pid[i], SIGCONT);
            kill(p->pid[i], SIGKILL);
        }
    }
}

static void on_signal(struct ev_loop *loop, ev_signal *s, int revents) {
    struct parent *p = s->data;
    int i;
    (void)loop, (void)revents;

    if (!p->interrupted) {
        p->interrupted = 1;
        begin_stop(p, "interrupted");
        return;
    }
    for (i = 1; i <= WORKERS; i++) /* a second time: no more waiting */
        if (p->pid[i] > 0 && !p->exited[i]) {
            kill(p->pid[i], SIGCONT);
            kill(p->pid[i], SIGKILL);
        }
}

/* ------------------------------------------------------------------ */
/* Before the run: can we talk to Redis at all?                         */
/* ------------------------------------------------------------------ */

struct probe {
    struct ev_loop *loop;
    int status;
    ev_timer guard;
    char last_log[200]; /* the library's last warning: why it failed */
};

static void probe_log(int level, const char *msg, void *arg) {
    struct probe *pr = arg;
    (void)level;
    snprintf(pr->last_log, sizeof(pr->last_log), "%s", msg);
}

static void probe_released(leash_lock *l, int status, void *arg) {
    struct probe *pr = arg;
    (void)l, (void)status;
    ev_break(pr->loop, EVBREAK_ALL);
}

static void probe_acquired(leash_lock *l, int status, void *arg) {
    struct probe *pr = arg;
    pr->status = status;
    if (status == LEASH_OK && leash_release(l, probe_released, pr) == LEASH_OK)
        return;
    ev_break(pr->loop, EVBREAK_ALL);
}

static void probe_guard(struct ev_loop *loop, ev_timer *t, int revents) {
    struct probe *pr = t->data;
    (void)revents;
    fprintf(stderr, "leash-demo: BUG? a try-once acquire got no callback in %.0f s\n", t->repeat);
    pr->status = LEASH_ECONN;
    ev_break(loop, EVBREAK_ALL);
}

/* A try-once acquire (and release) of a lock of its own: 0 when Redis
 * answered, else -1 after printing why. */
static int probe_redis(const struct target *t) {
    struct probe pr;
    leash_options opts;
    leash_client *c = NULL;
    leash_lock *l;
    int rc;

    memset(&pr, 0, sizeof(pr));
    pr.status = LEASH_ECONN;
    pr.loop = ev_loop_new(EVFLAG_AUTO);
    if (pr.loop == NULL) {
        fprintf(stderr, "leash-demo: cannot create an event loop\n");
        return -1;
    }
    target_options(t, &opts);
    opts.connect_timeout_ms = 1500;
    opts.command_timeout_ms = 1500;
    opts.log_cb = probe_log;
    opts.log_arg = &pr;
    rc = leash_client_new(&c, &opts);
    if (rc == LEASH_OK && (rc = leash_libev_attach(pr.loop, c)) == LEASH_OK) {
        l = leash_lock_new(c, "probe");
        rc = l != NULL ? leash_acquire(l, 0, probe_acquired, &pr) : LEASH_ENOMEM;
    }
    if (rc == LEASH_OK) {
        ev_timer_init(&pr.guard, probe_guard, 5., 5.);
        pr.guard.data = &pr;
        ev_timer_start(pr.loop, &pr.guard);
        ev_run(pr.loop, 0);
        ev_timer_stop(pr.loop, &pr.guard);
        rc = pr.status;
    }
    leash_client_free(c);
    ev_loop_destroy(pr.loop);

    if (rc == LEASH_OK || rc == LEASH_EBUSY) /* EBUSY: someone holds it, yet Redis answered */
        return 0;
    fprintf(stderr, "leash-demo: cannot use Redis at %s: %s\n", t->shown, leash_strerror(rc));
    if (pr.last_log[0] != '\0')
        fprintf(stderr, "  (last message from leash: %s)\n", pr.last_log);
    if (rc == LEASH_ECONN && t->topology == LEASH_TOPOLOGY_CLUSTER)
        fprintf(stderr, "  Is a Redis Cluster running there? scripts/demo --cluster starts one of "
                        "its own.\n");
    else if (rc == LEASH_ECONN && t->topology == LEASH_TOPOLOGY_SENTINEL)
        fprintf(stderr, "  Do the sentinels run, and know that master? scripts/demo --sentinel "
                        "starts a master, two replicas and three sentinels of its own.\n");
    else if (rc == LEASH_ECONN && t->topology == LEASH_TOPOLOGY_REDLOCK)
        fprintf(stderr, "  Do a majority of those redis-servers run? scripts/demo --redlock starts "
                        "five of its own.\n");
    else if (rc == LEASH_ECONN)
        fprintf(stderr, "  Is a redis-server running there? Without REDIS_URL, scripts/demo "
                        "starts one of its own.\n");
    else if (rc == LEASH_EAUTH)
        fprintf(stderr, "  Check the user, password and database number in the URL.\n");
    return -1;
}

/* ------------------------------------------------------------------ */
/* The summary                                                         */
/* ------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* --cluster: what the failover did, and what the holder whose master was
 * killed saw; returns the number of problems found. */
static int summarize_failover(struct parent *p) {
    const struct failover *fo = &p->fo;
    const struct hold *h = killed_hold(p);
    int problems = 0;

    if (!fo->allowed) {
        printf("  %-15s none: without %s no server is killed\n", "failover",
               run.sentinel ? "LEASH_DEMO_SENTINEL_PIDS" : "LEASH_DEMO_CLUSTER_PIDS");
        return 0;
    }
    if (h == NULL && fo->refused) {
        printf("  %-15s none: the kill did not happen (above)\n", "failover");
        return 0;
    }
    if (h == NULL) {
        if (!p->interrupted) {
            printf("  !! no master was killed: the run ended too early\n");
            problems++;
        }
        return problems;
    }
    printf("  %-15s %s:%d (pid %ld) killed %.2f s into hold %d; ", "failover", fo->master.host,
           fo->master.port, fo->master.pid, (double)(fo->killed_at - h->granted) / 1e9,
           fo->hold + 1);
    if (fo->promoted_at != 0) {
        printf("%s:%d promoted %.2f s later", fo->replica.host, fo->replica.port,
               since_kill(p, fo->promoted_at));
        if (fo->fail_at != 0)
            printf(" (%s after %.2f s)", run.sentinel ? "+odown" : "FAIL",
                   since_kill(p, fo->fail_at));
        printf("\n");
    } else {
        printf("its replica was not seen promoted\n");
        if (!p->interrupted) {
            printf("  !! %s:%d did not take over\n", fo->replica.host, fo->replica.port);
            problems++;
        }
    }

    printf("  %-15s w%d ", "the holder", h->worker);
    if (h->end == E_LOST) {
        printf("LOST the lock (%s) %.2f s after the kill, at write %d/%d",
               leash_lost_reason_name(h->reason), since_kill(p, h->ended), h->steps, run.steps);
        if (fo->renewed_at != 0)
            printf(", though a renewal got through %.2f s after the kill",
                   since_kill(p, fo->renewed_at));
        printf("\n");
    } else if (fo->renewed_at != 0 || (h->end == E_RELEASED && h->status == LEASH_OK)) {
        printf("KEPT the lock across the failover: ");
        if (fo->renewed_at != 0)
            printf("renewed at the promoted master %.2f s after the kill",
                   since_kill(p, fo->renewed_at));
        else
            printf("no renewal got through before its job ended");
        if (h->end == E_RELEASED)
            printf(", released there: %s",
                   h->status == LEASH_OK ? "OK" : leash_status_name(h->status));
        printf("\n");
    } else if (h->end == E_RELEASED) {
        printf("stopped at %d/%d, released: %s\n", h->steps, run.steps, leash_strerror(h->status));
    } else {
        printf("still held at the end, no renewal since the kill\n");
        if (!p->interrupted) {
            printf("  !! its hold neither renewed nor ended\n");
            problems++;
        }
    }

    if (p->retries > 0 && run.redlock)
        printf("  %-15s %d waiter%s saw acquires end LEASH_ECONN with no majority up, and waited "
               "again\n",
               "waits ended", p->retries, p->retries == 1 ? "" : "s");
    else if (p->retries > 0)
        printf("  %-15s %d acquire%s ended LEASH_ECONN after the kill (granted only after their "
               "lease ran out, and given back) and waited again\n",
               "waits ended", p->retries, p->retries == 1 ? "" : "s");
    if (fo->next_grant != 0) {
        printf("  %-15s w%d, fence %" PRIu64 " %s w%d's %" PRIu64 ", from the promoted master "
               "%.2f s after the kill\n",
               "next holder", fo->next_worker, fo->next_fence,
               fo->next_fence > h->fence ? ">" : "NOT above", h->worker, h->fence,
               since_kill(p, fo->next_grant));
    } else if (!p->interrupted) {
        printf("  !! nobody got the lock after the kill\n");
        problems++;
    }
    return problems;
}

/* --redlock: what the kills did to the holders and the waiters; returns
 * the number of problems found. */
static int summarize_redlock(struct parent *p) {
    const struct quorum_kills *qk = &p->qk;
    const struct hold *h0 = quorum_hold(p, 0), *h1 = quorum_hold(p, 1);
    int problems = 0;
    char list[160], what[32];

    printf("  %-15s %d, a majority is %d\n", "servers", qk->n, qk->majority);
    if (!qk->allowed) {
        printf("  %-15s none: %s\n", "kills",
               qk->n < 3 ? "none can die with a majority left"
                         : "without LEASH_DEMO_REDLOCK_PIDS no server is killed");
        return 0;
    }
    if (h0 == NULL) {
        if (qk->refused) {
            printf("  %-15s none: the kill did not happen (above)\n", "kills");
        } else if (!p->interrupted) {
            printf("  !! no server was killed: the run ended too early\n");
            problems++;
        }
        return problems;
    }

    snprintf(what, sizeof(what), "%d killed", qk->count[0]);
    printf("  %-15s %s, %.2f s into hold %d\n", what,
           server_list(p, 0, qk->count[0], list, sizeof(list)),
           (double)(qk->at[0] - h0->granted) / 1e9, qk->hold[0] + 1);
    printf("  %-15s w%d ", "the holder", h0->worker);
    if (h0->end == E_RELEASED && h0->status == LEASH_OK && qk->renewed_at != 0) {
        printf("KEPT the lock: renewed %d times by the %d left (the first %.2f s after the kill), "
               "released at %d/%d\n",
               qk->renewals, qk->n - qk->count[0], (double)(qk->renewed_at - qk->at[0]) / 1e9,
               h0->steps, run.steps);
    } else if (h0->end == E_LOST) {
        printf("LOST the lock (%s) %.2f s after the kill, with a majority left\n",
               leash_lost_reason_name(h0->reason), (double)(h0->ended - qk->at[0]) / 1e9);
        problems++;
    } else if (!p->interrupted || h0->end != 0) {
        printf("%s, %d renewals since the kill\n",
               h0->end == 0 ? "still held at the end" : leash_strerror(h0->status), qk->renewals);
        problems += !p->interrupted;
    } else {
        printf("interrupted\n");
    }
    if (qk->down_grant != 0) {
        printf("  %-15s w%d, fence %" PRIu64 " %s w%d's %" PRIu64 ", granted by the %d left\n",
               "next holder", qk->down_worker, qk->down_fence,
               qk->down_fence > h0->fence ? ">" : "NOT above", h0->worker, h0->fence,
               qk->n - qk->count[0]);
    } else if (!p->interrupted) {
        printf("  !! nobody got the lock while %d of %d were down\n", qk->count[0], qk->n);
        problems++;
    }

    if (h1 == NULL) {
        if (!p->interrupted && !qk->refused) {
            printf("  !! no more server was killed: the run ended too early\n");
            problems++;
        }
        return problems;
    }
    printf("  %-15s %s, %.2f s into hold %d: %d of %d left, no majority\n", "1 more killed",
           server_list(p, qk->count[0], qk->count[0] + qk->count[1], list, sizeof(list)),
           (double)(qk->at[1] - h1->granted) / 1e9, qk->hold[1] + 1, servers_up_at(p, qk->at[1]),
           qk->n);
    printf("  %-15s w%d ", "the holder", h1->worker);
    if (h1->end == E_LOST) {
        int64_t late = h1->ended - h1->valid_until;
        printf("LOST the lock (%s) %.2f s after the kill, at write %d/%d; its last write %.0f ms "
               "before its validity ran out, the lost callback %" PRId64 " ms after\n",
               leash_lost_reason_name(h1->reason), (double)(h1->ended - qk->at[1]) / 1e9, h1->steps,
               run.steps, (double)(h1->valid_until - h1->last_write) / 1e6,
               (late + 500000) / 1000000);
        if (h1->reason != LEASH_LOST_UNREACHABLE) {
            printf("  !! lost %s, not unreachable\n", leash_lost_reason_name(h1->reason));
            problems++;
        }
        if (late > (int64_t)REORDER_MS * 1000000) {
            printf("  !! the lost callback came %.0f ms after the end of the validity\n",
                   (double)late / 1e6);
            problems++;
        }
    } else {
        printf("%s\n", h1->end == 0 ? "still held at the end" : "released, never lost");
        if (!p->interrupted) {
            printf("  !! its hold was not lost with no majority\n");
            problems++;
        }
    }
    return problems;
}

/* Prints the summary; returns the number of problems found in it. */
static int summarize(struct parent *p, int64_t end) {
    int i, j, done = 0, lost = 0, cut = 0, overlaps = 0, problems = 0;
    uint64_t renewals = 0;

    for (i = 0; i < p->nholds; i++) {
        const struct hold *h = &p->holds[i];
        renewals += h->renewals;
        if (h->end == E_LOST)
            lost++;
        else if (h->steps == run.steps)
            done++;
        else
            cut++;
    }

    printf("\nsummary\n");
    printf("  %-15s %d: %d done", "jobs run", p->nholds, done);
    if (lost > 0)
        printf(", %d stopped by the lost callback", lost);
    if (cut > 0)
        printf(", %d stopped by the end of the run", cut);
    printf("\n");

    if (servers_die())
        printf("  %-15s %d: %d woken by a release, %d after a lost hold\n", "handoffs", p->handoffs,
               p->nwake, p->after_lost);
    else
        printf("  %-15s %d: %d woken by a release, %d takeover%s from the frozen holder\n",
               "handoffs", p->handoffs, p->nwake, p->takeovers, p->takeovers == 1 ? "" : "s");
    if (p->nwake > 0) {
        qsort(p->wake_ms, (size_t)p->nwake, sizeof(p->wake_ms[0]), cmp_double);
        printf("  %-15s %+.2f to %+.2f ms from the release callback to the waiter's grant\n",
               "wake latency", p->wake_ms[0], p->wake_ms[p->nwake - 1]);
    }
    printf("  %-15s %" PRIu64 " (lease %" PRId64 " ms, renewed every %d ms)\n", "renewals",
           renewals, run.lease_ms, RENEW_MS);

    printf("  %-15s %d", "losts", lost);
    for (i = 0, j = 0; i < p->nholds; i++) {
        const struct hold *h = &p->holds[i];
        if (h->end != E_LOST)
            continue;
        printf("%s w%d %s (fence %" PRIu64, j++ ? "," : ":", h->worker,
               leash_lost_reason_name(h->reason), h->fence);
        if (p->frozen == h->worker && i == p->frozen_hold)
            printf(", after a %.2f s freeze", (double)(p->thawed_at - p->frozen_at) / 1e9);
        if (h == killed_hold(p))
            printf(", its master killed");
        if (h == quorum_hold(p, 1))
            printf(", no majority left");
        printf(")");
    }
    printf("\n");

    printf("  %-15s", "fences in order");
    for (i = 0; i < p->nholds; i++)
        printf(" %" PRIu64, p->holds[i].fence);
    for (i = 1; i < p->nholds && p->holds[i].fence > p->holds[i - 1].fence; i++) {
    }
    printf(i >= p->nholds ? " (each hold a higher one)\n" : " (NOT increasing)\n");

    printf("  %-15s %" PRIu64 " writes accepted, %" PRIu64 " stale writes rejected\n", "storage",
           (uint64_t)atomic_load(&p->shm->accepted), (uint64_t)atomic_load(&p->shm->rejected));

    /* Two holds whose writers both believed their lease valid at once would
     * break the lock's promise (the storage's fence check is the backstop). */
    for (i = 0; i < p->nholds; i++) {
        for (j = i + 1; j < p->nholds; j++) {
            const struct hold *a = &p->holds[i], *b = &p->holds[j];
            int64_t from = a->first_write > b->first_write ? a->first_write : b->first_write;
            int64_t to = a->valid_until < b->valid_until ? a->valid_until : b->valid_until;
            if (a->writes == 0 || b->writes == 0 || from >= to)
                continue;
            overlaps++;
            printf("  !! fences %" PRIu64 " (w%d) and %" PRIu64 " (w%d) wrote while both were "
                   "valid, for %.1f ms\n",
                   a->fence, a->worker, b->fence, b->worker, (double)(to - from) / 1e6);
        }
    }
    printf("  %-15s %s\n", "overlap",
           overlaps ? "FOUND (above)" : "none: no write while another holder's lease was valid");
    problems += overlaps;

    if (run.cluster)
        problems += summarize_failover(p);
    else if (run.redlock)
        problems += summarize_redlock(p);
    else if (!p->interrupted) {
        if (p->frozen == 0) {
            printf("  !! no holder was frozen: the run ended too early\n");
            problems++;
        } else if (!p->taken_over) {
            printf("  !! nobody took over while w%d was frozen\n", p->frozen);
            problems++;
        }
    }
    printf("  %-15s %.1f s\n", "run time", (double)(end - p->t0) / 1e9);
    return problems;
}

/* ------------------------------------------------------------------ */
/* main                                                                */
/* ------------------------------------------------------------------ */

static void usage(void) {
    fprintf(stderr,
            "usage: leash-demo REDIS_URL\n"
            "       leash-demo --cluster HOST:PORT[,HOST:PORT...] [--long-lease]\n"
            "       leash-demo --redlock HOST:PORT[,HOST:PORT...]\n"
            "       leash-demo --sentinel redis+sentinel://HOST:PORT[,HOST:PORT...]/MASTER "
            "[--long-lease]\n"
            "  REDIS_URL: redis://[[user]:password@]host[:port][/db] or "
            "unix:///path/to/socket[?db=N]\n"
            "  e.g. leash-demo redis://127.0.0.1:6379 (scripts/demo starts a server and runs "
            "this)\n"
            "  --cluster: the seed nodes of a Redis Cluster (scripts/demo --cluster starts one and "
            "runs this)\n"
            "  --long-lease: a %d ms lease instead of %d ms, longer than a failover\n"
            "  --redlock: independent servers, a majority holds the lock (scripts/demo --redlock "
            "starts 5 and runs this)\n"
            "  --sentinel: the master that Redis Sentinel names (scripts/demo --sentinel starts "
            "a master, 2 replicas and 3 sentinels and runs this)\n",
            LONG_LEASE_MS, LEASE_MS);
}

/* --cluster and --sentinel: a run with a failover, and its arguments
 * after the nodes (--long-lease); -1 (said) when one is not right. */
static int failover_run(int argc, char **argv) {
    int i;

    run.cluster = 1;
    run.steps = CLUSTER_STEPS;
    run.jobs_wanted = CLUSTER_JOBS_WANTED;
    run.run_limit_ms = CLUSTER_RUN_LIMIT_MS;
    for (i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--long-lease") != 0) {
            fprintf(stderr, "leash-demo: unknown argument '%s'\n", argv[i]);
            return -1;
        }
        run.lease_ms = LONG_LEASE_MS;
    }
    return 0;
}

/* The command line into *t and run; -1 (said) when it is not right. */
static int parse_args(int argc, char **argv, struct target *t) {
    char err[LEASH_URL_ERR_MAX];
    const char *why = NULL;
    int i;

    if (argc >= 3 && strcmp(argv[1], "--sentinel") == 0) {
        leash_sentinel_url su;
        if (leash_sentinel_url_parse(argv[2], &su, err, sizeof(err)) != LEASH_OK) {
            fprintf(stderr, "leash-demo: %s\n", err);
            return -1;
        }
        memset(t, 0, sizeof(*t));
        t->topology = LEASH_TOPOLOGY_SENTINEL;
        t->url = su.data;
        snprintf(t->master, sizeof(t->master), "%s", su.master);
        snprintf(t->sentinel_user, sizeof(t->sentinel_user), "%s", su.sentinel_username);
        snprintf(t->sentinel_password, sizeof(t->sentinel_password), "%s", su.sentinel_password);
        for (i = 0; i < su.nsentinels; i++) {
            snprintf(t->node_text[i], sizeof(t->node_text[i]), "%s", su.sentinels[i]);
            t->nodes[i] = t->node_text[i];
        }
        t->nnodes = su.nsentinels;
        snprintf(t->shown, sizeof(t->shown), "the master %.100s of %d sentinels (%.300s...)",
                 su.master, su.nsentinels, su.sentinels[0]);
        memset(&su, 0, sizeof(su));
        run.sentinel = 1;
        return failover_run(argc, argv);
    }
    if (argc == 2 && (strcmp(argv[1], "--cluster") == 0 || strcmp(argv[1], "--redlock") == 0 ||
                      strcmp(argv[1], "--sentinel") == 0)) {
        fprintf(stderr, "leash-demo: %s takes the nodes, HOST:PORT[,HOST:PORT...]\n", argv[1]);
        return -1;
    }
    if (argc >= 3 && strcmp(argv[1], "--redlock") == 0) {
        if (parse_nodes(argv[2], LEASH_TOPOLOGY_REDLOCK, t, &why) != 0) {
            fprintf(stderr, "leash-demo: bad server list '%s': %s\n", argv[2], why);
            return -1;
        }
        if (argc > 3) {
            fprintf(stderr, "leash-demo: unknown argument '%s'\n", argv[3]);
            return -1;
        }
        run.redlock = 1;
        run.jobs_wanted = REDLOCK_JOBS_WANTED;
        run.run_limit_ms = REDLOCK_RUN_LIMIT_MS;
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "--cluster") == 0) {
        if (parse_nodes(argv[2], LEASH_TOPOLOGY_CLUSTER, t, &why) != 0) {
            fprintf(stderr, "leash-demo: bad node list '%s': %s\n", argv[2], why);
            return -1;
        }
        return failover_run(argc, argv);
    }
    if (argc != 2)
        return -1;
    /* The message, not argv[1]: that may hold the password. */
    if (leash_url_parse(argv[1], &t->url, err, sizeof(err)) != LEASH_OK) {
        fprintf(stderr, "leash-demo: %s\n", err);
        return -1;
    }
    t->topology = LEASH_TOPOLOGY_SINGLE;
    leash_url_format(&t->url, t->shown, sizeof(t->shown));
    return 0;
}

/* --redlock: the servers from the target; kills only of servers that
 * scripts/demo started, and only when a majority can be left. */
static void quorum_kills_init(struct quorum_kills *qk, const struct target *t) {
    int i;

    qk->n = t->nnodes;
    qk->majority = t->nnodes / 2 + 1;
    for (i = 0; i < t->nnodes; i++)
        if (split_endpoint(t->nodes[i], qk->server[i].host, sizeof(qk->server[i].host),
                           &qk->server[i].port) != 0)
            qk->server[i].port = 0;
    qk->allowed = getenv("LEASH_DEMO_REDLOCK_PIDS") != NULL && qk->n >= 3;
}

static void print_redlock_plan(const struct quorum_kills *qk) {
    printf("  a hold needs a majority, %d of the %d servers;\n", qk->majority, qk->n);
    if (!qk->allowed) {
        printf("  no server is killed: %s.\n\n",
               qk->n < 3 ? "none can die with a majority left"
                         : "LEASH_DEMO_REDLOCK_PIDS, which names the servers that\n"
                           "  scripts/demo --redlock started, is not set");
        return;
    }
    printf("  %d ms into hold %d the parent kills (SIGKILL) %d of them (any the hold does not\n"
           "  need first), %d ms into the next hold one more; %.1f s later, with no majority,\n"
           "  the run ends.\n\n",
           KILL_AFTER_MS, KILL_HOLD, qk->n - qk->majority, LAST_KILL_AFTER_MS,
           NO_MAJORITY_MS / 1000.);
}

static void parent_timer(struct parent *p, ev_timer *t,
                         void (*cb)(struct ev_loop *, ev_timer *, int), double after) {
    ev_timer_init(t, cb, after, 0.);
    t->data = p;
}

int main(int argc, char **argv) {
    static struct parent par; /* zeroed; large */
    static struct target target;
    struct parent *p = &par;
    int events[2], stops[WORKERS + 1][2], i, forked, status, problems;
    int64_t end;

    if (parse_args(argc, argv, &target) != 0) {
        usage();
        return 2;
    }
    signal(SIGPIPE, SIG_IGN); /* a closed socket or pipe is an error, not a signal */
    if (probe_redis(&target) != 0)
        return 1;

    p->shm = mmap(NULL, sizeof(*p->shm), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p->shm == MAP_FAILED) {
        perror("leash-demo: mmap");
        return 1;
    }
    memset(p->shm, 0, sizeof(*p->shm));
    if (pipe(events) != 0) {
        perror("leash-demo: pipe");
        return 1;
    }
    for (i = 1; i <= WORKERS; i++) {
        if (pipe(stops[i]) != 0) {
            perror("leash-demo: pipe");
            return 1;
        }
        p->stop_fd[i] = stops[i][1];
    }
    p->events_fd = events[0];
    p->freeze_hold = run.redlock ? KILL_HOLD : FREEZE_HOLD;
    p->target = &target;
    p->fo.allowed =
        getenv(run.sentinel ? "LEASH_DEMO_SENTINEL_PIDS" : "LEASH_DEMO_CLUSTER_PIDS") != NULL;
    if (run.redlock)
        quorum_kills_init(&p->qk, &target);

    printf("leash-demo: %d workers take turns on the lock \"%s\" %s %s\n", WORKERS, LOCK_NAME,
           servers_die() ? "on" : "at", target.shown);
    printf("  a job is %d writes %d ms apart; the watchdog renews a %" PRId64
           " ms lease every %d ms;\n",
           run.steps, STEP_MS, run.lease_ms, RENEW_MS);
    printf("  the storage refuses a write whose fence is below the highest it has seen;\n");
    if (run.redlock)
        print_redlock_plan(&p->qk);
    else if (!run.cluster)
        printf("  during hold %d the parent freezes the holder (SIGSTOP) for %.1f s.\n\n",
               FREEZE_HOLD, FREEZE_MS / 1000.);
    else if (p->fo.allowed && run.sentinel)
        printf("  %d ms into hold %d the parent kills (SIGKILL) the master the sentinels name,\n"
               "  and the sentinels promote a replica (a %s lease than the failover takes).\n\n",
               KILL_AFTER_MS, FREEZE_HOLD, run.lease_ms == LONG_LEASE_MS ? "longer" : "shorter");
    else if (p->fo.allowed)
        printf("  %d ms into hold %d the parent kills (SIGKILL) the master of the lock's slot,\n"
               "  and the cluster promotes its replica (a %s lease than the failover takes).\n\n",
               KILL_AFTER_MS, FREEZE_HOLD, run.lease_ms == LONG_LEASE_MS ? "longer" : "shorter");
    else
        printf("  no server is killed: %s, which names the servers that\n"
               "  scripts/demo %s started, is not set.\n\n",
               run.sentinel ? "LEASH_DEMO_SENTINEL_PIDS" : "LEASH_DEMO_CLUSTER_PIDS",
               run.sentinel ? "--sentinel" : "--cluster");
    printf("  time  who     what\n");
    fflush(stdout);
    fflush(stderr);

    p->t0 = now_ns();
    for (forked = 0, i = 1; i <= WORKERS; i++, forked++) {
        pid_t pid = fork();
        if (pid == 0) {
            int j;
            signal(SIGINT, SIG_IGN); /* Ctrl-C goes to the parent, which stops us in order */
            close(events[0]);
            for (j = 1; j <= WORKERS; j++) {
                close(stops[j][1]);
                if (j != i)
                    close(stops[j][0]);
            }
            exit(worker_run(i, &target, events[1], stops[i][0], p->shm));
        }
        if (pid < 0) {
            perror("leash-demo: fork");
            break;
        }
        p->pid[i] = pid;
    }
    close(events[1]);
    for (i = 1; i <= WORKERS; i++)
        close(stops[i][0]);
    fcntl(p->events_fd, F_SETFL, fcntl(p->events_fd, F_GETFL) | O_NONBLOCK);

    p->loop = ev_loop_new(EVFLAG_AUTO);
    if (p->loop == NULL) {
        fprintf(stderr, "leash-demo: cannot create an event loop\n");
        for (i = 1; i <= WORKERS; i++)
            close_stop(p, i);
        while (wait(NULL) > 0) {
        }
        return 1;
    }
    ev_io_init(&p->events, on_events, p->events_fd, EV_READ);
    p->events.data = p;
    ev_io_start(p->loop, &p->events);
    parent_timer(p, &p->flush, on_flush, 0.);
    parent_timer(p, &p->freeze, on_freeze, 0.);
    parent_timer(p, &p->thaw, on_thaw, FREEZE_MS / 1000.);
    parent_timer(p, &p->lost_check, on_lost_check, LOST_WAIT_MS / 1000.);
    parent_timer(p, &p->limit, on_limit,
                 (double)(p->t0 + (int64_t)run.run_limit_ms * 1000000 - now_ns()) / 1e9);
    parent_timer(p, &p->grace, on_grace, GRACE_MS / 1000.);
    parent_timer(p, &p->watch, on_watch, WATCH_MS / 1000.);
    p->watch.repeat = WATCH_MS / 1000.;
    parent_timer(p, &p->kill_check, on_kill_check, 0.);
    parent_timer(p, &p->no_majority, on_no_majority, NO_MAJORITY_MS / 1000.);
    ev_timer_start(p->loop, &p->limit);
    ev_signal_init(&p->sigint, on_signal, SIGINT);
    p->sigint.data = p;
    ev_signal_start(p->loop, &p->sigint);
    ev_signal_init(&p->sigterm, on_signal, SIGTERM);
    p->sigterm.data = p;
    ev_signal_start(p->loop, &p->sigterm);
    if (forked < WORKERS) {
        parent_note(p, E_PROBLEM, "only %d of %d workers started", forked, WORKERS);
        begin_stop(p, "fork failed");
    }

    ev_run(p->loop, 0);
    end = now_ns();
    ev_loop_destroy(p->loop);
    close(p->events_fd);
    for (i = 1; i <= WORKERS; i++)
        close_stop(p, i);

    problems = p->problems;
    for (i = 1; i <= WORKERS; i++) {
        if (p->pid[i] <= 0 || waitpid(p->pid[i], &status, 0) != p->pid[i])
            continue;
        if (WIFSIGNALED(status)) {
            printf("!! w%d was killed by signal %d\n", i, WTERMSIG(status));
            problems++;
        } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0 && p->exited[i] == 0) {
            printf("!! w%d exited with status %d\n", i, WEXITSTATUS(status));
            problems++;
        }
    }
    problems += summarize(p, end);
    munmap(p->shm, sizeof(*p->shm));

    if (p->interrupted) {
        printf("result: interrupted\n");
        return 130;
    }
    if (problems > 0) {
        printf("result: FAILED, %d problem%s (marked !!)\n", problems, problems > 1 ? "s" : "");
        return 1;
    }
    printf("result: OK\n");
    return 0;
}
