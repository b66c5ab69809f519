/*
 * What the benchmark programs share: time, CPU pinning and steal, the
 * redis-server they start, INFO commandstats and INFO cpu, redis-benchmark
 * runs, and leash's own Lua scripts (SCRIPT LOAD of the sources the library
 * itself loads, from src/scripts.c).
 *
 * Every program starts its own redis-server on a free loopback port with
 * bench_start_server(): the server is pinned to the first CPU this process
 * may use (it inherits the mask at fork), the program to the second, so the
 * two never share a core; child processes and redis-benchmark inherit the
 * program's CPU.
 */
#ifndef LEASH_BENCH_COMMON_H
#define LEASH_BENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include <ev.h>
#include <hiredis/hiredis.h>
#include <leash/leash.h>

#include "redis_server.h"

/* ---- time and resources ---- */

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t bench_now_ns(void);
void bench_sleep_ms(int ms);
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
typedef struct bench_cmdstats {
    int n;
    struct {
        char name[48];
        long long calls, usec;
    } cmd[BENCH_MAX_CMDSTATS];
} bench_cmdstats;

int bench_cmdstats_read(redisContext *c, bench_cmdstats *out);
/* Calls (or usec) of one command, lower case ("evalsha"); 0 when absent. */
long long bench_cmdstats_calls(const bench_cmdstats *s, const char *name);
long long bench_cmdstats_usec(const bench_cmdstats *s, const char *name);
/* Calls of every command but INFO (which the benchmark itself sends). */
long long bench_cmdstats_total(const bench_cmdstats *s);
/* Calls that leash's Lua scripts make inside the server (EXISTS, HGET,
 * HSET, PEXPIRE, GET, INCR, HSETNX, PTTL, HEXISTS, DEL, SET, PUBLISH):
 * leash never sends these itself, so total - inner = commands sent. */
long long bench_cmdstats_script_inner(const bench_cmdstats *s);
/* after - before, command by command. */
void bench_cmdstats_delta(const bench_cmdstats *before, const bench_cmdstats *after,
                          bench_cmdstats *out);

/* CPU time the server process has used so far (INFO cpu, user + sys), in
 * seconds; -1 on failure. */
double bench_server_cpu_s(redisContext *c);

/* SCRIPT LOAD of leash's acquire, release and renew scripts (the text the
 * library loads, from src/scripts.c); sha[i] gets each SHA1. 0 or -1. */
enum {
    BENCH_SCRIPT_ACQUIRE,
    BENCH_SCRIPT_RELEASE,
    BENCH_SCRIPT_RENEW,
    BENCH_SCRIPT_COUNT
};
int bench_load_scripts(redisContext *c, char sha[BENCH_SCRIPT_COUNT][41]);

/* bench_start_server (no config), a connection to it in *admin, and the
 * scripts loaded; on failure, says so on stderr as `prog`, stops the server
 * and returns -1. */
int bench_start_with_scripts(const char *prog, test_redis *r, int pin, bench_cpus *cpus,
                             redisContext **admin, char sha[BENCH_SCRIPT_COUNT][41]);

/* Makes n lock hashes "<prefix><i as 12 digits>" for i in [0, n), each held
 * by `token` (count 1) with a TTL of ttl_ms: what leash's acquire script
 * leaves behind, and the key names that redis-benchmark's __rand_int__
 * produces. Done inside the server, in chunks. 0 or -1. */
int bench_populate_holds(redisContext *c, const char *prefix, long n, const char *token,
                         long ttl_ms);

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

/* ---- leash ---- */

/* A leash log callback that prints to stderr with the pid. */
void bench_log_stderr(int level, const char *msg, void *arg);
/* A client for 127.0.0.1:port on loop, logging warnings to stderr, or NULL. */
leash_client *bench_client_new(struct ev_loop *loop, int port);
/* Runs loop until every client is connected; 0, or -1 after timeout_ms. */
int bench_wait_connected(struct ev_loop *loop, leash_client *const *clients, int n, int timeout_ms);

/* ---- statistics ---- */

int bench_cmp_i64(const void *a, const void *b);
/* Nearest-rank percentile p (0..1) of n sorted values. */
int64_t bench_pct(const int64_t *sorted, int64_t n, double p);

#endif
