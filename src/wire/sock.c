/* SPDX-License-Identifier: MIT */
#include "wire/sock.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "base/clock.h"
#include "base/timer.h"
#include "wire/resolve.h"

/* What one read takes at most; a read that fills it is followed by another
 * before the loop turns. */
#define READ_CHUNK 16384
/* An output buffer larger than this is given back once it drained. */
#define OBUF_KEEP 65536
/* Our replies never hold more than one renew batch (100) per array; a
 * larger array from a server is refused before hiredis allocates it. */
#define MAX_ELEMENTS 4096
/* How long a connect runs alone before the next address starts beside it
 * (RFC 8305's Connection Attempt Delay), and the least it may shrink to
 * when the connect budget is short (RFC 8305's floor). */
#define STAGGER_MS 250
#define STAGGER_MIN_MS 10

/* One connect of the race, to the address of the same index. */
typedef struct racer {
    leash__sock *s;
    int fd;   /* -1: not started, failed, or handed to the socket */
    void *io; /* its watcher; the winner's becomes the socket's */
} racer;

struct leash__sock {
    leash__env *env;
    int fd;
    void *io;
    int events;             /* what the watcher waits for */
    int connecting;         /* resolving the name (query), then connecting */
    char *host;             /* the name or address connected to, for log lines */
    leash__query *query;    /* while the name resolves */
    leash__addrs *addrs;    /* where to connect, in order (NULL: a unix socket) */
    racer *race;            /* one per address (one for a unix socket) */
    size_t next;            /* the next address to start */
    size_t racing;          /* connects started and not ended */
    leash__timer stagger;   /* when the next address starts beside them */
    int64_t deadline;       /* the connect budget's end (ms), 0: none given */
    size_t won;             /* a name's address that won, until ready; SIZE_MAX: none */
    int last_err;           /* errno of the connect that failed last */
    size_t last_failed;     /* ... and its address */
    leash__tls *tls;        /* TLS once connected (NULL: plain) */
    const char *tls_name;   /* the name sent and verified */
    leash__tls_session *ts; /* from the connect on, with tls */
    int64_t handshaking;    /* since when the TLS handshake runs (ms), 0: it does not */
    int write_wants_read;   /* the last TLS write waits for the fd to be readable */
    int read_wants_write;   /* the last TLS read waits for it to be writable */
    int heard;              /* the server sent data: TLS was accepted */
    char *obuf;
    size_t olen, opos, ocap;
    redisReader *reader;
    const leash__sock_hooks *hooks;
    void *owner;
    unsigned dispatching; /* inside on_io */
    int dead;             /* closed: freed when the dispatch returns */
    int queued;           /* on env->unsent */
    leash__sock *unsent_next;
};

/* ---- the reply parser, with a limit on arrays ---- */

#if HIREDIS_MAJOR >= 1
typedef size_t element_count;
#else
typedef int element_count;
#endif

/* hiredis's own constructors (one table for every reader). */
static _Atomic(redisReplyObjectFunctions *) hiredis_fns;

static void *limited_array(const redisReadTask *task, element_count elements) {
    if ((long long)elements > MAX_ELEMENTS)
        return NULL; /* the reader reports it: a protocol error */
    return atomic_load(&hiredis_fns)->createArray(task, elements);
}

static void *pass_string(const redisReadTask *task, char *str, size_t len) {
    return atomic_load(&hiredis_fns)->createString(task, str, len);
}

static void *pass_integer(const redisReadTask *task, long long value) {
    return atomic_load(&hiredis_fns)->createInteger(task, value);
}

static void *pass_nil(const redisReadTask *task) {
    return atomic_load(&hiredis_fns)->createNil(task);
}

static void pass_free(void *reply) {
    atomic_load(&hiredis_fns)->freeObject(reply);
}

#if HIREDIS_MAJOR >= 1
static void *pass_double(const redisReadTask *task, double value, char *str, size_t len) {
    return atomic_load(&hiredis_fns)->createDouble(task, value, str, len);
}

