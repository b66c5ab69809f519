/* SPDX-License-Identifier: MIT */
/*
 * What the benchmark programs share: time, CPU pinning and steal, the
 * redis-server they start, INFO commandstats, cpu and memory, redis-benchmark
 * runs, child processes, and calls of leash's own Lua scripts (SCRIPT LOAD
 * of the sources the library itself loads, called with the commands its
 * dialect builds: src/dialect/leash.c alone knows their arguments and what
 * they write). The launchers and the loop helpers are tests/support's.
 *
 * Every program starts its own redis-server on a free loopback port with
 * bench_start_server(): the server is pinned to the first CPU this process
 * may use (it inherits the mask at fork), the program to the second, so the
 * two never share a core; child processes and redis-benchmark inherit the
 * program's CPU. A program run with --cluster also starts a Redis Cluster
 * with bench_start_cluster() (tests/support/redis_cluster.h: 3 masters + 3
 * replicas), every node of it on the server's CPU, so that the cluster has
 * the one core that the single server has; one run with --redlock starts
 * Redlock's 5 independent redis-servers with bench_start_redlock()
 * (tests/support/redis_server.h, as the Redlock tests start them), on the
 * server's CPU too.
 */
#ifndef LEASH_BENCH_COMMON_H
#define LEASH_BENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <ev.h>
#include <hiredis/hiredis.h>
#include <leash/leash.h>

#include "check.h" /* test_sleep_ms */
#include "redis_cluster.h"
#include "redis_server.h"

/* ---- time and resources ---- */

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t bench_now_ns(void);
/* User + system CPU time of this process so far (getrusage), in ns. */
int64_t bench_cpu_ns(void);
/* Resident set size of this process (/proc/self/statm), in bytes; -1 if unknown. */
int64_t bench_rss_bytes(void);

/* ---- CPUs ---- */

typedef struct bench_cpus {
    int server, client;   /* CPU numbers, -1 when not pinned */
    char server_desc[64]; /* the affinity actually in force, e.g. "0" */
    char client_desc[64];
} bench_cpus;

/* Starts a redis-server (cfg may be NULL) pinned as described above when
 * pin is 1 and two CPUs are allowed. 0, or -1 with the reason on stderr. */
int bench_start_server(test_redis *r, const test_redis_config *cfg, int pin, bench_cpus *cpus);
/* "redis-server on CPU 0, benchmark on CPU 1." */
void bench_print_cpus(const bench_cpus *cpus);

/* Steal time of one CPU so far (/proc/stat), in ms; -1 if unknown. On a
 * virtual machine, time the host took away from the vCPU. */
int64_t bench_steal_ms(int cpu);

/* What happened on the two CPUs during a window: steal, and how busy each
 * CPU was (user + nice + system + irq + softirq, every process on it), so
 * that a reader can tell the benchmark's own load from other processes'. */
typedef struct bench_steal {
    int64_t server_ms, client_ms;           /* steal; -1 unknown */
    int64_t server_busy_ms, client_busy_ms; /* -1 unknown */
    int64_t wall_ns;
} bench_steal;
void bench_steal_begin(const bench_cpus *cpus, bench_steal *s);
void bench_steal_end(const bench_cpus *cpus, bench_steal *s);
/* "; CPU steal 12 ms (server CPU) + 3 ms (benchmark CPU); CPUs busy 98% +
 * 41%" or nothing when unknown (not pinned). */
void bench_print_steal(const bench_steal *s);

/* ---- Redis ---- */

/* A blocking connection to 127.0.0.1:port with 3 s timeouts, or NULL. */
redisContext *bench_connect(int port);

#define BENCH_MAX_CMDSTATS 96

/* INFO commandstats: calls and usec of every command that ran. */
typedef struct bench_cmdstat {
    char name[48];
    long long calls, usec;
} bench_cmdstat;

