/* SPDX-License-Identifier: MIT */
/*
 * Real redis-server processes for tests.
 *
 * Each server gets a fresh folder (under test_tmpdir()) holding its
 * config, its log and, for unix_socket, its socket; it listens on a free
 * port of 127.0.0.1 (or the host and port its config gives) or on that
 * socket only, keeps no data on disk, and
 * is stopped by its pid. The binary is $LEASH_REDIS_SERVER, else
 * redis-server from $PATH, else /usr/bin/redis-server.
 *
 * A server dies with the thread that started it (PR_SET_PDEATHSIG), so
 * start servers from the case's main thread; a case that crashes takes
 * its servers with it.
 *
 *     test_redis r;
 *     CHECK(test_redis_start(&r, NULL) == 0);
 *     ... connect to 127.0.0.1:r.port ...
 *     test_redis_stop(&r);
 */
#ifndef LEASH_TESTS_REDIS_SERVER_H
#define LEASH_TESTS_REDIS_SERVER_H

#include <stdarg.h>
#include <stdio.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct test_redis_config {
    /* 1: listen on a unix socket in the server's folder (port 0), else on
     * 127.0.0.1:<free port>. */
    int unix_socket;
    /* NULL or the password of the default user. */
    const char *requirepass;
    /* NULL or the body of an ACL rule, e.g. "alice on >secret ~* &* +@all";
     * written to the config as "user <acl_user>". */
    const char *acl_user;
    /* 1: a Redis Sentinel (redis-server CONF --sentinel): extra holds its
     * "sentinel monitor ..." lines; it rewrites its config in its folder.
     * PING answers once it is up (redis_sentinel.h builds on this). */
    int sentinel;
    /* NULL or more config lines, "\n"-separated, e.g.
     * "enable-debug-command yes\nmaxclients 50". */
    const char *extra;
    /* NULL, or the address of 127.0.0.0/8 to listen on and be reached at
     * instead of 127.0.0.1 (Linux routes all of 127/8 to lo). */
    const char *host;
    /* 0, or the TCP port to listen on instead of a free one (a start on it
     * is not tried again on another). */
    int port;
    /* NULL, or a folder of certificates made by test_tls_certs(): the
     * server also serves TLS on tls_port (the plain port stays for the
     * harness' own connections), with tls_cert.pem and tls_cert.key of
     * that folder ("server" when NULL) and its ca.pem for clients. */
    const char *tls_dir;
    const char *tls_cert;
    /* With tls_dir: 1 asks every TLS client for a certificate signed by
     * ca.pem (tls-auth-clients yes); 0 asks for none. */
    int tls_auth_clients;
    /* 0, or how many milliseconds the server's wall clock (TIME, the
     * scripts' clock, key expiry) runs ahead of the machine's (> 0) or
     * behind it (< 0), as on a host whose clock is off: the server runs
     * with support/clock_shift.c preloaded, also after a restart. At most
     * TEST_REDIS_CLOCK_SHIFT_MAX_MS either way; a start asking for a shift
     * fails where that library was not built (the benchmarks). */
    int clock_shift_ms;
    /* NULL, or a network namespace (a path such as /proc/PID/ns/net, see
     * netlab_ns_path) that the server runs in and that the harness makes
     * its own connections to it in, so that host can be an address of
     * that namespace (a node of tests/support/netlab.h) that the caller's
     * namespace does not reach. */
    const char *netns;
} test_redis_config;

/* The largest clock_shift_ms either way: a day. */
#define TEST_REDIS_CLOCK_SHIFT_MAX_MS (24 * 3600 * 1000)

typedef struct test_redis {
    pid_t pid;             /* 0 when not running */
    int port;              /* 0 with unix_socket */
    int tls_port;          /* with cfg.tls_dir: where TLS is served, else 0 */
    char unix_path[108];   /* "" without unix_socket */
    char dir[256];         /* the server's folder; "" once stopped */
    test_redis_config cfg; /* a copy; its strings are owned by this struct */

    /* Private. */
    redisContext *admin_; /* cached connection of test_redis_cmd */
    char *strings_[7];    /* copies of the cfg strings */
} test_redis;

/* The address clients reach r at: cfg.host, or 127.0.0.1. */
const char *test_redis_host(const test_redis *r);

/* The version of the redis-server binary the tests run (see above), from
 * its --version, as major * 10000 + minor * 100 + patch (Valkey: its own
 * version); 0 when it cannot be read. Read once. Where the versions
 * differ (ACL channel rules are 6.2, sharded pub/sub and the cluster bus
 * port settings 7.0), the launchers and the tests ask it. */
int test_redis_version(void);

/* Starts a server with cfg (NULL: TCP, no password) and waits until it
 * answers PING (at most 5 s). Another port is tried when the server does
 * not come up. Returns 0, or -1 with the reason on stderr and *r left
 * stopped. The config strings are copied. */
int test_redis_start(test_redis *r, const test_redis_config *cfg);

/* SIGTERM by pid (SIGKILL after 3 s), reaps it, removes the folder and
 * frees what r holds. Safe on a stopped or zeroed r, and twice. */
void test_redis_stop(test_redis *r);

/* SIGKILL and reap; port, socket and folder stay for a restart.
 * Returns 0, -1 if it was not running. */
int test_redis_kill(test_redis *r);

/* Kills the server if running and starts it again, empty, on the same
 * port or socket with the same config. Returns 0 or -1 (then stopped). */
int test_redis_restart(test_redis *r);

