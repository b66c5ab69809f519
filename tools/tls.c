/* SPDX-License-Identifier: MIT */
/*
 * TLS for the tool's blocking hiredis connections. hiredis 0.14 (Debian's)
 * has no TLS, so a connection to a TLS server is a socketpair: hiredis
 * reads and writes one end (redisConnectFd), a thread relays the other end
 * through a TLS session to the server. The session is the library's own
 * (wire/tls.h): the same context, verification and log lines as the
 * programs that use leash. The handshake runs before the thread starts, so
 * that its failure is the connect's error.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "wire/tls.h"

/* The relays started, joined by cli_tls_close: a thread still running at
 * exit would leave OpenSSL's per-thread state behind. */
#define RELAYS_MAX (2 * CLI_NODES_MAX)
static pthread_t relays[RELAYS_MAX];
static int nrelays;

typedef struct relay {
    int plain; /* our end of the socketpair */
    int fd;    /* the TCP connection to the server */
    leash__tls_session *ts;
} relay;

static int write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The server's side is nonblocking (a read that only met a session
 * ticket must not sit in SSL_read while hiredis's command waits): a write
 * waits in poll for what the session wants. */
static int tls_write_all(relay *r, const char *buf, size_t len) {
    char why[256];

    while (len > 0) {
        long n = leash__tls_write(r->ts, buf, len, why, sizeof(why));
        if (n == LEASH__TLS_WANT_READ || n == LEASH__TLS_WANT_WRITE) {
            struct pollfd p = {r->fd, n == LEASH__TLS_WANT_READ ? POLLIN : POLLOUT, 0};
            if (poll(&p, 1, -1) < 0 && errno != EINTR)
                return -1;
            continue;
        }
        if (n <= 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Both ways until either side closes; then both close, which hiredis
 * sees as the server's close. */
static void *relay_run(void *arg) {
    relay *r = arg;
    char buf[16384], why[256];

    for (;;) {
        struct pollfd p[2] = {{r->plain, POLLIN, 0}, {r->fd, POLLIN, 0}};
        long n;

        if (!leash__tls_pending(r->ts) && poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (leash__tls_pending(r->ts) || p[1].revents != 0) {
            n = leash__tls_read(r->ts, buf, sizeof(buf), why, sizeof(why));
            if (n != LEASH__TLS_WANT_READ && n != LEASH__TLS_WANT_WRITE &&
                (n <= 0 || write_all(r->plain, buf, (size_t)n) != 0))
                break;
        }
        if (p[0].revents != 0) {
            ssize_t m = read(r->plain, buf, sizeof(buf));
            if (m <= 0 || tls_write_all(r, buf, (size_t)m) != 0)
                break;
        }
    }
    leash__tls_session_free(r->ts);
    close(r->fd);
    close(r->plain);
    free(r);
    return NULL;
}

/* A blocking TCP connection within timeout_ms, its reads and writes
 * bounded by it too (a server that stops answering the handshake). */
static int tcp_connect(const char *host, int port, int timeout_ms, char *err, size_t errlen) {
    struct addrinfo hints, *res = NULL, *ai;
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    char service[16];
    int fd = -1, rc, last = 0;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(service, sizeof(service), "%d", port);
    if ((rc = getaddrinfo(host, service, &hints, &res)) != 0) {
        snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(rc));
        return -1;
    }
    for (ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
        struct pollfd p;
        socklen_t len = sizeof(last);

        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            last = errno;
            continue;
        }
        p.fd = fd;
        p.events = POLLOUT;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 &&
            (errno != EINPROGRESS || poll(&p, 1, timeout_ms) != 1 ||
             getsockopt(fd, SOL_SOCKET, SO_ERROR, &last, &len) != 0 || last != 0)) {
            if (last == 0)
                last = errno == EINPROGRESS ? ETIMEDOUT : errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, errlen, "%s", strerror(last));
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    return fd;
}

static void on_log(int level, const char *msg, void *arg) {
    (void)level;
    (void)arg;
    fprintf(stderr, "leash: %s\n", msg);
}

int cli_tls_prepare(cli_conn *c) {
    leash__tls_cfg cfg = {c->tls_ca_file,  c->tls_ca_dir, c->tls_cert_file,
                          c->tls_key_file, c->tls_verify, c->tls_key_password};
    leash__logger log = {on_log, NULL, LEASH_LOG_WARN};

    if (!c->tls || c->tls_ctx != NULL)
        return 0;
    if (leash__tls_new(&c->tls_ctx, &cfg, &log) != LEASH_OK) {
        snprintf(c->err, sizeof(c->err), "TLS: see above");
        return -1;
    }
    return 0;
}

void cli_tls_close(cli_conn *c) {
    struct timespec until;
    int i, all = 1;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2;
    for (i = 0; i < nrelays; i++)
        all &= pthread_timedjoin_np(relays[i], NULL, &until) == 0;
    nrelays = 0;
    /* A relay that did not end still uses the context. */
    if (all) {
        leash__tls_free(c->tls_ctx);
        c->tls_ctx = NULL;
    }
}

int cli_tls_connect(cli_conn *c, const char *host, int port, char *err, size_t errlen) {
    struct timeval none = {0, 0};
    pthread_t thread;
    int pair[2] = {-1, -1}, rc;
    relay *r = calloc(1, sizeof(*r));

    if (r == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    r->plain = -1;
    if ((r->fd = tcp_connect(host, port, c->timeout_ms, err, errlen)) < 0)
        goto fail;
    r->ts = leash__tls_session_new(
        c->tls_ctx, r->fd, c->tls_server_name != NULL ? c->tls_server_name : host, err, errlen);
    if (r->ts == NULL)
        goto fail;
    rc = leash__tls_handshake(r->ts, err, errlen);
    if (rc == LEASH__TLS_WANT_READ || rc == LEASH__TLS_WANT_WRITE)
        snprintf(err, errlen, "TLS handshake not answered within %d ms: is this port TLS?",
                 c->timeout_ms);
    if (rc != LEASH__TLS_DONE)
        goto fail;
    /* From here on the relay waits as long as hiredis does. */
    setsockopt(r->fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
    setsockopt(r->fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none));
    fcntl(r->fd, F_SETFL, fcntl(r->fd, F_GETFL) | O_NONBLOCK);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
        snprintf(err, errlen, "socketpair: %s", strerror(errno));
        goto fail;
    }
    r->plain = pair[1];
    if (nrelays == RELAYS_MAX || pthread_create(&thread, NULL, relay_run, r) != 0) {
        snprintf(err, errlen, "cannot start the TLS relay");
        close(pair[0]);
        goto fail;
    }
    relays[nrelays++] = thread;
    return pair[0];
fail:
    leash__tls_session_free(r->ts);
    if (r->fd >= 0)
        close(r->fd);
    if (r->plain >= 0)
        close(r->plain);
    free(r);
    return -1;
}