typedef struct bench_cmdstats {
    int n;
    bench_cmdstat cmd[BENCH_MAX_CMDSTATS];
} bench_cmdstats;

int bench_cmdstats_read(redisContext *c, bench_cmdstats *out);
/* Calls (or usec) of one command, lower case ("evalsha"); 0 when absent. */
long long bench_cmdstats_calls(const bench_cmdstats *s, const char *name);
long long bench_cmdstats_usec(const bench_cmdstats *s, const char *name);
/* 0 for the commands that are not the clients': INFO and CLUSTER INFO
 * (which the benchmark itself sends), REPLCONF (a replica's
 * acknowledgements to its master). */
int bench_cmdstats_counted(const char *name);
/* Calls of every command that bench_cmdstats_counted() counts. */
long long bench_cmdstats_total(const bench_cmdstats *s);
/* after - before, command by command. */
void bench_cmdstats_delta(const bench_cmdstats *before, const bench_cmdstats *after,
                          bench_cmdstats *out);

/* Prints "<lead>evalsha 2.00, del 1.00, ..." : every command of d that
 * bench_cmdstats_counted() counts, per `per` units, the most called first
 * (and "n/a" when there is none). */
void bench_print_calls(const bench_cmdstats *d, double per, const char *lead);

/* CPU time the server process has used so far (INFO cpu, user + sys), in
 * seconds; -1 on failure. */
double bench_server_cpu_s(redisContext *c);
/* INFO memory used_memory, in bytes; -1 on failure. */
long long bench_used_memory(redisContext *c);
/* Keys in db 0 (INFO keyspace, which INFO commandstats does not count
 * as a command of its own, unlike DBSIZE); -1 on failure. */
long long bench_db_keys(redisContext *c);

/* FLUSHALL on the test helper's connection, for a clean server. */
void bench_flushall(test_redis *r);

/* ---- one server, a Redis Cluster or Redlock ---- */

#define BENCH_MAX_NODES TEST_CLUSTER_MAX_NODES
/* Redlock's servers, as its README example and the Redlock tests have them. */
#define BENCH_REDLOCK_N 5

/* Where a benchmark's clients go. */
typedef struct bench_target {
    int cluster;               /* 0: one server at port[0] (or Redlock) */
    int redlock;               /* 1: Redlock over the servers port[0..masters) */
    int masters;               /* 1 for one server; Redlock: its servers */
    int replicas;              /* replicas in all (0 for one server, Redlock) */
    int port[BENCH_MAX_NODES]; /* the masters first, then the replicas */
    int pubsub;                /* leash_options.pubsub (LEASH_PUBSUB_AUTO) */
} bench_target;

/* One server at 127.0.0.1:port, default pub/sub. */
void bench_target_single(bench_target *t, int port);
/* "one server", "cluster, sharded pub/sub", "cluster, classic pub/sub" or
 * "Redlock, 5 servers". */
const char *bench_target_name(const bench_target *t);

/* Starts a Redis Cluster of 3 masters with a replica each on loopback
 * (cluster-node-timeout 5 s, so that a busy core never looks like a failed
 * node), every node pinned to cpus->server when cpus->server >= 0 (the
 * CPUs of an earlier bench_start_server; -1: not pinned), and fills *t
 * (pub/sub AUTO). 0, or -1 with the reason on stderr. */
int bench_start_cluster(test_cluster *c, const bench_cpus *cpus, bench_target *t);
/* 1 when every node still has the role it started with (no failover). */
int bench_cluster_intact(test_cluster *c, const bench_target *t);

/* Redlock's independent redis-servers. */
typedef struct bench_redlock {
    test_redis s[BENCH_REDLOCK_N];
} bench_redlock;

