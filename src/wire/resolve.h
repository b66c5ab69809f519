/* SPDX-License-Identifier: MIT */
/*
 * Host names resolved without blocking the loop: c-ares, one channel per
 * client, driven through the same loop hooks as leash's sockets (an fd
 * watcher per socket c-ares opens, reported by its socket-state callback,
 * and one timer for its retransmits and timeouts).
 *
 * Within the connect budget (connect_timeout_ms): c-ares asks its servers
 * in turn, each given a share of half the budget, so that every
 * configured server is asked inside it, and a query runs on for four
 * rounds (each twice as patient as the one before). One query per name
 * runs at a time: a connect that gives up waiting leaves it running, and
 * the next connect to that name waits for the same query. The last good
 * answer of a name is kept for its TTL: when the resolvers fail, or none
 * answered within a round, it answers instead.
 *
 * A query's callback runs once, from the loop (an fd event or the timer),
 * never inside leash__resolve, and never after leash__resolve_cancel. It
 * runs between leash__env_enter/leave, so it may free anything, the client
 * included: the channel goes only once the outermost leave returns.
 */
#ifndef LEASH_WIRE_RESOLVE_H
#define LEASH_WIRE_RESOLVE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/env.h"

typedef struct leash__resolver leash__resolver;
typedef struct leash__query leash__query;

/* The addresses of a name, in the order to try them: the one whose
 * connection was ready last (leash__resolve_worked) first, then c-ares's
 * order (that of RFC 6724), IPv6 and IPv4 taking turns (RFC 8305), then
 * the demoted ones (leash__resolve_demote), the latest demoted last; each
 * with the port. One allocation: free() it. */
typedef struct leash__addrs {
    size_t n;
    struct {
        struct sockaddr_storage sa;
        socklen_t len;
    } at[];
} leash__addrs;

/* The answer: addrs (n >= 1; the callee owns it), or NULL and why the name
 * did not resolve (c-ares's words, valid during the call). */
typedef void leash__resolve_fn(void *arg, leash__addrs *addrs, const char *why);

/*
 * A resolver for env's client. servers: NULL for the system's resolvers
 * (read when the first name is resolved), else "ip[:port],..." (copied),
 * checked here. budget_ms: the connect timeout, which the servers' timeouts
 * are cut from. LEASH_OK, LEASH_ENOMEM, or LEASH_EINVAL for a server list
 * c-ares does not take (logged).
 */
int leash__resolver_new(leash__resolver **out, leash__env *env, const char *servers,
                        int64_t budget_ms);
/* Makes its timer (the env is attached). LEASH_OK / LEASH_ENOMEM. */
int leash__resolver_prepare(leash__resolver *r);
/* Gives the timer back (a failed attach). */
void leash__resolver_unprepare(leash__resolver *r);
/* Ends every query (no callback runs) and frees the resolver. Never from
 * inside one of its callbacks (the env defers the client's free anyway). */
void leash__resolver_free(leash__resolver *r);

/* Starts resolving host (IPv6 and IPv4) for port. NULL when it could not
 * start (no memory, no channel): err says why. */
leash__query *leash__resolve(leash__resolver *r, const char *host, int port, leash__resolve_fn *fn,
                             void *arg, char *err, size_t errlen);
/* The caller stops waiting: fn will not run. The query itself runs on,
 * for the next caller that asks for the name. */
void leash__resolve_cancel(leash__query *q);
/* A connection to sa, one of host's addresses, became ready (the server
 * answered it): it goes first in host's answers from now on (until another
 * one does), and is no longer demoted. */
void leash__resolve_worked(leash__resolver *r, const char *host, const struct sockaddr *sa,
                           socklen_t len);
/* A connection to sa connected but failed before it was ready (a frozen
 * server, a load balancer without a backend, a refused handshake): it goes
 * last in host's answers from now on, behind those demoted before it,
 * until it works again; it no longer goes first. */
void leash__resolve_demote(leash__resolver *r, const char *host, const struct sockaddr *sa,
                           socklen_t len);

/* "1.2.3.4:6379" or "[::1]:6379", for log lines. */
void leash__addr_text(const struct sockaddr *sa, char *buf, size_t len);

#endif
