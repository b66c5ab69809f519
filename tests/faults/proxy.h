/* SPDX-License-Identifier: MIT */
/*
 * A fault-injecting TCP proxy between leash and a redis-server, for tests.
 *
 * The proxy runs in a child process (so that it keeps forwarding while the
 * test process is stopped, busy, or forks workers of its own) and listens on
 * a free port of 127.0.0.1. The test controls it over a socketpair: every
 * call below is answered by the proxy once the change took effect.
 *
 * Connections are told apart by what the client sends: one that sends
 * SUBSCRIBE is a subscriber connection (FP_SUB), one that sends SCRIPT, EVAL
 * or EVALSHA a command connection (FP_CMD). Until then it is unclassified:
 * only settings made for FP_ALL apply to it. A setting applies to the
 * connections that exist and to those that come later.
 *
 * Faults, each for a set of roles and directions:
 *   delay      every byte is forwarded `ms` after it was read (latency);
 *   trickle    at most `bytes` bytes go out at a time, one piece every
 *              FP_TRICKLE_GAP_MS (a slow path, replies and TLS records cut
 *              into pieces that arrive one by one);
 *   stall      bytes are held, not forwarded, until the stall is lifted;
 *              the connection stays open (a frozen network path);
 *   blackhole  bytes are read and thrown away; as with a real partition,
 *              the stream cannot resume where it was cut, so a connection
 *              that lost bytes is closed when the blackhole is lifted;
 *   cut        every connection of the roles is closed now (RST);
 *   refuse     new connections are refused: for FP_ALL the listening
 *              socket is closed (connect() gets ECONNREFUSED); for one
 *              role a connection is reset as soon as it shows that role.
 *
 *     fault_proxy p;
 *     CHECK(fp_start(&p, redis_port) == 0);
 *     ... point leash at 127.0.0.1:p.port ...
 *     fp_stall(&p, FP_CMD, FP_BOTH, 1);
 *     ...
 *     fp_clear(&p);
 *     fp_stop(&p);
 */
#ifndef LEASH_TESTS_FAULTS_PROXY_H
#define LEASH_TESTS_FAULTS_PROXY_H

#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Roles (a bit set). */
#define FP_CMD 1
#define FP_SUB 2
#define FP_ALL 3
/* Directions (a bit set): UP is client -> server, DOWN server -> client. */
#define FP_UP 1
#define FP_DOWN 2
#define FP_BOTH 3

typedef struct fault_proxy {
    pid_t pid; /* the proxy's process; 0 when stopped */
    int port;  /* where clients connect (127.0.0.1) */
    int ctl;   /* control socket */
} fault_proxy;

typedef struct fp_stats {
    uint64_t accepted; /* connections accepted */
    uint64_t refused;  /* connections refused (reset) by a role refusal */
    uint64_t cut;      /* connections closed by fp_cut or after a blackhole */
    uint64_t open_cmd; /* open connections now, by role */
    uint64_t open_sub;
    uint64_t open_unknown;
    uint64_t bytes_up; /* bytes forwarded */
    uint64_t bytes_down;
    uint64_t bytes_dropped; /* bytes thrown away by blackholes */
} fp_stats;

/* Starts a proxy to 127.0.0.1:target_port. 0, or -1 (reason on stderr). */
int fp_start(fault_proxy *p, int target_port);
/* Stops the proxy (SIGKILL by pid) and closes every connection. Safe on a
 * stopped or zeroed p. */
void fp_stop(fault_proxy *p);

/* Each returns 0, or -1 if the proxy did not answer. */
int fp_delay(fault_proxy *p, int roles, int dirs, int ms);
int fp_stall(fault_proxy *p, int roles, int dirs, int on);
/* bytes 0 turns it off. */
#define FP_TRICKLE_GAP_MS 1
int fp_trickle(fault_proxy *p, int roles, int dirs, int bytes);
int fp_blackhole(fault_proxy *p, int roles, int dirs, int on);
int fp_cut(fault_proxy *p, int roles);
int fp_refuse(fault_proxy *p, int roles, int on);
/* Every fault off: held bytes flow again, connections that lost bytes to a
 * blackhole are closed, refused ones are accepted again. */
int fp_clear(fault_proxy *p);
int fp_stats_get(fault_proxy *p, fp_stats *out);
/* New connections go to 127.0.0.1:target_port from now on. */
int fp_retarget(fault_proxy *p, int target_port);

#ifdef __cplusplus
}
#endif

#endif