/* Starts Redlock's BENCH_REDLOCK_N redis-servers on loopback (no config:
 * each as bench_start_server starts the single one, and as the Redlock
 * tests start theirs), every one pinned to cpus->server when
 * cpus->server >= 0 (-1: not pinned), so that the five share the one core
 * that the single server has, and fills *t (a LEASH_TOPOLOGY_REDLOCK client
 * over all of them, pub/sub AUTO, i.e. classic). 0, or -1 with the reason
 * on stderr (then none runs). */
int bench_start_redlock(bench_redlock *rl, const bench_cpus *cpus, bench_target *t);
/* Stops them (safe on a zeroed or stopped *rl). */
void bench_stop_redlock(bench_redlock *rl);
/* 1 when every one of them still answers PING (none died in the run). */
int bench_redlock_intact(bench_redlock *rl);

/* Blocking connections to the servers of a target, for the figures a
 * benchmark reads: commands and CPU sum over the masters (what serves the
 * locks; a replica only applies what its master sends it; Redlock: all of
 * its servers), the cluster bus over every node. */
typedef struct bench_admin {
    int masters, count;
    redisContext *c[BENCH_MAX_NODES]; /* the masters first */
} bench_admin;

int bench_admin_open(bench_admin *a, const bench_target *t);
void bench_admin_close(bench_admin *a);
/* INFO commandstats, each command's calls and usec summed over the masters. */
int bench_admin_cmdstats(bench_admin *a, bench_cmdstats *out);
/* INFO cpu (user + sys) summed over the masters (replicas 0) or over the
 * replicas (replicas 1), in s; -1 on failure; 0 for a target without any. */
double bench_admin_cpu_s(bench_admin *a, int replicas);
/* INFO memory used_memory and INFO keyspace keys, summed over the masters. */
long long bench_admin_used_memory(bench_admin *a);
long long bench_admin_db_keys(bench_admin *a);
/* FLUSHALL on every master (a replica follows its master). */
void bench_admin_flushall(bench_admin *a);

/* Pub/sub messages on the cluster bus (CLUSTER INFO, summed over every
 * node): cluster_stats_messages_publish_* (PUBLISH, which a cluster
 * broadcasts to every node) and cluster_stats_messages_publishshard_*
 * (SPUBLISH, sent to the other nodes of the channel's shard only). Redis
 * leaves a counter out of CLUSTER INFO while it is 0. */
typedef struct bench_bus {
    int ok;
    long long publish_sent, publish_received;
    long long shard_sent, shard_received;
} bench_bus;
int bench_admin_bus(bench_admin *a, bench_bus *out);
/* after - before. */
void bench_bus_delta(const bench_bus *before, const bench_bus *after, bench_bus *out);

/* ---- leash's scripts ----
 *
 * The benchmarks call leash's own scripts (src/dialect/leash.c) with the
 * commands the library's dialect builds, and read nothing of the layout:
 * a change of the scripts' arguments or of what they write changes the
 * dialect alone.
 */

/* What the calls need of the server: its version, for the variant of each
 * script that the library would send it. */
typedef struct bench_scripts {
    int version;
} bench_scripts;

/* SCRIPT LOAD of each of leash's scripts (leash__dialect_leash.scripts, in
 * the variant the library sends to this server's version). 0 or -1. */
int bench_load_scripts(redisContext *c, bench_scripts *s);

/* bench_start_server (no config), a connection to it in *admin, and the
 * scripts loaded; on failure, says so on stderr as `prog`, stops the server
 * and returns -1. */
int bench_start_with_scripts(const char *prog, test_redis *r, int pin, bench_cpus *cpus,
                             redisContext **admin, bench_scripts *s);

/* Owner tokens are 32 hex digits, like leash's. */
#define BENCH_TOKEN_LEN 32
/* Locks one renew call renews at most (what the watchdog batches). */
#define BENCH_RENEW_BATCH 100

/* One call of a script as redis-benchmark arguments: "EVALSHA <sha>
 * <numkeys> KEYS... ARGV...", NULL-terminated; the strings live in the
 * struct. A key may hold redis-benchmark's __rand_int__. */
