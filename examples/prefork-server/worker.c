/* SPDX-License-Identifier: MIT */
/*
 * One worker process: its own libev loop, its own leash client, its own
 * hiredis connection for the application's data, and a tiny HTTP/1.1 server
 * (one request per connection) on the listening socket it shares with the
 * other workers.
 *
 *   POST /orders/<id>/pay[?wait_ms=N]
 *       Takes the lock "order:<id>", waiting up to N ms (default --wait-ms)
 *       for the request that holds it, then reads the order from Redis and
 *       pays it only if it is unpaid. 200 "paid" or "already paid"; 409 when
 *       the wait ran out (another request is paying that order); 404 for an
 *       unknown order; 503 when Redis is not reachable.
 *   GET /locks
 *       The locks this worker holds now: name, fence, validity left, renewals,
 *       and from the handle's leash_lock_stats its holds, waits, longest
 *       wait and failed renewals; with the client's held and waiting now.
 *   GET /metrics
 *       This worker's leash_stats in Prometheus text format (metrics/prometheus.c).
 *
 * The order lives in the hash shop:order:<id> (state, payments, fence,
 * paid_by). Payment writes carry the lock's fence, and Redis refuses a fence
 * older than the last one it saw for that order: the lock keeps two requests
 * from paying at once, the fence keeps a paused worker whose lock expired from
 * writing late.
 */
#define _GNU_SOURCE /* accept4, strcasestr */

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server.h"

#define REQUEST_MAX 4096
#define ORDER_ID_MAX 64

/* Marks the order paid, counts the payment, if the fence is not older than
 * the last one written. KEYS[1] the order; ARGV fence, pid. Returns the
 * number of payments, or -1 for a stale fence. */
static const char pay_script[] =
    "local seen = tonumber(redis.call('hget', KEYS[1], 'fence') or '0') "
    "if tonumber(ARGV[1]) < seen then return -1 end "
    "redis.call('hset', KEYS[1], 'state', 'paid', 'fence', ARGV[1], 'paid_by', ARGV[2]) "
    "return redis.call('hincrby', KEYS[1], 'payments', 1)";

typedef struct http_conn {
    ev_io io; /* first member: the callback casts back */
    int fd;
    int closing; /* set while conn_close frees what it holds */
    char in[REQUEST_MAX];
    size_t in_len;
    char *out;
    size_t out_len, out_done;
    /* POST /orders/<id>/pay */
    char order[ORDER_ID_MAX + 1];
    int64_t wait_ms;
    leash_lock *lock;
    ev_timer pay; /* the pretend payment provider */
    struct http_conn *prev, *next;
} http_conn;

static struct {
    struct ev_loop *loop;
    const server_config *cfg;
    int listen_fd;
    int stopping;
    ev_io accept_io;
    ev_timer accept_pause; /* after an accept error other than EAGAIN */
    ev_signal sigterm, sigint;
    ev_timer redis_retry;
    leash_client *leash;
    redisAsyncContext *redis;
    maintenance *maint;
    http_conn *conns;
} w;

void say(const char *fmt, ...) {
    char line[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "[worker %d] %s\n", (int)getpid(), line);
}

static void leash_log(int level, const char *msg, void *arg) {
    (void)arg;
    if (level <= LEASH_LOG_WARN)
        say("leash: %s", msg);
}

redisAsyncContext *worker_redis(void) {
    return w.redis;
}

/* ---- the application's Redis connection ---- */

static void redis_connect(void);

static void redis_retry_fired(EV_P_ ev_timer *t, int revents) {
    (void)t, (void)revents;
#if EV_MULTIPLICITY
    (void)loop;
#endif
    redis_connect();
}

static void redis_retry_later(void) {
    if (!w.stopping) {
        ev_timer_set(&w.redis_retry, 0.2, 0.);
        ev_timer_start(w.loop, &w.redis_retry);
    }
}

