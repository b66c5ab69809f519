/* SPDX-License-Identifier: MIT */
/*
 * A small DNS server for tests: answers A and AAAA queries over UDP on
 * 127.0.0.1:<free port> (or another address: test_dns_start_at) from a
 * table the test sets, optionally late.
 *
 * It runs in a child process (so that it answers while the test's loop is
 * busy, and a delay there stalls nothing here), killed by pid and with its
 * parent (PR_SET_PDEATHSIG). The test controls it over a socketpair; each
 * call below returns once the change took effect. A client is pointed at
 * it with leash_options.dns_servers = d.servers, and asks no other server.
 *
 * Answers: a name in the table gets its addresses of the type asked (none
 * of that type: an empty NOERROR answer); any other name NXDOMAIN. TTL 0
 * unless test_dns_ttl says otherwise.
 *
 *     test_dns d;
 *     CHECK(test_dns_start(&d) == 0);
 *     test_dns_set(&d, "redis.leash.test", "127.0.0.1,::1");
 *     o.host = "redis.leash.test";
 *     o.dns_servers = d.servers;
 *     ...
 *     test_dns_stop(&d);
 */
#ifndef LEASH_TESTS_DNS_SERVER_H
#define LEASH_TESTS_DNS_SERVER_H

#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct test_dns {
    pid_t pid;        /* the server's process; 0 when stopped */
    int port;         /* UDP, on 127.0.0.1 */
    int ctl;          /* control socket */
    char servers[40]; /* "127.0.0.1:PORT", for leash_options.dns_servers */
} test_dns;

/* Starts a server with an empty table. 0, or -1 (reason on stderr). */
int test_dns_start(test_dns *d);
/* The same on ipv4 (an address of the caller's network namespace, e.g. a
 * node of tests/support/netlab.h) instead of 127.0.0.1. The socket stays
 * in the namespace the caller was in. */
int test_dns_start_at(test_dns *d, const char *ipv4);
/* Stops it (SIGKILL by pid). Safe on a stopped or zeroed d, and twice. */
void test_dns_stop(test_dns *d);

/* name's addresses from now on: IPv4 and IPv6 literals, comma-separated,
 * answered in that order; "" for none; NULL removes the name (NXDOMAIN).
 * 0, or -1. */
int test_dns_set(test_dns *d, const char *name, const char *addrs);
/* Every answer from now on leaves ms after its query came (0: at once).
 * 0, or -1. */
int test_dns_delay(test_dns *d, int ms);
/* The TTL of every answer from now on, in seconds (0 at the start). 0, or
 * -1. */
int test_dns_ttl(test_dns *d, int seconds);
/* Queries (A and AAAA alike) that came for name so far, or -1. */
long test_dns_queries(test_dns *d, const char *name);

#ifdef __cplusplus
}
#endif

#endif
