/* SPDX-License-Identifier: MIT */
/*
 * A nonblocking socket to one Redis server: the connect, TLS when asked
 * (wire/tls.h: the handshake after the connect, then every read and write
 * through the session), an output buffer that goes out as the socket takes
 * it, and the input cut into replies by
 * hiredis's reply parser (redisReader; no hiredis connection is involved,
 * so no frame a server sends can trip hiredis's own asserts). The loop
 * watches the fd through the io hooks of leash/loop.h.
 *
 * Hooks fire from the loop only, never inside a leash__sock_* call, and
 * never after leash__sock_close. A hook may close the socket (or free the
 * whole client): the memory goes once the event that called it returns.
 */
#ifndef LEASH_WIRE_SOCK_H
#define LEASH_WIRE_SOCK_H

#include <stddef.h>
#include <stdint.h>

#include "base/env.h"
#include "wire/tls.h"

struct redisReply;
typedef struct leash__sock leash__sock;

typedef struct leash__sock_hooks {
    /* The connect (and the TLS handshake) completed: writes go out from
     * now on. */
    void (*connected)(void *owner);
    /* One reply, in the order they came. Returns 0 (the socket frees it
     * when the hook returns) or 1 (the owner took it: freeReplyObject). */
    int (*reply)(void *owner, struct redisReply *reply);
    /* The connect failed, or the peer closed, or a read, a write or the
     * parser failed (why says which). status is LEASH_ETLS when TLS was
     * refused before the server said anything (a certificate, an alert, a
     * peer that does not speak TLS), else LEASH_ECONN. The socket is
     * closed and freed when the hook returns: forget it. */
    void (*closed)(void *owner, int status, const char *why);
} leash__sock_hooks;

/* Where to connect: a unix socket path, or a host and port. An IP address
 * connects at once; a name is resolved first, without blocking (the env's
 * resolver, wire/resolve.h), again on every open, and its addresses race
 * (RFC 8305): in order, each next one starting when the one before failed
 * or has not connected within 250 ms (less when budget_ms would not let
 * every address start), the first to connect winning. The winner goes
 * first next time once the owner said the connection is ready
 * (leash__sock_ready); a winner closed before that goes last next time.
 * For a host, TLS or not (the handshake on the winner). */
typedef struct leash__sock_addr {
    const char *host;
    int port;
    const char *unix_path;
    leash__tls *tls;      /* NULL: plain; else TLS once the connect completes */
    const char *tls_name; /* with tls: the name sent (SNI) and verified */
    int64_t budget_ms;    /* the owner's connect timeout, from the open; 0: none said */
} leash__sock_addr;

/*
 * Starts connecting (for a name: resolving, then connecting); `connected`
 * or `closed` follows from the loop. NULL when it failed at once (no
 * memory, no watcher, a refused unix socket or IP address): `err` then
 * says why.
 */
leash__sock *leash__sock_open(leash__env *env, const leash__sock_addr *addr,
                              const leash__sock_hooks *hooks, void *owner, char *err,
                              size_t errlen);

/* Appends buf to what goes out. 0, or -1 without memory (nothing of buf
 * was taken). Before the connect completes, it waits for it. */
int leash__sock_write(leash__sock *s, const char *buf, size_t len);

/* Takes back the last n bytes written (n at most leash__sock_unsent). */
void leash__sock_unwrite(leash__sock *s, size_t n);

/* Writes what the socket takes now, without waiting (a teardown: there is
 * no later write event). */
void leash__sock_flush_now(leash__sock *s);

/* Bytes taken by leash__sock_write that the socket did not take yet. */
size_t leash__sock_unsent(const leash__sock *s);

/* Whether the socket has something to read (bytes, or the server's close,
 * or input the TLS session holds) that the loop has not delivered yet. */
int leash__sock_has_input(const leash__sock *s);

/* While the TLS handshake runs: what the server sent so far (see
 * leash__tls_seen) in out, and 1; else 0. */
int leash__sock_tls_seen(const leash__sock *s, char *out, size_t len);
/* 1 while the host name is being resolved (no connect started yet). */
int leash__sock_resolving(const leash__sock *s);

/* The fd, for tests that drive the loop by hand; -1 until a connect won
 * (the race's fds are its own), and once closed. */
int leash__sock_fd(const leash__sock *s);

/* The owner's handshake was answered: the connection is ready. For a
 * name, the address that won the race is the one that worked (it goes
 * first next time); until this is said, a connect is not enough: a winner
 * that is closed or fails first (its server frozen, a load balancer without
 * a backend) is demoted, so that the next race starts elsewhere. */
void leash__sock_ready(leash__sock *s);

/* Closes the socket (a query for its name ends); no hook fires any more. */
void leash__sock_close(leash__sock *s);

#endif