/* The same, but the server keeps the files of its folder: with
 * persistence turned on by cfg.extra ("appendonly yes"), it comes back
 * with what it had written there. Returns once it has read that back
 * (before, it answers LOADING). */
int test_redis_restart_keeping_data(test_redis *r);

/* SIGSTOP / SIGCONT: the server keeps its connections and stops
 * answering until thawed. */
void test_redis_freeze(test_redis *r);
void test_redis_thaw(test_redis *r);

/* Steps the clock of a server started with a clock_shift_ms to shift_ms
 * from the machine's (not 0, at most a day either way), at once, as
 * `date -s` would: TIME, scripts and expiry jump; restarts keep it.
 * Returns 0, or -1 (said on stderr). */
int test_redis_step_clock(test_redis *r, int shift_ms);

/* Makes that clock run fast (ppm > 0) or slow by |ppm| millionths, from
 * now for duration_ms, then keep the shift it got to (no step at either
 * end), as a host clock drifting without NTP would. |ppm| at most
 * TEST_REDIS_DRIFT_MAX_PPM; duration_ms at most a day. Returns at once; the
 * shift when the drift ends (ms, rounded; what clock_shift_ms says from
 * then on) in *end_ms. 0, or -1 (said on stderr). */
#define TEST_REDIS_DRIFT_MAX_PPM 500000
int test_redis_drift_clock(test_redis *r, int ppm, int duration_ms, int *end_ms);

/* A command on a cached blocking connection (hiredis format, so %s and
 * %b), authenticated with requirepass when set. A broken connection is
 * replaced once per call. A command times out after 3 s (a frozen
 * server). Returns NULL on failure; the caller frees the reply with
 * freeReplyObject. */
redisReply *test_redis_cmd(test_redis *r, const char *fmt, ...);

/* The integer reply of a command, or -1 for any other reply. */
long long test_redis_int(test_redis *r, const char *fmt, ...);

/* "calls=" of INFO commandstats for a command (case does not matter;
 * "client|setname" for a subcommand), 0 if it has none, -1 on failure.
 * CONFIG RESETSTAT sets them all back to 0. */
long long test_redis_calls(test_redis *r, const char *command);

/* Calls of every command counted since the last CONFIG RESETSTAT (INFO
 * commandstats: scripts' runs and what they ran), but the harness's own
 * (INFO, CONFIG) and what servers and connections say among themselves (a
 * replica's REPLCONF ACK every second, PING, CLUSTER, HELLO, ...): what
 * clients of the locks cost Redis. -1 on failure. */
long long test_redis_lock_calls(test_redis *r);

/* A folder of throwaway certificates made once per process with
 * scripts/make-certs (its top comment lists the files), under
 * test_tmpdir(), of that process' own (certs-XXXXXX: concurrent runs that
 * share a TMPDIR keep their own CAs), removed when the process that made
 * it exits; NULL when that failed (said on stderr). Forked children use
 * their parent's. */
const char *test_tls_certs(void);

/* The path of a file in test_tls_certs()'s folder, e.g. "ca.pem", in a
 * static buffer of its own per call site's slot (0..7). */
const char *test_tls_file(int slot, const char *name);

/* ---- pieces for harnesses built on these servers (redis_cluster.c) ---- */

/* The config lines of a TLS listener on tls_port (test_redis_config's
 * tls_dir, tls_cert and tls_auth_clients). */
void test_redis_put_tls_config(FILE *f, const char *dir, const char *cert, int tls_port,
                               int auth_clients);

/* A free TCP port of 127.0.0.1, or -1. Free now, not reserved: until the
 * server binds it another process may take it, so a start that fails is
 * worth another try with another port. */
int test_redis_free_port(void);
/* 1 if 127.0.0.1:port is free now, as above. */
int test_redis_port_is_free(int port);

/* Writes the config line `name "value"`: the value in double quotes with
 * '"' and '\\' escaped (Redis reads C-like escapes there), so that paths
 * and passwords survive spaces and quotes. */
void test_redis_put_config(FILE *f, const char *name, const char *value);

/* A command as a hiredis format with its arguments, or, with fmt NULL, as
 * an argument vector (redisCommandArgv). */
typedef struct test_redis_request {
    const char *fmt;
    va_list *ap; /* the address of a va_list object, never of a parameter */
    int argc;
    const char **argv;
    const size_t *lens;
} test_redis_request;

/* A blocking connection to r for the harness' own commands: connected
 * within connect_timeout_ms, commands time out after 3 s (a frozen server
 * fails the command instead of hanging the test), authenticated with
 * r's requirepass when set. NULL on failure. */
redisContext *test_redis_connect_admin(const test_redis *r, int connect_timeout_ms);

/* rq on the connection cached in *admin, which is opened with
 * test_redis_connect_admin(r, connect_timeout_ms) when there is none. A
 * cached connection that broke (not one that timed out) is replaced and
 * rq sent once more; a failed connection is freed and *admin set to NULL.
 * NULL when r is not running or on failure; the caller frees the reply.
 * test_redis_cmd is this on r's own connection. */
redisReply *test_redis_send(test_redis *r, redisContext **admin, int connect_timeout_ms,
                            const test_redis_request *rq);

/* Frees the connection cached in *admin, if any, and sets it to NULL. */
void test_redis_close_admin(redisContext **admin);

/* The integer of reply, -1 for any other reply or NULL; frees reply. */
long long test_redis_int_reply(redisReply *reply);

#ifdef __cplusplus
}
#endif

#endif
