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

/* How many rounds over every server a query makes (ARES_OPT_TRIES), each
 * round's timeouts twice the one's before: c-ares's default, 4, lets a
 * query live 15 first rounds (7.5 connect budgets, when the share is not
 * bounded below). c-ares 1.18 also counts a server's refusal (ICMP) as a
 * try of every query on its socket: with an odd count the last try waits
 * out its timeout instead of failing at once. */
#define TRIES 4
/* The bounds of one server's first timeout: c-ares's default is the
 * upper; below the lower, the retransmits would come faster than a distant
 * server answers (an answer to an earlier send still counts). */
#define SERVER_TIMEOUT_MIN_MS 50
#define SERVER_TIMEOUT_MAX_MS 5000

/* How many demoted addresses a name remembers: past it, the one demoted
 * first is forgotten (it takes its turn in c-ares's order again). */
#define DEMOTED_MAX 8

/* A name: its query while one runs, who waits for it, its last good
 * answer and the address that connected last. Kept until the resolver
 * goes (a client resolves few names). */
typedef struct lookup {
    leash__list link; /* in the resolver's lookups */
    leash__resolver *r;
    char *host;
    int asking;                     /* a c-ares query for it runs */
    int64_t asked_at;               /* ... since then (ms) */
    leash__list waiters;            /* of leash__query */
    leash__addrs *last;             /* the last good answer (port 0), or NULL */
    int64_t last_until;             /* ... which serves until then (its TTL) */
    int stale_said;                 /* serving it was logged since the last good answer */
    struct sockaddr_storage worked; /* the address whose connection was ready last */
    socklen_t worked_len;           /* 0: none yet */
    /* Addresses whose connection failed after the connect, before it was
     * ready, the latest last: they go last, in this order. */
    struct sockaddr_storage demoted[DEMOTED_MAX];
    size_t ndemoted;
} lookup;

/* One caller's wait for a name. */
struct leash__query {
    leash__list link; /* in its lookup's waiters, or in the done list */
    lookup *lk;
    int port;
    leash__resolve_fn *fn;
    void *arg;
    leash__addrs *addrs; /* an answer that waits in the done list */
    const char *why;     /* ... or why there is none (static text) */
};

