/* SPDX-License-Identifier: MIT */
/*
 * What the leash integration and fault tests share: a client on a real
 * event loop against a test_redis (or a proxy or fake server in front of
 * one), callback recorders, and a log capture.
 *
 * One test source, three loops. The loop is chosen when the test is
 * compiled: -DLEASH_TEST_LOOP_LIBEV (the default), -DLEASH_TEST_LOOP_LIBEVENT
 * or -DLEASH_TEST_LOOP_LIBUV; tests/CMakeLists.txt builds the shared tests
 * once per loop (leash_loop_test). fx_loop is that loop's own type (struct
 * ev_loop, struct event_base, uv_loop_t), so a libev-only test may still
 * pass a struct ev_loop * where an fx_loop * is asked for. A test that is
 * built for every loop uses only the fx_ calls below to drive it.
 *
 * One test source, three topologies. Built with -DLEASH_TEST_TOPOLOGY_CLUSTER
 * (leash_cluster_test in tests/CMakeLists.txt), a world's Redis is a real
 * Redis Cluster (support/redis_cluster.h: 3 masters, 3 replicas) that
 * fx_main starts once for the whole program and empties before each case;
 * clients use LEASH_TOPOLOGY_CLUSTER with every master as a seed. Built with
 * -DLEASH_TEST_TOPOLOGY_REDLOCK (leash_redlock_test), it is FX_REDLOCK_N
 * independent redis-servers, started and emptied the same way, and
 * clients use LEASH_TOPOLOGY_REDLOCK. A test that reaches into Redis asks
 * fx_redis_of(w, key) for a server holding a key, and the fx_ calls below
 * for the rest; cases that need one server (restarting it, say) are built
 * only where LEASH_TEST_ONE_SERVER is defined.
 */
#ifndef LEASH_TESTS_FIXTURE_H
#define LEASH_TESTS_FIXTURE_H

#include <leash/leash.h>

#if defined(LEASH_TEST_LOOP_LIBEV) + defined(LEASH_TEST_LOOP_LIBEVENT) + \
        defined(LEASH_TEST_LOOP_LIBUV) >                                 \
    1
#error "more than one LEASH_TEST_LOOP_... is defined"
#endif

#if defined(LEASH_TEST_LOOP_LIBEVENT)
#include <leash/adapters/libevent.h>
typedef struct event_base fx_loop;
#elif defined(LEASH_TEST_LOOP_LIBUV)
#include <leash/adapters/libuv.h>
typedef uv_loop_t fx_loop;
#else
#ifndef LEASH_TEST_LOOP_LIBEV
#define LEASH_TEST_LOOP_LIBEV 1
#endif
#include <ev.h>
#include <leash/adapters/libev.h>
typedef struct ev_loop fx_loop;
/* test_run_until / test_run_for of libev-only tests. Not with the other
 * loops: <ev.h> and <event2/event.h> both define EV_READ and friends. */
#include "evloop.h"
#endif

#include "check.h"
#include "lockdata.h"
#include "redis_server.h"
#ifdef LEASH_TEST_TOPOLOGY_CLUSTER
#include "redis_cluster.h"
#endif
#if !defined(LEASH_TEST_TOPOLOGY_CLUSTER) && !defined(LEASH_TEST_TOPOLOGY_REDLOCK)
#define LEASH_TEST_ONE_SERVER 1
#endif
/* The servers of the Redlock build. */
#define FX_REDLOCK_N 5

/* ---- the loop ---- */

/* "libev", "libevent" or "libuv". */
const char *fx_loop_name(void);
/* A new loop of the compiled-in kind; fails the test on error. */
fx_loop *fx_loop_new(void);
/* Destroys a loop whose clients were all freed. With libuv it first lets
 * the loop finish closing their handles; with libevent and libuv it fails
 * the test if any of the loop's events or handles is left over. */
void fx_loop_free(fx_loop *loop);
/* The adapter's attach call: leash_libev_attach, leash_libevent_attach or
 * leash_libuv_attach. */