typedef struct bench_call {
    int argc;
    const char *argv[8 + 5 * BENCH_RENEW_BATCH];
    char pool[8192 + 128 * BENCH_RENEW_BATCH];
    size_t used;
} bench_call;

/* The dialect's commands as such calls, each a first send (no stamps), on
 * a lock at key whose messages go to channel: a new hold of `key` by
 * `token` for lease_ms, what leash_acquire() sends; the release of a whole
 * hold (count 1 -> 0), what leash_release() sends to one server (it
 * publishes only when someone found the lock busy); one renew call of
 * keys[0..n) (n <= BENCH_RENEW_BATCH), all held by token, what the
 * watchdog sends. 0, or -1 when it does not fit. */
int bench_call_acquire(bench_call *c, const bench_scripts *s, const char *key, const char *token,
                       long lease_ms);
int bench_call_release(bench_call *c, const bench_scripts *s, const char *key, const char *token,
                       const char *channel);
int bench_call_renew(bench_call *c, const bench_scripts *s, const char *const *keys, int n,
                     const char *token, long lease_ms, const char *channel);

/* Makes n locks "<prefix><i as 12 digits>" for i in [0, n), each held by
 * `token` (count 1, nobody waiting) with a TTL of ttl_ms: the first by
 * leash's acquire script, the others copies of it made inside the server
 * (DUMP and RESTORE, in chunks); the key names that redis-benchmark's
 * __rand_int__ produces. The scripts must be loaded. 0 or -1. */
int bench_populate_holds(redisContext *c, const char *prefix, long n, const char *token,
                         long ttl_ms);

/* What INFO commandstats deltas say about the runs of leash's scripts,
 * from the commands each one runs inside the server:
 *   acquire: TIME on every run, then SET NX GET (a new hold, or the
 *            holder's value), and for a busy answer PTTL (after a SET
 *            KEEPTTL that marks the lock waited for, the first time);
 *   release: GET, and DEL when it ends the hold (PUBLISH, or SPUBLISH with
 *            sharded pub/sub, when someone waits); TIME only when resent
 *            after a lost answer;
 *   renew:   GET per lock, PEXPIRE per lock renewed ((S)PUBLISH when someone
 *            waits).
 * A benchmark on loopback resends nothing, so TIME counts acquire runs. */
typedef struct bench_script_runs {
    long long total;                    /* every command bench_cmdstats_counted() counts */
    long long scripts;                  /* EVALSHA + EVAL: runs of leash's scripts */
    long long inner;                    /* commands the scripts ran inside the server */
    long long sent;                     /* total - inner: the commands clients sent */
    long long acquires;                 /* acquire-script runs */
    long long busy;                     /* acquire runs that found another holder */
    long long grants;                   /* acquire runs that granted (acquires - busy) */
    long long deletes;                  /* runs that deleted a lock: full releases */
    long long publishes;                /* PUBLISH + SPUBLISH */
    long long renewed;                  /* locks renewed by renew-script runs */
    long long subscribes, unsubscribes; /* (S)SUBSCRIBE, (S)UNSUBSCRIBE */
    long long script_usec;              /* server time inside EVALSHA + EVAL */
} bench_script_runs;
void bench_script_runs_of(const bench_cmdstats *delta, bench_script_runs *out);
/* The commands named above that the scripts run, for the notes:
 * "TIME, SET, GET, DEL, PEXPIRE, PTTL, PUBLISH, SPUBLISH". */
const char *bench_script_inner_names(void);

/* ---- redis-benchmark ---- */

typedef struct bench_rb {
    int ok;
    double rps;                                            /* requests per second */
    double avg_us, min_us, p50_us, p95_us, p99_us, max_us; /* per request */
    double seconds;                                        /* wall time of the run */
    double cpu_us;                                         /* redis-benchmark's CPU per request */
} bench_rb;