static void on_redis_connected(const redisAsyncContext *ac, int status) {
    if (status != REDIS_OK) {
        say("redis: cannot connect: %s", ac->errstr);
        if (w.redis == ac)
            w.redis = NULL; /* hiredis frees it */
        redis_retry_later();
    }
}

static void on_redis_disconnected(const redisAsyncContext *ac, int status) {
    if (status != REDIS_OK)
        say("redis: connection lost: %s", ac->errstr);
    if (w.redis == ac)
        w.redis = NULL;
    redis_retry_later();
}

static void redis_connect(void) {
    redisAsyncContext *ac = redisAsyncConnect(w.cfg->redis_host, w.cfg->redis_port);

    if (ac == NULL || ac->err || redisLibevAttach(w.loop, ac) != REDIS_OK) {
        say("redis: cannot connect: %s", ac ? ac->errstr : "out of memory");
        if (ac != NULL)
            redisAsyncFree(ac);
        redis_retry_later();
        return;
    }
    redisAsyncSetConnectCallback(ac, on_redis_connected);
    redisAsyncSetDisconnectCallback(ac, on_redis_disconnected);
    w.redis = ac; /* commands sent before it connects wait in hiredis */
}

/* ---- HTTP connections ---- */

static void conn_io(EV_P_ ev_io *io, int revents);

static void conn_close(http_conn *hc) {
    leash_lock *l = hc->lock;

    hc->closing = 1;
    hc->lock = NULL;
    leash_lock_free(l); /* an acquire still pending completes ECANCELED now */
    ev_io_stop(w.loop, &hc->io);
    ev_timer_stop(w.loop, &hc->pay);
    close(hc->fd);
    if (hc->prev)
        hc->prev->next = hc->next;
    else
        w.conns = hc->next;
    if (hc->next)
        hc->next->prev = hc->prev;
    free(hc->out);
    free(hc);
}

static void conn_flush(http_conn *hc) {
    ssize_t n;

    while (hc->out_done < hc->out_len) {
        n = write(hc->fd, hc->out + hc->out_done, hc->out_len - hc->out_done);
        if (n > 0) {
            hc->out_done += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            ev_io_stop(w.loop, &hc->io);
            ev_io_set(&hc->io, hc->fd, EV_WRITE);
            ev_io_start(w.loop, &hc->io);
            return;
        } else {
            break; /* the client went away */
        }
    }
    conn_close(hc);
}

static const char *reason_phrase(int code) {
    switch (code) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 409:
        return "Conflict";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    default:
        return "Service Unavailable";
    }
}

/* Sends the whole answer (a JSON body) and closes the connection. */
static void respond(http_conn *hc, int code, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Sends the whole answer (body, len bytes, then a newline unless it ends
 * with one) and closes the connection. */
static void answer(http_conn *hc, int code, const char *type, const char *body, int len) {
    const char *nl = len > 0 && body[len - 1] == '\n' ? "" : "\n";
    int n, blen = len + (nl[0] != '\0');

    if (w.stopping) {
        conn_close(hc);
        return;
    }
    n = snprintf(NULL, 0,
                 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
                 "Content-Length: %d\r\nConnection: close\r\n\r\n%.*s%s",
                 code, reason_phrase(code), type, blen, len, body, nl);
    hc->out = malloc((size_t)n + 1);
    if (hc->out == NULL) {
        conn_close(hc);
        return;
    }
    snprintf(hc->out, (size_t)n + 1,
             "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
             "Content-Length: %d\r\nConnection: close\r\n\r\n%.*s%s",
             code, reason_phrase(code), type, blen, len, body, nl);
    hc->out_len = (size_t)n;
    hc->out_done = 0;
    conn_flush(hc);
}

static void respond(http_conn *hc, int code, const char *fmt, ...) {
    char body[8192];
    va_list ap;
    int len;

    va_start(ap, fmt);
    len = vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof(body))
        len = snprintf(body, sizeof(body), "{\"error\":\"answer too long\"}");
    answer(hc, code, "application/json", body, len);
}

/* ---- POST /orders/<id>/pay ---- */

