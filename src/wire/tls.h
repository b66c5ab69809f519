/* SPDX-License-Identifier: MIT */
/*
 * TLS for leash's sockets, with OpenSSL: one context per client (the
 * trusted CAs, the client certificate, whether to verify), built once from
 * the options, and one session per connection on top of a nonblocking fd.
 *
 * Nothing here waits: every call does what the socket allows now and says
 * what it waits for (LEASH__TLS_WANT_READ or _WANT_WRITE, which the caller
 * turns into the loop watcher's events; a write may want a read and a read
 * a write). The session reads and writes the fd with recv/send and
 * MSG_NOSIGNAL, like the plain path: a peer that closed never raises
 * SIGPIPE in the caller's process.
 *
 * Sessions are used by sock.c and, outside the library, by the leash
 * tool's relay (tools/tls.c: scripts/check-layers lets the tool include
 * this header). OpenSSL's headers stay inside tls.c.
 */
#ifndef LEASH_WIRE_TLS_H
#define LEASH_WIRE_TLS_H

#include <stddef.h>

#include "base/log.h"

typedef struct leash__tls leash__tls;
typedef struct leash__tls_session leash__tls_session;

/* The files and the checks of leash_options (docs/tls-and-names.md "TLS"). */
typedef struct leash__tls_cfg {
    const char *ca_file, *ca_dir; /* both NULL: the system's default store */
    const char *cert_file, *key_file;
    int verify;
    /* The password of an encrypted key_file; NULL: none. Used while
     * leash__tls_new reads the key, not kept. */
    const char *key_password;
} leash__tls_cfg;

/* What a session call returns besides a byte count (> 0). */
enum {
    LEASH__TLS_DONE = 0,        /* the handshake completed */
    LEASH__TLS_WANT_READ = -1,  /* call again once the fd is readable */
    LEASH__TLS_WANT_WRITE = -2, /* call again once the fd is writable */
    LEASH__TLS_CLOSED = -3,     /* the peer closed (close_notify or EOF) */
    LEASH__TLS_BROKEN = -4,     /* the socket failed (a read or write error) */
    LEASH__TLS_FAILED = -5      /* TLS refused: a certificate, an alert, not TLS at all */
};

/* The client's context. LEASH_OK; LEASH_ETLS when a file cannot be read,
 * the key is encrypted and key_password is NULL or wrong, or the key does
 * not match the certificate (logged, with OpenSSL's reason); LEASH_ENOMEM.
 * It never prompts for a password. tls_verify = 0 is logged as a warning
 * here, once. */
int leash__tls_new(leash__tls **out, const leash__tls_cfg *cfg, const leash__logger *log);
void leash__tls_free(leash__tls *t);

/* A client session on fd (connected), for the server `name` (SNI, unless
 * an IP address, and the name or address verified). NULL without memory
 * (err says so). */
leash__tls_session *leash__tls_session_new(leash__tls *t, int fd, const char *name, char *err,
                                           size_t errlen);
void leash__tls_session_free(leash__tls_session *ts);

/* The handshake, as far as the socket allows: DONE, WANT_*, or CLOSED,
 * BROKEN, FAILED with why (for FAILED: OpenSSL's reason, the certificate
 * check's result, and a hint; for BROKEN errno's text). */
int leash__tls_handshake(leash__tls_session *ts, char *why, size_t whylen);

/* Bytes read into buf (> 0), or WANT_*, CLOSED, BROKEN, FAILED (why). */
long leash__tls_read(leash__tls_session *ts, char *buf, size_t len, char *why, size_t whylen);

/* Bytes of buf written (> 0, one record or more), or WANT_*, BROKEN,
 * FAILED (why). After WANT_*, call again with at least the same bytes at
 * the front of buf (buf itself may have moved, and may have grown). */
long leash__tls_write(leash__tls_session *ts, const char *buf, size_t len, char *why,
                      size_t whylen);

/* What the server sent so far, for the log line of a handshake that ran
 * out of time: "no byte from the server", or how many bytes and how far
 * the handshake came with them. */
void leash__tls_seen(const leash__tls_session *ts, char *out, size_t len);

/* Whether the session holds input it decrypted or read ahead that no
 * leash__tls_read has returned yet: the socket may show nothing to read. */
int leash__tls_pending(const leash__tls_session *ts);

#endif
