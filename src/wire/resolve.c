/* SPDX-License-Identifier: MIT */
#include "wire/resolve.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <ares.h>

#include "base/clock.h"
#include "base/list.h"
#include "base/log.h"
#include "base/timer.h"

/* A socket c-ares opened, watched by the loop. */
typedef struct watch {
    leash__list link;
    leash__resolver *r;
    int fd;
    void *io;
} watch;

struct leash__query {
    leash__list link; /* in the done list while its answer waits there */
    leash__resolver *r;
    leash__resolve_fn *fn; /* NULL once cancelled: c-ares still holds it */
    void *arg;
    leash__addrs *addrs; /* an answer that waits in the done list */
    int status;          /* ... and its c-ares status */
};

struct leash__resolver {
    leash__env *env;
    char *servers;          /* "ip[:port],...", or NULL: the system's */
    ares_channel channel;   /* NULL until needed */
    leash__list watches;    /* of c-ares's sockets */
    leash__list done;       /* answered inside leash__resolve: delivered from the timer */
    leash__query *starting; /* the query leash__resolve is starting */
    leash__timer timer;     /* c-ares's timeouts, and the done list */
};

/* ---- c-ares's sockets on the loop ---- */

static void arm(leash__resolver *r);
static void timer_fired(void *arg);

static void on_io(void *arg, int events) {
    watch *w = arg;
    leash__resolver *r = w->r;
    int fd = w->fd;

    /* c-ares may close the socket, and so free w, while it runs. */
    leash__env_enter(r->env);
    ares_process_fd(r->channel, (events & LEASH_IO_READ) ? fd : ARES_SOCKET_BAD,
                    (events & LEASH_IO_WRITE) ? fd : ARES_SOCKET_BAD);
    arm(r);
    leash__env_leave(r->env);
}

static watch *watch_of(leash__resolver *r, int fd) {
    leash__list *n;

    for (n = r->watches.next; n != &r->watches; n = n->next)
        if (LEASH__CONTAINER(n, watch, link)->fd == fd)
            return LEASH__CONTAINER(n, watch, link);
    return NULL;
}

/* c-ares's socket-state callback: what fd waits for now (nothing: it is
 * about to be closed). */
static void sock_state(void *data, ares_socket_t fd, int readable, int writable) {
    leash__resolver *r = data;
    const leash_loop *lp = &r->env->loop;
    watch *w = watch_of(r, fd);
    int events = (readable ? LEASH_IO_READ : 0) | (writable ? LEASH_IO_WRITE : 0);

    if (events == 0) {
        if (w != NULL) {
            lp->io_free(lp->data, w->io);
            leash__list_remove(&w->link);
            free(w);
        }
        return;
    }
    if (w == NULL) {
        w = calloc(1, sizeof(*w));
        if (w != NULL && (w->io = lp->io_new(lp->data, fd, on_io, w)) == NULL) {
            free(w);
            w = NULL;
        }
        if (w == NULL) {
            /* Its queries end at c-ares's timeout, or at the connect's. */
            leash__log(&r->env->log, LEASH_LOG_WARN,
                       "resolver: out of memory for a DNS socket's watcher");
            return;
        }
        w->r = r;
        w->fd = fd;
        leash__list_insert_tail(&r->watches, &w->link);
    }
    lp->io_set(lp->data, w->io, events);
}

/* ---- the channel ---- */

static int make_channel(leash__resolver *r, char *err, size_t errlen) {
    struct ares_options o;
    int rc;

    memset(&o, 0, sizeof(o));
    o.sock_state_cb = sock_state;
    o.sock_state_cb_data = r;
    rc = ares_init_options(&r->channel, &o, ARES_OPT_SOCK_STATE_CB);
    if (rc != ARES_SUCCESS) {
        r->channel = NULL;
        snprintf(err, errlen, "c-ares: %s", ares_strerror(rc));
        return rc == ARES_ENOMEM ? LEASH_ENOMEM : LEASH_EINVAL;
    }
    if (r->servers != NULL && (rc = ares_set_servers_ports_csv(r->channel, r->servers)) != 0) {
        ares_destroy(r->channel);
        r->channel = NULL;
        snprintf(err, errlen, "dns_servers \"%s\": %s", r->servers, ares_strerror(rc));
        return rc == ARES_ENOMEM ? LEASH_ENOMEM : LEASH_EINVAL;
    }
    return LEASH_OK;
}

int leash__resolver_new(leash__resolver **out, leash__env *env, const char *servers) {
    leash__resolver *r = calloc(1, sizeof(*r));
    char err[LEASH_DNS_SERVERS_MAX + 64];
    int rc;

    if (r == NULL || (servers != NULL && (r->servers = strdup(servers)) == NULL)) {
        free(r);
        return LEASH_ENOMEM;
    }
    r->env = env;
    leash__list_init(&r->watches);
    leash__list_init(&r->done);
    leash__timer_init(&r->timer, env, timer_fired, r);
    /* A server list given is checked now; the system's configuration is
     * read when the first name is resolved. */
    if (servers != NULL && (rc = make_channel(r, err, sizeof(err))) != LEASH_OK) {
        leash__log(&env->log, LEASH_LOG_ERROR, "%s", err);
        free(r->servers);
        free(r);
        return rc;
    }
    *out = r;
    return LEASH_OK;
}

/* ---- queries ---- */