int fx_attach(fx_loop *loop, leash_client *c);
/* Runs the loop until *flag is non-zero or timeout_ms have passed
 * (CLOCK_MONOTONIC): 0 when the flag was set, -1 on timeout. Never blocks
 * past the timeout, even on a loop with nothing else to do. */
int fx_run_until_flag(fx_loop *loop, const int *flag, int64_t timeout_ms);
/* Runs the loop for ms milliseconds. */
void fx_run_for(fx_loop *loop, int64_t ms);
/* One turn of the loop that does not block: what is ready runs. */
void fx_run_nowait(fx_loop *loop);

/* ---- clients and callbacks ---- */

/* One callback's outcome. */
typedef struct fx_result {
    int done;         /* set on the first call */
    int calls;        /* how many times it was called (must end at 1) */
    int status;       /* status (or lost reason) of the last call */
    int64_t at_ms;    /* test_now_ms() of the last call */
    leash_lock *lock; /* the handle it was called with */
} fx_result;

void fx_acquire_cb(leash_lock *l, int status, void *arg);
void fx_release_cb(leash_lock *l, int status, void *arg);
void fx_lost_cb(leash_lock *l, int reason, void *arg);

/* Options pointing at r, with the log captured and the given lease. */
void fx_options(leash_options *o, const test_redis *r, int64_t lease_ms);
/* Options for 127.0.0.1:port, usually a fault proxy or a fake server, with
 * timeouts short enough that a fault shows within a test: command and
 * connect 300 ms, reconnect backoff 10..100 ms; the log captured. */
void fx_fault_options(leash_options *o, int port, int64_t lease_ms);
/* A client attached to loop; fails the test on error. */
leash_client *fx_client_opts(fx_loop *loop, const leash_options *o);
leash_client *fx_client(fx_loop *loop, const test_redis *r, int64_t lease_ms);
leash_client *fx_fault_client(fx_loop *loop, int port, int64_t lease_ms);
/* Runs the loop until the client's command connection is ready. */
void fx_wait_connected(fx_loop *loop, leash_client *c, int64_t timeout_ms);
/* For Redlock: leash_client_connected says 1 once a majority of the servers
 * is. This waits until every one of `servers` has its connections ready, so
 * that a lock taken first thing reaches all of them (a copy still waiting for
 * its connection is dropped once a majority decided, and the hold then lives
 * on the others only). Cases that kill servers under a hold count on that. */
void fx_wait_every_server(fx_loop *loop, leash_client *c, int servers, int64_t timeout_ms);

/* One test's world: its own redis-server (or the program's cluster), a
 * loop, and a client of it, connected. */
typedef struct fx_world {
    test_redis r; /* one server; unused in the cluster build */
    fx_loop *loop;
    leash_client *c;
    int64_t command_timeout_ms; /* 0: fx_options' */
#ifdef LEASH_TEST_TOPOLOGY_CLUSTER
    test_cluster *cl;
    const char *seeds[TEST_CLUSTER_MAX_NODES];
    char seed_text[TEST_CLUSTER_MAX_NODES][32];
#endif
#ifdef LEASH_TEST_TOPOLOGY_REDLOCK
    test_redis *servers; /* FX_REDLOCK_N of them */
    const char *seeds[FX_REDLOCK_N];
    char seed_text[FX_REDLOCK_N][32];
#endif
} fx_world;
/* Starts it all; command_timeout_ms 0 keeps fx_options' value. */
void fx_world_up(fx_world *w, int64_t lease_ms, int64_t command_timeout_ms);
void fx_world_down(fx_world *w);
/* Options for another client of the world's Redis (as w->c's), and such a
 * client, attached to w->loop (connecting). */
void fx_world_options(fx_world *w, leash_options *o, int64_t lease_ms);
leash_client *fx_world_client(fx_world *w, int64_t lease_ms);
/* The server that holds key (one server: w->r; a cluster: the master of
 * the key's slot; Redlock: the first of the servers). */
