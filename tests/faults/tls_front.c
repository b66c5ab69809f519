/* SPDX-License-Identifier: MIT */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4 */
#endif

#include "tls_front.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "redis_server.h"

/* Connections open at once; a slot whose relay ended is used again. */
#define FRONT_CONNS 64

typedef struct front_conn {
    tls_front *tf;
    int tls_fd, plain_fd;
    SSL *ssl;
    pthread_t thread;
    int used;          /* a relay was started in this slot */
    _Atomic int ended; /* ... and has returned */
} front_conn;

struct tls_front {
    SSL_CTX *ctx;
    int listen_fd, port, target_port;
    pthread_t acceptor;
    pthread_mutex_t lock;
    front_conn conns[FRONT_CONNS];
};

static int plain_connect(int port) {
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)port);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static int send_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* SSL_write of all of buf on the nonblocking TLS side. */
static int ssl_send_all(front_conn *c, const char *buf, size_t len) {
    while (len > 0) {
        int n = SSL_write(c->ssl, buf, (int)len);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
            continue;
        }
        n = SSL_get_error(c->ssl, n);
        if (n != SSL_ERROR_WANT_READ && n != SSL_ERROR_WANT_WRITE)
            return -1;
        {
            struct pollfd p = {c->tls_fd, n == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, 0};
            if (poll(&p, 1, -1) < 0 && errno != EINTR)
                return -1;
        }
    }
    return 0;
}

static void *relay(void *arg) {
    front_conn *c = arg;
    char buf[16384];
    sigset_t pipe;

    /* SSL_write to a peer that left must fail, not raise SIGPIPE. */
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, NULL);
    if (SSL_accept(c->ssl) != 1)
        goto out;
    fcntl(c->tls_fd, F_SETFL, fcntl(c->tls_fd, F_GETFL) | O_NONBLOCK);
    for (;;) {
        struct pollfd p[2] = {{c->plain_fd, POLLIN, 0}, {c->tls_fd, POLLIN, 0}};

        if (!SSL_has_pending(c->ssl) && poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (SSL_has_pending(c->ssl) || p[1].revents != 0) {
            int n = SSL_read(c->ssl, buf, sizeof buf);
            if (n <= 0) {
                int e = SSL_get_error(c->ssl, n);
                if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
                    break;
            } else if (send_all(c->plain_fd, buf, (size_t)n) != 0) {
                break;
            }
        }
        if (p[0].revents != 0) {
            ssize_t n = read(c->plain_fd, buf, sizeof buf);
            if (n <= 0 || ssl_send_all(c, buf, (size_t)n) != 0)
                break;
        }
    }
out:
    /* Either side's end is the other's: the fds close in tls_front_stop. */
    shutdown(c->tls_fd, SHUT_RDWR);
    shutdown(c->plain_fd, SHUT_RDWR);
    ERR_clear_error();
    OPENSSL_thread_stop();
    atomic_store(&c->ended, 1);
    return NULL;
}

/* Joins the relay of a used slot and frees what it had. */
static void slot_clear(front_conn *c) {
    pthread_join(c->thread, NULL);
    SSL_free(c->ssl);
    close(c->tls_fd);
    close(c->plain_fd);
    c->used = 0;
    atomic_store(&c->ended, 0);
}

/* A slot that is free, or whose relay ended (cleared first); NULL when all
 * FRONT_CONNS are busy. */
static front_conn *free_slot(tls_front *tf) {
    int i;

    for (i = 0; i < FRONT_CONNS; i++) {
        front_conn *c = &tf->conns[i];
        if (c->used && atomic_load(&c->ended))
            slot_clear(c);
        if (!c->used)
            return c;
    }
    return NULL;
}

static void *acceptor(void *arg) {
    tls_front *tf = arg;

    for (;;) {
        int fd = accept4(tf->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        front_conn *c;

        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            OPENSSL_thread_stop();
            return NULL; /* the listener was shut down */
        }
        pthread_mutex_lock(&tf->lock);
        c = free_slot(tf);
        if (c != NULL) {
            c->tf = tf;
            c->tls_fd = fd;
            c->plain_fd = plain_connect(tf->target_port);
            c->ssl = SSL_new(tf->ctx);
            if (c->plain_fd >= 0 && c->ssl != NULL && SSL_set_fd(c->ssl, fd) == 1 &&
                pthread_create(&c->thread, NULL, relay, c) == 0) {
                c->used = 1;
            } else {
                SSL_free(c->ssl);
                if (c->plain_fd >= 0)
                    close(c->plain_fd);
                c = NULL;
            }
        }
        pthread_mutex_unlock(&tf->lock);
        if (c == NULL)
            close(fd);
    }
}

tls_front *tls_front_start(int target_port) {
    tls_front *tf = calloc(1, sizeof(*tf));
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;

    if (tf == NULL || test_tls_certs() == NULL)
        goto fail;
    tf->listen_fd = -1;
    tf->target_port = target_port;
    pthread_mutex_init(&tf->lock, NULL);
    tf->ctx = SSL_CTX_new(TLS_server_method());
    if (tf->ctx == NULL ||
        SSL_CTX_use_certificate_chain_file(tf->ctx, test_tls_file(6, "server.pem")) != 1 ||
        SSL_CTX_use_PrivateKey_file(tf->ctx, test_tls_file(7, "server.key"), SSL_FILETYPE_PEM) != 1)
        goto fail;
    tf->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (tf->listen_fd < 0 || bind(tf->listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(tf->listen_fd, 64) != 0 ||
        getsockname(tf->listen_fd, (struct sockaddr *)&sa, &len) != 0)
        goto fail;
    tf->port = ntohs(sa.sin_port);
    if (pthread_create(&tf->acceptor, NULL, acceptor, tf) != 0)
        goto fail;
    return tf;
fail:
    fprintf(stderr, "tls_front_start: %s\n", strerror(errno));
    if (tf != NULL) {
        if (tf->listen_fd >= 0)
            close(tf->listen_fd);
        SSL_CTX_free(tf->ctx);
        free(tf);
    }
    return NULL;
}

int tls_front_port(const tls_front *tf) {
    return tf->port;
}

void tls_front_stop(tls_front *tf) {
    int i;

    if (tf == NULL)
        return;
    shutdown(tf->listen_fd, SHUT_RDWR);
    pthread_join(tf->acceptor, NULL);
    close(tf->listen_fd);
    for (i = 0; i < FRONT_CONNS; i++) {
        front_conn *c = &tf->conns[i];
        if (!c->used)
            continue;
        shutdown(c->tls_fd, SHUT_RDWR);
        shutdown(c->plain_fd, SHUT_RDWR);
        slot_clear(c);
    }
    pthread_mutex_destroy(&tf->lock);
    SSL_CTX_free(tf->ctx);
    free(tf);
}