/* 1 when redis-benchmark is on PATH. */
int bench_have_redis_benchmark(void);
/* Runs "redis-benchmark -h 127.0.0.1 -p PORT --csv --precision 3 ARGS..."
 * (args NULL-terminated), killed after timeout_s, and reads its one result
 * row. 0 with *out filled, or -1. */
int bench_redis_benchmark(int port, double timeout_s, const char *const *args, bench_rb *out);
/* The same with redis-benchmark's options (NULL-terminated) followed by a
 * script call. */
int bench_redis_benchmark_call(int port, double timeout_s, const char *const *opts,
                               const bench_call *call, bench_rb *out);
/* One Redis round trip: redis-benchmark -c 1 -P 1 PING (20 000 requests).
 * 0 with *out filled, or -1 (also when redis-benchmark is missing). */
int bench_ping_rtt(int port, bench_rb *out);

/* ---- leash ---- */

/* A leash log callback that prints to stderr with the pid. */
void bench_log_stderr(int level, const char *msg, void *arg);
/* A client for 127.0.0.1:port on loop, logging warnings to stderr, or NULL. */
leash_client *bench_client_new(struct ev_loop *loop, int port);
/* The same for a target: a cluster's masters are the seeds, Redlock's
 * servers its nodes (LEASH_TOPOLOGY_REDLOCK), with the target's pub/sub. */
leash_client *bench_client_new_at(struct ev_loop *loop, const bench_target *t);
/* Runs loop until every client is connected; 0, or -1 after timeout_ms. */
int bench_wait_connected(struct ev_loop *loop, leash_client *const *clients, int n, int timeout_ms);
/* The same for clients of target t; for Redlock (whose clients say
 * connected once a majority is) until each client's command and subscriber
 * connections to all of its servers are ready, as the Redlock tests wait,
 * so that the first acquires reach every server. */
int bench_wait_ready(struct ev_loop *loop, leash_client *const *clients, int n,
                     const bench_target *t, int timeout_ms);

/* ---- handoff samples ---- */

/* Writes sorted handoff latencies (ns) to dir/handoff-<tag>.txt, one µs
 * value a line under a "# handoff latency in microseconds, sorted; <label>"
 * line: what scripts/bench plots into bench/results/handoff.png. Creates
 * dir; says so on stderr as `prog` when it cannot write. */
void bench_write_samples(const char *prog, const char *dir, const char *tag, const char *label,
                         const int64_t *sorted, int64_t n);

/* ---- child processes ---- */

/* fork() after flushing stdio; the child dies with this process
 * (PR_SET_PDEATHSIG), so that a benchmark never leaves contenders behind.
 * Returns as fork() does. */
pid_t bench_fork(void);
/* Reaps the children of pids[0..n) that exited (their pid becomes 0) and
 * returns how many still run. */
int bench_reap_exited(pid_t *pids, int n);
/* Waits up to timeout_ms for the children of pids[0..n) to exit, then
 * kills (SIGKILL) and reaps the rest, saying so on stderr as `prog`.
 * Returns 0 when all exited on their own, -1 when some were killed. */
int bench_reap(pid_t *pids, int n, int timeout_ms, const char *prog);

/* Zeroed memory that forked children share with this process (mmap
 * MAP_SHARED), or NULL; bench_shared_free with the same size. */
void *bench_shared_alloc(size_t size);
void bench_shared_free(void *p, size_t size);

/* ---- options and statistics ---- */

/* A comma-separated list of integers in [lo, hi] ("1,64,1024") into out
 * (at most max). The count, or -1 (said on stderr) on a bad list. */
int bench_parse_list(const char *s, int *out, int max, long lo, long hi);

int bench_cmp_i64(const void *a, const void *b);
/* Nearest-rank percentile p (0..1) of n sorted values. */
int64_t bench_pct(const int64_t *sorted, int64_t n, double p);

#endif