static void on_order_unlocked(leash_lock *l, int status, void *arg) {
    (void)arg;
    if (status != LEASH_OK)
        say("release of %s: %s", leash_lock_name(l), leash_strerror(status));
    leash_lock_free(l);
}

/* The answer is decided: give the order's lock back. */
static void order_unlock(http_conn *hc) {
    leash_lock *l = hc->lock;

    hc->lock = NULL;
    if (l != NULL && leash_held(l) && leash_release(l, on_order_unlocked, NULL) == LEASH_OK)
        return;
    leash_lock_free(l);
}

static void on_payment_recorded(redisAsyncContext *ac, void *r, void *arg) {
    http_conn *hc = arg;
    redisReply *reply = r;
    uint64_t fence = leash_fence(hc->lock);

    (void)ac;
    order_unlock(hc);
    if (reply == NULL || reply->type != REDIS_REPLY_INTEGER) {
        respond(hc, 503, "{\"order\":\"%s\",\"error\":\"redis: %s\"}", hc->order,
                reply && reply->type == REDIS_REPLY_ERROR ? reply->str : "no answer");
    } else if (reply->integer < 0) {
        /* Our lock expired while we were paying and someone newer wrote. */
        respond(hc, 409, "{\"order\":\"%s\",\"error\":\"stale fence %" PRIu64 "\"}", hc->order,
                fence);
    } else {
        respond(hc, 200,
                "{\"order\":\"%s\",\"result\":\"paid\",\"payments\":%lld,\"fence\":%" PRIu64
                ",\"pid\":%d}",
                hc->order, reply->integer, fence, (int)getpid());
    }
}

/* The payment provider said yes: record it, fenced. */
static void on_paid(EV_P_ ev_timer *t, int revents) {
    http_conn *hc = (http_conn *)((char *)t - offsetof(http_conn, pay));
    char key[sizeof(hc->order) + 16], fence[24], pid[16];
    redisAsyncContext *redis = worker_redis();

    (void)revents;
#if EV_MULTIPLICITY
    (void)loop;
#endif
    if (!leash_held(hc->lock)) {
        /* Too slow: the lease ran out, someone else may be paying now. */
        order_unlock(hc);
        respond(hc, 503, "{\"order\":\"%s\",\"error\":\"lost the order's lock\"}", hc->order);
        return;
    }
    snprintf(key, sizeof(key), "shop:order:%s", hc->order);
    snprintf(fence, sizeof(fence), "%" PRIu64, leash_fence(hc->lock));
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    if (redis == NULL || redisAsyncCommand(redis, on_payment_recorded, hc, "EVAL %s 1 %s %s %s",
                                           pay_script, key, fence, pid) != REDIS_OK) {
        order_unlock(hc);
        respond(hc, 503, "{\"order\":\"%s\",\"error\":\"redis is down\"}", hc->order);
    }
}

static void on_order_read(redisAsyncContext *ac, void *r, void *arg) {
    http_conn *hc = arg;
    redisReply *reply = r;

    (void)ac;
    if (reply == NULL || reply->type == REDIS_REPLY_ERROR) {
        order_unlock(hc);
        respond(hc, 503, "{\"order\":\"%s\",\"error\":\"redis: %s\"}", hc->order,
                reply ? reply->str : "no answer");
    } else if (reply->type != REDIS_REPLY_STRING) {
        order_unlock(hc);
        respond(hc, 404, "{\"order\":\"%s\",\"error\":\"no such order\"}", hc->order);
    } else if (strcmp(reply->str, "paid") == 0) {
        order_unlock(hc);
        respond(hc, 200, "{\"order\":\"%s\",\"result\":\"already paid\",\"pid\":%d}", hc->order,
                (int)getpid());
    } else {
        ev_timer_set(&hc->pay, (double)w.cfg->pay_ms / 1000., 0.);
        ev_timer_start(w.loop, &hc->pay);
    }
}