struct leash__resolver {
    leash__env *env;
    char *servers;        /* "ip[:port],...", or NULL: the system's */
    int64_t budget_ms;    /* the connect timeout */
    int64_t round_ms;     /* a query's first round over every server */
    ares_channel channel; /* NULL until needed */
    leash__list watches;  /* of c-ares's sockets */
    leash__list lookups;  /* of every name asked for */
    leash__list done;     /* answered inside leash__resolve: delivered from the timer */
    lookup *starting;     /* the lookup leash__resolve is starting */
    leash__timer timer;   /* c-ares's timeouts, the last answers' turn, the done list */
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

/* A channel with the servers (NULL: the system's) and the options in o. */
static int open_channel(leash__resolver *r, struct ares_options *o, int mask, char *err,
                        size_t errlen) {
    int rc = ares_init_options(&r->channel, o, mask);

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

static int server_count(ares_channel channel) {
    struct ares_addr_port_node *list = NULL, *n;
    int count = 0;

    if (ares_get_servers_ports(channel, &list) != ARES_SUCCESS)
        return 1;
    for (n = list; n != NULL; n = n->next)
        count++;
    ares_free_data(list);
    return count > 0 ? count : 1;
}

/*
 * The channel, with timeouts cut from the connect budget. c-ares asks one
 * server at a time, and moves on at that server's timeout (5 s by default,
 * or resolv.conf's); a dead first server would take a 2 s connect budget
 * whole, every time. Here every server has a share of half the budget, so
 * that every one is asked in the first half and the connect keeps the
 * second; the later rounds (twice as patient each) serve the next
 * connects. How many servers there are is known once c-ares has read the
 * configuration: a first channel counts them.
 */
static int make_channel(leash__resolver *r, char *err, size_t errlen) {
    struct ares_options o;
    int64_t share;
    int rc, servers;

    memset(&o, 0, sizeof(o));
    o.sock_state_cb = sock_state;
    o.sock_state_cb_data = r;
    if ((rc = open_channel(r, &o, ARES_OPT_SOCK_STATE_CB, err, errlen)) != LEASH_OK)
        return rc;
    servers = server_count(r->channel);
    ares_destroy(r->channel);
    r->channel = NULL;
    share = r->budget_ms / 2 / servers;
    o.timeout = (int)(share < SERVER_TIMEOUT_MIN_MS   ? SERVER_TIMEOUT_MIN_MS
                      : share > SERVER_TIMEOUT_MAX_MS ? SERVER_TIMEOUT_MAX_MS
                                                      : share);
    o.tries = TRIES;
    rc = open_channel(r, &o, ARES_OPT_SOCK_STATE_CB | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES, err,
                      errlen);
    if (rc != LEASH_OK)
        return rc;
    r->round_ms = (int64_t)o.timeout * servers;
    leash__log(&r->env->log, LEASH_LOG_DEBUG,
               "resolver: %d server%s, each asked for %d ms first, %d rounds", servers,
               servers == 1 ? "" : "s", o.timeout, TRIES);
    return LEASH_OK;
}

int leash__resolver_new(leash__resolver **out, leash__env *env, const char *servers,
                        int64_t budget_ms) {
    leash__resolver *r = calloc(1, sizeof(*r));
    char err[LEASH_DNS_SERVERS_MAX + 64];
    int rc;

    if (r == NULL || (servers != NULL && (r->servers = strdup(servers)) == NULL)) {
        free(r);
        return LEASH_ENOMEM;
    }
    r->env = env;
    r->budget_ms = budget_ms;
    leash__list_init(&r->watches);
    leash__list_init(&r->lookups);
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

/* ---- answers ---- */

/* The answer's addresses (port 0) and their shortest TTL, or NULL
 * (*status says why). */
static leash__addrs *addrs_of(const struct ares_addrinfo *res, int *status, int *ttl) {
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
    *ttl = -1;
    for (n = res->nodes; n != NULL; n = n->ai_next)
        if ((n->ai_family == AF_INET || n->ai_family == AF_INET6) &&
            n->ai_addrlen <= sizeof(a->at[0].sa)) {
            memcpy(&a->at[a->n].sa, n->ai_addr, n->ai_addrlen);
            a->at[a->n++].len = (socklen_t)n->ai_addrlen;
            if (*ttl < 0 || n->ai_ttl < *ttl)
                *ttl = n->ai_ttl;
        }
    if (*ttl < 0)
        *ttl = 0;
    return a;
}

/* Whether a and b are the same IP address (ports aside). */
static int same_ip(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
    if (a->ss_family != b->ss_family)
        return 0;
    if (a->ss_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)(const void *)a)->sin_addr,
                      &((const struct sockaddr_in *)(const void *)b)->sin_addr,
                      sizeof(struct in_addr)) == 0;
    return a->ss_family == AF_INET6 &&
           memcmp(&((const struct sockaddr_in6 *)(const void *)a)->sin6_addr,
                  &((const struct sockaddr_in6 *)(const void *)b)->sin6_addr,
                  sizeof(struct in6_addr)) == 0 &&
           ((const struct sockaddr_in6 *)(const void *)a)->sin6_scope_id ==
               ((const struct sockaddr_in6 *)(const void *)b)->sin6_scope_id;
}

static int family_of(const leash__addrs *a, size_t i) {
    return a->at[i].sa.ss_family == AF_INET6 ? 0 : 1;
}

/* Where sa is in lk's demoted addresses, or -1. */
static int demoted_at(const lookup *lk, const struct sockaddr_storage *sa) {
    for (size_t d = 0; d < lk->ndemoted; d++)
        if (same_ip(&lk->demoted[d], sa))
            return (int)d;
    return -1;
}

/* Whether src's address i takes its turn in the families' alternation:
 * neither the one that goes first nor a demoted one. */
static int takes_turns(const lookup *lk, const leash__addrs *src, size_t i, size_t first) {
    return i != first && demoted_at(lk, &src->at[i].sa) < 0;
}

/* lk's last answer for port, in the order to try: the address whose
 * connection was ready last first (when it is still one of them), then the
 * others in c-ares's order, the two families taking turns (RFC 8305,
 * section 4), so that a family that does not connect holds the other back
 * one stagger only; the demoted ones last, the latest demoted at the end,
 * so that an address that connects but never answers (a frozen server, a
 * load balancer without a backend) does not win the next race too. NULL
 * without memory. */
static leash__addrs *answer_for(const lookup *lk, int port) {
    const leash__addrs *src = lk->last;
    leash__addrs *a = malloc(sizeof(*a) + src->n * sizeof(a->at[0]));
    size_t first = src->n, turns = 0, k = 0, cur[2] = {0, 0};
    int want = 0;

    if (a == NULL)
        return NULL;
    for (size_t i = 0; lk->worked_len != 0 && i < src->n; i++)
        if (same_ip(&src->at[i].sa, &lk->worked)) {
            first = i;
            break;
        }
    for (size_t i = 0; first == src->n && i < src->n; i++)
        if (demoted_at(lk, &src->at[i].sa) < 0)
            first = i;
    if (first < src->n) {
        a->at[k++] = src->at[first];
        want = family_of(src, first) ^ 1;
    }
    for (size_t i = 0; i < src->n; i++)
        turns += (size_t)takes_turns(lk, src, i, first);
    for (size_t m = 0; m < turns; m++) {
        int f = want;
        for (int t = 0; t < 2; t++, f ^= 1) {
            while (cur[f] < src->n &&
                   (family_of(src, cur[f]) != f || !takes_turns(lk, src, cur[f], first)))
                cur[f]++;
            if (cur[f] < src->n)
                break;
        }
        a->at[k++] = src->at[cur[f]++];
        want = f ^ 1;
    }
    for (size_t d = 0; d < lk->ndemoted; d++)
        for (size_t i = 0; i < src->n; i++)
            if (i != first && same_ip(&src->at[i].sa, &lk->demoted[d]))
                a->at[k++] = src->at[i];
    a->n = k;
    for (k = 0; k < a->n; k++) {
        if (a->at[k].sa.ss_family == AF_INET)
            ((struct sockaddr_in *)(void *)&a->at[k].sa)->sin_port = htons((uint16_t)port);
        else
            ((struct sockaddr_in6 *)(void *)&a->at[k].sa)->sin6_port = htons((uint16_t)port);
    }
    return a;
}

/* Whether lk's last answer serves at `at`. */
static int last_serves(const lookup *lk, int64_t at) {
    return lk->last != NULL && at < lk->last_until;
}

/* A failure of the resolvers (timeouts, refusals, SERVFAIL...), not an
 * answer that the name has no address. */
static int outage(int status) {
    return status != ARES_ENOTFOUND && status != ARES_ENODATA && status != ARES_ENONAME;
}

/* The one way a wait ends for its owner: forgotten, then told. */
static void deliver(leash__query *q, leash__addrs *addrs, const char *why) {
    leash__resolve_fn *fn = q->fn;
    void *arg = q->arg;

    free(q);
    fn(arg, addrs, addrs != NULL ? NULL : why);
}

/* Every waiter of lk gets lk's last answer (fresh, or serving for an
 * outage) or why not. From inside leash__resolve, they wait in the done
 * list for the loop's turn. Those a callback cancels are not told. */
static void answer_waiters(lookup *lk, int good, const char *why) {
    leash__resolver *r = lk->r;
    leash__list waiting;

    leash__list_init(&waiting);
    leash__list_splice_tail(&waiting, &lk->waiters);
    while (!leash__list_empty(&waiting)) {
        leash__query *q = LEASH__CONTAINER(LEASH__LIST_FIRST(&waiting), leash__query, link);
        leash__addrs *addrs = good ? answer_for(lk, q->port) : NULL;

        leash__list_remove(&q->link);
        if (good && addrs == NULL)
            why = "out of memory";
        if (r->starting == lk) {
            q->addrs = addrs;
            q->why = why;
            leash__list_insert_tail(&r->done, &q->link);
            continue;
        }
        deliver(q, addrs, why);
    }
}

/* No server answered lk within the first round, or the query failed for
 * an outage: its last answer serves while its TTL lasts. */
static void serve_last(lookup *lk, const char *because) {
    int64_t left = lk->last_until - leash__now_ms();

    leash__log(&lk->r->env->log, lk->stale_said ? LEASH_LOG_DEBUG : LEASH_LOG_WARN,
               "resolver: %s: %s: using its last answer (%lld s left of its TTL)", lk->host,
               because, (long long)(left / 1000));
    lk->stale_said = 1;
    answer_waiters(lk, 1, NULL);
}

static void on_answer(void *arg, int status, int timeouts, struct ares_addrinfo *res) {
    lookup *lk = arg;
    leash__addrs *addrs = NULL;
    int ttl = 0;

    (void)timeouts;
    if (status == ARES_EDESTRUCTION) { /* the resolver goes: nobody waits */
        ares_freeaddrinfo(res);
        return;
    }
    lk->asking = 0;
    if (status == ARES_SUCCESS)
        addrs = addrs_of(res, &status, &ttl);
    ares_freeaddrinfo(res);
    if (addrs != NULL) {
        free(lk->last);
        lk->last = addrs;
        lk->last_until = leash__now_ms() + (int64_t)ttl * 1000;
        lk->stale_said = 0;
        answer_waiters(lk, 1, NULL);
    } else if (outage(status) && last_serves(lk, leash__now_ms()) &&
               !leash__list_empty(&lk->waiters)) {
        serve_last(lk, ares_strerror(status));
    } else {
        if (!outage(status)) { /* the name lost its addresses */
            free(lk->last);
            lk->last = NULL;
        }
        answer_waiters(lk, 0, ares_strerror(status));
    }
}

/* When lk's waiters take its last answer instead of the query's: once the
 * query's first round asked every server. 0: not to come. */
static int64_t stale_at(const lookup *lk) {
    int64_t at = lk->asked_at + lk->r->round_ms;

    return lk->asking && !leash__list_empty(&lk->waiters) && last_serves(lk, at) ? at : 0;
}

static lookup *lookup_of(leash__resolver *r, const char *host, int make) {
    leash__list *n;
    lookup *lk;

    for (n = r->lookups.next; n != &r->lookups; n = n->next)
        if (strcmp(LEASH__CONTAINER(n, lookup, link)->host, host) == 0)
            return LEASH__CONTAINER(n, lookup, link);
    if (!make || (lk = calloc(1, sizeof(*lk))) == NULL)
        return NULL;
    if ((lk->host = strdup(host)) == NULL) {
        free(lk);
        return NULL;
    }
    lk->r = r;
    leash__list_init(&lk->waiters);
    leash__list_insert_tail(&r->lookups, &lk->link);
    return lk;
}

leash__query *leash__resolve(leash__resolver *r, const char *host, int port, leash__resolve_fn *fn,
                             void *arg, char *err, size_t errlen) {
    struct ares_addrinfo_hints hints;
    leash__query *q;
    lookup *lk;

    if (r->channel == NULL && make_channel(r, err, errlen) != LEASH_OK)
        return NULL;
    if ((lk = lookup_of(r, host, 1)) == NULL || (q = calloc(1, sizeof(*q))) == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    q->lk = lk;
    q->port = port;
    q->fn = fn;
    q->arg = arg;
    leash__list_insert_tail(&lk->waiters, &q->link);
    if (lk->asking) {
        /* A query that an earlier connect left: it answers this one too,
         * or, past its first round, the last answer does (timer_fired). */
        arm(r);
        return q;
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    lk->asking = 1;
    lk->asked_at = leash__now_ms();
    r->starting = lk;
    ares_getaddrinfo(r->channel, host, NULL, &hints, on_answer, lk);
    r->starting = NULL;
    arm(r);
    return q;
}

void leash__resolve_cancel(leash__query *q) {
    leash__list_remove(&q->link);
    free(q->addrs);
    free(q);
}

/* Takes sa out of lk's demoted addresses. */
static void undemote(lookup *lk, const struct sockaddr_storage *sa) {
    int d = demoted_at(lk, sa);

    if (d < 0)
        return;
    memmove(&lk->demoted[d], &lk->demoted[d + 1],
            (lk->ndemoted - (size_t)d - 1) * sizeof(lk->demoted[0]));
    lk->ndemoted--;
}

/* sa as a sockaddr_storage (zeroed past len), or -1 when it does not fit. */
static int storage_of(struct sockaddr_storage *out, const struct sockaddr *sa, socklen_t len) {
    if (len > sizeof(*out))
        return -1;
    memset(out, 0, sizeof(*out));
    memcpy(out, sa, len);
    return 0;
}

void leash__resolve_worked(leash__resolver *r, const char *host, const struct sockaddr *sa,
                           socklen_t len) {
    lookup *lk = lookup_of(r, host, 0);
    struct sockaddr_storage at;

    if (lk == NULL || storage_of(&at, sa, len) != 0)
        return;
    undemote(lk, &at);
    lk->worked = at;
    lk->worked_len = len;
}

void leash__resolve_demote(leash__resolver *r, const char *host, const struct sockaddr *sa,
                           socklen_t len) {
    lookup *lk = lookup_of(r, host, 0);
    struct sockaddr_storage at;

    if (lk == NULL || storage_of(&at, sa, len) != 0)
        return;
    if (lk->worked_len != 0 && same_ip(&lk->worked, &at))
        lk->worked_len = 0;
    undemote(lk, &at);
    if (lk->ndemoted == DEMOTED_MAX)
        undemote(lk, &lk->demoted[0]);
    lk->demoted[lk->ndemoted++] = at;
}

/* ---- the timer ---- */

/* Rounded up: a timer that fires before c-ares's deadline finds nothing
 * to do, and would be armed again at once. */
static void arm(leash__resolver *r) {
    struct timeval tv;
    int64_t due = 0;
    leash__list *n;

    if (r->env->freeing || r->channel == NULL)
        return;
    if (!leash__list_empty(&r->done)) {
        (void)leash__timer_at(&r->timer, leash__now_ms(), 0);
        return;
    }
    if (ares_timeout(r->channel, NULL, &tv) != NULL)
        due = leash__now_ms() + (int64_t)tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000;
    for (n = r->lookups.next; n != &r->lookups; n = n->next) {
        int64_t at = stale_at(LEASH__CONTAINER(n, lookup, link));
        if (at != 0 && (due == 0 || at < due))
            due = at;
    }
    if (due == 0)
        leash__timer_stop(&r->timer);
    else
        (void)leash__timer_at(&r->timer, due, 0);
}

static void timer_fired(void *arg) {
    leash__resolver *r = arg;
    int64_t now = leash__now_ms();
    leash__list *n;
    char because[96];

    /* A callback may cancel the waits after it (or free the client, which
     * cancels them all). */
    while (!leash__list_empty(&r->done)) {
        leash__query *q = LEASH__CONTAINER(LEASH__LIST_FIRST(&r->done), leash__query, link);
        leash__list_remove(&q->link);
        deliver(q, q->addrs, q->why);
    }
    if (r->env->freeing)
        return;
    /* Lookups only ever join the list: a callback may add one. */
    for (n = r->lookups.next; n != &r->lookups; n = n->next) {
        lookup *lk = LEASH__CONTAINER(n, lookup, link);
        int64_t at = stale_at(lk);
        if (at != 0 && now >= at) {
            snprintf(because, sizeof(because), "no DNS server answered within %lld ms",
                     (long long)r->round_ms);
            serve_last(lk, because);
            if (r->env->freeing)
                return;
        }
    }
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
    /* Every query still running ends with ARES_EDESTRUCTION (no callback),
     * and every socket's watcher goes (sock_state). */
    if (r->channel != NULL)
        ares_destroy(r->channel);
    while (!leash__list_empty(&r->done))
        leash__resolve_cancel(LEASH__CONTAINER(LEASH__LIST_FIRST(&r->done), leash__query, link));
    while (!leash__list_empty(&r->lookups)) {
        lookup *lk = LEASH__CONTAINER(LEASH__LIST_FIRST(&r->lookups), lookup, link);
        while (!leash__list_empty(&lk->waiters))
            leash__resolve_cancel(
                LEASH__CONTAINER(LEASH__LIST_FIRST(&lk->waiters), leash__query, link));
        leash__list_remove(&lk->link);
        free(lk->last);
        free(lk->host);
        free(lk);
    }
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
