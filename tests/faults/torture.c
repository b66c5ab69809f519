/* SPDX-License-Identifier: MIT */
/*
 * torture: worker processes with many lock handles contend for a few lock
 * names through the fault proxy, with short leases and the watchdog on,
 * while a schedule of faults fires. Afterwards the supervisor checks the
 * guarantees of DESIGN.md section 1 on what the workers recorded.
 *
 *   torture --quick                  about 45 s: what ctest runs
 *   torture --minutes N              N minutes of faults (soak, by hand)
 *   torture --procs 16 --handles 64 --names 16   the big mode
 *   torture --seed S                 replay a schedule
 *   torture --cluster [--quick | --minutes N] [--seed S]
 *                                    the same on a Redis Cluster (below)
 *   torture --redlock [--quick | --minutes N] [--seed S]
 *   torture --sentinel [--quick | --minutes N] [--seed S]
 *                                    the same on Redlock's five servers
 *   torture --fair | --rw | --semaphore N [--seconds S] ...
 *                                    the same with the lock family (below)
 *   torture --multi [--cluster | --redlock] ...
 *                                    the same with multi-locks (below)
 *   torture --lab [--redlock | --sentinel] [--tls] [--only FAULT]
 *                                    in the network lab (below)
 *   torture --lab --cluster [--tls] [--only FAULT]
 *                                    a Redis Cluster in the lab
 *                                    (tests/faults/lab_cluster.c)
 *   torture ... --pubsub-off         every waiter polls (LEASH_PUBSUB_OFF:
 *                                    docs/how-it-works.md "Waiting without pub/sub"),
 *                                    under the same checks
 *   torture --lab --replicas [--tls] one server with two replicas and
 *                                    wait_replicas (lab_replicas.c)
 *   torture --tls ...                one server over TLS through the proxy
 *                                    (below)
 *
 * What the workers record, in a shared log (an mmap'd file):
 *   UNIT  a unit of "work" of a hold: its fence and the CLOCK_MONOTONIC
 *         interval during which leash_held() was true. The start t0 is
 *         read before leash_valid_ms() (so the hold is valid on
 *         [t0, t0 + v0]); the end t1 is read before leash_held() (so a
 *         hold still valid then was valid on [t0, t1]). The claim is
 *         [t0, t1] when held at t1, else [t0, t0 + v0]. Each unit ends with
 *         a write to a simulated storage that rejects fences below the
 *         largest it has seen; the write comes before the leash_held()
 *         check, so a rejected write while still held is a violation, and
 *         one after the hold ended is a stale writer stopped by its fence.
 *   ACQ   an acquire: when it was asked, its wait, when and how it ended.
 *   LOST  a lost callback: when it fired and the hold's local deadline
 *         (read from the handle: src/prim/lock.h).
 *
 * The supervisor checks:
 *   - no two holds of one name have overlapping UNIT claims;
 *   - one fence is never granted to two holds of one name;
 *   - the storage never rejected a write made while the hold was valid;
 *   - every acquire and release callback fired exactly once, never inside
 *     the call (checked in the workers, and again after leash_client_free);
 *   - every lost callback fired at most once per hold, only for a hold, and
 *     no later than its local deadline + TOL ms (25 by default) + the
 *     lateness of the worker's own probe timer (a loop starved of CPU runs
 *     every timer late); a worker that the schedule SIGSTOPped meanwhile is
 *     excused;
 *   - leash_held() never turns true again without a new grant, and a hold
 *     whose leash_held() turned 0 gets its lost callback;
 *   - an acquire with a wait never ends before its wait (ETIMEDOUT) and
 *     never later than its wait + command_timeout_ms + 300 ms (+ the loop's
 *     own lateness; a try-once acquire: command_timeout_ms + 300 ms, from
 *     the trickle's end when asked while bytes trickled: see trickles);
 *   - after the faults stop, no waiter is stranded: in the drain phase
 *     every pending acquire completes and every worker finishes;
 *   - state reads (leash_client_lock_state of a random name, every 100 to
 *     400 ms in each worker, as an operator's tool reads while the faults
 *     go on): each completes once, never inside the call, within a
 *     try-once acquire's bound; one that says "free" spans no claim of a
 *     hold of that name (not on Redlock, whose reader sees a hold only on
 *     a majority of the servers that answered it);
 *   - no lock is left in Redis at the end.
 *
 * The faults (tests/faults/proxy.h between the workers and Redis): stalls
 * of the command connection shorter and longer than the leases, of the
 * subscriber connection, of both; latency; blackholes up or down; cuts of
 * all or of the subscriber connections; refused reconnects; redis-server
 * SIGKILLed and started again; CLIENT KILL TYPE pubsub; SIGSTOP / SIGCONT
 * of a worker that holds a lock; SCRIPT FLUSH. The server keeps an
 * append-only file with appendfsync always, so a restart loses no
 * acknowledged write: the guarantees are for a single Redis without data
 * loss (DESIGN.md 1.3). With --tls (one server) the proxy carries TLS to
 * the server's TLS port, and, as it cannot read what it carries, cannot
 * tell the command connection from the subscriber's: the faults of one
 * role (stalls, cuts and blackholes of one of them) find none and do
 * nothing. With --trickle the faults include bytes that trickle (1 to 64
 * at a time, one piece a millisecond: replies and TLS records cut into
 * pieces; one fault in four; the one server's proxy only); a try-once
 * acquire asked while they trickled is bounded from the trickle's end
 * (see trickles).
 *
 * Cluster mode (--cluster): the supervisor starts a Redis Cluster of
 * tests/support/redis_cluster.h (3 masters, 3 replicas, node timeout
 * 500 ms) and the workers' clients use LEASH_TOPOLOGY_CLUSTER with the
 * masters as seeds. No proxy: the cluster hands out its nodes' real
 * addresses. The clients ask for WAIT 1 (wait_replicas): a grant or a
 * renewal counts only once the master's replica has it, so a SIGKILLed
 * master's promoted replica has every hold its holder counts on; without
 * it asynchronous replication may lose an acknowledged grant and two valid
 * holders are possible by design (DESIGN.md 9.3). The faults, each on the
 * master of a name's slot unless said otherwise: a graceful failover
 * (CLUSTER FAILOVER on its replica); SIGKILL, then, once the replica was
 * promoted and the workers ran a while against a master without a replica
 * (every grant and renewal there is short of its WAIT), a restart, which
 * brings the node back empty as a replica of its successor; the slot
 * migrated to another master at once, or step by step (IMPORTING /
 * MIGRATING, the keys moved, the slot handed over) with the workers going
 * on between the steps (ASK, then MOVED); CLIENT KILL TYPE pubsub and
 * SCRIPT FLUSH on every master; SIGSTOP / SIGCONT of a worker that holds a
 * lock. The harness blocks the supervisor until the cluster settled again;
 * the workers keep running meanwhile. Holds may be lost (EXPIRED,
 * UNREACHABLE, REPLICAS) and acquires fail (ECONN, EREPLICAS); the checks
 * are those above, with "no lock left" asked of every master, and one bound
 * that cannot hold as it is: while a master has no replica that
 * acknowledges, every WAIT on a connection to it runs out, each holds up
 * the commands behind it, and an acquire may end later by the WAITs queued
 * ahead of its attempt (short_of_replicas says how much). The leases
 * go up to 3 s (cfg.lease_max) so that some holds outlive a failover
 * (1 to 2.5 s) and are kept by a renewal at the promoted replica, the case
 * where two valid holders would show; short ones are lost.
 *
 * Redlock mode (--redlock): the supervisor starts five independent
 * redis-servers without persistence, each behind a fault proxy of its own,
 * and the workers' clients use LEASH_TOPOLOGY_REDLOCK with the proxies as
 * the nodes. Each fault takes one or two servers picked at random, never
 * more than a minority (2 of 5) down or frozen at once, servers still down
 * from an earlier fault included, so that the lock stays available:
 * SIGKILL (the server stays down over the next faults and comes back
 * EMPTY only after the delayed restart of the Redlock algorithm, DESIGN.md
 * 9.2: down for the longest lease, cfg.lease_max, at least; an earlier
 * restart can legitimately make two valid holders, so the schedule never
 * does it); SIGSTOP / SIGCONT; stalls, latency, blackholes, cuts and
 * refused connections at its proxy; and, on every server that is up,
 * CLIENT KILL TYPE pubsub and SCRIPT FLUSH; SIGSTOP / SIGCONT of a worker
 * that holds a lock. A rare fault (one in 25, and once half-way through
 * the faults if it did not come) takes a majority: servers are killed or
 * frozen until two are left, for the longest lease + 0.2 to 1.5 s, then
 * come back (the killed ones empty: they were down for a lease). The
 * checks are those above, "no lock left" asked of every server (the fence
 * floors a grant raised, the companion keys "<key>\0{<key>}fence", are
 * not locks: they outlive them by design and must only have a TTL), and
 * for each window in which a majority was gone (check_majority_gone):
 * nobody is granted the lock, no hold is valid past the window's start +
 * the longest lease, and the holds lost in it are lost UNREACHABLE. Fences
 * must still never go back: the fence floors guarantee it under the
 * delayed restart.
 */
/*
 * Sentinel mode (--sentinel): the supervisor starts a master, two replicas
 * and three sentinels of tests/support/redis_sentinel.h (down-after
 * 2000 ms) and the workers' clients use LEASH_TOPOLOGY_SENTINEL with the
 * sentinels as nodes and WAIT 2, every replica (without it a killed master
 * may take an acknowledged grant with it; and with WAIT 1 a SENTINEL
 * FAILOVER made two valid holders: the live old master granted after the
 * promotion, acknowledged by the replica that was then re-pointed). The
 * faults: SENTINEL FAILOVER; the master SIGKILLed, and once a replica was
 * promoted and the workers ran a while, restarted (empty, as a master,
 * until the sentinels make it a replica of its successor: leash must
 * never take it for the master); a sentinel frozen (SIGSTOP) for up to
 * 1.5 s (its subscribers hear no +switch-master meanwhile; 2 s would put it
 * in TILT mode for 30 s); CLIENT KILL TYPE
 * pubsub and SCRIPT FLUSH on the master; SIGSTOP / SIGCONT of a worker
 * that holds a lock. The checks are those above, "no lock left" asked of
 * the master the sentinels name at the end; the leases go up to 3 s as in
 * cluster mode.
 */
/*
 * The lock family (--fair, --rw, --semaphore N; alone or with --cluster,
 * not with --redlock, where the constructors refuse): every handle is of
 * that kind, under the same faults, and the checks above hold with what
 * the kind promises instead of "one holder":
 *   --fair       leash_fair_lock_new: exactly the mutex's checks.
 *   --rw         leash_read_lock_new / leash_write_lock_new on the same
 *                names: each handle reads (two in three) or writes, so
 *                that one client has both kinds on a name, which exclude
 *                each other like strangers' (no leash_rw_lock_pair here:
 *                a paired downgrade overlaps by design). Checks: no
 *                write claim overlaps any other hold's claim (read or
 *                write); a writer's fence is granted once; only writers
 *                write the storage, and a reader reads it at the end of each
 *                unit, before leash_held(): a fence above its own while it
 *                still holds is a writer that came in while it was valid.
 *   --semaphore N  leash_semaphore_new(..., N): at no instant are more than
 *                N claims of one name valid (a sweep over the claims,
 *                half-open); holders do not write the storage (N of them
 *                share the resource by design).
 * In these modes a cancel or release while acquiring (the meddle timer) is
 * now and then a leash_lock_free of the waiting handle instead (and a new
 * handle of the same name takes its place): its acquire callback must fire
 * LEASH_ECANCELED inside the free, and whatever it was granted meanwhile
 * is given back (no lock left at the end, nobody stuck behind it).
 * Read and semaphore holds may share a fence when one script let several
 * in at once; that is counted and printed, not a violation. The output
 * gives, per run, the most holds of a name that were valid at one instant
 * (1 for a mutex or fair lock; up to N for the semaphore; readers: more).
 *
 * --multi: every handle is a multi-lock (leash_multi_lock_new) of two
 * neighbouring names, n<k> and n<k+1> (mod --names, at least 2), so that
 * multi-locks over overlapping names contend, named in no common order.
 * Every record is made for each member, under its name and with its fence
 * (leash_multi_fence), and a unit writes the storage of both names: the
 * mutex's checks then hold per name. A multi-lock that waits for ever and
 * never completes (a deadlock) is a stranded waiter of the drain phase.
 */
/*
 * Lab mode (--lab, with one server, --redlock or --sentinel; --tls on
 * top): every redis-server, sentinel, DNS server and worker runs in a
 * network namespace of its own on one bridge (tests/support/netlab.h,
 * private addresses that exist only inside the lab; the supervisor
 * itself moves into an empty namespace). The clients reach the servers by
 * name (redisN.lab.test, from the lab's two DNS servers, asked in that
 * order) and, with --tls, over TLS. Instead of the proxy's faults the
 * network's, on a random set of workers (and the probe, below):
 *   cut            both ways;
 *   replies-lost   the server's packets to them dropped (one-way);
 *   requests-lost  theirs to the server dropped;
 *   syn-blackhole  new connects to the server vanish, and every client
 *                  connection is killed into it;
 *   isolate        the server gone from the network;
 *   dead-first-address  its name answers a dead address first;
 *   dns-first-dead the first DNS server gone;
 *   nxdomain       its name unknown for a while;
 *   dns-slow       every DNS server answers late (up to five connect
 *                  timeouts), and the clients' connections are killed;
 * and what servers and processes suffer: freeze-server (SIGSTOP),
 * debug-sleep, restart (with its append-only file), restart-empty
 * (without: the documented unsafe case, whose violations count as
 * expected, lab_expected.c), clock-forward and clock-back (the
 * server's clock stepped, lab_clocks.c), clock-drift (run fast or slow
 * a while, lab_clocks.c), name-moves and maxmemory
 * (lab_ops.c), client-kill, script-flush, sigstop (a worker). Redlock adds a bridge (two groups
 * of workers that each see a different majority, sharing one server)
 * and clock-step and clock-drift (one server's clock, lab_clocks.c);
 * Sentinel adds stale-sentinel (the first sentinel of every client's
 * list cut off while the others fail the master over: it names the old
 * master, soon a replica), master-cut-off (the master cut off from
 * sentinels and replicas, clients still reaching it), sentinels-down
 * (every sentinel gone a while, lab_ops.c), and the network's faults on
 * one sentinel; one server with two replicas (--replicas,
 * lab_replicas.c) adds replicas-cut-off, freeze-replica and
 * replica-oneway. --only FAULT (one server, with or without replicas)
 * replays one cell.
 * With --cluster, 3 masters and 3 replicas each in a node of their own,
 * the network's faults on a master, master-minority (a master cut off
 * from every other node while its clients reach it), a bridge between two
 * masters' halves, freeze-master, kill-master and failover: its own top
 * comment, tests/faults/lab_cluster.c (--only FAULT there too).
 *
 * The checks are those above, and availability: across every fault a
 * probe, a fresh client in a node of its own (new connections, names
 * resolved anew), asks for a lock nobody else uses with a wait that
 * outlasts the fault; it must be granted no later than RECOVER_MS after
 * the fault was over, and a fault that leaves a path open all along (a
 * dead first address or DNS server, a bridge, a stale sentinel once the
 * others named the new master) is over when it begins. A probe that
 * ends EREPLICAS while a Sentinel master was short of replicas is
 * counted as documented (docs/sentinel.md "Redis Sentinel"), not as a violation.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* prctl, strdup, kill, MAP_ANONYMOUS */
#endif

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>
#include <hiredis/hiredis.h>
#include <leash/adapters/libev.h>
#include <leash/leash.h>

#include "check.h"
#include "dns_server.h"
#include "netlab.h"
#include "prim/lock.h" /* the hold's deadline, for the lost callback's check */
#include "proxy.h"
#include "redis_cluster.h"
#include "redis_sentinel.h"
#include "redis_server.h"

#define MAX_PROCS 64
#define MAX_NAMES 64
#define MAX_STOPS 256
#define PREFIX "torture:"

/* ---- settings ---- */

static struct {
    int procs, handles, names;
    int fault_s, settle_s, drain_s;
    int lease_min, lease_max;
    int command_timeout;
    int tol_ms;   /* lateness allowed to a lost callback (timer wake-up) */
    int slack_ms; /* lateness allowed to an acquire beyond wait + command timeout */
    unsigned seed;
    int verbose;
    int cluster;      /* --cluster: on a Redis Cluster, see the top */
    int redlock;      /* --redlock: on Redlock's five servers, see the top */
    int sentinel;     /* --sentinel: through Redis Sentinel, see the top */
    int kind;         /* K_MUTEX, or a member of the lock family (see the top) */
    int permits;      /* --semaphore N */
    int lab;          /* --lab: every process in a network namespace of its own, see the top */
    const char *only; /* --only NAME: lab mode, that fault alone */
    int tls;          /* --tls: lab mode over TLS */
    int pubsub_off;   /* --pubsub-off: waiters poll */
    int trickle;      /* --trickle: the proxy's trickle among the faults */
    int replicas;     /* --replicas: lab mode, a master with two replicas (lab_replicas.c) */
} cfg = {4, 8, 3, 40, 4, 20, 200, 600, 300, 25, 300, 0, 0, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0, 0};

enum {
    K_MUTEX = 0,
    K_FAIR,
    K_RW,
    K_SEM,
    K_MULTI /* --multi */
};

static const char *kind_flag(void) {
    static char sem[32];
    snprintf(sem, sizeof sem, " --semaphore %d", cfg.permits);
    return cfg.kind == K_FAIR    ? " --fair"
           : cfg.kind == K_RW    ? " --rw"
           : cfg.kind == K_SEM   ? sem
           : cfg.kind == K_MULTI ? " --multi"
                                 : "";
}

/* Kinds whose holds of one name may be valid at once, and share a fence. */
static int shared_kind(int reader) {
    return cfg.kind == K_SEM || (cfg.kind == K_RW && reader);
}

/* Cluster mode: the longest lease, and how long WAIT waits for the replica
 * (below the command timeout, as leash_options wants). */
#define CLUSTER_LEASE_MAX 3000
#define CLUSTER_WAIT_TIMEOUT_MS 100

/* ---- the shared log ---- */

enum {
    REC_UNIT = 1,
    REC_ACQ,
    REC_LOST,
    REC_STATE
};

typedef struct rec {
    uint8_t type;
    uint8_t flags; /* UNIT: F_*; LOST: reason */
    uint16_t proc, handle, name;
    int32_t status; /* ACQ: the status */
    uint32_t hold;  /* hold number of this handle (1, 2, ...) */
    uint64_t fence;
    /* UNIT: lo, hi, -; ACQ: asked, ended, wait; LOST: fired, deadline;
     * STATE: asked, ended, fence_max (fence: its fence) */
    int64_t a, b, c;
    int64_t lag;     /* ACQ, LOST: how late the worker's loop ran timers meanwhile */
    int64_t lag_end; /* ACQ, LOST: how late it ran them in the RECENT_MS before the record */
} rec;

enum {
    F_HELD_AT_END = 1, /* leash_held() at t1 */
    F_ACCEPTED = 2,    /* the storage took the write */
    F_READ = 4,        /* UNIT, ACQ: a read hold (--rw) */
    F_STATE_HELD = 8,  /* STATE: the read said held */
};

typedef struct worker_shm {
    pid_t pid;
    int done, started;
    int holding;
    int nstops;
    int64_t stops[MAX_STOPS][2]; /* SIGSTOP .. SIGCONT, conservative */
    uint64_t acquired, busy, timedout, canceled, econn, other_fail;
    uint64_t releases, release_fail;
    uint64_t ereplicas;
    uint64_t losts[6];
    uint64_t rejections, writes;
    uint64_t violations;
    uint64_t resurrections;
    uint64_t reads, stale_reads;       /* --rw: storage reads by readers */
    uint64_t frees;                    /* waiting handles freed (the family's modes) */
    uint64_t state_reads, state_fails; /* leash_client_lock_state: answered, failed */
    char first_violation[512];
} worker_shm;