test_redis *fx_redis_of(fx_world *w, const char *key);
/* The servers a lock's key lives on: 1, or FX_REDLOCK_N in the Redlock
 * build (where a lock is on every server that granted it). */
#ifdef LEASH_TEST_TOPOLOGY_REDLOCK
#define FX_COPIES FX_REDLOCK_N
#else
#define FX_COPIES 1
#endif
/* A command that changes a lock's key behind leash's back (SET, DEL,
 * PEXPIRE...), on every server the key lives on (see FX_COPIES), hiredis
 * format: the sum of the integer replies (a status reply counts 1, any
 * other -1000). */
long long fx_key_cmd(fx_world *w, const char *key, const char *fmt, ...);
/* Turns of the loop that do not block, until `key` exists on every server
 * it lives on: the command that writes it has been written and run, and
 * its answer is not read yet (fails the test after 2 s). */
void fx_run_until_key_exists(fx_world *w, const char *key);
/* Acquires l (wait_ms), turning the loop until Redis granted it (key
 * written on every copy) but not one turn more: the grant waits unread in
 * the socket when this returns (for a stall of the loop after it). A turn
 * that read it too (libuv may poll right after it wrote) is released and
 * tried again. */
void fx_acquire_unread(fx_world *w, leash_lock *l, const char *key, int64_t wait_ms,
                       fx_result *got);
/* Lock keys in the world's Redis (every master of a cluster; Redlock: on
 * the first server, fence floors not counted: they live a minute by
 * design). */
long long fx_dbsize(fx_world *w);
/* A command without a key, on every master (one server: on it); fails the
 * test on an error reply. */
void fx_all(fx_world *w, const char *cmd);
/* Subscribers of a lock's channel (of fx_channel) where its releases are
 * published: PUBSUB NUMSUB, or SHARDNUMSUB in a cluster. */
long long fx_subscribers(fx_world *w, const char *chan, size_t len);
/* Channels with a subscriber in the world's Redis: PUBSUB CHANNELS, plus
 * PUBSUB SHARDCHANNELS on every master of a cluster. */
long long fx_channels(fx_world *w);
/* The program's main: test_main, with the cluster (or Redlock servers) of
 * those builds started first and stopped last. */
int fx_main(int argc, char **argv, const test_case *cases);

/* Acquire and wait: the status, with the callback checked to fire once
 * (never inside the call, and no second time during one more turn). */
int fx_acquire_sync(fx_loop *loop, leash_lock *l, int64_t wait_ms, int64_t timeout_ms);
int fx_release_sync(fx_loop *loop, leash_lock *l, int64_t timeout_ms);
int fx_force_release_sync(fx_loop *loop, leash_lock *l, int64_t timeout_ms);
/* Runs the loop until r->done, failing the test after timeout_ms. */
void fx_run_until(fx_loop *loop, fx_result *r, int64_t timeout_ms);

/* The captured log: 1 if a line contains `needle`. */
int fx_log_contains(const char *needle);
/* The case's log since the last fx_log_clear, one line a message. */
const char *fx_log_text(void);
void fx_log_clear(void);
/* The trace of lock `name`'s machine in the captured log (its "STATE: "
 * lines, at debug level): the number of those lines if each of `path`
 * (n parts of lines) is found in the log after the one before, else -1
 * (the first missing one is printed). */
int fx_log_state_path(const char *name, const char *const *path, size_t n);
void fx_log_cb(int level, const char *msg, void *arg);

/* 1 if the key exists in Redis (db 0), else 0. */
long long fx_redis_exists(test_redis *r, const char *key);

/* The pub/sub channel of lock `name` (prefix "leash:") in db `db`: it holds
 * a NUL, so use it with %b. Returns its length. */
#define FX_CHANNEL_MAX 2048
size_t fx_channel(const char *name, int db, char buf[FX_CHANNEL_MAX]);

#endif