static void on_order_locked(leash_lock *l, int status, void *arg) {
    http_conn *hc = arg;
    redisAsyncContext *redis = worker_redis();

    (void)l;
    if (hc->closing)
        return; /* conn_close freed the handle: nothing to answer */
    if (status == LEASH_ETIMEDOUT) {
        order_unlock(hc);
        respond(hc, 409,
                "{\"order\":\"%s\",\"error\":\"busy: another request is paying this order\","
                "\"waited_ms\":%lld}",
                hc->order, (long long)hc->wait_ms);
        return;
    }
    if (status != LEASH_OK) {
        order_unlock(hc);
        respond(hc, 503, "{\"order\":\"%s\",\"error\":\"lock: %s\"}", hc->order,
                leash_strerror(status));
        return;
    }
    if (redis == NULL || redisAsyncCommand(redis, on_order_read, hc, "HGET shop:order:%s state",
                                           hc->order) != REDIS_OK) {
        order_unlock(hc);
        respond(hc, 503, "{\"order\":\"%s\",\"error\":\"redis is down\"}", hc->order);
    }
}

static void pay_order(http_conn *hc, const char *id, size_t id_len, int64_t wait_ms) {
    char name[ORDER_ID_MAX + 8];
    size_t i;
    int rc;

    for (i = 0; i < id_len; i++) {
        char ch = id[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '_'))
            break;
    }
    if (id_len == 0 || id_len > ORDER_ID_MAX || i != id_len) {
        respond(hc, 400, "{\"error\":\"bad order id\"}");
        return;
    }
    memcpy(hc->order, id, id_len);
    hc->order[id_len] = '\0';
    hc->wait_ms = wait_ms;
    snprintf(name, sizeof(name), "order:%s", hc->order);
    hc->lock = leash_lock_new(w.leash, name);
    if (hc->lock == NULL) {
        respond(hc, 500, "{\"error\":\"no lock handle\"}");
        return;
    }
    rc = leash_acquire(hc->lock, wait_ms, on_order_locked, hc);
    if (rc != LEASH_OK) {
        order_unlock(hc);
        respond(hc, 500, "{\"error\":\"acquire: %s\"}", leash_strerror(rc));
    }
}

/* ---- GET /locks, GET /metrics ---- */

/* A held lock: its hold now, and what its handle went through (its
 * leash_lock_stats: the maintenance handle lives as long as the worker;
 * a request's lives for one request). */
static size_t describe_lock(char *buf, size_t size, size_t at, const leash_lock *l) {
    leash_lock_stats st;
    int n;

    if (l == NULL || !leash_held(l) || at >= size)
        return at;
    leash_lock_stats(l, &st);
    n = snprintf(buf + at, size - at,
                 "%s{\"name\":\"%s\",\"fence\":%" PRIu64 ",\"valid_ms\":%lld,\"renewals\":%" PRIu64
                 ",\"holds\":%" PRIu64 ",\"waits\":%" PRIu64 ",\"wait_us_max\":%" PRIu64
                 ",\"renewals_failed\":%" PRIu64 "}",
                 at > 0 ? "," : "", leash_lock_name(l), leash_fence(l),
                 (long long)leash_valid_ms(l), leash_renewals(l), st.holds, st.waits,
                 st.wait_us_max, st.renewals_failed);
    return n < 0 ? at : at + (size_t)n;
}

static void list_locks(http_conn *hc) {
    char list[6000];
    size_t at = 0;
    http_conn *c;
    leash_stats st;

    list[0] = '\0';
    at = describe_lock(list, sizeof(list), at, maintenance_lock(w.maint));
    for (c = w.conns; c != NULL; c = c->next)
        at = describe_lock(list, sizeof(list), at, c->lock);
    if (at >= sizeof(list)) {
        respond(hc, 500, "{\"error\":\"too many locks to list\"}");
        return;
    }
    leash_client_stats(w.leash, &st);
    respond(hc, 200, "{\"pid\":%d,\"held\":%" PRIu64 ",\"waiting\":%" PRIu64 ",\"locks\":[%s]}",
            (int)getpid(), st.held_now, st.waiting_now, list);
}