/* Windows of expected violations (lab_expected.c), at most. */
#define MAX_EXPECT 256

typedef struct shm {
    int phase;
    uint64_t max_fence[MAX_NAMES]; /* the simulated storage */
    uint64_t nrec, cap, dropped;
    worker_shm w[MAX_PROCS];
    int nexpect; /* lab_expected.c */
    struct {
        int64_t from, to;
        uint64_t n;
        int by_grant;
    } expect[MAX_EXPECT];
    rec recs[];
} shm;

enum {
    PHASE_RUN = 0,
    PHASE_SETTLE = 1, /* faults stopped; work goes on */
    PHASE_DRAIN = 2,  /* no new acquires; holds end; pending acquires must complete */
    PHASE_GIVEUP = 3  /* drain took too long: whatever is pending is stranded */
};

static shm *S;

static int64_t now_ms(void) {
    return test_now_ms();
}

static void put(const rec *r) {
    uint64_t i = __atomic_fetch_add(&S->nrec, 1, __ATOMIC_RELAXED);
    if (i >= S->cap) {
        __atomic_fetch_add(&S->dropped, 1, __ATOMIC_RELAXED);
        return;
    }
    S->recs[i] = *r;
}

static int phase(void) {
    return __atomic_load_n(&S->phase, __ATOMIC_ACQUIRE);
}