static void *pass_bool(const redisReadTask *task, int value) {
    return atomic_load(&hiredis_fns)->createBool(task, value);
}
#endif

static redisReplyObjectFunctions limited = {
    .createString = pass_string,
    .createArray = limited_array,
    .createInteger = pass_integer,
#if HIREDIS_MAJOR >= 1
    .createDouble = pass_double,
    .createBool = pass_bool,
#endif
    .createNil = pass_nil,
    .freeObject = pass_free,
};

static redisReader *reader_new(void) {
    redisReader *r = redisReaderCreate();

    if (r == NULL)
        return NULL;
    if (r->fn != &limited) {
        atomic_store(&hiredis_fns, r->fn);
        r->fn = &limited;
    }
    return r;
}

/* ---- the fd ---- */

static void set_events(leash__sock *s, int events) {
    if (events != s->events) {
        s->events = events;
        s->env->loop.io_set(s->env->loop.data, s->io, events);
    }
}

static void drop_fd(leash__sock *s) {
    if (s->io != NULL) {
        s->env->loop.io_free(s->env->loop.data, s->io);
        s->io = NULL;
    }
    if (s->ts != NULL) {
        leash__tls_session_free(s->ts);
        s->ts = NULL;
    }
    if (s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
    s->events = 0;
}

static void racer_close(leash__sock *s, racer *r) {
    if (r->io != NULL) {
        s->env->loop.io_free(s->env->loop.data, r->io);
        r->io = NULL;
    }
    if (r->fd >= 0) {
        close(r->fd);
        r->fd = -1;
        s->racing--;
    }
}

/* Ends every connect still racing, and the next one's start. */
static void race_end(leash__sock *s) {
    size_t n = s->addrs != NULL ? s->addrs->n : 1;

    leash__timer_stop(&s->stagger);
    for (size_t i = 0; s->race != NULL && i < n; i++)
        racer_close(s, &s->race[i]);
}

static const struct sockaddr *addr_at(const leash__sock *s, size_t i);

/* The winner of a name's race is closed before the owner said it was
 * ready: its TCP connect completed, but nothing came of it. It goes last
 * in the next race, which then starts elsewhere. Not at the client's free
 * (nothing failed there). */
static void demote_winner(leash__sock *s) {
    char at[64];

    if (s->won == SIZE_MAX)
        return;
    if (!s->env->freeing) {
        leash__addr_text(addr_at(s, s->won), at, sizeof(at));
        leash__log(&s->env->log, LEASH_LOG_INFO,
                   "%s: %s connected but the connection failed before it was ready: it goes "
                   "last next time",
                   s->host, at);
        leash__resolve_demote(s->env->resolver, s->host, addr_at(s, s->won),
                              s->addrs->at[s->won].len);
    }
    s->won = SIZE_MAX;
}

/* Releases the fd and its watcher, or ends the connects or the wait for
 * the name's answer; hooks fire no more. */
static void shut(leash__sock *s) {
    s->dead = 1;
    demote_winner(s);
    if (s->query != NULL) {
        leash__resolve_cancel(s->query);
        s->query = NULL;
    }
    race_end(s);
    drop_fd(s);
}

static void unqueue(leash__sock *s) {
    leash__sock **p = &s->env->unsent;

    while (*p != s)
        p = &(*p)->unsent_next;
    *p = s->unsent_next;
    s->queued = 0;
}

static void sock_free(leash__sock *s) {
    if (s->queued)
        unqueue(s);
    leash__timer_clear(&s->stagger);
    free(s->race);
    if (s->reader != NULL)
        redisReaderFree(s->reader);
    free(s->obuf);
    free(s->host);
    free(s->addrs);
    free(s);
}

static void fail_status(leash__sock *s, int status, const char *why) {
    if (s->dead)
        return;
    shut(s);
    s->hooks->closed(s->owner, status, why);
}

static void fail(leash__sock *s, const char *what, int err) {
    char why[256]; /* room for the longest `what` a caller makes (180) and an errno text */

    if (err != 0)
        snprintf(why, sizeof(why), "%s: %s", what, strerror(err));
    else
        snprintf(why, sizeof(why), "%s", what);
    fail_status(s, LEASH_ECONN, why);
}

/* A TLS call ended the connection (n: LEASH__TLS_CLOSED, _BROKEN or
 * _FAILED, why from the session). A refusal counts as TLS's (LEASH_ETLS)
 * until the server has sent data: with TLS 1.3 a server that wants a
 * client certificate says so only after the client's handshake is done. */
static void tls_fail(leash__sock *s, long n, const char *why) {
    fail_status(s, n == LEASH__TLS_FAILED && !s->heard ? LEASH_ETLS : LEASH_ECONN, why);
}

/* The output buffer went out whole. */
static void drained(leash__sock *s) {
    s->opos = s->olen = 0;
    if (s->ocap > OBUF_KEEP) {
        free(s->obuf);
        s->obuf = NULL;
        s->ocap = 0;
    }
}

/* Sends what the socket takes: 0 (all of it, or it would block), or -1
 * with errno. */
static int send_out(leash__sock *s) {
    while (s->opos < s->olen) {
        ssize_t n = send(s->fd, s->obuf + s->opos, s->olen - s->opos, MSG_NOSIGNAL);
        if (n > 0) {
            s->opos += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return 0;
        } else {
            return -1;
        }
    }
    drained(s);
    return 0;
}

/* The same through the TLS session: 0, or the LEASH__TLS_* failure with
 * why. A record that could not go out whole stays in the session, and the
 * next try passes the same bytes again (the buffer may have moved or
 * grown: SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER). */
static long tls_send_out(leash__sock *s, char *why, size_t whylen) {
    s->write_wants_read = 0;
    while (s->opos < s->olen) {
        long n = leash__tls_write(s->ts, s->obuf + s->opos, s->olen - s->opos, why, whylen);
        if (n > 0) {
            s->opos += (size_t)n;
        } else if (n == LEASH__TLS_WANT_WRITE) {
            return 0;
        } else if (n == LEASH__TLS_WANT_READ) {
            s->write_wants_read = 1;
            return 0;
        } else {
            return n;
        }
    }
    drained(s);
    return 0;
}

static void write_some(leash__sock *s) {
    if (send_out(s) != 0) {
        fail(s, "write failed", errno);
        return;
    }
    set_events(s, LEASH_IO_READ | (s->olen > s->opos ? LEASH_IO_WRITE : 0));
}

/* What the events of a TLS socket are: always readable (replies, the
 * server's close), writable while output waits and the session does not
 * wait for a read first, or while a read waits for it. */
static void tls_watch(leash__sock *s) {
    int write = s->read_wants_write || (s->olen > s->opos && !s->write_wants_read);

    set_events(s, LEASH_IO_READ | (write ? LEASH_IO_WRITE : 0));
}

/* Hands every complete reply to the owner. 0 once the socket died. */
static int deliver(leash__sock *s) {
    for (;;) {
        void *reply = NULL;

        if (redisReaderGetReply(s->reader, &reply) != REDIS_OK) {
            char what[180];
            snprintf(what, sizeof(what), "protocol error: %s",
                     s->reader->err == REDIS_ERR_OOM ? "out of memory or an array too large"
                                                     : s->reader->errstr);
            fail(s, what, 0);
            return 0;
        }
        if (reply == NULL)
            return 1;
        if (!s->hooks->reply(s->owner, reply))
            freeReplyObject(reply);
        if (s->dead)
            return 0;
    }
}

/* Input from the server, cut into replies: 0 once the socket died. */
static int take_input(leash__sock *s, const char *buf, size_t n) {
    if (redisReaderFeed(s->reader, buf, n) != REDIS_OK) {
        fail(s, "protocol error: out of memory", 0);
        return 0;
    }
    return deliver(s);
}

static void read_some(leash__sock *s) {
    char buf[READ_CHUNK];

    for (;;) {
        ssize_t n = recv(s->fd, buf, sizeof(buf), 0);
        if (n == 0) {
            fail(s, "closed by the server", 0);
            return;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                fail(s, "read failed", errno);
            return;
        }
        if (!take_input(s, buf, (size_t)n) || (size_t)n < sizeof(buf))
            return;
    }
}

/* Reads until the session wants the fd to be readable again: a short read
 * does not mean that the socket is empty (a record is read whole or not
 * at all), and records the session already holds show on no fd. */
static void tls_read_some(leash__sock *s) {
    char buf[READ_CHUNK], why[256];

    s->read_wants_write = 0;
    for (;;) {
        long n = leash__tls_read(s->ts, buf, sizeof(buf), why, sizeof(why));
        if (n == LEASH__TLS_WANT_READ)
            return;
        if (n == LEASH__TLS_WANT_WRITE) {
            s->read_wants_write = 1;
            return;
        }
        if (n < 0) {
            tls_fail(s, n, why);
            return;
        }
        s->heard = 1;
        if (!take_input(s, buf, (size_t)n))
            return;
    }
}

static void tls_io(leash__sock *s, int events) {
    char why[256], alert[256], c;
    long rc;

    if (s->olen > s->opos && ((events & LEASH_IO_WRITE) || s->write_wants_read) &&
        (rc = tls_send_out(s, why, sizeof(why))) != 0) {
        /* A server that refused this client (TLS 1.3: after the handshake)
         * sent its alert and closed; the write met the close. The alert,
         * when it came first, is still to be read: it says why. */
        if (!s->heard && rc == LEASH__TLS_BROKEN &&
            leash__tls_read(s->ts, &c, 1, alert, sizeof(alert)) == LEASH__TLS_FAILED)
            tls_fail(s, LEASH__TLS_FAILED, alert);
        else
            tls_fail(s, rc, why);
        return;
    }
    if ((events & LEASH_IO_READ) || s->read_wants_write)
        tls_read_some(s);
    if (!s->dead)
        tls_watch(s);
}

/* The TLS handshake, as far as the socket allows; the owner hears of the
 * connection once it is done. */
static void tls_handshake(leash__sock *s) {
    char why[256];
    int rc = leash__tls_handshake(s->ts, why, sizeof(why));

    if (rc == LEASH__TLS_DONE) {
        s->handshaking = 0;
        tls_watch(s);
        s->hooks->connected(s->owner);
    } else if (rc == LEASH__TLS_WANT_READ) {
        set_events(s, LEASH_IO_READ);
    } else if (rc == LEASH__TLS_WANT_WRITE) {
        set_events(s, LEASH_IO_WRITE);
    } else {
        tls_fail(s, rc, why);
    }
}

static void start_tls(leash__sock *s) {
    char err[160];

    s->ts = leash__tls_session_new(s->tls, s->fd, s->tls_name, err, sizeof(err));
    if (s->ts == NULL) {
        fail(s, err, 0);
        return;
    }
    s->handshaking = leash__now_ms();
    tls_handshake(s);
}

static void race_io(leash__sock *s, racer *r);

static void on_io(void *arg, int events) {
    racer *r = arg;
    leash__sock *s = r->s;
    leash__env *env = s->env;

    leash__env_enter(env);
    s->dispatching++;
    if (s->connecting) {
        race_io(s, r);
    } else if (s->handshaking) {
        tls_handshake(s);
    } else if (s->ts != NULL) {
        tls_io(s, events);
    } else {
        if (!s->dead && (events & LEASH_IO_WRITE))
            write_some(s);
        if (!s->dead && (events & LEASH_IO_READ))
            read_some(s);
    }
    if (--s->dispatching == 0 && s->dead)
        sock_free(s);
    leash__env_leave(env);
}

/* ---- connecting ---- */

static void tune_tcp(int fd) {
    int on = 1, idle = 15, intvl = 5, cnt = 3;

    /* Commands are small and pipelined: no Nagle delay. Keepalive finds a
     * peer that vanished without a FIN. Best effort. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

static int connect_unix(const char *path, char *err, size_t errlen) {
    struct sockaddr_un sa;
    int fd;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        snprintf(err, errlen, "unix socket path too long");
        return -1;
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 && errno != EINPROGRESS) {
        snprintf(err, errlen, "connect %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/*
 * ---- the race (RFC 8305, Happy Eyeballs) ----
 *
 * A name's addresses are tried in their order, but an address whose
 * connect neither completes nor fails (SYNs dropped by a firewall, a dead
 * node behind a round-robin name, IPv6 filtered on a dual-stack host)
 * does not hold the others back: after STAGGER_MS (less when the connect
 * budget would not let every address start), the next one starts beside
 * it. One that fails lets the next start at once. The first connect that
 * completes wins and the others are closed. The TLS handshake runs on the
 * winner alone. A TCP connect proves little (a frozen Redis's kernel
 * completes it, so does a load balancer without a backend): the resolver
 * hears that the winner worked only once the owner's handshake was
 * answered (leash__sock_ready), and that it did not when it is closed
 * before (demote_winner): it then goes first, or last, next time. The
 * budget itself is the owner's (connect_timeout_ms).
 */

static size_t addr_count(const leash__sock *s) {
    return s->addrs != NULL ? s->addrs->n : 1;
}

static const struct sockaddr *addr_at(const leash__sock *s, size_t i) {
    return (const struct sockaddr *)&s->addrs->at[i].sa;
}

/* Watches racer i's fd, whose connect was started. 0, or ENOMEM (fd
 * closed). */
static int race_watch(leash__sock *s, size_t i, int fd) {
    racer *r = &s->race[i];

    r->s = s;
    r->io = s->env->loop.io_new(s->env->loop.data, fd, on_io, r);
    if (r->io == NULL) {
        close(fd);
        return ENOMEM;
    }
    r->fd = fd;
    s->racing++;
    /* The connect's end shows as writable, even when it is already done:
     * the owner hears of it from the loop either way. */
    s->env->loop.io_set(s->env->loop.data, r->io, LEASH_IO_WRITE);
    return 0;
}

/* Starts the connect to address i: 0, or the errno that ended it at once. */
static int race_start(leash__sock *s, size_t i) {
    const struct sockaddr *sa = addr_at(s, i);
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), err;

    if (fd < 0)
        return errno;
    if (connect(fd, sa, s->addrs->at[i].len) != 0 && errno != EINPROGRESS) {
        err = errno;
        close(fd);
        return err;
    }
    tune_tcp(fd);
    return race_watch(s, i, fd);
}

/* How long the connect just started runs alone: STAGGER_MS, or the share
 * of what is left of the budget that lets every address still to start
 * have as long as the last. */
static int64_t stagger_delay(const leash__sock *s) {
    int64_t delay = STAGGER_MS;

    if (s->deadline != 0) {
        int64_t share = (s->deadline - leash__now_ms()) / (int64_t)(s->addrs->n - s->next + 1);
        if (share < delay)
            delay = share;
    }
    return delay < STAGGER_MIN_MS ? STAGGER_MIN_MS : delay;
}

/* Starts the next address that takes a connect (logging each one that
 * refused at once, and what comes after it), and arms the start of the
 * one after. 0, or -1 when none was left. */
static int start_next(leash__sock *s) {
    char at[64], then[64];

    while (s->next < s->addrs->n) {
        size_t i = s->next++;
        int err = race_start(s, i);

        if (err == 0) {
            if (s->next < s->addrs->n)
                (void)leash__timer_at(&s->stagger, leash__now_ms() + stagger_delay(s), 0);
            else
                leash__timer_stop(&s->stagger);
            return 0;
        }
        s->last_err = err;
        s->last_failed = i;
        if (s->next < s->addrs->n) {
            leash__addr_text(addr_at(s, i), at, sizeof(at));
            leash__addr_text(addr_at(s, s->next), then, sizeof(then));
            leash__log(&s->env->log, LEASH_LOG_INFO, "%s: connect to %s failed (%s): trying %s",
                       s->host, at, strerror(err), then);
        }
    }
    leash__timer_stop(&s->stagger);
    return -1;
}

/* Why no address connected: the last failure. */
static void lost_why(const leash__sock *s, char *why, size_t len) {
    char at[64];

    if (s->addrs == NULL) {
        snprintf(why, len, "connect failed: %s", strerror(s->last_err));
        return;
    }
    leash__addr_text(addr_at(s, s->last_failed), at, sizeof(at));
    if (s->addrs->n > 1)
        snprintf(why, len, "connect failed (%s, the last of %zu addresses of %s): %s", at,
                 s->addrs->n, s->host, strerror(s->last_err));
    else
        snprintf(why, len, "connect failed (%s): %s", at, strerror(s->last_err));
}

/* No connect runs and no address is left: the socket fails. */
static void race_lost(leash__sock *s) {
    char why[200];

    lost_why(s, why, sizeof(why));
    fail(s, why, 0);
}

/* Racer i's connect failed with err: the next address starts now. */
static void race_failed(leash__sock *s, size_t i, int err) {
    char at[64], then[64];

    racer_close(s, &s->race[i]);
    s->last_err = err;
    s->last_failed = i;
    if (s->addrs == NULL) {
        race_lost(s);
        return;
    }
    leash__addr_text(addr_at(s, i), at, sizeof(at));
    if (s->next < s->addrs->n) {
        leash__addr_text(addr_at(s, s->next), then, sizeof(then));
        leash__log(&s->env->log, LEASH_LOG_INFO, "%s: connect to %s failed (%s): trying %s",
                   s->host, at, strerror(err), then);
    } else if (s->racing > 0) {
        leash__log(&s->env->log, LEASH_LOG_INFO,
                   "%s: connect to %s failed (%s): %zu other%s still connecting", s->host, at,
                   strerror(err), s->racing, s->racing == 1 ? "" : "s");
    }
    if (start_next(s) != 0 && s->racing == 0)
        race_lost(s);
}

/* Racer i connected first: the socket's fd from now on. */
static void race_won(leash__sock *s, size_t i) {
    racer *r = &s->race[i];
    char at[64];

    s->fd = r->fd;
    s->io = r->io;
    s->events = LEASH_IO_WRITE;
    r->fd = -1;
    r->io = NULL;
    s->racing--;
    race_end(s);
    if (s->addrs != NULL && s->addrs->n > 1) {
        leash__addr_text(addr_at(s, i), at, sizeof(at));
        leash__log(&s->env->log, LEASH_LOG_DEBUG, "%s: connected to %s", s->host, at);
        /* It worked once the owner says ready (leash__sock_ready). */
        s->won = i;
    }
    s->connecting = 0;
    if (s->tls != NULL) {
        start_tls(s);
        return;
    }
    set_events(s, LEASH_IO_READ | (s->olen > s->opos ? LEASH_IO_WRITE : 0));
    s->hooks->connected(s->owner);
}

/* A racer's connect ended. */
static void race_io(leash__sock *s, racer *r) {
    size_t i = (size_t)(r - s->race);
    int err = 0;
    socklen_t len = sizeof(err);

    if (getsockopt(r->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    if (err != 0)
        race_failed(s, i, err);
    else
        race_won(s, i);
}

/* The connect started last ran STAGGER_MS alone: the next starts beside. */
static void stagger_fired(void *arg) {
    leash__sock *s = arg;
    char at[64], then[64];

    if (s->dead || !s->connecting || s->addrs == NULL || s->next >= s->addrs->n)
        return;
    s->dispatching++;
    leash__addr_text(addr_at(s, s->next - 1), at, sizeof(at));
    leash__addr_text(addr_at(s, s->next), then, sizeof(then));
    leash__log(&s->env->log, LEASH_LOG_INFO, "%s: connect to %s not done yet: trying %s beside it",
               s->host, at, then);
    if (start_next(s) != 0 && s->racing == 0)
        race_lost(s);
    if (--s->dispatching == 0 && s->dead)
        sock_free(s);
}

/* One racer per address. 0, or -1 without memory. */
static int race_alloc(leash__sock *s) {
    s->race = calloc(addr_count(s), sizeof(*s->race));
    if (s->race == NULL)
        return -1;
    for (size_t i = 0; i < addr_count(s); i++)
        s->race[i].fd = -1;
    return 0;
}

/* Starts the race over s->addrs: 0, or -1 with why when no address took a
 * connect. */
static int race_begin(leash__sock *s, char *why, size_t len) {
    if (race_alloc(s) != 0) {
        snprintf(why, len, "out of memory");
        return -1;
    }
    if (start_next(s) == 0)
        return 0;
    lost_why(s, why, len);
    return -1;
}

/* The name's addresses came (or why not). */
static void on_resolved(void *arg, leash__addrs *addrs, const char *why_not) {
    leash__sock *s = arg;
    char why[200];

    s->query = NULL;
    s->dispatching++;
    if (addrs == NULL) {
        snprintf(why, sizeof(why), "cannot resolve %s: %s", s->host, why_not);
        fail(s, why, 0);
    } else {
        s->addrs = addrs;
        leash__log(&s->env->log, LEASH_LOG_DEBUG, "%s: %zu address%s", s->host, addrs->n,
                   addrs->n == 1 ? "" : "es");
        if (race_begin(s, why, sizeof(why)) != 0)
            fail(s, why, 0);
    }
    if (--s->dispatching == 0 && s->dead)
        sock_free(s);
}

/* host as an IP address (never a DNS query): 1 with *out, 0 when it is a
 * name, -1 without memory. */
static int ip_literal(const char *host, int port, leash__addrs **out) {
    struct addrinfo hints, *res = NULL;
    char service[16];
    leash__addrs *a;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    snprintf(service, sizeof(service), "%d", port);
    if (getaddrinfo(host, service, &hints, &res) != 0)
        return 0;
    a = malloc(sizeof(*a) + sizeof(a->at[0]));
    if (a == NULL || res->ai_addrlen > sizeof(a->at[0].sa)) {
        free(a);
        freeaddrinfo(res);
        return -1;
    }
    a->n = 1;
    memcpy(&a->at[0].sa, res->ai_addr, res->ai_addrlen);
    a->at[0].len = res->ai_addrlen;
    freeaddrinfo(res);
    *out = a;
    return 1;
}

leash__sock *leash__sock_open(leash__env *env, const leash__sock_addr *addr,
                              const leash__sock_hooks *hooks, void *owner, char *err,
                              size_t errlen) {
    leash__sock *s = calloc(1, sizeof(*s));
    int literal = 0, fd;

    if (s == NULL || (s->reader = reader_new()) == NULL ||
        (addr->unix_path == NULL &&
         ((s->host = strdup(addr->host)) == NULL ||
          (literal = ip_literal(addr->host, addr->port, &s->addrs)) < 0))) {
        snprintf(err, errlen, "out of memory");
        if (s != NULL)
            sock_free(s);
        return NULL;
    }
    s->env = env;
    s->hooks = hooks;
    s->owner = owner;
    if (addr->unix_path == NULL) {
        s->tls = addr->tls;
        s->tls_name = addr->tls_name;
    }
    s->fd = -1;
    s->won = SIZE_MAX;
    s->connecting = 1;
    leash__timer_init(&s->stagger, env, stagger_fired, s);
    if (addr->budget_ms > 0)
        s->deadline = leash__now_ms() + addr->budget_ms;
    if (addr->unix_path != NULL) {
        if (race_alloc(s) != 0) {
            snprintf(err, errlen, "out of memory");
            goto failed;
        }
        if ((fd = connect_unix(addr->unix_path, err, errlen)) < 0)
            goto failed;
        if (race_watch(s, 0, fd) != 0) {
            snprintf(err, errlen, "out of memory (fd watcher)");
            goto failed;
        }
    } else if (literal) {
        /* An IP address connects at once. */
        if (race_begin(s, err, errlen) != 0)
            goto failed;
    } else {
        /* A name: resolving, then connecting (on_resolved). */
        s->query =
            leash__resolve(env->resolver, addr->host, addr->port, on_resolved, s, err, errlen);
        if (s->query == NULL)
            goto failed;
    }
    return s;

failed:
    race_end(s);
    drop_fd(s);
    sock_free(s);
    return NULL;
}

/* The outermost leave of the env (base/env.h): what the entry wrote goes
 * out now, one send per socket for all its commands, rather than on the
 * writable event of the loop's next turn: at one command in flight that
 * turn is a wait of its own before the servers see the command. A send
 * that fails or would block leaves the rest to the writable event, whose
 * handler reports a failure inside an entry, as every failure is. */
static void send_unsent(leash__env *env) {
    while (env->unsent != NULL) {
        leash__sock *s = env->unsent;

        env->unsent = s->unsent_next;
        s->queued = 0;
        if (s->dead || s->olen == s->opos)
            continue;
        if (send_out(s) != 0 || s->olen > s->opos)
            set_events(s, LEASH_IO_READ | LEASH_IO_WRITE);
    }
}

int leash__sock_write(leash__sock *s, const char *buf, size_t len) {
    if (s->dead)
        return -1;
    if (s->olen + len > s->ocap && s->opos > 0) {
        memmove(s->obuf, s->obuf + s->opos, s->olen - s->opos);
        s->olen -= s->opos;
        s->opos = 0;
    }
    if (s->olen + len > s->ocap) {
        size_t cap = s->ocap ? s->ocap * 2 : 4096;
        char *grown;
        while (cap < s->olen + len)
            cap *= 2;
        grown = realloc(s->obuf, cap);
        if (grown == NULL)
            return -1;
        s->obuf = grown;
        s->ocap = cap;
    }
    memcpy(s->obuf + s->olen, buf, len);
    s->olen += len;
    if (s->connecting || s->handshaking || s->write_wants_read)
        return 0;
    /* Inside an entry, the entry's end sends (send_unsent). Outside one (a
     * call from the program's own code: no leave follows), behind output
     * that waits, and through TLS, the loop's writable event does. */
    if (s->ts == NULL && s->env->depth > 0 && (s->events & LEASH_IO_WRITE) == 0) {
        if (!s->queued) {
            s->queued = 1;
            s->unsent_next = s->env->unsent;
            s->env->unsent = s;
            s->env->send = send_unsent;
        }
    } else {
        set_events(s, LEASH_IO_READ | LEASH_IO_WRITE);
    }
    return 0;
}

void leash__sock_unwrite(leash__sock *s, size_t n) {
    s->olen -= n;
}

void leash__sock_flush_now(leash__sock *s) {
    char why[256];

    if (s->dead || s->connecting || s->handshaking)
        return;
    if (s->ts != NULL)
        (void)tls_send_out(s, why, sizeof(why));
    else
        (void)send_out(s);
}

size_t leash__sock_unsent(const leash__sock *s) {
    return s->olen - s->opos;
}

int leash__sock_has_input(const leash__sock *s) {
    char c;

    if (s->fd < 0)
        return 0;
    return (s->ts != NULL && leash__tls_pending(s->ts)) ||
           recv(s->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) >= 0;
}

int leash__sock_tls_seen(const leash__sock *s, char *out, size_t len) {
    if (!s->handshaking || s->ts == NULL)
        return 0;
    leash__tls_seen(s->ts, out, len);
    return 1;
}

int leash__sock_resolving(const leash__sock *s) {
    return s->query != NULL;
}

int leash__sock_fd(const leash__sock *s) {
    return s->fd;
}

void leash__sock_ready(leash__sock *s) {
    if (s->won == SIZE_MAX)
        return;
    leash__resolve_worked(s->env->resolver, s->host, addr_at(s, s->won), s->addrs->at[s->won].len);
    s->won = SIZE_MAX;
}

void leash__sock_close(leash__sock *s) {
    if (s->dead)
        return;
    shut(s);
    if (s->dispatching == 0)
        sock_free(s);
}