static void metrics(http_conn *hc) {
    char body[8192];
    leash_stats st;
    size_t len;

    leash_client_stats(w.leash, &st);
    len = prometheus_write(body, sizeof(body), &st, (int)getpid());
    if (len >= sizeof(body)) {
        respond(hc, 500, "{\"error\":\"metrics too long\"}");
        return;
    }
    answer(hc, 200, "text/plain; version=0.0.4; charset=utf-8", body, (int)len);
}

/* ---- requests ---- */

static void route(http_conn *hc) {
    char *method = hc->in, *target, *end, *query;
    size_t len;

    target = strchr(method, ' ');
    if (target == NULL) {
        respond(hc, 400, "{\"error\":\"bad request line\"}");
        return;
    }
    *target++ = '\0';
    end = strchr(target, ' ');
    if (end == NULL) {
        respond(hc, 400, "{\"error\":\"bad request line\"}");
        return;
    }
    *end = '\0';
    query = strchr(target, '?');
    if (query != NULL)
        *query++ = '\0';

    if (strcmp(target, "/locks") == 0 || strcmp(target, "/metrics") == 0) {
        if (strcmp(method, "GET") != 0)
            respond(hc, 405, "{\"error\":\"GET only\"}");
        else if (target[1] == 'l')
            list_locks(hc);
        else
            metrics(hc);
        return;
    }
    len = strlen(target);
    if (strncmp(target, "/orders/", 8) == 0 && len > 12 && strcmp(target + len - 4, "/pay") == 0) {
        int64_t wait_ms = w.cfg->wait_ms;
        if (strcmp(method, "POST") != 0) {
            respond(hc, 405, "{\"error\":\"POST only\"}");
            return;
        }
        if (query != NULL && strncmp(query, "wait_ms=", 8) == 0)
            wait_ms = atoll(query + 8);
        if (wait_ms < 0)
            wait_ms = 0;
        pay_order(hc, target + 8, len - 12, wait_ms);
        return;
    }
    respond(hc, 404, "{\"error\":\"no such path\"}");
}

/* Reads until the headers and the body (Content-Length) are in. */
static void conn_read(http_conn *hc) {
    char *head_end, *cl;
    size_t head_len, body_len = 0;
    ssize_t n;

    for (;;) {
        n = read(hc->fd, hc->in + hc->in_len, sizeof(hc->in) - 1 - hc->in_len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            conn_close(hc); /* gone before the request was complete */
            return;
        }
        hc->in_len += (size_t)n;
        hc->in[hc->in_len] = '\0';
        head_end = strstr(hc->in, "\r\n\r\n");
        if (head_end == NULL) {
            if (hc->in_len == sizeof(hc->in) - 1)
                break;
            continue;
        }
        head_len = (size_t)(head_end - hc->in) + 4;
        *head_end = '\0'; /* the headers are a string now */
        cl = strcasestr(hc->in, "\r\ncontent-length:");
        if (cl != NULL)
            body_len = (size_t)strtoul(cl + 17, NULL, 10);
        *head_end = '\r';
        if (head_len + body_len > sizeof(hc->in) - 1)
            break;
        if (hc->in_len < head_len + body_len)
            continue;
        ev_io_stop(w.loop, &hc->io);
        *head_end = '\0';
        route(hc);
        return;
    }
    ev_io_stop(w.loop, &hc->io);
    respond(hc, 431, "{\"error\":\"request too large\"}");
}

static void conn_io(EV_P_ ev_io *io, int revents) {
    http_conn *hc = (http_conn *)io;

#if EV_MULTIPLICITY
    (void)loop;
#endif
    if (revents & EV_READ)
        conn_read(hc);
    else if (revents & EV_WRITE)
        conn_flush(hc);
}