/* The storage: accepts a write whose fence is at least the largest seen. */
static int storage_write(int name, uint64_t fence) {
    uint64_t cur = __atomic_load_n(&S->max_fence[name], __ATOMIC_ACQUIRE);
    for (;;) {
        if (fence < cur)
            return 0;
        if (fence == cur || __atomic_compare_exchange_n(&S->max_fence[name], &cur, fence, 0,
                                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return 1;
    }
}

/* The windows of expected violations: their own file. */
#include "lab_expected.c"

/* ---- a worker ---- */

enum {
    H_IDLE,
    H_ACQUIRING,
    H_HELD,
    H_EXPIRED, /* leash_held() turned 0; the lost callback is due */
    H_RELEASING
};

typedef struct handle {
    int idx, name;
    int name2;       /* --multi: the second member's name, else -1 */
    int reader;      /* --rw: a read handle */
    int reader_role; /* --rw: drawn once per handle (two in three read) */
    leash_lock *l;
    int state;
    int acq_pending, rel_pending; /* callbacks expected */
    int canceled;                 /* leash_cancel or release while acquiring */
    int freeing;                  /* inside leash_lock_free (the family's modes) */
    uint32_t hold;
    int lost_seen;
    int64_t acq_start, acq_wait;
    int64_t hold_end;
    int64_t granted; /* when the hold was granted (lab_expected.c) */
    int64_t t0, v0;
    int64_t expired_at;
    ev_timer t;      /* the gap before an acquire, a unit, the lost check */
    ev_timer meddle; /* a cancel or release while acquiring */
} handle;

static struct {
    int proc;
    worker_shm *me;
    struct ev_loop *loop;
    leash_client *c;
    handle *h;
    int in_call;
    unsigned rnd;
    ev_timer tick;
    int quitting;
    /* The loop's own lateness: a timer due every PROBE_MS that notes how
     * late it ran. What the loop suffered (CPU starvation on a busy
     * machine) is not the engine's lateness. */
    ev_timer probe;
    int64_t probe_due;
    ev_timer state; /* the next state read */
    int state_pending;
    int64_t probe_at[64], probe_late[64];
    unsigned probe_n;
} W;

#define PROBE_MS 5
/* What lag_end looks back on (the probes kept cover about 320 ms). */
#define RECENT_MS 500

static unsigned rnd_next(unsigned *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static int rnd_between(int lo, int hi) {
    return lo + (int)(rnd_next(&W.rnd) % (unsigned)(hi - lo + 1));
}

static void violation(const char *fmt, ...) TEST_PRINTF_(1, 2);
static void violation(const char *fmt, ...) {
    char msg[400];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (W.me->violations++ == 0)
        snprintf(W.me->first_violation, sizeof W.me->first_violation, "proc %d: %s", W.proc, msg);
    fprintf(stderr, "torture: VIOLATION proc %d: %s\n", W.proc, msg);
}

static void start_acquire(handle *h);
static void start_unit(handle *h);

static void on_probe(struct ev_loop *loop, ev_timer *t, int revents) {
    int64_t now = now_ms();
    unsigned i = W.probe_n++ % 64;
    (void)revents;
    W.probe_at[i] = now;
    W.probe_late[i] = now - W.probe_due;
    W.probe_due = now + PROBE_MS;
    ev_timer_set(t, PROBE_MS / 1000.0, 0.);
    ev_timer_start(loop, t);
}

/* How late the loop ran its timers at some moment of [from, now]. */
static int64_t loop_lateness(int64_t from) {
    int64_t now = now_ms(), worst = now > W.probe_due ? now - W.probe_due : 0;
    unsigned i;
    for (i = 0; i < 64 && i < W.probe_n; i++)
        if (W.probe_at[i] >= from && W.probe_late[i] > worst)
            worst = W.probe_late[i];
    return worst;
}

static void arm(ev_timer *t, int64_t ms) {
    ev_timer_stop(W.loop, t);
    ev_timer_set(t, (double)(ms > 0 ? ms : 0) / 1000.0, 0.);
    ev_timer_start(W.loop, t);
}

static void schedule_acquire(handle *h) {
    h->state = H_IDLE;
    if (phase() >= PHASE_DRAIN)
        return;
    arm(&h->t, rnd_between(0, 80));
}

static void on_released(leash_lock *l, int status, void *arg) {
    handle *h = arg;
    (void)l;
    if (W.in_call)
        violation("release callback of handle %d inside a call", h->idx);
    if (h->rel_pending != 1) {
        violation("release callback of handle %d not expected (status %s)", h->idx,
                  leash_status_name(status));
        return;
    }
    h->rel_pending = 0;
    if (status == LEASH_OK)
        W.me->releases++;
    else
        W.me->release_fail++;
    if (leash_held(h->l))
        violation("handle %d held after its release completed", h->idx);
    if (h->state == H_RELEASING)
        schedule_acquire(h);
}

/* The fence of member 0 (h->name) or 1 (h->name2, --multi) of h's hold. */
static uint64_t fence_of(const handle *h, int member) {
    return cfg.kind == K_MULTI ? leash_multi_fence(h->l, member) : leash_fence(h->l);
}

/* --multi: the record r of member 0 once more, for member 1. */
static void put_second_member(rec *r, const handle *h) {
    if (cfg.kind != K_MULTI)
        return;
    r->name = (uint16_t)h->name2;
    if (r->fence != 0)
        r->fence = fence_of(h, 1);
    put(r);
}

static void record_acq(handle *h, int status) {
    rec r;
    memset(&r, 0, sizeof r);
    r.type = REC_ACQ;
    r.flags = (uint8_t)(h->reader ? F_READ : 0);
    r.proc = (uint16_t)W.proc;
    r.handle = (uint16_t)h->idx;
    r.name = (uint16_t)h->name;
    r.status = status;
    r.hold = h->hold;
    r.fence = status == LEASH_OK ? fence_of(h, 0) : 0;
    r.a = h->acq_start;
    r.b = now_ms();
    r.c = h->acq_wait;
    r.lag = loop_lateness(r.a + (r.c > 0 ? r.c : cfg.command_timeout));
    r.lag_end = loop_lateness(r.b - RECENT_MS);
    put(&r);
    if (status == LEASH_OK)
        put_second_member(&r, h);
}

static void on_acquired(leash_lock *l, int status, void *arg) {
    handle *h = arg;
    (void)l;
    if (W.in_call)
        violation("acquire callback of handle %d inside a call", h->idx);
    if (h->acq_pending != 1) {
        violation("acquire callback of handle %d not expected (status %s)", h->idx,
                  leash_status_name(status));
        return;
    }
    h->acq_pending = 0;
    ev_timer_stop(W.loop, &h->meddle);
    if ((h->canceled || h->freeing) && status != LEASH_ECANCELED)
        violation("canceled acquire of handle %d ended %s", h->idx, leash_status_name(status));
    if (status == LEASH_OK)
        h->hold++, h->granted = now_ms();
    record_acq(h, status);
    switch (status) {
    case LEASH_OK:
        W.me->acquired++;
        break;
    case LEASH_EBUSY:
        W.me->busy++;
        break;
    case LEASH_ETIMEDOUT:
        W.me->timedout++;
        break;
    case LEASH_ECANCELED:
        W.me->canceled++;
        break;
    case LEASH_ECONN:
        W.me->econn++;
        break;
    case LEASH_EREPLICAS:
        W.me->ereplicas++;
        break;
    default:
        W.me->other_fail++;
        if (W.me->other_fail < 5)
            fprintf(stderr, "torture: proc %d: acquire ended %s\n", W.proc,
                    leash_status_name(status));
    }
    if (status != LEASH_OK) {
        if (h->state == H_ACQUIRING)
            schedule_acquire(h);
        /* else a release while acquiring: its own callback moves on */
        return;
    }
    h->state = H_HELD;
    h->lost_seen = 0;
    W.me->holding++;
    h->hold_end = now_ms() + (phase() >= PHASE_DRAIN ? 0 : rnd_between(20, 1500));
    start_unit(h);
}

static void on_lost(leash_lock *l, int reason, void *arg) {
    handle *h = arg;
    rec r;

    if (h->state != H_HELD && h->state != H_EXPIRED) {
        violation("lost (%s) on handle %d that does not hold", leash_lost_reason_name(reason),
                  h->idx);
        return;
    }
    if (h->lost_seen++)
        violation("second lost callback for hold %u of handle %d", h->hold, h->idx);
    if (leash_held(l))
        violation("handle %d still held inside its lost callback", h->idx);
    memset(&r, 0, sizeof r);
    r.type = REC_LOST;
    r.flags = (uint8_t)reason;
    r.proc = (uint16_t)W.proc;
    r.handle = (uint16_t)h->idx;
    r.name = (uint16_t)h->name;
    r.hold = h->hold;
    r.fence = fence_of(h, 0);
    r.a = now_ms();
    r.b = l->hold.deadline;
    r.lag = loop_lateness(l->hold.deadline);
    r.lag_end = loop_lateness(r.a - RECENT_MS);
    put(&r);
    if (reason >= 1 && reason <= 5)
        W.me->losts[reason]++;
    /* The unit under way was valid up to t0 + v0. */
    if (h->state == H_HELD && h->v0 > 0) {
        memset(&r, 0, sizeof r);
        r.type = REC_UNIT;
        r.flags = (uint8_t)(h->reader ? F_READ : 0);
        r.proc = (uint16_t)W.proc;
        r.handle = (uint16_t)h->idx;
        r.name = (uint16_t)h->name;
        r.hold = h->hold;
        r.fence = fence_of(h, 0);
        r.a = h->t0;
        r.b = h->t0 + h->v0;
        put(&r);
        put_second_member(&r, h);
    }
    W.me->holding--;
    schedule_acquire(h);
}

static void start_unit(handle *h) {
    int64_t left;
    h->t0 = now_ms();
    h->v0 = leash_valid_ms(h->l);
    left = h->hold_end - h->t0;
    arm(&h->t, rnd_between(5, 60) < left ? rnd_between(5, 60) : (left > 0 ? left : 0));
}

static void end_unit(handle *h) {
    int accepted, held;
    int64_t t1;
    uint64_t seen = 0;
    rec r;

    if (h->reader) {
        /* A reader reads: a writer's fence above its own while it is
         * still valid is a writer that came in beside it. */
        seen = __atomic_load_n(&S->max_fence[h->name], __ATOMIC_ACQUIRE);
        accepted = 1;
    } else if (cfg.kind == K_SEM) {
        accepted = 1; /* N holders share the resource: no fenced storage */
    } else {
        accepted = storage_write(h->name, fence_of(h, 0));
        if (cfg.kind == K_MULTI)
            accepted &= storage_write(h->name2, fence_of(h, 1));
    }
    t1 = now_ms();
    held = leash_held(h->l);
    if (h->reader) {
        W.me->reads++;
        if (seen > leash_fence(h->l)) {
            W.me->stale_reads++;
            if (held && !expected(t1, "a reader valid after a newer writer wrote") &&
                !expected_grant(h->granted, "a reader granted a fence below a writer's"))
                violation("reader handle %d (fence %" PRIu64 ") of name %d still holds after a "
                          "writer with fence %" PRIu64 " wrote",
                          h->idx, leash_fence(h->l), h->name, seen);
        }
    } else if (cfg.kind != K_SEM) {
        W.me->writes++;
    }
    if (!accepted) {
        W.me->rejections++;
        if (held && !expected(t1, "the fenced store refused a valid hold's write") &&
            !expected_grant(h->granted, "a fence below an earlier hold's"))
            violation("storage rejected fence %" PRIu64 " of name %d while handle %d held it",
                      leash_fence(h->l), h->name, h->idx);
    }
    memset(&r, 0, sizeof r);
    r.type = REC_UNIT;
    r.flags = (uint8_t)((held ? F_HELD_AT_END : 0) | (accepted ? F_ACCEPTED : 0) |
                        (h->reader ? F_READ : 0));
    r.proc = (uint16_t)W.proc;
    r.handle = (uint16_t)h->idx;
    r.name = (uint16_t)h->name;
    r.hold = h->hold;
    r.fence = fence_of(h, 0);
    r.a = h->t0;
    r.b = held ? t1 : h->t0 + h->v0;
    if (held || h->v0 > 0) {
        put(&r);
        put_second_member(&r, h);
    }
    if (!held) {
        /* The lost callback must come (it may be behind us in this loop
         * iteration); leash_held() must not come back. */
        h->state = H_EXPIRED;
        h->expired_at = t1;
        h->v0 = 0;
        arm(&h->t, 20);
        return;
    }
    if (t1 < h->hold_end && phase() < PHASE_DRAIN) {
        start_unit(h);
        return;
    }
    h->state = H_RELEASING;
    h->rel_pending = 1;
    W.me->holding--;
    W.in_call = 1;
    int rc = leash_release(h->l, on_released, h);
    W.in_call = 0;
    if (rc != LEASH_OK) {
        h->rel_pending = 0;
        violation("leash_release of held handle %d refused: %s", h->idx, leash_status_name(rc));
        schedule_acquire(h);
    }
}

static void check_expired(handle *h) {
    if (leash_held(h->l)) {
        /* Valid again without a new grant. */
        W.me->resurrections++;
        violation("handle %d: leash_held() is 1 again %lld ms after it turned 0, no lost "
                  "callback (hold %u)",
                  h->idx, (long long)(now_ms() - h->expired_at), h->hold);
        h->state = H_HELD;
        start_unit(h);
        return;
    }
    if (now_ms() - h->expired_at > 2000) {
        violation("handle %d: not held for 2 s and no lost callback (hold %u)", h->idx, h->hold);
        h->state = H_HELD; /* give it back to the flow */
        h->hold_end = 0;
        end_unit(h);
        return;
    }
    arm(&h->t, 20);
}

static void on_handle_timer(struct ev_loop *loop, ev_timer *t, int revents) {
    handle *h = t->data;
    (void)loop, (void)revents;
    switch (h->state) {
    case H_IDLE:
        start_acquire(h);
        break;
    case H_HELD:
        end_unit(h);
        break;
    case H_EXPIRED:
        check_expired(h);
        break;
    default:
        break;
    }
}

static void new_handle(handle *h);

/* The lock family's modes also free a waiting handle (and make a new one
 * of the same name): its acquire callback fires LEASH_ECANCELED inside
 * leash_lock_free, a grant on its way is given back, a queue place is
 * left at once. */
static void free_waiting(handle *h) {
    h->freeing = 1;
    leash_lock_free(h->l);
    h->freeing = 0;
    W.me->frees++;
    if (h->acq_pending) {
        violation("acquire callback of handle %d did not fire inside leash_lock_free", h->idx);
        h->acq_pending = 0;
        schedule_acquire(h);
    }
    new_handle(h);
}

static void on_meddle(struct ev_loop *loop, ev_timer *t, int revents) {
    handle *h = t->data;
    int rc;
    unsigned pick;
    (void)loop, (void)revents;
    if (h->state != H_ACQUIRING || !h->acq_pending)
        return;
    pick = rnd_next(&W.rnd) % (cfg.kind != K_MUTEX ? 3u : 2u);
    if (pick == 2) {
        free_waiting(h);
        return;
    }
    W.in_call = 1;
    if (pick == 1) {
        rc = leash_cancel(h->l);
        if (rc == LEASH_OK)
            h->canceled = 1;
    } else {
        h->rel_pending = 1;
        rc = leash_release(h->l, on_released, h);
        if (rc == LEASH_OK) {
            h->canceled = 1;
            h->state = H_RELEASING;
        } else {
            h->rel_pending = 0;
        }
    }
    W.in_call = 0;
    if (rc != LEASH_OK)
        violation("cancel/release of acquiring handle %d refused: %s", h->idx,
                  leash_status_name(rc));
}

static void start_acquire(handle *h) {
    int r = rnd_between(0, 99), rc;
    int64_t wait = r < 25 ? 0 : r < 75 ? rnd_between(100, 3000) : LEASH_WAIT_FOREVER;

    if (phase() >= PHASE_DRAIN)
        return;
    leash_lock_set_watchdog(h->l, rnd_between(cfg.lease_min, cfg.lease_max), 0);
    h->state = H_ACQUIRING;
    h->acq_pending = 1;
    h->canceled = 0;
    h->acq_start = now_ms();
    h->acq_wait = wait;
    W.in_call = 1;
    rc = leash_acquire(h->l, wait, on_acquired, h);
    W.in_call = 0;
    if (rc != LEASH_OK) {
        h->acq_pending = 0;
        violation("leash_acquire of idle handle %d refused: %s", h->idx, leash_status_name(rc));
        schedule_acquire(h);
        return;
    }
    if (wait != 0 && rnd_between(0, 99) < 8)
        arm(&h->meddle, rnd_between(1, 400));
}

/* State reads: now and then a worker reads a random name's state
 * (leash_client_lock_state), as an operator's tool would while the faults
 * go on. Each must complete once, never inside the call, within the
 * acquire's bound; one that says "free" must not span a valid hold's
 * claim (check_state_reads). */
typedef struct state_read {
    int name;
    int64_t asked;
} state_read;

static void on_state(const leash_state *st, int status, void *arg) {
    state_read *sr = arg;
    rec r;

    if (W.in_call)
        violation("state callback of n%d inside a call", sr->name);
    W.state_pending--;
    memset(&r, 0, sizeof r);
    r.type = REC_STATE;
    r.proc = (uint16_t)W.proc;
    r.name = (uint16_t)sr->name;
    r.status = status;
    if (status == LEASH_OK) {
        r.flags = st->held ? F_STATE_HELD : 0;
        r.fence = st->fence;
        r.c = (int64_t)st->fence_max;
        W.me->state_reads++;
    } else {
        W.me->state_fails++;
    }
    r.a = sr->asked;
    r.b = now_ms();
    r.lag = loop_lateness(r.a + cfg.command_timeout);
    r.lag_end = loop_lateness(r.b - RECENT_MS);
    put(&r);
    free(sr);
}

static void on_state_timer(struct ev_loop *loop, ev_timer *t, int revents) {
    state_read *sr;
    char name[32];
    int rc;
    (void)loop, (void)t, (void)revents;

    if (phase() >= PHASE_DRAIN)
        return;
    sr = malloc(sizeof *sr);
    if (sr != NULL) {
        sr->name = (int)(rnd_next(&W.rnd) % (unsigned)cfg.names);
        sr->asked = now_ms();
        snprintf(name, sizeof name, "n%d", sr->name);
        W.in_call = 1;
        rc = leash_client_lock_state(W.c, name, on_state, sr);
        W.in_call = 0;
        if (rc == LEASH_OK) {
            W.state_pending++;
        } else {
            violation("leash_client_lock_state of n%d refused: %s", sr->name,
                      leash_status_name(rc));
            free(sr);
        }
    }
    arm(&W.state, rnd_between(100, 400));
}

static int all_idle(void) {
    int i;
    for (i = 0; i < cfg.handles; i++)
        if (W.h[i].state != H_IDLE || W.h[i].acq_pending || W.h[i].rel_pending)
            return 0;
    return 1;
}

static void finish(void) {
    int i;

    W.quitting = 1;
    ev_timer_stop(W.loop, &W.tick);
    ev_timer_stop(W.loop, &W.probe);
    ev_timer_stop(W.loop, &W.state);
    for (i = 0; i < cfg.handles; i++) {
        ev_timer_stop(W.loop, &W.h[i].t);
        ev_timer_stop(W.loop, &W.h[i].meddle);
    }
    leash_client_free(W.c); /* pending callbacks fire ECANCELED now */
    W.c = NULL;
    if (W.state_pending != 0)
        violation("%d state callbacks never fired", W.state_pending);
    for (i = 0; i < cfg.handles; i++)
        if (W.h[i].acq_pending || W.h[i].rel_pending)
            violation("handle %d: a callback never fired (acquire %d, release %d)", i,
                      W.h[i].acq_pending, W.h[i].rel_pending);
}

static void on_tick(struct ev_loop *loop, ev_timer *t, int revents) {
    (void)loop, (void)t, (void)revents;
    int p = phase(), i;
    if (p == PHASE_DRAIN && all_idle()) {
        finish();
        return;
    }
    if (p == PHASE_GIVEUP) {
        for (i = 0; i < cfg.handles; i++)
            if (W.h[i].state == H_ACQUIRING)
                violation("handle %d stranded: acquire (wait %lld) pending for %lld ms after "
                          "the faults stopped",
                          i, (long long)W.h[i].acq_wait, (long long)(now_ms() - W.h[i].acq_start));
            else if (W.h[i].state != H_IDLE)
                violation("handle %d stuck in state %d at the end", i, W.h[i].state);
        finish();
    }
}

static void worker_log(int level, const char *msg, void *arg) {
    static int errors;
    (void)arg;
    if (cfg.verbose || (level == LEASH_LOG_ERROR && errors++ < 5))
        fprintf(stderr, "torture: t=%lld proc %d leash[%d]: %s\n", (long long)now_ms(), W.proc,
                level, msg);
}

/* Cluster mode: the masters' addresses; Redlock mode: the proxies' in
 * front of the five servers. Set before the workers fork. */
static char seed_text[TEST_CLUSTER_MAX_NODES][32];
static const char *seeds[TEST_CLUSTER_MAX_NODES];
static int nseeds;

/* Where the one server is: 127.0.0.1 (its proxy), or its address in the lab. */
static const char *server_host = "127.0.0.1";

/* A lock handle of the run's kind for h->name. */
static void new_handle(handle *h) {
    char name[32];

    snprintf(name, sizeof name, "n%d", h->name);
    switch (cfg.kind) {
    case K_FAIR:
        h->l = leash_fair_lock_new(W.c, name);
        break;
    case K_RW:
        h->reader = h->reader_role;
        h->l = h->reader ? leash_read_lock_new(W.c, name) : leash_write_lock_new(W.c, name);
        break;
    case K_SEM:
        h->l = leash_semaphore_new(W.c, name, cfg.permits);
        break;
    case K_MULTI: {
        char name2[32];
        const char *names[2] = {name, name2};
        snprintf(name2, sizeof name2, "n%d", h->name2);
        h->l = leash_multi_lock_new(W.c, names, 2);
        break;
    }
    default:
        h->l = leash_lock_new(W.c, name);
    }
    if (h->l == NULL) {
        violation("no lock handle for %s", name);
        exit(1);
    }
    leash_on_lost(h->l, on_lost, h);
}

/* The lab's DNS servers, "addr:port,addr:port" (lab mode; else NULL). */
static char lab_dns_servers[96];

/* What every client of the run is given: a worker's and the probe's. */
static void client_options(leash_options *o, int port) {
    leash_options_init(o);
    o->host = server_host;
    o->port = port;
    o->key_prefix = PREFIX;
    o->lease_ms = cfg.lease_max;
    o->command_timeout_ms = cfg.command_timeout;
    o->connect_timeout_ms = cfg.command_timeout;
    o->reconnect_min_ms = 20;
    o->reconnect_max_ms = 200;
    o->log_cb = worker_log;
    o->log_level = cfg.verbose ? LEASH_LOG_INFO : LEASH_LOG_ERROR;
    if (cfg.pubsub_off)
        o->pubsub = LEASH_PUBSUB_OFF;
    if (lab_dns_servers[0] != '\0')
        o->dns_servers = lab_dns_servers;
    if (cfg.tls) {
        /* The test certificates name localhost, not the lab's names. */
        o->tls = 1;
        o->tls_ca_file = test_tls_file(0, "ca.pem");
        o->tls_server_name = "localhost";
    }
    if (cfg.cluster) {
        o->topology = LEASH_TOPOLOGY_CLUSTER;
        o->nodes = seeds;
        o->nodes_count = nseeds;
        o->wait_replicas = 1;
        o->wait_timeout_ms = CLUSTER_WAIT_TIMEOUT_MS;
    } else if (cfg.redlock) {
        o->topology = LEASH_TOPOLOGY_REDLOCK;
        o->nodes = seeds;
        o->nodes_count = nseeds;
    } else if (cfg.sentinel) {
        o->topology = LEASH_TOPOLOGY_SENTINEL;
        o->nodes = seeds;
        o->nodes_count = nseeds;
        o->sentinel_master = TEST_SENTINEL_MASTER;
        o->wait_replicas = 2; /* every replica: see the top */
        o->wait_timeout_ms = CLUSTER_WAIT_TIMEOUT_MS;
    } else if (cfg.replicas) {
        o->wait_replicas = W.proc >= 0 && W.proc % 2 == 0 ? 2 : 1; /* lab_replicas.c */
        o->wait_timeout_ms = CLUSTER_WAIT_TIMEOUT_MS;
    }
}

static void worker_main(int proc, int port) {
    leash_options o;
    int i;

    memset(&W, 0, sizeof W);
    W.proc = proc;
    W.me = &S->w[proc];
    W.rnd = cfg.seed * 2654435761u + (unsigned)proc * 40503u + 1;
    W.loop = ev_loop_new(EVFLAG_AUTO);
    client_options(&o, port);
    if (leash_client_new(&W.c, &o) != LEASH_OK || leash_libev_attach(W.loop, W.c) != LEASH_OK) {
        violation("no client");
        exit(1);
    }
    W.h = calloc((size_t)cfg.handles, sizeof *W.h);
    for (i = 0; i < cfg.handles; i++) {
        handle *h = &W.h[i];
        h->idx = i;
        h->name = (int)(rnd_next(&W.rnd) % (unsigned)cfg.names);
        h->name2 = cfg.kind == K_MULTI ? (h->name + 1) % cfg.names : -1;
        if (cfg.kind == K_RW)
            h->reader_role = rnd_next(&W.rnd) % 3 != 0;
        new_handle(h);
        ev_timer_init(&h->t, on_handle_timer, 0., 0.);
        h->t.data = h;
        ev_timer_init(&h->meddle, on_meddle, 0., 0.);
        h->meddle.data = h;
        schedule_acquire(h);
    }
    ev_timer_init(&W.tick, on_tick, 0.01, 0.01);
    ev_timer_start(W.loop, &W.tick);
    ev_timer_init(&W.state, on_state_timer, 0., 0.);
    arm(&W.state, rnd_between(100, 400));
    ev_timer_init(&W.probe, on_probe, PROBE_MS / 1000.0, 0.);
    W.probe_due = now_ms() + PROBE_MS;
    ev_timer_start(W.loop, &W.probe);
    W.me->started = 1;
    ev_run(W.loop, 0);
    if (W.c != NULL) /* the loop ran dry: should not happen */
        finish();
    ev_loop_destroy(W.loop);
    free(W.h);
    W.me->done = 1;
}

/* ---- the supervisor ---- */

static netlab *LAB;
static int lab_home = -1; /* the supervisor's own network namespace */
#define LAB_MAX_SERVERS 8
static int lab_srv[LAB_MAX_SERVERS]; /* each server's node */
static int lab_nsrv;
static int lab_cli[MAX_PROCS]; /* each worker's node */
static int lab_ghost = -1;     /* a node whose connects vanish: a dead address */
static int lab_dns_node[2];
static test_dns lab_dns[2]; /* every client asks dns0 first, then dns1 */
static char lab_names[LAB_MAX_SERVERS][32];

/* The network faults that the lab makes between the workers and server s
 * (the same for one server and for each Redlock server). Each holds for
 * a while and heals; returns how long it held, and says which in said. */
enum {
    NF_CUT,           /* some workers cut off from the server, both ways */
    NF_REPLIES_LOST,  /* the server's packets to some workers dropped */
    NF_REQUESTS_LOST, /* some workers' packets to the server dropped */
    NF_SYN_HOLE,      /* connects vanish; every connection is killed into it */
    NF_ISOLATE,       /* the server gone from the network */
    NF_DEAD_FIRST,    /* its name gets a dead address first (connects to it vanish) */
    NF_DNS_DEAD,      /* the first DNS server gone from the network */
    NF_NXDOMAIN,      /* its name unknown to every DNS server */
    NF_DNS_SLOW,      /* every DNS server answers late */
    NF_COUNT
};
/* Their names, first in every lab topology's list of faults. */
#define NET_FAULT_NAMES                                                                       \
    "cut", "replies-lost", "requests-lost", "syn-blackhole", "isolate", "dead-first-address", \
        "dns-first-dead", "nxdomain", "dns-slow"
static const char *const net_fault_names[] = {NET_FAULT_NAMES};
_Static_assert(sizeof net_fault_names / sizeof net_fault_names[0] == NF_COUNT,
               "a name for every network fault");
/* The faults that leave a path open all along: over when they begin. */
#define NF_LEAVES_A_PATH(nf) ((nf) == NF_DEAD_FIRST || (nf) == NF_DNS_DEAD)

/* Lab mode (its section is below). How soon after a fault was over the
 * probe must be granted (see the probe). */
#define RECOVER_MS 2000
typedef struct probe {
    pid_t pid;
    int fd;
    int n;
    int64_t started;
} probe;
static void probe_start(probe *p);
static void probe_check(probe *p, int64_t over, const char *fault);
static int full_during(int64_t from, int64_t to);
static int64_t lab_net_fault(int nf, const int *servers, test_redis *const *rs, int nservers,
                             probe *pr, char *said, size_t cap);
static int64_t lab_bridge(char *said, size_t cap);
static void lab_rule(int ok);
static void lab_kill_connections(test_redis *r);

static test_redis R;
static fault_proxy P;
static unsigned srnd;

static int s_between(int lo, int hi) {
    return lo + (int)(rnd_next(&srnd) % (unsigned)(hi - lo + 1));
}

static void sleep_ms(int64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (ms > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static const char *redis_bin(void) {
    const char *e = getenv("LEASH_REDIS_SERVER");
    return e && *e ? e : "redis-server";
}

/* Starts the same server again on its folder's config: with appendonly
 * and appendfsync always it comes back with every acknowledged write. */
static int redis_respawn(void) {
    char conf[300];
    pid_t pid, parent = getpid();
    int64_t deadline;
    int fd;

    snprintf(conf, sizeof conf, "%s/redis.conf", R.dir);
    pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        signal(SIGPIPE, SIG_DFL);
        fd = open("/dev/null", O_RDWR);
        dup2(fd, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        for (fd = 3; fd < 1024; fd++)
            close(fd);
        execlp(redis_bin(), redis_bin(), conf, (char *)NULL);
        _exit(127);
    }
    if (pid < 0)
        return -1;
    R.pid = pid;
    deadline = now_ms() + 10000;
    while (now_ms() < deadline) {
        long long v = test_redis_int(&R, "DBSIZE");
        if (v >= 0)
            return 0;
        sleep_ms(10);
    }
    return -1;
}

enum {
    F_STALL_CMD_SHORT,
    F_STALL_CMD_LONG,
    F_STALL_SUB,
    F_STALL_ALL,
    F_DELAY,
    F_HOLE_UP,
    F_HOLE_DOWN,
    F_CUT_ALL,
    F_CUT_SUB,
    F_REFUSE,
    F_RESTART,
    F_KILL_PUBSUB,
    F_SIGSTOP,
    F_SCRIPT_FLUSH,
    F_TRICKLE, /* only with --trickle (see the top) */
    F_COUNT
};
static const char *const fault_names[F_COUNT] = {
    "stall-cmd-short", "stall-cmd-long", "stall-sub", "stall-all",    "delay",
    "blackhole-up",    "blackhole-down", "cut-all",   "cut-sub",      "refuse",
    "restart",         "client-kill",    "sigstop",   "script-flush", "trickle"};
static uint64_t fault_count[F_COUNT];

static void admin(const char *cmd) {
    redisReply *r = test_redis_cmd(&R, cmd);
    if (r)
        freeReplyObject(r);
}

static void sigstop_one(int64_t ms) {
    int i, pick = -1, n = 0;
    worker_shm *w;
    /* A worker that holds something, if any. */
    for (i = 0; i < cfg.procs; i++)
        if (!S->w[i].done && __atomic_load_n(&S->w[i].holding, __ATOMIC_RELAXED) > 0 &&
            s_between(0, n++) == 0)
            pick = i;
    if (pick < 0)
        pick = s_between(0, cfg.procs - 1);
    w = &S->w[pick];
    if (w->done || w->pid <= 0 || w->nstops >= MAX_STOPS)
        return;
    w->stops[w->nstops][0] = now_ms();
    w->stops[w->nstops][1] = INT64_MAX;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    kill(w->pid, SIGSTOP);
    sleep_ms(ms);
    kill(w->pid, SIGCONT);
    w->stops[w->nstops][1] = now_ms();
    w->nstops++;
}

/* Times in which something excuses a lateness (ms, now_ms()). */
#define MAX_SPANS 4096
typedef struct spans {
    int64_t at[MAX_SPANS][2];
    int n;
} spans;

static void spans_note(spans *s, int64_t from, int64_t to) {
    if (s->n < MAX_SPANS) {
        s->at[s->n][0] = from;
        s->at[s->n][1] = to;
        s->n++;
    } else {
        s->at[MAX_SPANS - 1][1] = INT64_MAX; /* full: excuse the rest */
    }
}

/* The latest end of a span of s that overlaps [from, to]; INT64_MIN when
 * none does. */
static int64_t spans_end_during(const spans *s, int64_t from, int64_t to) {
    int64_t end = INT64_MIN;
    int i;

    for (i = 0; i < s->n; i++)
        if (s->at[i][0] <= to && s->at[i][1] >= from && s->at[i][1] > end)
            end = s->at[i][1];
    return end;
}

/* --trickle: when the proxy trickled bytes. A try-once acquire waits for
 * its answer as long as the connection keeps answering (leash.h: a burst
 * of the program's own commands ahead of it is not an outage), and a
 * trickle answers all along: one whose bound had not passed when bytes
 * began to trickle is bounded from the trickle's end, when the answers
 * queued behind come at once. A wait's bound (its end +
 * command_timeout_ms) and a state read's stand as they are. */
static spans trickles;

static void one_fault(void) {
    /* With --trickle, one fault in four trickles: a short run has some. */
    int f = cfg.trickle && s_between(0, 3) == 0 ? F_TRICKLE : s_between(0, F_TRICKLE - 1);
    int lease = cfg.lease_min;
    int64_t trickled_from = 0;

    fault_count[f]++;
    if (cfg.verbose)
        fprintf(stderr, "torture: fault %s\n", fault_names[f]);
    switch (f) {
    case F_STALL_CMD_SHORT:
        fp_stall(&P, FP_CMD, FP_BOTH, 1);
        sleep_ms(s_between(20, lease / 2));
        break;
    case F_STALL_CMD_LONG:
        fp_stall(&P, FP_CMD, s_between(1, 3), 1);
        sleep_ms(s_between(cfg.lease_max, 3 * cfg.lease_max));
        break;
    case F_STALL_SUB:
        fp_stall(&P, FP_SUB, FP_BOTH, 1);
        sleep_ms(s_between(100, 3 * cfg.lease_max));
        break;
    case F_STALL_ALL:
        fp_stall(&P, FP_ALL, FP_BOTH, 1);
        sleep_ms(s_between(50, 2 * cfg.lease_max));
        break;
    case F_DELAY:
        fp_delay(&P, FP_ALL, FP_BOTH, s_between(5, 120));
        sleep_ms(s_between(500, 3000));
        break;
    case F_TRICKLE:
        trickled_from = now_ms();
        fp_trickle(&P, FP_ALL, s_between(1, 3), s_between(1, 64));
        sleep_ms(s_between(300, 3000));
        break;
    case F_HOLE_UP:
        fp_blackhole(&P, s_between(1, 3), FP_UP, 1);
        sleep_ms(s_between(50, 1500));
        break;
    case F_HOLE_DOWN:
        fp_blackhole(&P, s_between(1, 3), FP_DOWN, 1);
        sleep_ms(s_between(50, 1500));
        break;
    case F_CUT_ALL:
        fp_cut(&P, FP_ALL);
        break;
    case F_CUT_SUB:
        fp_cut(&P, FP_SUB);
        break;
    case F_REFUSE:
        fp_refuse(&P, FP_ALL, 1);
        fp_cut(&P, s_between(1, 3));
        sleep_ms(s_between(100, 1500));
        break;
    case F_RESTART:
        test_redis_kill(&R);
        sleep_ms(s_between(0, 600));
        if (redis_respawn() != 0) {
            fprintf(stderr, "torture: redis-server did not come back\n");
            exit(2);
        }
        break;
    case F_KILL_PUBSUB:
        admin("CLIENT KILL TYPE pubsub");
        break;
    case F_SIGSTOP:
        sigstop_one(s_between(50, 3 * cfg.lease_max));
        break;
    case F_SCRIPT_FLUSH:
        admin("SCRIPT FLUSH");
        break;
    }
    fp_clear(&P);
    if (f == F_TRICKLE)
        spans_note(&trickles, trickled_from, now_ms());
}

/* ---- the supervisor in cluster mode ---- */

static test_cluster C;

enum {
    CF_FAILOVER,
    CF_KILL,
    CF_MIGRATE,
    CF_MIGRATE_STEPS,
    CF_KILL_PUBSUB,
    CF_SCRIPT_FLUSH,
    CF_SIGSTOP,
    CF_COUNT
};
static const char *const cluster_fault_names[CF_COUNT] = {
    "failover",    "kill-master",  "migrate", "migrate-steps",
    "client-kill", "script-flush", "sigstop"};
static uint64_t cluster_fault_count[CF_COUNT];
static uint64_t failovers_refused;

/*
 * When the supervisor's faults left some master without a replica that
 * acknowledges WAIT: from the start of a failover or a kill to the end of
 * the fault + REPLICA_ACK_MS. A killed master's successor has no replica
 * until the restart; after a failover or a restart the replica
 * resynchronises, and a replica that finished its sync is counted by WAIT
 * only from its first REPLCONF ACK, which it sends once a second.
 *
 * Why the checks need it: the clients send WAIT after every grant and
 * renewal on the same connection, and Redis holds a connection on WAIT:
 * while the slot's master has no acknowledging replica, every attempt and
 * every group of commands on a worker's connection to it takes
 * CLUSTER_WAIT_TIMEOUT_MS, and the next group waits for it. An
 * attempt written before its deadline is then answered up to
 * wait_queue_ms() later (a connection that keeps answering is not silent,
 * so no command timeout cuts it short; DESIGN.md 5.6: the answer in flight
 * decides), and an acquire ends that much after the single mode's bound.
 * The acquire bound of check_log grows by wait_queue_ms() for acquires
 * that overlap such a time, and only for those.
 */
#define REPLICA_ACK_MS 1500

static spans short_of_replicas;

static void note_short_of_replicas(int64_t from, int64_t to) {
    spans_note(&short_of_replicas, from, to);
}

/* 1 if some master was short of replicas at some moment of [from, to]. */
static int short_during(int64_t from, int64_t to) {
    return spans_end_during(&short_of_replicas, from, to) != INT64_MIN;
}

/* The WAITs an attempt can wait for on a worker's connection to one
 * master: the one out when it is issued, and the one behind its group
 * (src/wire/conn.c writes one WAIT behind the commands written together,
 * and holds the next ones until it answered); one more for the loop's
 * turn between them. Before, every command had a WAIT of its own, and an
 * attempt waited behind one per handle and one per name. */
static int64_t wait_queue_ms(void) {
    return 3 * CLUSTER_WAIT_TIMEOUT_MS;
}

/* SIGKILL to every worker still running (a stopped one dies too), reaped. */
static void kill_workers(void) {
    int i;
    for (i = 0; i < cfg.procs; i++)
        if (S->w[i].pid > 0) {
            kill(S->w[i].pid, SIGKILL);
            waitpid(S->w[i].pid, NULL, 0);
            S->w[i].pid = 0;
        }
}

/* Copies every node's redis.log to <tmpdir>/leash-torture-<pid>-node<i>.log,
 * for what Redis said about a step that did not happen (the harness
 * removes the nodes' folders when it stops them). */
static void keep_node_logs(void) {
    char from[300], to[300], buf[8192];
    size_t n;
    int i;

    for (i = 0; i < C.count; i++) {
        FILE *in, *out;
        snprintf(from, sizeof from, "%s/redis.log", C.node[i].server.dir);
        snprintf(to, sizeof to, "%s/leash-torture-%d-node%d.log", test_tmpdir(), (int)getpid(), i);
        if ((in = fopen(from, "r")) == NULL)
            continue;
        if ((out = fopen(to, "w")) != NULL) {
            while ((n = fread(buf, 1, sizeof buf, in)) > 0)
                fwrite(buf, 1, n, out);
            fclose(out);
        }
        fclose(in);
    }
    fprintf(stderr, "torture: the nodes' logs kept as %s/leash-torture-%d-node*.log\n",
            test_tmpdir(), (int)getpid());
}

/* What every live node thinks of the cluster, on stderr. */
static void dump_cluster(void) {
    int i;

    for (i = 0; i < C.count; i++) {
        char state[16] = "?";
        redisReply *r;
        if (!test_cluster_alive(&C, i))
            continue;
        test_cluster_info(&C, i, "cluster_state", state, sizeof state);
        r = test_cluster_cmd(&C, i, "CLUSTER NODES");
        fprintf(stderr, "torture: node %d (port %d) cluster_state:%s, CLUSTER NODES:\n%s", i,
                test_cluster_port(&C, i), state,
                r && r->type == REDIS_REPLY_STRING ? r->str : "(no answer)\n");
        if (r)
            freeReplyObject(r);
    }
}

/* A harness call failed (the cluster did not settle in time, or a step
 * was refused; the harness said why on stderr). What follows would not be
 * the schedule of the seed, and a failure of the harness says nothing
 * about leash: the run ends as a failure of the test's setup. */
static void harness_failed(const char *what) {
    fprintf(stderr, "torture: the cluster harness failed (%s): giving up\n", what);
    dump_cluster();
    keep_node_logs();
    kill_workers();
    test_cluster_stop(&C);
    exit(2);
}

/* A step of the harness that waits for the cluster to settle gave up
 * after its settle timeout (seen once in a 10-minute soak: the new master
 * of a killed one stayed at cluster_state:fail after its predecessor came
 * back as its replica). Say what the nodes think, keep their logs, and
 * wait once more before giving up: the workers go on meanwhile. */
static uint64_t settle_retries;

static void settle_again(const char *what) {
    fprintf(stderr, "torture: t=%lld %s did not settle: waiting once more\n", (long long)now_ms(),
            what);
    dump_cluster();
    keep_node_logs();
    settle_retries++;
    /* A promotion right after a migration can leave the new master's
     * claim at the config epoch of the master it replaced (seen: both at
     * 16, the dead one still owning the slots in every other node's
     * view), which nothing resolves until an epoch moves on: every live
     * master bumps its own, as an operator would (CLUSTER BUMPEPOCH). */
    for (int i = 0; i < C.count; i++)
        if (test_cluster_role(&C, i) == TEST_CLUSTER_MASTER) {
            redisReply *r = test_cluster_cmd(&C, i, "CLUSTER BUMPEPOCH");
            if (r != NULL)
                freeReplyObject(r);
        }
    if (test_cluster_wait_settled(&C) != 0)
        harness_failed(what);
}

/* The cluster slot of name n's lock key (key_prefix + name, no hash tag). */
static int name_slot(int name) {
    char key[64];
    snprintf(key, sizeof key, PREFIX "n%d", name);
    return test_cluster_slot_of_key(key);
}

/* The live masters into m[]; how many. */
static int live_masters(int *m) {
    int i, n = 0;
    for (i = 0; i < C.count; i++)
        if (test_cluster_alive(&C, i) && test_cluster_role(&C, i) == TEST_CLUSTER_MASTER)
            m[n++] = i;
    return n;
}

/* A live master other than master, at random; -1 if none. */
static int other_master(int master) {
    int m[TEST_CLUSTER_MAX_NODES], n = live_masters(m), i, pick = -1, seen = 0;
    for (i = 0; i < n; i++)
        if (m[i] != master && s_between(0, seen++) == 0)
            pick = m[i];
    return pick;
}

/* CLIENT KILL TYPE pubsub or SCRIPT FLUSH on every master; what the
 * masters said, for the fault's line. */
static void on_every_master(int fault, char *out, size_t cap) {
    int m[TEST_CLUSTER_MAX_NODES], n = live_masters(m), i;
    size_t used = 0;

    out[0] = '\0';
    for (i = 0; i < n; i++) {
        redisReply *r = fault == CF_KILL_PUBSUB
                            ? test_cluster_cmd(&C, m[i], "CLIENT KILL TYPE pubsub")
                            : test_cluster_cmd(&C, m[i], "SCRIPT FLUSH");
        if (used < cap)
            used += (size_t)snprintf(out + used, cap - used, " %d:", m[i]);
        if (used < cap && r && r->type == REDIS_REPLY_INTEGER)
            used += (size_t)snprintf(out + used, cap - used, "%lld", r->integer);
        else if (used < cap && r && (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR))
            used += (size_t)snprintf(out + used, cap - used, "%s", r->str);
        else if (used < cap)
            used += (size_t)snprintf(out + used, cap - used, "no answer");
        if (r)
            freeReplyObject(r);
    }
}

/* One fault, on the master of a name's slot picked at random. Each line
 * says what happened and when (CLOCK_MONOTONIC ms, the clock of the
 * violations' messages): the harness takes seconds for some. */
static void one_cluster_fault(void) {
    int f = s_between(0, CF_COUNT - 1), name = s_between(0, cfg.names - 1);
    int slot = name_slot(name), master = test_cluster_master_of_slot(&C, slot), other = -1;
    int moved = 0, refused = 0;
    int64_t t0 = now_ms(), t1 = 0, t2 = 0;
    char said[160] = "";

    cluster_fault_count[f]++;
    if (master < 0)
        harness_failed("no master for a name's slot");
    switch (f) {
    case CF_FAILOVER:
        if ((other = test_cluster_replica_of(&C, master)) < 0)
            harness_failed("failover: no replica");
        if (test_cluster_failover(&C, other) != 0) {
            /* Redis ends a manual failover whose election did not get
             * through after 5 s (CLUSTER_MF_TIMEOUT), and the harness
             * waits for the swap until its settle timeout (seen once in a
             * 10-minute soak, the failover 0.5 s after another). Nothing
             * changed then: go on once the cluster settled. */
            failovers_refused++;
            refused = 1;
            settle_again("failover");
        }
        break;
    case CF_KILL:
        if (test_cluster_kill(&C, master) != 0)
            settle_again("kill");
        if ((other = test_cluster_wait_promoted(&C, master)) < 0)
            settle_again("wait_promoted");
        t1 = now_ms();
        /* The promoted master has no replica until the killed one is back:
         * grants there fail EREPLICAS and renewals lose their holds. */
        sleep_ms(s_between(100, 2000));
        t2 = now_ms();
        if (test_cluster_restart(&C, master) != 0)
            settle_again("restart");
        break;
    case CF_MIGRATE:
        other = other_master(master);
        if (other < 0)
            harness_failed("migrate_slot: no other master");
        if (test_cluster_migrate_slot(&C, slot, other) != 0)
            settle_again("migrate_slot");
        break;
    case CF_MIGRATE_STEPS:
        other = other_master(master);
        if (other < 0 || test_cluster_migrate_begin(&C, slot, other) != 0)
            harness_failed("migrate_begin");
        sleep_ms(s_between(50, 1000)); /* the key at the source, new ones at the target */
        t1 = now_ms();
        if ((moved = test_cluster_migrate_move_keys(&C, slot, other, 0)) < 0)
            harness_failed("migrate_move_keys");
        sleep_ms(s_between(50, 1000)); /* ASK to the target */
        t2 = now_ms();
        if (test_cluster_migrate_finish(&C, slot, other) != 0)
            settle_again("migrate_finish");
        break;
    case CF_KILL_PUBSUB:
    case CF_SCRIPT_FLUSH:
        on_every_master(f, said, sizeof said);
        break;
    case CF_SIGSTOP:
        sigstop_one(s_between(50, cfg.lease_max + 1000));
        break;
    }
    if (f == CF_FAILOVER || f == CF_KILL)
        note_short_of_replicas(t0, now_ms() + REPLICA_ACK_MS);
    fprintf(stderr, "torture: t=%lld fault %s", (long long)t0, cluster_fault_names[f]);
    if (f <= CF_MIGRATE_STEPS)
        fprintf(stderr, ": n%d slot %d master %d -> %d", name, slot, master, other);
    if (f == CF_KILL)
        fprintf(stderr, ", promoted at t=%lld, restarted at t=%lld", (long long)t1, (long long)t2);
    if (f == CF_MIGRATE_STEPS)
        fprintf(stderr, ", %d key(s) moved at t=%lld, slot handed over at t=%lld", moved,
                (long long)t1, (long long)t2);
    if (refused)
        fprintf(stderr, ", did not happen");
    fprintf(stderr, "%s%s, done at t=%lld\n", said[0] ? ", masters said" : "", said,
            (long long)now_ms());
}

/* ---- the supervisor in Sentinel mode ---- */

static test_sentinel TS;

enum {
    SF_FAILOVER,
    SF_KILL,
    SF_FREEZE_SENTINEL,
    SF_KILL_PUBSUB,
    SF_SCRIPT_FLUSH,
    SF_SIGSTOP,
    SF_STALE_SENTINEL, /* lab mode only, as the two below */
    SF_MASTER_CUT_OFF,
    SF_NET,            /* lab mode: one of the network's faults, on a sentinel */
    SF_SENTINELS_DOWN, /* lab mode: lab_ops.c */
    SF_COUNT
};
static const char *const sentinel_fault_names[SF_COUNT] = {
    "failover", "kill-master",    "freeze-sentinel", "client-kill", "script-flush",
    "sigstop",  "stale-sentinel", "master-cut-off",  "network",     "sentinels-down"};
static uint64_t sentinel_fault_count[SF_COUNT];

/* The sentinels' harness gave up (no master named in time). */
static void sentinel_harness_failed(const char *what) {
    fprintf(stderr, "torture: the sentinel harness failed (%s): giving up\n", what);
    test_sentinel_stop(&TS);
    exit(2);
}

/* Lab mode: the first sentinel of every client's list is cut off from
 * the other sentinels and every data node (the clients still reach it)
 * while the others fail the master over: it goes on naming the old
 * master, which the others soon make a replica. Every client connection
 * is closed then, so that clients ask the sentinels again. Returns the
 * new master, and in *named when the others named it. */
static void sentinels_down(int master, int64_t *back, char *said, size_t cap);

static int stale_sentinel(int master, int64_t *named, probe *pr) {
    int i, m = -1, liar = lab_nsrv - TS.nsentinels; /* sentinel 0's node index */
    int64_t until;

    for (i = 0; i < lab_nsrv; i++)
        if (i != liar)
            lab_rule(netlab_cut(LAB, lab_srv[liar], lab_srv[i]));
    until = now_ms() + 30000;
    while (now_ms() < until) {
        freeReplyObject(
            test_redis_cmd(&TS.sentinel[1], "SENTINEL FAILOVER %s", TEST_SENTINEL_MASTER));
        int64_t wait_until = now_ms() + 5000;
        while (now_ms() < wait_until && ((m = test_sentinel_named_by(&TS, 1)) < 0 || m == master))
            sleep_ms(50);
        if (m >= 0 && m != master)
            break;
    }
    if (m < 0 || m == master)
        sentinel_harness_failed("no failover behind the stale sentinel");
    *named = now_ms();
    /* Until the old master is demoted, it would still say "master". */
    until = now_ms() + 30000;
    for (;;) {
        redisReply *r = test_redis_cmd(&TS.data[master], "ROLE");
        int demoted = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                      strcmp(r->element[0]->str, "slave") == 0;
        freeReplyObject(r);
        if (demoted)
            break;
        if (now_ms() > until)
            sentinel_harness_failed("the old master was not demoted");
        sleep_ms(50);
    }
    for (i = 0; i < TS.ndata; i++)
        lab_kill_connections(&TS.data[i]);
    *named = now_ms();
    probe_start(pr);
    sleep_ms(s_between(RECOVER_MS + 1000, RECOVER_MS + 3000));
    lab_rule(netlab_heal(LAB));
    if (test_sentinel_wait_master(&TS, -1, 30000) < 0)
        sentinel_harness_failed("the sentinels did not agree again");
    return m;
}

/* Lab mode: the master cut off from the sentinels and the replicas while
 * the clients still reach it, until the sentinels named another; then
 * healed. Returns the new master, and in *named when it was named. */
static int master_cut_off(int master, int64_t *named) {
    int i, m;
    for (i = 0; i < lab_nsrv; i++)
        if (i != master)
            lab_rule(netlab_cut(LAB, lab_srv[master], lab_srv[i]));
    m = test_sentinel_wait_master(&TS, master, 30000);
    *named = now_ms();
    if (m < 0)
        sentinel_harness_failed("no new master while the old was cut off");
    sleep_ms(s_between(100, 2000));
    lab_rule(netlab_heal(LAB));
    return m;
}

static void one_sentinel_fault(void) {
    int f, master = test_sentinel_master(&TS), other = -1;
    int64_t t0 = now_ms(), t1 = 0, t2 = 0, over = 0;
    redisReply *r = NULL;
    char said[160] = "";
    probe pr;

    do
        f = s_between(0, SF_COUNT - 1);
    while (!cfg.lab && f >= SF_STALE_SENTINEL);
    sentinel_fault_count[f]++;
    if (master < 0)
        sentinel_harness_failed("no master named");
    if (f != SF_STALE_SENTINEL && f != SF_NET)
        probe_start(&pr);
    switch (f) {
    case SF_FAILOVER:
        /* A failover that does not happen (no replica good enough in
         * time) changes nothing: go on. */
        if ((other = test_sentinel_failover(&TS, 30000)) < 0)
            failovers_refused++;
        break;
    case SF_KILL:
        test_redis_kill(&TS.data[master]);
        if ((other = test_sentinel_wait_master(&TS, master, 30000)) < 0)
            sentinel_harness_failed("no new master after the kill");
        t1 = now_ms();
        sleep_ms(s_between(100, 2000));
        t2 = now_ms();
        if (test_redis_restart(&TS.data[master]) != 0)
            sentinel_harness_failed("restart");
        break;
    case SF_FREEZE_SENTINEL:
        other = s_between(0, TS.nsentinels - 1);
        /* Below 2 s: a sentinel whose timer was late by 2 s goes into
         * TILT mode and takes no part in a failover for 30 s (two of
         * them, and a killed master was never replaced). */
        test_redis_freeze(&TS.sentinel[other]);
        sleep_ms(s_between(100, 1500));
        test_redis_thaw(&TS.sentinel[other]);
        break;
    case SF_KILL_PUBSUB:
        r = test_redis_cmd(&TS.data[master], "CLIENT KILL TYPE pubsub");
        break;
    case SF_SCRIPT_FLUSH:
        r = test_redis_cmd(&TS.data[master], "SCRIPT FLUSH");
        break;
    case SF_SIGSTOP:
        sigstop_one(s_between(50, cfg.lease_max + 1000));
        break;
    case SF_STALE_SENTINEL:
        other = stale_sentinel(master, &over, &pr);
        break;
    case SF_MASTER_CUT_OFF:
        other = master_cut_off(master, &over);
        break;
    case SF_NET: {
        /* On one sentinel: a minority; the others still answer. */
        int nf = s_between(0, NF_COUNT - 1), sn = s_between(0, TS.nsentinels - 1);
        int node = lab_nsrv - TS.nsentinels + sn;
        lab_net_fault(nf, &node, (test_redis *const[]){&TS.sentinel[sn]}, 1, &pr, said,
                      sizeof said);
        if (NF_LEAVES_A_PATH(nf))
            over = t0;
        other = sn;
        break;
    }
    case SF_SENTINELS_DOWN:
        sentinels_down(master, &over, said, sizeof said);
        break;
    }
    if (r)
        freeReplyObject(r);
    if ((f == SF_FAILOVER && other >= 0) || f == SF_KILL || f == SF_STALE_SENTINEL ||
        f == SF_MASTER_CUT_OFF) {
        /* WAIT 2 is short until the old master is a replica in sync
         * again (the sentinels convert it when they see it). */
        int64_t until = now_ms() + 30000;
        while (!test_sentinel_is_replica(&TS, master) && now_ms() < until)
            sleep_ms(50);
        note_short_of_replicas(t0, now_ms() + REPLICA_ACK_MS);
    }
    fprintf(stderr, "torture: t=%lld fault %s: master %d", (long long)t0, sentinel_fault_names[f],
            master);
    if (f == SF_FAILOVER && other < 0)
        fprintf(stderr, ", did not happen");
    else if (f == SF_FAILOVER || f == SF_KILL)
        fprintf(stderr, " -> %d", other);
    if (f == SF_KILL)
        fprintf(stderr, ", promoted at t=%lld, restarted at t=%lld", (long long)t1, (long long)t2);
    if (f == SF_FREEZE_SENTINEL || f == SF_NET)
        fprintf(stderr, ", sentinel %d", other);
    if (f == SF_STALE_SENTINEL || f == SF_MASTER_CUT_OFF)
        fprintf(stderr, " -> %d, named at t=%lld", other, (long long)over);
    fprintf(stderr, "%s, done at t=%lld\n", said, (long long)now_ms());
    probe_check(&pr, over != 0 ? over : now_ms(), sentinel_fault_names[f]);
}

/* ---- the supervisor in Redlock mode ---- */

/*
 * Five independent servers without persistence, each behind a proxy of its
 * own. A fault takes one or two of them (RL_MINORITY) at random; servers
 * that are down count against that, so that a majority is always up and
 * the lock stays available - except in the majority-gone fault. A killed
 * server comes back empty, and only after it was down for the longest
 * lease (the delayed restart of the Redlock algorithm, DESIGN.md 9.2:
 * every hold that counted on its copy has ended by then); an earlier
 * restart can legitimately make two valid holders, so the schedule never
 * does it.
 */
#define RL_N 5
#define RL_MINORITY 2

#define MAX_GONE 256

static test_redis RS[RL_N];
static fault_proxy RP[RL_N];
static int64_t rl_killed_at[RL_N]; /* 0 while up; else when it was dead (reaped) */
static int64_t rl_restart_at[RL_N];

enum {
    RF_KILL,
    RF_FREEZE,
    RF_STALL,
    RF_DELAY,
    RF_HOLE,
    RF_CUT,
    RF_REFUSE,
    RF_KILL_PUBSUB,
    RF_SCRIPT_FLUSH,
    RF_SIGSTOP,
    RF_BRIDGE, /* lab mode only */
    RF_MAJORITY,
    RF_COUNT
};
static const char *const redlock_fault_names[RF_COUNT] = {
    "kill",   "freeze",      "stall",        "delay",   "blackhole", "cut",
    "refuse", "client-kill", "script-flush", "sigstop", "bridge",    "majority-gone"};
/* In the lab the proxy's faults are the network's (lab_net_fault). */
static const char *const redlock_lab_fault_names[RF_COUNT] = {
    "kill",          "freeze",  "cut",           "replies-lost",
    "syn-blackhole", "isolate", "requests-lost", "client-kill",
    "script-flush",  "sigstop", "bridge",        "majority-gone"};
static const int redlock_lab_net[RF_COUNT] = {[RF_STALL] = NF_CUT,
                                              [RF_DELAY] = NF_REPLIES_LOST,
                                              [RF_HOLE] = NF_SYN_HOLE,
                                              [RF_CUT] = NF_ISOLATE,
                                              [RF_REFUSE] = NF_REQUESTS_LOST};
static uint64_t redlock_fault_count[RF_COUNT];
static uint64_t rl_restarts;
static int64_t rl_min_down = INT64_MAX; /* shortest time a killed server stayed down */

/*
 * The majority-gone windows: from the moment a third server was dead or
 * frozen to the moment the first of them came back. check_majority_gone
 * asks of each: no grant, no hold valid past the window's start + the
 * longest lease, and every hold lost in it lost UNREACHABLE.
 */
static int64_t gone[MAX_GONE][2];
static int ngone;

static int rl_down_count(void) {
    int i, n = 0;
    for (i = 0; i < RL_N; i++)
        n += rl_killed_at[i] != 0;
    return n;
}

/* Up to k servers that are up, picked at random, into out[]; how many. */
static int rl_pick_up(int *out, int k) {
    int i, n = 0, up[RL_N], nup = 0;
    for (i = 0; i < RL_N; i++)
        if (rl_killed_at[i] == 0)
            up[nup++] = i;
    while (n < k && nup > 0) {
        int j = s_between(0, nup - 1);
        out[n++] = up[j];
        up[j] = up[--nup];
    }
    return n;
}

static void rl_kill(int s) {
    test_redis_kill(&RS[s]);
    rl_killed_at[s] = now_ms();
    rl_restart_at[s] = rl_killed_at[s] + cfg.lease_max;
}

/* Starts server s again, empty, if it has been down for the longest lease
 * (never earlier: see the top of this section). */
static void rl_restart(int s) {
    int64_t down = now_ms() - rl_killed_at[s];
    if (down < cfg.lease_max) {
        fprintf(stderr, "torture: bug in the schedule: server %d would come back after %lld ms\n",
                s, (long long)down);
        exit(2);
    }
    int restarted = test_redis_restart(&RS[s]);
    if (restarted != 0) {
        fprintf(stderr, "torture: redis-server %d did not come back\n", s);
        kill_workers();
        exit(2);
    }
    if (down < rl_min_down)
        rl_min_down = down;
    rl_killed_at[s] = 0;
    rl_restarts++;
}

/* Restarts the killed servers whose time came; with wait, waits for the
 * time of every one of them. */
static void rl_restart_due(int wait) {
    int i;
    for (i = 0; i < RL_N; i++) {
        if (rl_killed_at[i] == 0)
            continue;
        if (wait && now_ms() < rl_restart_at[i])
            sleep_ms(rl_restart_at[i] - now_ms());
        if (now_ms() >= rl_restart_at[i]) {
            int64_t down = now_ms() - rl_killed_at[i];
            rl_restart(i);
            fprintf(stderr, "torture: t=%lld server %d restarted empty after %lld ms down\n",
                    (long long)now_ms(), i, (long long)down);
        }
    }
}

/* CLIENT KILL TYPE pubsub or SCRIPT FLUSH on every server that is up;
 * what they said, for the fault's line. */
static void rl_on_every_server(int fault, char *out, size_t cap) {
    size_t used = 0;
    int i;

    out[0] = '\0';
    for (i = 0; i < RL_N; i++) {
        redisReply *r;
        if (rl_killed_at[i] != 0)
            continue;
        r = fault == RF_KILL_PUBSUB ? test_redis_cmd(&RS[i], "CLIENT KILL TYPE pubsub")
                                    : test_redis_cmd(&RS[i], "SCRIPT FLUSH");
        if (used < cap)
            used += (size_t)snprintf(out + used, cap - used, " %d:", i);
        if (used < cap && r && r->type == REDIS_REPLY_INTEGER)
            used += (size_t)snprintf(out + used, cap - used, "%lld", r->integer);
        else if (used < cap && r && (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR))
            used += (size_t)snprintf(out + used, cap - used, "%s", r->str);
        else if (used < cap)
            used += (size_t)snprintf(out + used, cap - used, "no answer");
        if (r)
            freeReplyObject(r);
    }
}

/* The majority-gone fault: servers killed or frozen until only a minority
 * is left, for longer than the longest lease; then back (the killed ones
 * empty: they have been down for a lease). */
static void rl_majority_gone(char *said, size_t cap) {
    int pick[RL_N], n, i, freeze = s_between(0, 1), down = rl_down_count();
    int64_t t_gone, t_back, hold;
    size_t used = 0;

    n = rl_pick_up(pick, RL_N - rl_down_count() - (RL_N / 2));
    for (i = 0; i < n; i++) {
        if (freeze)
            test_redis_freeze(&RS[pick[i]]);
        else
            rl_kill(pick[i]);
    }
    t_gone = now_ms();
    hold = s_between(cfg.lease_max + 200, cfg.lease_max + 1500);
    sleep_ms(hold);
    t_back = now_ms();
    for (i = 0; i < n; i++) {
        if (freeze)
            test_redis_thaw(&RS[pick[i]]);
        else
            rl_restart(pick[i]);
    }
    if (ngone < MAX_GONE) {
        gone[ngone][0] = t_gone;
        gone[ngone][1] = t_back;
        ngone++;
    }
    used += (size_t)snprintf(said + used, cap - used, "%s", freeze ? " frozen" : " killed");
    for (i = 0; i < n && used < cap; i++)
        used += (size_t)snprintf(said + used, cap - used, " %d", pick[i]);
    if (used < cap)
        snprintf(said + used, cap - used, " (with %d down): gone at t=%lld, back at t=%lld (%s)",
                 down, (long long)t_gone, (long long)t_back, freeze ? "thawed" : "restarted empty");
}

/* One fault on one or two servers (or on every server, or a worker). Each
 * line says what happened and when (CLOCK_MONOTONIC ms, the clock of the
 * violations' messages). */
static int redlock_clock_fault(void);

static void one_redlock_fault(int force_majority) {
    int f, k, n = 0, i, s[RL_N], budget;
    int64_t t0 = now_ms(), ms = 0;
    char said[200] = "";

    probe pr;

    rl_restart_due(0);
    if (redlock_clock_fault()) /* lab_clocks.c */
        return;
    budget = RL_MINORITY - rl_down_count();
    for (;;) {
        f = force_majority || s_between(0, 24) == 0 ? RF_MAJORITY : s_between(0, RF_MAJORITY - 1);
        if (f == RF_BRIDGE && (!cfg.lab || rl_down_count() > 0))
            continue; /* each side must still see a majority */
        if (budget > 0 || f == RF_KILL_PUBSUB || f == RF_SCRIPT_FLUSH || f == RF_SIGSTOP ||
            f == RF_BRIDGE || f == RF_MAJORITY)
            break;
    }
    redlock_fault_count[f]++;
    if (!cfg.lab || f < RF_STALL || f > RF_REFUSE)
        probe_start(&pr);
    if (f <= RF_REFUSE) {
        k = s_between(1, budget);
        n = rl_pick_up(s, k);
    }
    if (cfg.lab && f >= RF_STALL && f <= RF_REFUSE)
        f = -f - 1; /* the network's fault instead of the proxy's, below */
    switch (f) {
    case RF_KILL:
        for (i = 0; i < n; i++) {
            rl_kill(s[i]);
            /* Down for a lease at least, for up to 3 s more. */
            rl_restart_at[s[i]] += s_between(0, 3000);
        }
        break;
    case RF_FREEZE:
        for (i = 0; i < n; i++)
            test_redis_freeze(&RS[s[i]]);
        sleep_ms(ms = s_between(50, 3 * cfg.lease_max));
        for (i = 0; i < n; i++)
            test_redis_thaw(&RS[s[i]]);
        break;
    case RF_STALL: {
        int roles = s_between(1, 3);
        for (i = 0; i < n; i++)
            fp_stall(&RP[s[i]], roles, FP_BOTH, 1);
        sleep_ms(ms = s_between(20, 2 * cfg.lease_max));
        snprintf(said, sizeof said, " (%s)",
                 roles == FP_CMD   ? "cmd"
                 : roles == FP_SUB ? "sub"
                                   : "all");
        break;
    }
    case RF_DELAY: {
        int d = s_between(5, 120);
        for (i = 0; i < n; i++)
            fp_delay(&RP[s[i]], FP_ALL, FP_BOTH, d);
        sleep_ms(ms = s_between(500, 3000));
        snprintf(said, sizeof said, " (%d ms)", d);
        break;
    }
    case RF_HOLE: {
        int dir = s_between(1, 2);
        for (i = 0; i < n; i++)
            fp_blackhole(&RP[s[i]], s_between(1, 3), dir, 1);
        sleep_ms(ms = s_between(50, 1500));
        snprintf(said, sizeof said, " (%s)", dir == FP_UP ? "up" : "down");
        break;
    }
    case RF_CUT: {
        int roles = s_between(0, 1) ? FP_ALL : FP_SUB;
        for (i = 0; i < n; i++)
            fp_cut(&RP[s[i]], roles);
        snprintf(said, sizeof said, " (%s)", roles == FP_ALL ? "all" : "sub");
        break;
    }
    case RF_REFUSE:
        for (i = 0; i < n; i++) {
            fp_refuse(&RP[s[i]], FP_ALL, 1);
            fp_cut(&RP[s[i]], s_between(1, 3));
        }
        sleep_ms(ms = s_between(100, 1500));
        break;
    case RF_KILL_PUBSUB:
    case RF_SCRIPT_FLUSH:
        rl_on_every_server(f, said, sizeof said);
        break;
    case RF_SIGSTOP:
        sigstop_one(ms = s_between(50, 3 * cfg.lease_max));
        break;
    case RF_BRIDGE:
        ms = lab_bridge(said, sizeof said);
        break;
    case RF_MAJORITY:
        rl_majority_gone(said, sizeof said);
        break;
    default: /* lab mode: the network's fault for -f - 1 */
        f = -f - 1;
        test_redis *rs[RL_N];
        for (i = 0; i < n; i++)
            rs[i] = &RS[s[i]];
        ms = lab_net_fault(redlock_lab_net[f], s, rs, n, &pr, said, sizeof said);
    }
    for (i = 0; i < n && !cfg.lab; i++)
        fp_clear(&RP[s[i]]);
    fprintf(stderr, "torture: t=%lld fault %s", (long long)t0,
            (cfg.lab ? redlock_lab_fault_names : redlock_fault_names)[f]);
    if (n > 0) {
        fprintf(stderr, ": server%s", n > 1 ? "s" : "");
        for (i = 0; i < n; i++)
            fprintf(stderr, "%s%d", i ? "," : " ", s[i]);
    }
    if (ms > 0)
        fprintf(stderr, " for %lld ms", (long long)ms);
    if (f == RF_KILL)
        fprintf(stderr, " (%d down now)", rl_down_count());
    fprintf(stderr, "%s%s, done at t=%lld\n",
            f == RF_KILL_PUBSUB || f == RF_SCRIPT_FLUSH ? ", servers said" : "", said,
            (long long)now_ms());
    /* Across a bridge every worker sees a majority all along. */
    probe_check(&pr, f == RF_BRIDGE ? t0 : now_ms(),
                (cfg.lab ? redlock_lab_fault_names : redlock_fault_names)[f]);
}

/* ---- lab mode (--lab) ---- */

/* Back to the supervisor's own namespace, which reaches nothing: every
 * connection the harness makes to a server is made in the server's
 * namespace (test_redis_config.netns), and one that a slip made here
 * would go nowhere, never out of the machine. */
static void lab_out(void) {
    if (LAB != NULL && setns(lab_home, CLONE_NEWNET) != 0) {
        perror("torture: setns back home");
        exit(2);
    }
}

static void sv_violation(const char *fmt, ...) TEST_PRINTF_(1, 2);

/* The probe. */

/*
 * Availability after a fault: a fresh client in a node of its own (new
 * connections, every name resolved anew) asks, as the fault begins, for
 * a lock nobody else uses, with a wait that outlasts the fault. It must be
 * granted, and no later than RECOVER_MS after the fault was over: work
 * issued while disconnected waits until it connects or its own deadline
 * passes (DESIGN.md 7), a name with one live address connects, a slow or
 * frozen server is a connect timeout like any other. A fault that leaves
 * a path open the whole time (a dead first address or DNS server, a
 * bridge) is over, for this bound, the moment it began.
 */
#define PROBE_WAIT_MS 60000

typedef struct probe_result {
    int status;
    int64_t ended;
} probe_result;

static int lab_probe_node = -1;
static int lab_port;
static int probes;
static uint64_t probe_failures, probes_expected;

/* Per fault: how its probes ended, for the campaign's table (the "cell"
 * lines at the end). */
#define MAX_CELLS 32
static struct cell {
    const char *fault;
    uint64_t probes, failed, documented;
    uint64_t expected; /* violations the README documents (lab_expected.c) */
} cells[MAX_CELLS];
static int ncells;

static struct cell *cell_of(const char *fault) {
    for (int i = 0; i < ncells; i++)
        if (strcmp(cells[i].fault, fault) == 0)
            return &cells[i];
    if (ncells == MAX_CELLS)
        return &cells[MAX_CELLS - 1];
    cells[ncells].fault = fault;
    return &cells[ncells++];
}

static void probe_on_acquired(leash_lock *l, int status, void *arg) {
    probe_result *r = arg;
    (void)l;
    r->status = status;
    r->ended = now_ms();
    ev_break(W.loop, EVBREAK_ALL);
}

/* NULL, or what names the probe's lock instead of probe<n> (a cluster:
 * a name on the master the fault is on; lab_cluster.c). */
static void (*probe_name_fn)(char *name, size_t cap, int n);

static void probe_main(int fd, int n) {
    leash_options o;
    leash_client *c = NULL;
    leash_lock *l = NULL;
    char name[32];
    probe_result r = {-1000, 0};

    W.proc = -1;
    W.loop = ev_loop_new(EVFLAG_AUTO);
    client_options(&o, lab_port);
    snprintf(name, sizeof name, "probe%d", n);
    if (probe_name_fn != NULL)
        probe_name_fn(name, sizeof name, n);
    if (leash_client_new(&c, &o) != LEASH_OK || leash_libev_attach(W.loop, c) != LEASH_OK ||
        (l = leash_lock_new(c, name)) == NULL ||
        leash_acquire(l, PROBE_WAIT_MS, probe_on_acquired, &r) != LEASH_OK)
        _exit(3);
    ev_run(W.loop, 0);
    /* One server with replicas: a grant short of its WAIT fails at once;
     * the probe asks again until its wait ends (lab_replicas.c). */
    for (int64_t end = now_ms() + PROBE_WAIT_MS;
         cfg.replicas && r.status == LEASH_EREPLICAS && now_ms() < end - 100;) {
        sleep_ms(20);
        if (leash_acquire(l, end - now_ms(), probe_on_acquired, &r) != LEASH_OK)
            _exit(3);
        ev_run(W.loop, 0);
    }
    if (r.status == LEASH_OK)
        leash_release(l, NULL, NULL);
    leash_client_free(c); /* gives back what it still holds, then ends */
    ev_run(W.loop, 0);
    if (write(fd, &r, sizeof r) != (ssize_t)sizeof r)
        _exit(3);
    _exit(0);
}

static void probe_start(probe *p) {
    int fds[2];
    pid_t parent = getpid();

    p->pid = 0;
    if (LAB == NULL)
        return;
    p->n = ++probes;
    p->started = now_ms();
    if (pipe(fds) != 0) {
        perror("torture: pipe");
        exit(2);
    }
    fflush(stderr);
    p->pid = fork();
    if (p->pid < 0) {
        perror("torture: fork");
        exit(2);
    }
    if (p->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent || netlab_enter(LAB, lab_probe_node) != 0)
            _exit(3);
        close(fds[0]);
        probe_main(fds[1], p->n);
    }
    close(fds[1]);
    p->fd = fds[0];
}

/* The fault the probe ran across was over at `over`: the probe must end
 * granted by over + RECOVER_MS. */
static void probe_check(probe *p, int64_t over, const char *fault) {
    probe_result r = {-1000, 0};
    int status;
    ssize_t got;

    if (p->pid <= 0)
        return;
    struct cell *c = cell_of(fault);
    c->probes++;
    do
        got = read(p->fd, &r, sizeof r);
    while (got < 0 && errno == EINTR);
    close(p->fd);
    waitpid(p->pid, &status, 0);
    p->pid = 0;
    if (got != (ssize_t)sizeof r) {
        probe_failures++;
        c->failed++;
        sv_violation("availability: probe %d across %s died (status 0x%x)", p->n, fault, status);
    } else if (r.status == LEASH_EREPLICAS && short_during(p->started, r.ended)) {
        /* docs/sentinel.md "Redis Sentinel": while the master has fewer replicas in
         * sync than wait_replicas, grants fail EREPLICAS. */
        probes_expected++;
        c->documented++;
        fprintf(stderr,
                "torture: probe %d across %s ended %s at t=%lld: expected (the master was short "
                "of replicas)\n",
                p->n, fault, leash_strerror(r.status), (long long)r.ended);
    } else if (r.status == LEASH_EREDIS && full_during(p->started, r.ended)) {
        /* docs/how-it-works.md "What Redis must be and do": a full Redis (noeviction)
         * refuses the acquire (lab_ops.c). */
        probes_expected++;
        c->documented++;
        fprintf(stderr,
                "torture: probe %d across %s ended %s at t=%lld: expected (the server was full)\n",
                p->n, fault, leash_strerror(r.status), (long long)r.ended);
    } else if (r.status != LEASH_OK) {
        probe_failures++;
        c->failed++;
        sv_violation("availability: probe %d across %s (over at t=%lld): a fresh client's "
                     "acquire of a free lock ended %s at t=%lld",
                     p->n, fault, (long long)over, leash_strerror(r.status), (long long)r.ended);
    } else if (r.ended > over + RECOVER_MS) {
        probe_failures++;
        c->failed++;
        sv_violation("availability: probe %d across %s (over at t=%lld): granted at t=%lld, "
                     "%lld ms after the fault was over (at most %d)",
                     p->n, fault, (long long)over, (long long)r.ended, (long long)(r.ended - over),
                     RECOVER_MS);
    }
}

/* Between 1 and every worker's node, picked at random, into out[]. */
static int lab_pick_clients(int *out) {
    int i, n = 0, k = s_between(1, cfg.procs), left[MAX_PROCS], nleft = cfg.procs;
    for (i = 0; i < cfg.procs; i++)
        left[i] = lab_cli[i];
    while (n < k) {
        int j = s_between(0, nleft - 1);
        out[n++] = left[j];
        left[j] = left[--nleft];
    }
    return n;
}

static void lab_rule(int ok) {
    if (ok != 0) {
        fprintf(stderr, "torture: a lab rule was refused\n");
        kill_workers();
        exit(2);
    }
}

/* Server s's name resolves to addrs (NULL: NXDOMAIN) on every DNS server. */
static void lab_name_set(int s, const char *addrs) {
    for (int i = 0; i < 2; i++)
        if (test_dns_set(&lab_dns[i], lab_names[s], addrs) != 0) {
            fprintf(stderr, "torture: the lab's DNS server %d did not take a name\n", i);
            exit(2);
        }
}

/* Every client connection of server r closed: they connect again, and
 * resolve its name again. */
static void lab_kill_connections(test_redis *r) {
    redisReply *x;
    if ((x = test_redis_cmd(r, "CLIENT KILL TYPE normal")) != NULL)
        freeReplyObject(x);
    if ((x = test_redis_cmd(r, "CLIENT KILL TYPE pubsub")) != NULL)
        freeReplyObject(x);
}

/* pr: a probe to start once the fault is in place. */
static int64_t lab_net_fault(int nf, const int *servers, test_redis *const *rs, int nservers,
                             probe *pr, char *said, size_t cap) {
    int cli[MAX_PROCS + 1], n = nf <= NF_REQUESTS_LOST ? lab_pick_clients(cli) : 0, i, k;
    int64_t ms, dns_ms = 0;

    /* The probe's path always suffers what the picked workers' do. */
    if (n > 0)
        cli[n] = lab_probe_node;

    for (k = 0; k < nservers; k++) {
        int node = lab_srv[servers[k]];
        test_redis *r = rs[k];
        for (i = 0; i < n + (n > 0); i++) {
            if (nf == NF_CUT)
                lab_rule(netlab_cut(LAB, node, cli[i]));
            else if (nf == NF_REPLIES_LOST)
                lab_rule(netlab_cut_oneway(LAB, node, cli[i]));
            else
                lab_rule(netlab_cut_oneway(LAB, cli[i], node));
        }
        if (nf == NF_SYN_HOLE) {
            /* Where the clients connect: over TLS, the TLS port. */
            lab_rule(
                netlab_drop_syn(LAB, node, cfg.tls && r->tls_port > 0 ? r->tls_port : r->port));
            lab_kill_connections(r);
        } else if (nf == NF_ISOLATE) {
            lab_rule(netlab_isolate(LAB, node));
        } else if (nf == NF_DEAD_FIRST) {
            char addrs[64];
            snprintf(addrs, sizeof addrs, "%s,%s", netlab_addr(LAB, lab_ghost),
                     netlab_addr(LAB, node));
            if (k == 0)
                lab_rule(netlab_drop_syn(LAB, lab_ghost, 0));
            lab_name_set(servers[k], addrs);
            lab_kill_connections(r);
        } else if (nf == NF_DNS_DEAD) {
            if (k == 0)
                lab_rule(netlab_isolate(LAB, lab_dns_node[0]));
            lab_kill_connections(r);
        } else if (nf == NF_NXDOMAIN) {
            lab_name_set(servers[k], NULL);
            lab_kill_connections(r);
        } else if (nf == NF_DNS_SLOW) {
            /* Up to five connect timeouts: the clients connect again,
             * asking the name again, after every CLIENT KILL. */
            if (k == 0) {
                dns_ms = s_between(50, 5 * cfg.command_timeout);
                for (i = 0; i < 2; i++)
                    if (test_dns_delay(&lab_dns[i], dns_ms) != 0)
                        lab_rule(-1);
            }
            lab_kill_connections(r);
        }
    }
    probe_start(pr);
    ms = nf == NF_ISOLATE ? s_between(50, 2 * cfg.lease_max) : s_between(50, 3 * cfg.lease_max);
    if (NF_LEAVES_A_PATH(nf)) /* longer than the probe may take to get through */
        ms = s_between(RECOVER_MS + 1000, RECOVER_MS + 4000);
    sleep_ms(ms);
    lab_rule(netlab_heal(LAB));
    for (k = 0; k < nservers; k++)
        lab_name_set(servers[k], netlab_addr(LAB, lab_srv[servers[k]]));
    if (dns_ms > 0)
        for (i = 0; i < 2; i++)
            if (test_dns_delay(&lab_dns[i], 0) != 0)
                lab_rule(-1);
    if (n > 0)
        snprintf(said, cap, " (%s, %d of %d workers)", net_fault_names[nf], n, cfg.procs);
    else if (dns_ms > 0)
        snprintf(said, cap, " (%s, answers %lld ms late)", net_fault_names[nf], (long long)dns_ms);
    else
        snprintf(said, cap, " (%s)", net_fault_names[nf]);
    return ms;
}

/* Redlock in the lab: the workers split in two groups that each see a
 * different majority of the servers, sharing one (A sees 0-2, B sees
 * 2-4, as a permutation of the servers): a bridge, where every worker
 * can still be granted the lock, by majorities that overlap in one
 * server. */
static int64_t lab_bridge(char *said, size_t cap) {
    int perm[RL_N], i, j, ina = 0;
    int64_t ms;

    for (i = 0; i < RL_N; i++)
        perm[i] = i;
    for (i = RL_N - 1; i > 0; i--) {
        int t;
        j = s_between(0, i);
        t = perm[i], perm[i] = perm[j], perm[j] = t;
    }
    for (i = 0; i <= cfg.procs; i++) {
        int in_a = s_between(0, 1), node = i < cfg.procs ? lab_cli[i] : lab_probe_node;
        ina += in_a && i < cfg.procs;
        for (j = 0; j < 2; j++)
            lab_rule(netlab_cut(LAB, node, lab_srv[perm[in_a ? 3 + j : j]]));
    }
    sleep_ms(ms = s_between(cfg.lease_min, 3 * cfg.lease_max));
    lab_rule(netlab_heal(LAB));
    snprintf(said, cap, " (%d workers see %d,%d,%d; %d see %d,%d,%d)", ina, perm[0], perm[1],
             perm[2], cfg.procs - ina, perm[2], perm[3], perm[4]);
    return ms;
}

/* One server in the lab: the network faults, and what the server and the
 * workers' processes suffer. */
enum {
    LF_FREEZE = NF_COUNT, /* below it: the network faults, NF_* */
    LF_DEBUG_SLEEP,
    LF_RESTART,
    LF_KILL_PUBSUB,
    LF_SIGSTOP,
    LF_SCRIPT_FLUSH,
    LF_RESTART_EMPTY, /* SIGKILL, back without its data: see README_RESTART_EMPTY */
    LF_CLOCK_FORWARD, /* lab_clocks.c */
    LF_CLOCK_BACK,
    LF_CLOCK_DRIFT,
    LF_NAME_MOVES, /* lab_ops.c */
    LF_MAXMEMORY,
    LF_COUNT
};
static const char *const lab_fault_names[] = {
    NET_FAULT_NAMES, "freeze-server", "debug-sleep",   "restart",       "client-kill",
    "sigstop",       "script-flush",  "restart-empty", "clock-forward", "clock-back",
    "clock-drift",   "name-moves",    "maxmemory"};
_Static_assert(sizeof lab_fault_names / sizeof lab_fault_names[0] == LF_COUNT,
               "a name for every fault of the one-server lab");
static uint64_t lab_fault_count[LF_COUNT];

static int lab_fault_named(const char *name) {
    for (int f = 0; f < LF_COUNT; f++)
        if (strcmp(lab_fault_names[f], name) == 0)
            return f;
    return -1;
}

/* Clock steps: their own file; what operators do: another. */
#include "lab_clocks.c"
#include "lab_ops.c"

static int replicas_fault(void);
static void replicas_after_lab_fault(int f, int64_t t0);

/* docs/how-it-works.md "What Redis must be and do", where it says what a restart
 * without the data costs. */
#define README_RESTART_EMPTY                                                                     \
    "docs/how-it-works.md \"What Redis must be and do\", \"Data kept across a restart\": a "     \
    "server that "                                                                               \
    "restarts without its data forgets the locks it held, and another client can be granted "    \
    "one while its holder's hold is still valid, for up to a lease (stay clear: appendonly yes " \
    "with appendfsync always, or keep the server from answering for a lease after it is up)"

/* The server SIGKILLed and started again without its data (no AOF, no
 * RDB: the documented unsafe case): two holders are expected until every
 * hold granted before the kill ran out, a lease after it. */
static void restart_empty(void) {
    int w = expect_open(now_ms(), "restart-empty", README_RESTART_EMPTY, 0);
    int64_t killed;

    test_redis_kill(&R);
    killed = now_ms();
    sleep_ms(s_between(0, 600));
    if (test_redis_restart(&R) != 0) {
        fprintf(stderr, "torture: redis-server did not come back\n");
        kill_workers();
        exit(2);
    }
    expect_close(w, killed + cfg.lease_max + 50);
}

static void one_lab_fault(void) {
    if (cfg.replicas && replicas_fault())
        return;
    int f = s_between(0, LF_COUNT - 1);

    if (cfg.only != NULL)
        f = lab_fault_named(cfg.only);
    int64_t t0 = now_ms(), ms = 0;
    char said[160] = "";
    probe pr;

    lab_fault_count[f]++;
    if (f >= NF_COUNT)
        probe_start(&pr);
    if (f < NF_COUNT) {
        ms = lab_net_fault(f, (const int[]){0}, (test_redis *const[]){&R}, 1, &pr, said,
                           sizeof said);
    } else {
        switch (f) {
        case LF_FREEZE:
            test_redis_freeze(&R);
            sleep_ms(ms = s_between(50, 3 * cfg.lease_max));
            test_redis_thaw(&R);
            break;
        case LF_DEBUG_SLEEP: {
            char cmd[40];
            ms = s_between(50, 2000);
            snprintf(cmd, sizeof cmd, "DEBUG SLEEP %.3f", (double)ms / 1000.0);
            admin(cmd);
            break;
        }
        case LF_RESTART:
            test_redis_kill(&R);
            sleep_ms(s_between(0, 600));
            /* In its namespace (test_redis_config.netns), with its data. */
            if (test_redis_restart_keeping_data(&R) != 0) {
                fprintf(stderr, "torture: redis-server did not come back\n");
                kill_workers();
                exit(2);
            }
            break;
        case LF_KILL_PUBSUB:
            admin("CLIENT KILL TYPE pubsub");
            break;
        case LF_SIGSTOP:
            sigstop_one(ms = s_between(50, 3 * cfg.lease_max));
            break;
        case LF_SCRIPT_FLUSH:
            admin("SCRIPT FLUSH");
            break;
        case LF_RESTART_EMPTY:
            restart_empty();
            break;
        case LF_CLOCK_FORWARD:
        case LF_CLOCK_BACK:
            clock_fault(f == LF_CLOCK_FORWARD, said, sizeof said);
            break;
        case LF_CLOCK_DRIFT:
            ms = clock_drift(said, sizeof said);
            break;
        case LF_NAME_MOVES:
            ms = name_moves(said, sizeof said);
            break;
        case LF_MAXMEMORY:
            ms = maxmemory_full(said, sizeof said);
            break;
        }
    }
    if (cfg.replicas)
        replicas_after_lab_fault(f, t0);
    fprintf(stderr, "torture: t=%lld fault %s", (long long)t0, lab_fault_names[f]);
    if (ms > 0)
        fprintf(stderr, " for %lld ms", (long long)ms);
    fprintf(stderr, "%s, done at t=%lld\n", said, (long long)now_ms());
    /* A moved name leaves a path open, but not to replicas that follow
     * the old address (replicaof): with them, over once they are back. */
    probe_check(&pr,
                (f < NF_COUNT && NF_LEAVES_A_PATH(f)) || (f == LF_NAME_MOVES && !cfg.replicas)
                    ? t0
                    : now_ms(),
                lab_fault_names[f]);
    if (f == LF_MAXMEMORY)
        ops_recovery_probe(lab_fault_names[f]);
}

/* The lab and a node for each of nservers servers (not started yet: each
 * is started with its node's address and namespace, lab_place). Exits 77
 * where no lab can be made. 0, or -1 with the reason on stderr. */
static int lab_make(int nservers) {
    char why[160];
    int i;

    if (!netlab_usable(why, sizeof why)) {
        printf("SKIP torture --lab: %s\n", why);
        exit(77);
    }
    if ((LAB = netlab_new(NULL)) == NULL)
        return -1;
    /* The supervisor leaves the host's namespace for an empty one. */
    if (unshare(CLONE_NEWNET) != 0 ||
        (lab_home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0) {
        perror("torture: a namespace of the supervisor's own");
        return -1;
    }
    for (i = 0; i < nservers; i++) {
        char name[16];
        snprintf(name, sizeof name, "redis%d", i);
        if ((lab_srv[i] = netlab_node(LAB, name)) < 0)
            return -1;
    }
    lab_nsrv = nservers;
    return 0;
}

/* Server s's config: on its node, over TLS with --tls. */
static test_redis_config lab_place(int s, const test_redis_config *rc) {
    test_redis_config c = *rc;
    c.host = netlab_addr(LAB, lab_srv[s]);
    c.netns = netlab_ns_path(LAB, lab_srv[s]);
    if (cfg.tls && (c.tls_dir = test_tls_certs()) == NULL) {
        fprintf(stderr, "torture: no certificates\n");
        exit(2);
    }
    return c;
}

/* The rest of the lab once the servers run: a node per worker, the
 * probe's, a dead address, two DNS servers, and every server's name. */
static int lab_finish(void) {
    int i;

    for (i = 0; i < cfg.procs; i++) {
        char name[16];
        snprintf(name, sizeof name, "worker%d", i);
        if ((lab_cli[i] = netlab_node(LAB, name)) < 0)
            return -1;
    }
    if ((lab_probe_node = netlab_node(LAB, "probe")) < 0 ||
        (lab_ghost = netlab_node(LAB, "ghost")) < 0)
        return -1;
    for (i = 0; i < 2; i++) {
        char name[16];
        snprintf(name, sizeof name, "dns%d", i);
        if ((lab_dns_node[i] = netlab_node(LAB, name)) < 0 ||
            netlab_enter(LAB, lab_dns_node[i]) != 0)
            return -1;
        int started = test_dns_start_at(&lab_dns[i], netlab_addr(LAB, lab_dns_node[i]));
        lab_out();
        if (started != 0)
            return -1;
    }
    snprintf(lab_dns_servers, sizeof lab_dns_servers, "%s,%s", lab_dns[0].servers,
             lab_dns[1].servers);
    for (i = 0; i < lab_nsrv; i++) {
        snprintf(lab_names[i], sizeof lab_names[i], "redis%d.lab.test", i);
        lab_name_set(i, netlab_addr(LAB, lab_srv[i]));
    }
    fprintf(stderr,
            "torture: a lab of %d servers (the first at %s) and %d workers, each in a "
            "network namespace of its own\n",
            lab_nsrv, netlab_addr(LAB, lab_srv[0]), cfg.procs);
    return 0;
}

/* One server or Redlock's: the lab, its servers, the rest. */
static int lab_start(int nservers, test_redis *servers, const test_redis_config *rc) {
    if (lab_make(nservers) != 0)
        return -1;
    for (int i = 0; i < nservers; i++) {
        test_redis_config c = lab_place(i, rc);
        if (test_redis_start(&servers[i], &c) != 0)
            return -1;
    }
    return lab_finish();
}

/* Redis Cluster in the lab (--lab --cluster): its own file, see its top. */
#include "lab_cluster.c"
/* One server with two replicas (--replicas): its own file. */
#include "lab_replicas.c"

/* ---- the checks ---- */

static uint64_t violations;

static void sv_violation(const char *fmt, ...) TEST_PRINTF_(1, 2);
static void sv_violation(const char *fmt, ...) {
    va_list ap;
    if (++violations > 30)
        return;
    fprintf(stderr, "torture: VIOLATION ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* 1 if proc was stopped at some moment of [from, to]. */
static int stopped_during(int proc, int64_t from, int64_t to) {
    const worker_shm *w = &S->w[proc];
    int i;
    for (i = 0; i < w->nstops; i++)
        if (w->stops[i][0] <= to && w->stops[i][1] >= from)
            return 1;
    return 0;
}

static int by_name_lo(const void *x, const void *y) {
    const rec *a = x, *b = y;
    if (a->type != b->type)
        return a->type - b->type;
    if (a->name != b->name)
        return a->name - b->name;
    if (a->type == REC_ACQ) {
        if (a->fence != b->fence)
            return a->fence < b->fence ? -1 : 1;
        return a->b < b->b ? -1 : a->b > b->b;
    }
    return a->a < b->a ? -1 : a->a > b->a;
}

static int same_hold(const rec *a, const rec *b) {
    return a->proc == b->proc && a->handle == b->handle && a->hold == b->hold;
}

typedef struct figures {
    uint64_t acquisitions, handoffs, units;
    uint64_t shared_fences; /* read or semaphore grants that shared a fence */
    int max_valid;          /* the most holds of one name valid at one instant */
    int64_t max_lost_late, max_acq_late;
    uint64_t gone_losts;     /* Redlock: holds lost in a majority-gone window */
    uint64_t floors, no_ttl; /* Redlock: fence floors left at the end; of them without a TTL */
    int64_t floor_ttl_max;   /* the longest TTL among them */
    uint64_t state_reads;    /* answered state reads */
} figures;

/* The two claims reaching furthest among those seen so far of one name,
 * from two different holds (a hold's own units never overlap each other,
 * but the furthest claim may be the new unit's own hold). */
typedef struct reach {
    const rec *r[2];
} reach;

static void reach_add(reach *t, const rec *x) {
    if (t->r[0] != NULL && same_hold(t->r[0], x)) {
        if (x->b > t->r[0]->b)
            t->r[0] = x;
        return;
    }
    if (t->r[1] != NULL && same_hold(t->r[1], x)) {
        if (x->b > t->r[1]->b)
            t->r[1] = x;
    } else if (t->r[1] == NULL || x->b > t->r[1]->b) {
        t->r[1] = x;
    }
    if (t->r[0] == NULL || (t->r[1] != NULL && t->r[1]->b > t->r[0]->b)) {
        const rec *tmp = t->r[0];
        t->r[0] = t->r[1];
        t->r[1] = tmp;
    }
}

/* A claim of t that overlaps x (another hold's), or NULL. */
static const rec *reach_overlap(const reach *t, const rec *x) {
    int k;
    for (k = 0; k < 2; k++)
        if (t->r[k] != NULL && !same_hold(t->r[k], x) && x->a < t->r[k]->b)
            return t->r[k];
    return NULL;
}

typedef struct edge {
    int64_t t;
    int d; /* +1: a claim starts, -1: one ends */
} edge;

static int by_edge(const void *x, const void *y) {
    const edge *a = x, *b = y;
    if (a->t != b->t)
        return a->t < b->t ? -1 : 1;
    return a->d - b->d; /* ends first: the claims are half-open */
}

/* The most claims of one name valid at one instant, units r[lo..hi)
 * (sorted by start); over cfg.permits with --semaphore is a violation. */
static void sweep_name(figures *fg, const rec *r, uint64_t lo, uint64_t hi) {
    edge *e = malloc(sizeof(edge) * 2 * (hi - lo + 1));
    uint64_t i, k = 0;
    int cur = 0, worst = 0;
    int64_t worst_at = 0;

    if (e == NULL)
        return;
    for (i = lo; i < hi; i++)
        if (r[i].b > r[i].a) {
            e[k].t = r[i].a, e[k++].d = 1;
            e[k].t = r[i].b, e[k++].d = -1;
        }
    qsort(e, k, sizeof *e, by_edge);
    for (i = 0; i < k; i++) {
        cur += e[i].d;
        if (cur > worst)
            worst = cur, worst_at = e[i].t;
    }
    free(e);
    if (worst > fg->max_valid)
        fg->max_valid = worst;
    if (cfg.kind == K_SEM && worst > cfg.permits && !expected(worst_at, "more holds than permits"))
        sv_violation("name n%d: %d holds valid at t=%lld, over the %d permits", r[lo].name, worst,
                     (long long)worst_at, cfg.permits);
}

/* A state read that says "free" must not span a claim: a hold valid from
 * before the read was asked until after it ended had its key in Redis at
 * the moment of the read. Strictly before and after, in ms: within one ms
 * a read can run before the grant it seems to follow (the times are
 * whole ms), or after the release that ends the claim. r is sorted (by_name_lo): units, then state
 * reads, each by name and start. Not on Redlock: its reader sees a hold
 * only where a majority of the servers answered it, and a hold needs only
 * a majority to have been granted (with one of them down, the reader's
 * answers and the holder's may share a single server). */
static void check_state_reads(const rec *r, uint64_t n) {
    uint64_t u0 = 0, u1, s0, i, j, lo, hi;
    const rec **best;

    if (cfg.redlock)
        return;
    while (u0 < n && r[u0].type != REC_UNIT)
        u0++;
    for (u1 = u0; u1 < n && r[u1].type == REC_UNIT; u1++)
        ;
    for (s0 = u1; s0 < n && r[s0].type != REC_STATE; s0++)
        ;
    /* best[k]: of the units u0..u0+k of one name, the one reaching furthest. */
    best = malloc((size_t)(u1 - u0 + 1) * sizeof *best);
    if (best == NULL)
        return;
    for (i = u0; i < u1; i++)
        best[i - u0] = i > u0 && r[i - 1].name == r[i].name && best[i - 1 - u0]->b > r[i].b
                           ? best[i - 1 - u0]
                           : &r[i];
    for (i = s0; i < n && r[i].type == REC_STATE; i++) {
        const rec *x = &r[i], *u;
        if (x->status != LEASH_OK || (x->flags & F_STATE_HELD))
            continue;
        /* The last unit of x's name that started before x. */
        lo = u0, hi = u1;
        while (lo < hi) {
            j = lo + (hi - lo) / 2;
            if (r[j].name < x->name || (r[j].name == x->name && r[j].a < x->a))
                lo = j + 1;
            else
                hi = j;
        }
        if (lo == u0 || r[lo - 1].name != x->name)
            continue;
        u = best[lo - 1 - u0];
        if (u->b > x->b && !expected(x->a, "a state read said free while a hold was valid"))
            sv_violation("name n%d: a state read on [%lld, %lld] (proc %d) said free while proc "
                         "%d handle %d%s fence %" PRIu64 " held it, valid on [%lld, %lld]",
                         x->name, (long long)x->a, (long long)x->b, x->proc, u->proc, u->handle,
                         (u->flags & F_READ) ? " (read)" : "", u->fence, (long long)u->a,
                         (long long)u->b);
    }
    free(best);
}

static void check_log(figures *fg) {
    uint64_t n = S->nrec < S->cap ? S->nrec : S->cap, i, name_lo = 0;
    rec *r = S->recs;
    reach all, writes;

    if (S->dropped)
        sv_violation("the log was full: %" PRIu64 " records dropped", S->dropped);
    qsort(r, n, sizeof *r, by_name_lo);
    check_state_reads(r, n);
    fg->max_lost_late = fg->max_acq_late = INT64_MIN;
    for (i = 0; i < n; i++) {
        const rec *x = &r[i];
        if (x->type == REC_UNIT) {
            const rec *o;
            fg->units++;
            if (i == 0 || r[i - 1].type != REC_UNIT || r[i - 1].name != x->name) {
                memset(&all, 0, sizeof all);
                memset(&writes, 0, sizeof writes);
                name_lo = i;
            }
            /* Exclusive holds overlap no other claim; read holds no
             * write claim; semaphore holds are counted below. */
            o = cfg.kind == K_SEM                         ? NULL
                : cfg.kind == K_RW && (x->flags & F_READ) ? reach_overlap(&writes, x)
                                                          : reach_overlap(&all, x);
            if (o != NULL && !expected(x->a, "two holds valid at once"))
                sv_violation("name n%d: proc %d handle %d%s fence %" PRIu64 " valid on "
                             "[%lld, %lld] overlaps proc %d handle %d%s fence %" PRIu64
                             " valid on [%lld, %lld]",
                             x->name, x->proc, x->handle, (x->flags & F_READ) ? " (read)" : "",
                             x->fence, (long long)x->a, (long long)x->b, o->proc, o->handle,
                             (o->flags & F_READ) ? " (read)" : "", o->fence, (long long)o->a,
                             (long long)o->b);
            reach_add(&all, x);
            if (!(x->flags & F_READ))
                reach_add(&writes, x);
            if (i + 1 == n || r[i + 1].type != REC_UNIT || r[i + 1].name != x->name)
                sweep_name(fg, r, name_lo, i + 1);
        } else if (x->type == REC_ACQ) {
            int64_t late, allow;
            if (x->status == LEASH_OK) {
                fg->acquisitions++;
                if (i > 0 && r[i - 1].type == REC_ACQ && r[i - 1].status == LEASH_OK &&
                    r[i - 1].name == x->name && r[i - 1].fence == x->fence) {
                    if (shared_kind(x->flags & F_READ) && shared_kind(r[i - 1].flags & F_READ))
                        fg->shared_fences++;
                    else
                        sv_violation("name n%d: fence %" PRIu64 " granted twice (proc %d handle "
                                     "%d%s, proc %d handle %d%s)",
                                     x->name, x->fence, x->proc, x->handle,
                                     (x->flags & F_READ) ? " (read)" : "", r[i - 1].proc,
                                     r[i - 1].handle, (r[i - 1].flags & F_READ) ? " (read)" : "");
                }
            }
            /* The single mode's bound: command_timeout_ms + slack after
             * the wait (try-once: after the start); in cluster mode more
             * while a master was short of replicas (see short_of_replicas). */
            allow = cfg.command_timeout + cfg.slack_ms +
                    ((cfg.cluster || cfg.sentinel || cfg.replicas) && short_during(x->a, x->b)
                         ? wait_queue_ms()
                         : 0);
            if (x->c > 0) {
                late = x->b - (x->a + x->c);
                if (x->status == LEASH_ETIMEDOUT && late < -2)
                    sv_violation("proc %d handle %d: ETIMEDOUT %lld ms before its %lld ms wait",
                                 x->proc, x->handle, (long long)-late, (long long)x->c);
                late -= x->lag; /* what the loop itself suffered is not the engine's */
                if (late > fg->max_acq_late && !stopped_during(x->proc, x->a, x->b))
                    fg->max_acq_late = late;
                if (late > allow && !stopped_during(x->proc, x->a, x->b))
                    sv_violation("proc %d handle %d: acquire (wait %lld ms) of n%d asked at t=%lld "
                                 "ended %s %lld ms after its wait",
                                 x->proc, x->handle, (long long)x->c, x->name, (long long)x->a,
                                 leash_status_name(x->status), (long long)late);
            } else if (x->c == 0) {
                /* A trickle that began by the time it should have been
                 * answered: one that began later excuses nothing. */
                int64_t trickled =
                    spans_end_during(&trickles, x->a, x->b < x->a + allow ? x->b : x->a + allow);
                late = x->b - (trickled > x->a ? trickled : x->a) - x->lag;
                if (late > allow && !stopped_during(x->proc, x->a, x->b))
                    sv_violation("proc %d handle %d: try-once acquire of n%d asked at t=%lld "
                                 "ended %s after %lld ms",
                                 x->proc, x->handle, x->name, (long long)x->a,
                                 leash_status_name(x->status), (long long)(x->b - x->a));
            }
        } else if (x->type == REC_STATE) {
            /* A state read: bounded like a try-once acquire (Redlock:
             * each server answers or times out in command_timeout_ms). */
            int64_t late = x->b - x->a - x->lag,
                    allow =
                        cfg.command_timeout + cfg.slack_ms +
                        ((cfg.cluster || cfg.sentinel) && short_during(x->a, x->b) ? wait_queue_ms()
                                                                                   : 0);
            if (x->status == LEASH_OK)
                fg->state_reads++;
            if (x->status != LEASH_ECANCELED && late > allow &&
                !stopped_during(x->proc, x->a, x->b))
                sv_violation("proc %d: state read of n%d asked at t=%lld ended %s after %lld ms",
                             x->proc, x->name, (long long)x->a, leash_status_name(x->status),
                             (long long)(x->b - x->a));
        } else if (x->type == REC_LOST) {
            /* Lateness beyond what the worker's loop itself suffered. */
            int64_t late = x->a - x->b - x->lag;
            if (stopped_during(x->proc, x->b - cfg.tol_ms, x->a))
                continue;
            if (late > fg->max_lost_late)
                fg->max_lost_late = late;
            if (late > cfg.tol_ms)
                sv_violation("proc %d handle %d: lost (%s) of n%d fired at t=%lld, %lld ms "
                             "after the local deadline, the loop being %lld ms late (fence "
                             "%" PRIu64 ")",
                             x->proc, x->handle, leash_lost_reason_name(x->flags), x->name,
                             (long long)x->a, (long long)(x->a - x->b), (long long)x->lag,
                             x->fence);
        }
    }
    /* Handoffs: consecutive grants of a name, by time, to different handles. */
    {
        rec *g = malloc(sizeof(rec) * (fg->acquisitions + 1));
        uint64_t k = 0, j;
        for (i = 0; i < n; i++)
            if (r[i].type == REC_ACQ && r[i].status == LEASH_OK)
                g[k++] = r[i];
        /* Sorted by name then fence: fences grow with time per name. */
        for (j = 1; j < k; j++)
            if (g[j].name == g[j - 1].name &&
                (g[j].proc != g[j - 1].proc || g[j].handle != g[j - 1].handle))
                fg->handoffs++;
        free(g);
    }
}

static void check_redis_empty(void) {
    redisReply *r = test_redis_cmd(&R, "KEYS %s*", PREFIX);
    size_t i;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        sv_violation("cannot list the keys left in Redis");
    } else {
        for (i = 0; i < r->elements; i++) {
            long long ttl = test_redis_int(&R, "PTTL %s", r->element[i]->str);
            sv_violation("lock %s left in Redis (pttl %lld ms)", r->element[i]->str, ttl);
        }
    }
    if (r)
        freeReplyObject(r);
}

/* Cluster mode: every master (a replica has its master's keys). */
static void check_cluster_empty(void) {
    int m[TEST_CLUSTER_MAX_NODES], n = live_masters(m), i;
    size_t k;

    if (n == 0)
        sv_violation("no live master to list the keys left");
    for (i = 0; i < n; i++) {
        redisReply *r = test_cluster_cmd(&C, m[i], "KEYS %s*", PREFIX);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
            sv_violation("cannot list the keys left on master %d", m[i]);
        } else {
            for (k = 0; k < r->elements; k++) {
                long long ttl = test_cluster_int(&C, m[i], "PTTL %s", r->element[k]->str);
                sv_violation("lock %s left on master %d (pttl %lld ms)", r->element[k]->str, m[i],
                             ttl);
            }
        }
        if (r)
            freeReplyObject(r);
    }
}

/* Sentinel mode: the keys under PREFIX on the master named at the end. */
static void check_sentinel_empty(void) {
    int m = test_sentinel_wait_master(&TS, -1, 30000);
    redisReply *r;
    size_t k;

    if (m < 0) {
        sv_violation("no master to list the keys left");
        return;
    }
    r = test_redis_cmd(&TS.data[m], "KEYS %s*", PREFIX);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        sv_violation("cannot list the keys left on the master");
    for (k = 0; r != NULL && r->type == REDIS_REPLY_ARRAY && k < r->elements; k++)
        sv_violation("lock %s left on the master (pttl %lld ms)", r->element[k]->str,
                     test_redis_int(&TS.data[m], "PTTL %s", r->element[k]->str));
    if (r)
        freeReplyObject(r);
}

/* Redlock mode: the keys under PREFIX on every server. A lock is a key
 * that is the prefix and a name; a key that goes on after a NUL is a
 * companion of one (dialect/common.c), here the fence floor that a grant
 * raised: it outlives the lock by design (max(3 leases, 60 s), so that a
 * later majority, which shares a server with this one, sees it), and must
 * only have a TTL (DESIGN.md 1.9: nothing stays for ever). */
static void check_redlock_empty(figures *fg) {
    int i;
    size_t k;

    for (i = 0; i < RL_N; i++) {
        redisReply *r;
        r = test_redis_cmd(&RS[i], "KEYS %s*", PREFIX);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
            sv_violation("cannot list the keys left on server %d", i);
        } else {
            for (k = 0; k < r->elements; k++) {
                const redisReply *e = r->element[k];
                long long ttl = test_redis_int(&RS[i], "PTTL %b", e->str, e->len);
                const char *nul = memchr(e->str, '\0', e->len);
                if (nul == NULL) {
                    sv_violation("lock %s left on server %d (pttl %lld ms)", e->str, i, ttl);
                    continue;
                }
                fg->floors++;
                if (ttl > fg->floor_ttl_max)
                    fg->floor_ttl_max = ttl;
                if (ttl < 0) {
                    fg->no_ttl++;
                    sv_violation("%s\\0%.*s left on server %d without a TTL (pttl %lld)", e->str,
                                 (int)(e->len - (size_t)(nul - e->str) - 1), nul + 1, i, ttl);
                }
            }
        }
        if (r)
            freeReplyObject(r);
    }
}

/*
 * Redlock mode: what a majority gone means. From gone[i][0] on, fewer than
 * a majority of the servers answer, until gone[i][1]:
 *   - nobody is granted the lock: a grant needs a majority's answers, so a
 *     grant that ends later than slack_ms after the start (beyond its
 *     loop's own lateness) was granted without them;
 *   - every hold ends by the start + the longest lease (no majority renewed
 *     it after the start, and a renewal's validity runs from its send):
 *     a unit valid later than that is a holder that kept going;
 *   - a hold lost in the window is lost UNREACHABLE (EXPIRED needs a
 *     majority that said "not ours"), no later than its deadline (the
 *     check of every lost).
 */
static void check_majority_gone(figures *fg) {
    uint64_t n = S->nrec < S->cap ? S->nrec : S->cap, i;
    int g;

    for (g = 0; g < ngone; g++) {
        int64_t from = gone[g][0], to = gone[g][1];
        for (i = 0; i < n; i++) {
            const rec *x = &S->recs[i];
            if (x->type == REC_ACQ && x->status == LEASH_OK && x->b < to &&
                x->b - x->lag_end > from + cfg.slack_ms && !stopped_during(x->proc, from, x->b))
                sv_violation("proc %d handle %d: n%d granted at t=%lld (fence %" PRIu64
                             ", the loop %lld ms late) while a majority was gone (t=%lld to "
                             "t=%lld)",
                             x->proc, x->handle, x->name, (long long)x->b, x->fence,
                             (long long)x->lag_end, (long long)from, (long long)to);
            else if (x->type == REC_UNIT && x->a < to && x->b > from + cfg.lease_max)
                sv_violation("proc %d handle %d: n%d fence %" PRIu64 " valid on [%lld, %lld], "
                             "after a majority was gone at t=%lld (for %lld ms) + the longest "
                             "lease",
                             x->proc, x->handle, x->name, x->fence, (long long)x->a,
                             (long long)x->b, (long long)from, (long long)(to - from));
            else if (x->type == REC_LOST && x->a > from && x->a < to) {
                fg->gone_losts++;
                if (x->flags != LEASH_LOST_UNREACHABLE && x->a - x->lag_end > from + cfg.slack_ms &&
                    !stopped_during(x->proc, from, x->a))
                    sv_violation("proc %d handle %d: n%d lost %s at t=%lld (fence %" PRIu64
                                 ") while a majority was gone (t=%lld to t=%lld)",
                                 x->proc, x->handle, x->name, leash_lost_reason_name(x->flags),
                                 (long long)x->a, x->fence, (long long)from, (long long)to);
            }
        }
    }
}

/* lab_expected.c's tally into a cell. */
static uint64_t cell_add_expected(const char *cell, uint64_t n) {
    cell_of(cell)->expected += n;
    return n;
}

/* The run's folder (main), removed when the supervisor exits. */
static char run_tmp[300];
static pid_t run_tmp_owner;

static void remove_run_tmp(void) {
    if (getpid() == run_tmp_owner)
        test_remove_tree(run_tmp);
}

static void usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s [--cluster | --redlock | --sentinel] [--lab [--replicas] [--only FAULT]]\n"
            "          [--tls] [--trickle]\n"
            "          [--fair | --rw | --semaphore N | --multi] [--pubsub-off] [--quick]\n"
            "          [--minutes N] [--seconds N] [--procs N] [--handles N] [--names N]\n"
            "          [--seed S] [--tolerance-ms N] [--verbose]\n",
            argv0);
    exit(2);
}

int main(int argc, char **argv) {
    test_redis_config rc;
    char shm_path[300];
    size_t size;
    int fd, i, status;
    int64_t start, end, fault_end;
    uint64_t faults = 0, losts[6] = {0}, rejections = 0, writes = 0;
    uint64_t busy = 0, timedout = 0, econn = 0, ereplicas = 0, canceled = 0, other = 0;
    uint64_t reads = 0, stale_reads = 0, frees = 0, state_fails = 0;
    int port, nkinds;
    const char *const *kind_names;
    const uint64_t *kind_counts;
    figures fg;
    uint64_t expected_total;

    memset(&fg, 0, sizeof fg);
    cfg.seed = (unsigned)time(NULL) ^ ((unsigned)getpid() << 8);
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) {
            cfg.fault_s = 30;
        } else if (strcmp(a, "--cluster") == 0) {
            cfg.cluster = 1;
        } else if (strcmp(a, "--redlock") == 0) {
            cfg.redlock = 1;
        } else if (strcmp(a, "--sentinel") == 0) {
            cfg.sentinel = 1;
        } else if (strcmp(a, "--lab") == 0) {
            cfg.lab = 1;
        } else if (strcmp(a, "--tls") == 0) {
            cfg.tls = 1;
        } else if (strcmp(a, "--replicas") == 0) {
            cfg.replicas = 1;
        } else if (strcmp(a, "--fair") == 0) {
            cfg.kind = K_FAIR;
        } else if (strcmp(a, "--rw") == 0) {
            cfg.kind = K_RW;
        } else if (strcmp(a, "--multi") == 0) {
            cfg.kind = K_MULTI;
        } else if (strcmp(a, "--pubsub-off") == 0) {
            cfg.pubsub_off = 1;
        } else if (strcmp(a, "--trickle") == 0) {
            cfg.trickle = 1;
        } else if (strcmp(a, "--verbose") == 0) {
            cfg.verbose = 1;
        } else if (v == NULL) {
            usage(argv[0]);
        } else if (strcmp(a, "--semaphore") == 0) {
            cfg.kind = K_SEM, cfg.permits = atoi(v), i++;
        } else if (strcmp(a, "--minutes") == 0) {
            cfg.fault_s = atoi(v) * 60, i++;
        } else if (strcmp(a, "--seconds") == 0) {
            cfg.fault_s = atoi(v), i++;
        } else if (strcmp(a, "--procs") == 0) {
            cfg.procs = atoi(v), i++;
        } else if (strcmp(a, "--handles") == 0) {
            cfg.handles = atoi(v), i++;
        } else if (strcmp(a, "--names") == 0) {
            cfg.names = atoi(v), i++;
        } else if (strcmp(a, "--seed") == 0) {
            cfg.seed = (unsigned)strtoul(v, NULL, 0), i++;
        } else if (strcmp(a, "--only") == 0) {
            cfg.only = v, i++;
        } else if (strcmp(a, "--tolerance-ms") == 0) {
            cfg.tol_ms = atoi(v), i++;
        } else {
            usage(argv[0]);
        }
    }
    if (cfg.procs < 1 || cfg.procs > MAX_PROCS || cfg.handles < 1 || cfg.handles > 4096 ||
        cfg.names < 1 || cfg.names > MAX_NAMES || cfg.fault_s < 1 ||
        cfg.cluster + cfg.redlock + cfg.sentinel > 1 ||
        (cfg.redlock && cfg.kind != K_MUTEX && cfg.kind != K_MULTI) ||
        (cfg.kind == K_MULTI && cfg.names < 2) ||
        (cfg.tls && !cfg.lab && cfg.cluster + cfg.redlock + cfg.sentinel > 0) ||
        /* The trickle is the one server's proxy's (one_fault). */
        (cfg.trickle && (cfg.lab || cfg.cluster + cfg.redlock + cfg.sentinel > 0)) ||
        (cfg.only != NULL &&
         (!cfg.lab || cfg.redlock ||
          (cfg.cluster ? cluster_lab_fault_named(cfg.only) < 0
                       : lab_fault_named(cfg.only) < 0 &&
                             (!cfg.replicas || replicas_fault_named(cfg.only) < 0)))) ||
        (cfg.replicas && (!cfg.lab || cfg.cluster || cfg.redlock || cfg.sentinel)) ||
        (cfg.kind == K_SEM && (cfg.permits < 1 || cfg.permits > LEASH_PERMITS_MAX)))
        usage(argv[0]);
    if (cfg.cluster || cfg.sentinel)
        cfg.lease_max = CLUSTER_LEASE_MAX;
    srnd = cfg.seed | 1;
    signal(SIGPIPE, SIG_IGN);
    /* The server's append-only file on tmpfs: fsync costs nothing there,
     * and a killed server still finds every write it acknowledged. */
    if (getenv("TMPDIR") == NULL && access("/dev/shm", W_OK) == 0)
        setenv("TMPDIR", "/dev/shm", 1);
    /* A folder of the run's own for the servers' folders and the TLS
     * certificates (test_tls_certs makes them once per process in
     * $TMPDIR/certs): two runs at once that shared one remade each
     * other's certificates, and a fresh client of one trusted the other's
     * CA ("not signed by a CA this client trusts"). */
    snprintf(run_tmp, sizeof run_tmp, "%s/leash-torture-run-XXXXXX", test_tmpdir());
    if (mkdtemp(run_tmp) == NULL) {
        perror("torture: mkdtemp");
        return 2;
    }
    setenv("TMPDIR", run_tmp, 1);
    run_tmp_owner = getpid();
    atexit(remove_run_tmp);
    setvbuf(stderr, NULL, _IOLBF, 0);

    /* The log: a file mapped by every process (sparse: only what is used
     * takes room). */
    snprintf(shm_path, sizeof shm_path, "%s/leash-torture-XXXXXX", test_tmpdir());
    fd = mkstemp(shm_path);
    if (fd < 0) {
        perror("torture: mkstemp");
        return 2;
    }
    unlink(shm_path);
    {
        /* At most one holder per name writes a unit every 5 ms; a handle
         * ends an acquire every 40 ms at most (try-once, 0..80 ms apart). */
        uint64_t secs = (uint64_t)(cfg.fault_s + cfg.settle_s + cfg.drain_s + 10);
        uint64_t cap =
            secs * ((uint64_t)cfg.procs * (uint64_t)cfg.handles * 25 + (uint64_t)cfg.names * 200);
        /* Readers and permit holders of one name write their units at once:
         * every handle may hold, a unit every 5 ms at most. */
        if (cfg.kind == K_RW || cfg.kind == K_SEM)
            cap += secs * (uint64_t)cfg.procs * (uint64_t)cfg.handles * 200;
        size = sizeof(shm) + cap * sizeof(rec);
        if (ftruncate(fd, (off_t)size) != 0) {
            perror("torture: ftruncate");
            return 2;
        }
        S = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (S == MAP_FAILED) {
            perror("torture: mmap");
            return 2;
        }
        S->cap = cap;
    }

    if (cfg.cluster && cfg.lab) {
        if ((port = cluster_lab_start()) < 0) {
            fprintf(stderr, "torture: cannot start the cluster in the lab\n");
            return 2;
        }
    } else if (cfg.cluster) {
        /* The harness' defaults: 3 masters, one replica each, 500 ms. */
        if (test_cluster_start(&C, NULL) != 0) {
            fprintf(stderr, "torture: cannot start the cluster\n");
            return 2;
        }
        for (i = 0; i < C.cfg.masters; i++) {
            snprintf(seed_text[i], sizeof seed_text[i], "127.0.0.1:%d", test_cluster_port(&C, i));
            seeds[i] = seed_text[i];
        }
        nseeds = C.cfg.masters;
        port = test_cluster_port(&C, 0);
    } else if (cfg.sentinel) {
        test_sentinel_config scfg;
        memset(&scfg, 0, sizeof scfg);
        if (cfg.lab) {
            /* Nodes 0-2: the data nodes; 3-5: the sentinels (the harness'
             * defaults: a master, two replicas, three sentinels). */
            memset(&rc, 0, sizeof rc);
            if (lab_make(6) != 0) {
                fprintf(stderr, "torture: cannot start the lab\n");
                return 2;
            }
            for (i = 0; i < 6; i++) {
                test_redis_config c = lab_place(i, &rc);
                scfg.tls_dir = c.tls_dir;
                if (i < 3) {
                    scfg.data_host[i] = c.host;
                    scfg.data_netns[i] = c.netns;
                } else {
                    scfg.sentinel_host[i - 3] = c.host;
                    scfg.sentinel_netns[i - 3] = c.netns;
                }
            }
        }
        if (test_sentinel_start(&TS, &scfg) != 0 || (cfg.lab && lab_finish() != 0)) {
            fprintf(stderr, "torture: cannot start the master, its replicas and sentinels\n");
            return 2;
        }
        for (i = 0; i < TS.nsentinels; i++) {
            test_sentinel_addr(&TS, i, seed_text[i], sizeof seed_text[i]);
            if (cfg.lab) /* by name */
                snprintf(seed_text[i], sizeof seed_text[i], "%s:%d", lab_names[3 + i],
                         cfg.tls ? TS.sentinel[i].tls_port : TS.sentinel[i].port);
            seeds[i] = seed_text[i];
        }
        nseeds = TS.nsentinels;
        port = TS.data[0].port;
    } else if (cfg.redlock) {
        /* No persistence: a killed server comes back empty. */
        memset(&rc, 0, sizeof rc);
        rc.clock_shift_ms = cfg.lab; /* stepped by lab_clocks.c */
        if (cfg.lab) {
            if (lab_start(RL_N, RS, &rc) != 0) {
                fprintf(stderr, "torture: cannot start the lab\n");
                return 2;
            }
            for (i = 0; i < RL_N; i++) {
                snprintf(seed_text[i], sizeof seed_text[i], "%s:%d", lab_names[i],
                         cfg.tls ? RS[i].tls_port : RS[i].port);
                seeds[i] = seed_text[i];
            }
        }
        for (i = 0; i < RL_N && !cfg.lab; i++) {
            if (test_redis_start(&RS[i], NULL) != 0 || fp_start(&RP[i], RS[i].port) != 0) {
                fprintf(stderr, "torture: cannot start redis-server %d and its proxy\n", i);
                return 2;
            }
            snprintf(seed_text[i], sizeof seed_text[i], "127.0.0.1:%d", RP[i].port);
            seeds[i] = seed_text[i];
        }
        nseeds = RL_N;
        port = cfg.lab ? (cfg.tls ? RS[0].tls_port : RS[0].port) : RP[0].port;
    } else {
        memset(&rc, 0, sizeof rc);
        /* Restarts must not lose acknowledged writes: DESIGN.md's guarantees
         * are for a single Redis without data loss. */
        rc.extra = "appendonly yes\nappendfsync always\naof-use-rdb-preamble no";
        if (cfg.lab) {
            /* DEBUG SLEEP is one of the lab's faults. */
            rc.extra = "appendonly yes\nappendfsync always\naof-use-rdb-preamble no\n"
                       "enable-debug-command yes\nbind 0.0.0.0"; /* name-moves: lab_ops.c */
            if (test_redis_version() < 70000)
                rc.extra = "appendonly yes\nappendfsync always\naof-use-rdb-preamble no\n"
                           "bind 0.0.0.0";
            rc.clock_shift_ms = 1; /* stepped by lab_clocks.c */
            if (cfg.replicas ? replicas_start(&rc, &port) != 0 : lab_start(1, &R, &rc) != 0) {
                fprintf(stderr, "torture: cannot start the lab\n");
                return 2;
            }
            server_host = lab_names[0];
            port = cfg.tls ? R.tls_port : R.port;
        } else if ((cfg.tls && (rc.tls_dir = test_tls_certs()) == NULL) ||
                   test_redis_start(&R, &rc) != 0 ||
                   fp_start(&P, cfg.tls ? R.tls_port : R.port) != 0) {
            fprintf(stderr, "torture: cannot start redis-server and the proxy\n");
            return 2;
        } else {
            port = P.port;
        }
    }

    for (i = 0; i < cfg.procs; i++) {
        pid_t pid;
        fflush(stdout);
        fflush(stderr);
        pid = fork();
        if (pid < 0) {
            perror("torture: fork");
            return 2;
        }
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (LAB != NULL && netlab_enter(LAB, lab_cli[i]) != 0) {
                perror("torture: setns into a worker's namespace");
                exit(2);
            }
            worker_main(i, port);
            exit(S->w[i].violations ? 1 : 0);
        }
        S->w[i].pid = pid;
    }

    lab_port = port;
    start = now_ms();
    fault_end = start + (int64_t)cfg.fault_s * 1000;
    while (now_ms() < fault_end) {
        sleep_ms(s_between(100, 600));
        if (now_ms() >= fault_end)
            break;
        if (cfg.cluster && cfg.lab)
            one_cluster_lab_fault();
        else if (cfg.cluster)
            one_cluster_fault();
        else if (cfg.sentinel)
            one_sentinel_fault();
        else if (cfg.redlock)
            /* One majority gone at least, half-way at the latest. */
            one_redlock_fault(redlock_fault_count[RF_MAJORITY] == 0 &&
                              now_ms() >= start + (int64_t)cfg.fault_s * 500);
        else if (cfg.lab)
            one_lab_fault();
        else
            one_fault();
        faults++;
    }
    if (cfg.redlock)
        rl_restart_due(1); /* every server up, each after its lease */
    __atomic_store_n(&S->phase, PHASE_SETTLE, __ATOMIC_RELEASE);
    sleep_ms((int64_t)cfg.settle_s * 1000);
    __atomic_store_n(&S->phase, PHASE_DRAIN, __ATOMIC_RELEASE);
    end = now_ms() + (int64_t)cfg.drain_s * 1000;
    for (;;) {
        int left = 0;
        for (i = 0; i < cfg.procs; i++)
            if (S->w[i].pid > 0 && waitpid(S->w[i].pid, &status, WNOHANG) == 0)
                left++;
            else if (S->w[i].pid > 0) {
                if (!WIFEXITED(status) || (WEXITSTATUS(status) != 0 && !S->w[i].violations))
                    sv_violation("worker %d died (status 0x%x)", i, status);
                S->w[i].pid = 0;
            }
        if (left == 0)
            break;
        if (now_ms() >= end && phase() != PHASE_GIVEUP) {
            __atomic_store_n(&S->phase, PHASE_GIVEUP, __ATOMIC_RELEASE);
            end = now_ms() + 5000;
        } else if (now_ms() >= end) {
            for (i = 0; i < cfg.procs; i++)
                if (S->w[i].pid > 0) {
                    sv_violation("worker %d hung at the end: killed", i);
                    kill(S->w[i].pid, SIGKILL);
                }
        }
        sleep_ms(10);
    }
    sleep_ms(50);
    if (cfg.cluster)
        check_cluster_empty();
    else if (cfg.sentinel)
        check_sentinel_empty();
    else if (cfg.redlock)
        check_redlock_empty(&fg);
    else {
        check_redis_empty();
    }
    check_log(&fg);
    if (cfg.redlock)
        check_majority_gone(&fg);
    if (cfg.replicas)
        check_replica_windows();

    for (i = 0; i < cfg.procs; i++) {
        worker_shm *w = &S->w[i];
        int k;
        violations += w->violations;
        for (k = 1; k < 6; k++)
            losts[k] += w->losts[k];
        rejections += w->rejections;
        writes += w->writes;
        busy += w->busy;
        timedout += w->timedout;
        econn += w->econn;
        ereplicas += w->ereplicas;
        canceled += w->canceled;
        other += w->other_fail;
        reads += w->reads;
        stale_reads += w->stale_reads;
        frees += w->frees;
        state_fails += w->state_fails;
    }
    expected_total = expect_tally(cell_add_expected);

    nkinds = cfg.cluster    ? CF_COUNT
             : cfg.redlock  ? RF_COUNT
             : cfg.sentinel ? SF_COUNT
             : cfg.lab      ? LF_COUNT
                            : F_COUNT;
    kind_names = cfg.cluster              ? cluster_fault_names
                 : cfg.redlock && cfg.lab ? redlock_lab_fault_names
                 : cfg.redlock            ? redlock_fault_names
                 : cfg.sentinel           ? sentinel_fault_names
                 : cfg.lab                ? lab_fault_names
                                          : fault_names;
    kind_counts = cfg.cluster    ? cluster_fault_count
                  : cfg.redlock  ? redlock_fault_count
                  : cfg.sentinel ? sentinel_fault_count
                  : cfg.lab      ? lab_fault_count
                                 : fault_count;
    if (cfg.cluster && cfg.lab) {
        nkinds = CL_COUNT;
        kind_names = cluster_lab_fault_names;
        kind_counts = cluster_lab_fault_count;
    }
    printf("faults:");
    for (i = 0; i < nkinds; i++)
        printf(" %s=%" PRIu64, kind_names[i], kind_counts[i]);
    if (cfg.sentinel)
        printf(" (failovers that did not happen: %" PRIu64 ")", failovers_refused);
    if (cfg.cluster)
        printf(" (failovers that did not happen: %" PRIu64
               "; settled only at a second wait: %" PRIu64 ")",
               failovers_refused, settle_retries);
    if (cfg.redlock)
        printf(" (servers restarted empty: %" PRIu64 ", after %lld ms down at least; majority "
               "gone %d times, %" PRIu64 " holds lost meanwhile; fence floors left: %" PRIu64
               ", the longest pttl %lld ms)",
               rl_restarts, (long long)(rl_restarts ? rl_min_down : 0), ngone, fg.gone_losts,
               fg.floors, (long long)fg.floor_ttl_max);
    if (LAB != NULL)
        printf(" (probes %d: failed %" PRIu64 ", failed as documented %" PRIu64
               "; expected violations %" PRIu64 ")",
               probes, probe_failures, probes_expected, expected_total);
    /* One line per fault for scripts/campaign: fired, and its probes. */
    for (i = 0; LAB != NULL && i < nkinds; i++) {
        const struct cell *c = cell_of(kind_names[i]);
        printf("\ncell %s fired=%" PRIu64 " probes=%" PRIu64 " failed=%" PRIu64
               " documented=%" PRIu64 " expected=%" PRIu64,
               kind_names[i], kind_counts[i], c->probes, c->failed, c->documented, c->expected);
    }
    if (cfg.replicas)
        replicas_print();
    if (cfg.redlock && cfg.lab)
        redlock_clock_print();
    printf("\nacquire endings: busy=%" PRIu64 " timedout=%" PRIu64 " econn=%" PRIu64
           " ereplicas=%" PRIu64 " canceled=%" PRIu64 " other=%" PRIu64 "; writes=%" PRIu64
           "; worst lateness: lost %lld ms past its deadline (beyond the loop's own), acquire %lld "
           "ms past its wait\n",
           busy, timedout, econn, ereplicas, canceled, other, writes, (long long)fg.max_lost_late,
           (long long)fg.max_acq_late);
    printf("state reads (leash_client_lock_state): answered %" PRIu64 ", failed %" PRIu64 "\n",
           fg.state_reads, state_fails);
    if (cfg.kind != K_MUTEX) {
        printf("lock family%s: the most holds of one name valid at one instant %d; grants that "
               "shared a fence with another (read/semaphore) %" PRIu64 "; waiting handles "
               "freed %" PRIu64,
               kind_flag(), fg.max_valid, fg.shared_fences, frees);
        if (cfg.kind == K_RW)
            printf("; reads %" PRIu64 " (of them after a newer writer's write, the reader no "
                   "longer holding: %" PRIu64 ")",
                   reads, stale_reads);
        printf("\n");
    }
    printf("torture%s%s%s%s%s: %dx%d handles on %d names, %d s of faults, seed %u: "
           "acquisitions=%" PRIu64 " handoffs=%" PRIu64 " faults=%" PRIu64
           " losts: expired=%" PRIu64 " unreachable=%" PRIu64 " max_hold=%" PRIu64
           " replicas=%" PRIu64 " stale-fence rejections=%" PRIu64 " violations=%" PRIu64 "\n",
           cfg.cluster    ? " --cluster"
           : cfg.redlock  ? " --redlock"
           : cfg.sentinel ? " --sentinel"
                          : "",
           cfg.lab   ? (cfg.tls ? (cfg.replicas ? " --lab --replicas --tls" : " --lab --tls")
                                : (cfg.replicas ? " --lab --replicas" : " --lab"))
           : cfg.tls ? " --tls"
                     : "",
           kind_flag(), cfg.pubsub_off ? " --pubsub-off" : "", cfg.trickle ? " --trickle" : "",
           cfg.procs, cfg.handles, cfg.names, cfg.fault_s, cfg.seed, fg.acquisitions, fg.handoffs,
           faults, losts[LEASH_LOST_EXPIRED], losts[LEASH_LOST_UNREACHABLE],
           losts[LEASH_LOST_MAX_HOLD], losts[LEASH_LOST_REPLICAS], rejections, violations);
    fflush(stdout);
    if (cfg.cluster) {
        test_cluster_stop(&C);
    } else if (cfg.sentinel) {
        test_sentinel_stop(&TS);
    } else if (cfg.redlock) {
        for (i = 0; i < RL_N; i++) {
            if (!cfg.lab)
                fp_stop(&RP[i]);
            test_redis_stop(&RS[i]);
        }
    } else {
        if (!cfg.lab)
            fp_stop(&P);
        if (cfg.replicas)
            replicas_stop();
        test_redis_stop(&R);
    }
    test_dns_stop(&lab_dns[0]);
    test_dns_stop(&lab_dns[1]);
    netlab_free(LAB);
    munmap(S, size);
    if (fg.acquisitions == 0 || faults == 0) {
        fprintf(stderr, "torture: nothing happened\n");
        return 1;
    }
    return violations ? 1 : 0;
}