/* The answer's addresses, or NULL (*status says why). */
static leash__addrs *addrs_of(const struct ares_addrinfo *res, int *status) {
    const struct ares_addrinfo_node *n;
    leash__addrs *a;
    size_t count = 0;

    for (n = res != NULL ? res->nodes : NULL; n != NULL; n = n->ai_next)
        if ((n->ai_family == AF_INET || n->ai_family == AF_INET6) &&
            n->ai_addrlen <= sizeof(a->at[0].sa))
            count++;
    if (count == 0) {
        *status = ARES_ENODATA;
        return NULL;
    }
    a = malloc(sizeof(*a) + count * sizeof(a->at[0]));
    if (a == NULL) {
        *status = ARES_ENOMEM;
        return NULL;
    }
    a->n = 0;
    for (n = res->nodes; n != NULL; n = n->ai_next)
        if ((n->ai_family == AF_INET || n->ai_family == AF_INET6) &&
            n->ai_addrlen <= sizeof(a->at[0].sa)) {
            memcpy(&a->at[a->n].sa, n->ai_addr, n->ai_addrlen);
            a->at[a->n++].len = (socklen_t)n->ai_addrlen;
        }
    return a;
}

/* The one way a query ends for its owner: forgotten, then told. */
static void deliver(leash__query *q, leash__addrs *addrs, int status) {
    leash__resolve_fn *fn = q->fn;
    void *arg = q->arg;

    free(q);
    fn(arg, addrs, addrs != NULL ? NULL : ares_strerror(status));
}

static void on_answer(void *arg, int status, int timeouts, struct ares_addrinfo *res) {
    leash__query *q = arg;
    leash__resolver *r = q->r;
    leash__addrs *addrs = NULL;

    (void)timeouts;
    /* Cancelled, or the channel is being destroyed (ARES_EDESTRUCTION):
     * nobody waits. */
    if (q->fn == NULL || status == ARES_EDESTRUCTION) {
        ares_freeaddrinfo(res);
        free(q);
        return;
    }
    if (status == ARES_SUCCESS)
        addrs = addrs_of(res, &status);
    ares_freeaddrinfo(res);
    if (r->starting == q) {
        /* Inside leash__resolve (a hosts-file entry): told from the loop. */
        q->addrs = addrs;
        q->status = status;
        leash__list_insert_tail(&r->done, &q->link);
        return;
    }
    deliver(q, addrs, status);
}

leash__query *leash__resolve(leash__resolver *r, const char *host, int port, leash__resolve_fn *fn,
                             void *arg, char *err, size_t errlen) {
    struct ares_addrinfo_hints hints;
    char service[16];
    leash__query *q;

    if (r->channel == NULL && make_channel(r, err, errlen) != LEASH_OK)
        return NULL;
    q = calloc(1, sizeof(*q));
    if (q == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    leash__list_init(&q->link);
    q->r = r;
    q->fn = fn;
    q->arg = arg;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = ARES_AI_NUMERICSERV;
    snprintf(service, sizeof(service), "%d", port);
    r->starting = q;
    ares_getaddrinfo(r->channel, host, service, &hints, on_answer, q);
    r->starting = NULL;
    arm(r);
    return q;
}

void leash__resolve_cancel(leash__query *q) {
    if (leash__list_linked(&q->link)) {
        leash__list_remove(&q->link);
        free(q->addrs);
        free(q);
        return;
    }
    q->fn = NULL; /* freed when c-ares answers, or when the channel goes */
}

/* ---- the timer ---- */

/* Rounded up: a timer that fires before c-ares's deadline finds nothing
 * to do, and would be armed again at once. */
static void arm(leash__resolver *r) {
    struct timeval tv;
    int64_t delay;

    if (r->env->freeing || r->channel == NULL)
        return;
    if (!leash__list_empty(&r->done)) {
        (void)leash__timer_at(&r->timer, leash__now_ms(), 0);
        return;
    }
    if (ares_timeout(r->channel, NULL, &tv) == NULL) {
        leash__timer_stop(&r->timer);
        return;
    }
    delay = (int64_t)tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000;
    (void)leash__timer_at(&r->timer, leash__now_ms() + delay, 0);
}

static void timer_fired(void *arg) {
    leash__resolver *r = arg;

    /* A callback may cancel the queries after it (or free the client,
     * which cancels them all). */
    while (!leash__list_empty(&r->done)) {
        leash__query *q = LEASH__CONTAINER(LEASH__LIST_FIRST(&r->done), leash__query, link);
        leash__list_remove(&q->link);
        deliver(q, q->addrs, q->status);
    }
    if (r->env->freeing)
        return;
    ares_process_fd(r->channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
    arm(r);
}

int leash__resolver_prepare(leash__resolver *r) {
    return leash__timer_create(&r->timer);
}

void leash__resolver_unprepare(leash__resolver *r) {
    leash__timer_clear(&r->timer);
}

void leash__resolver_free(leash__resolver *r) {
    if (r == NULL)
        return;
    /* Every query still held ends with ARES_EDESTRUCTION (no callback),
     * and every socket's watcher goes (sock_state). */
    if (r->channel != NULL)
        ares_destroy(r->channel);
    while (!leash__list_empty(&r->done))
        leash__resolve_cancel(LEASH__CONTAINER(LEASH__LIST_FIRST(&r->done), leash__query, link));
    leash__timer_clear(&r->timer);
    free(r->servers);
    free(r);
}

void leash__addr_text(const struct sockaddr *sa, char *buf, size_t len) {
    char ip[INET6_ADDRSTRLEN];

    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)sa;
        inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
        snprintf(buf, len, "[%s]:%d", ip, ntohs(s6->sin6_port));
    } else if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)(const void *)sa;
        inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
        snprintf(buf, len, "%s:%d", ip, ntohs(s4->sin_port));
    } else {
        snprintf(buf, len, "(address family %d)", sa->sa_family);
    }
}