static void on_accept(EV_P_ ev_io *io, int revents) {
    http_conn *hc;
    int fd, i;

    (void)io, (void)revents;
#if EV_MULTIPLICITY
    (void)loop;
#endif
    /* A few at a time, so that the other workers get their share. */
    for (i = 0; i < 16; i++) {
        fd = accept4(w.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
            continue;
        if (fd < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return; /* another worker took it */
        if (fd < 0) {
            /* Out of descriptors (EMFILE) or memory: the socket stays
             * readable, so pause accepting instead of spinning on it. */
            say("accept: %s: pausing for 100 ms", strerror(errno));
            ev_io_stop(w.loop, &w.accept_io);
            ev_timer_set(&w.accept_pause, 0.1, 0.);
            ev_timer_start(w.loop, &w.accept_pause);
            return;
        }
        hc = calloc(1, sizeof(*hc));
        if (hc == NULL) {
            close(fd);
            continue;
        }
        hc->fd = fd;
        ev_io_init(&hc->io, conn_io, fd, EV_READ);
        ev_init(&hc->pay, on_paid);
        hc->next = w.conns;
        if (w.conns)
            w.conns->prev = hc;
        w.conns = hc;
        ev_io_start(w.loop, &hc->io);
    }
}

static void on_accept_pause_end(EV_P_ ev_timer *t, int revents) {
    (void)t, (void)revents;
    if (!w.stopping)
        ev_io_start(EV_A_ & w.accept_io);
}

/* ---- start and stop ---- */

static void on_stop_signal(EV_P_ ev_signal *s, int revents) {
    redisAsyncContext *redis = w.redis;

    (void)s, (void)revents;
    say("stopping");
    w.stopping = 1;
    ev_io_stop(EV_A_ & w.accept_io);
    ev_timer_stop(EV_A_ & w.accept_pause);
    ev_signal_stop(EV_A_ & w.sigterm);
    ev_signal_stop(EV_A_ & w.sigint);
    ev_timer_stop(EV_A_ & w.redis_retry);
    maintenance_stop(w.maint);
    /* Pending Redis commands complete now with no reply: their
     * connections close (respond() does not answer while stopping). */
    w.redis = NULL;
    if (redis != NULL)
        redisAsyncFree(redis);
    while (w.conns != NULL)
        conn_close(w.conns);
    /* Held locks are released on the way out. */
    leash_client_free(w.leash);
    w.leash = NULL;
    ev_break(EV_A_ EVBREAK_ALL);
}

int worker_main(int listen_fd, const server_config *cfg) {
    leash_options opts;

    /* If the master dies, so do we: no orphan keeps the socket. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    memset(&w, 0, sizeof(w));
    w.cfg = cfg;
    w.listen_fd = listen_fd;
    w.loop = ev_loop_new(EVFLAG_AUTO); /* made after the fork: this worker's own */
    if (w.loop == NULL)
        return 1;

    leash_options_init(&opts);
    opts.host = cfg->redis_host;
    opts.port = cfg->redis_port;
    opts.lease_ms = cfg->lease_ms;
    opts.log_cb = leash_log;
    if (leash_client_new(&w.leash, &opts) != LEASH_OK ||
        leash_libev_attach(w.loop, w.leash) != LEASH_OK) {
        say("cannot start the leash client");
        return 1;
    }
    ev_init(&w.redis_retry, redis_retry_fired);
    redis_connect();
    w.maint = maintenance_start(w.loop, w.leash, cfg);

    ev_io_init(&w.accept_io, on_accept, listen_fd, EV_READ);
    ev_io_start(w.loop, &w.accept_io);
    ev_init(&w.accept_pause, on_accept_pause_end);
    ev_signal_init(&w.sigterm, on_stop_signal, SIGTERM);
    ev_signal_start(w.loop, &w.sigterm);
    ev_signal_init(&w.sigint, on_stop_signal, SIGINT);
    ev_signal_start(w.loop, &w.sigint);

    ev_run(w.loop, 0);
    ev_loop_destroy(w.loop);
    say("stopped");
    return 0;
}
