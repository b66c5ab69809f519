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

#include "wire/resolve.h"

/* What one read takes at most; a read that fills it is followed by another
 * before the loop turns. */
#define READ_CHUNK 16384
/* An output buffer larger than this is given back once it drained. */
#define OBUF_KEEP 65536
/* Our replies never hold more than one renew batch (100) per array; a
 * larger array from a server is refused before hiredis allocates it. */
#define MAX_ELEMENTS 4096

struct leash__sock {
    leash__env *env;
    int fd;
    void *io;
    int events;          /* what the watcher waits for */
    int connecting;      /* resolving the name (query), then connecting */
    char *host;          /* the name or address connected to, for log lines */
    leash__query *query; /* while the name resolves */
    leash__addrs *addrs; /* where to connect, in order (NULL: a unix socket) */
    size_t next;         /* the next of them to try */
    char *obuf;
    size_t olen, opos, ocap;
    redisReader *reader;
    const leash__sock_hooks *hooks;
    void *owner;
    unsigned dispatching; /* inside on_io */
    int dead;             /* closed: freed when the dispatch returns */
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
    if (s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
    s->events = 0;
}

/* Releases the fd and its watcher, or ends the name's query; hooks fire
 * no more. */
static void shut(leash__sock *s) {
    s->dead = 1;
    if (s->query != NULL) {
        leash__resolve_cancel(s->query);
        s->query = NULL;
    }
    drop_fd(s);
}

static void sock_free(leash__sock *s) {
    if (s->reader != NULL)
        redisReaderFree(s->reader);
    free(s->obuf);
    free(s->host);
    free(s->addrs);
    free(s);
}

static void fail(leash__sock *s, const char *what, int err) {
    char why[256]; /* room for the longest `what` a caller makes (180) and an errno text */

    if (s->dead)
        return;
    if (err != 0)
        snprintf(why, sizeof(why), "%s: %s", what, strerror(err));
    else
        snprintf(why, sizeof(why), "%s", what);
    shut(s);
    s->hooks->closed(s->owner, why);
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
    s->opos = s->olen = 0;
    if (s->ocap > OBUF_KEEP) {
        free(s->obuf);
        s->obuf = NULL;
        s->ocap = 0;
    }
    return 0;
}

static void write_some(leash__sock *s) {
    if (send_out(s) != 0) {
        fail(s, "write failed", errno);
        return;
    }
    set_events(s, LEASH_IO_READ | (s->olen > s->opos ? LEASH_IO_WRITE : 0));
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
        if (redisReaderFeed(s->reader, buf, (size_t)n) != REDIS_OK) {
            fail(s, "protocol error: out of memory", 0);
            return;
        }
        if (!deliver(s) || (size_t)n < sizeof(buf))
            return;
    }
}

static int connect_next(leash__sock *s, int err, char *why, size_t len);

static void finish_connect(leash__sock *s) {
    int err = 0;
    socklen_t len = sizeof(err);
    char why[200];

    if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    if (err != 0) {
        if (connect_next(s, err, why, sizeof(why)) != 0)
            fail(s, why, 0);
        return;
    }
    s->connecting = 0;
    set_events(s, LEASH_IO_READ | (s->olen > s->opos ? LEASH_IO_WRITE : 0));
    s->hooks->connected(s->owner);
}

static void on_io(void *arg, int events) {
    leash__sock *s = arg;
    leash__env *env = s->env;

    leash__env_enter(env);
    s->dispatching++;
    if (s->connecting) {
        finish_connect(s);
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

/* Watches fd, whose connect was started. 0, or -1 (fd closed). */
static int watch_fd(leash__sock *s, int fd) {
    s->io = s->env->loop.io_new(s->env->loop.data, fd, on_io, s);
    if (s->io == NULL) {
        close(fd);
        return -1;
    }
    s->fd = fd;
    /* The connect's end shows as writable, even when it is already done:
     * the owner hears of it from the loop either way. */
    set_events(s, LEASH_IO_WRITE);
    return 0;
}

/* Starts a connect to the next address that takes one (the fd of the one
 * before is closed): 0; or -1 once none is left, with why (err: errno of
 * the address before, 0 for none). */
static int connect_next(leash__sock *s, int err, char *why, size_t len) {
    char at[64], then[64];

    drop_fd(s);
    if (s->addrs == NULL) { /* a unix socket */
        snprintf(why, len, "connect failed: %s", strerror(err));
        return -1;
    }
    while (s->next < s->addrs->n) {
        const struct sockaddr *sa = (const struct sockaddr *)&s->addrs->at[s->next].sa;
        int fd;

        if (err != 0) {
            leash__addr_text((const struct sockaddr *)&s->addrs->at[s->next - 1].sa, at,
                             sizeof(at));
            leash__addr_text((const struct sockaddr *)&s->addrs->at[s->next].sa, then,
                             sizeof(then));
            leash__log(&s->env->log, LEASH_LOG_INFO, "%s: connect to %s failed (%s): trying %s",
                       s->host, at, strerror(err), then);
        }
        fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            err = errno;
        } else if (connect(fd, sa, s->addrs->at[s->next].len) != 0 && errno != EINPROGRESS) {
            err = errno;
            close(fd);
        } else {
            tune_tcp(fd);
            if (watch_fd(s, fd) != 0) {
                snprintf(why, len, "out of memory (fd watcher)");
                return -1;
            }
            s->next++;
            return 0;
        }
        s->next++;
    }
    leash__addr_text((const struct sockaddr *)&s->addrs->at[s->addrs->n - 1].sa, at, sizeof(at));
    if (s->addrs->n > 1)
        snprintf(why, len, "connect failed (%s, the last of %zu addresses of %s): %s", at,
                 s->addrs->n, s->host, strerror(err));
    else
        snprintf(why, len, "connect failed (%s): %s", at, strerror(err));
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
        if (connect_next(s, 0, why, sizeof(why)) != 0)
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
    s->fd = -1;
    s->connecting = 1;
    if (addr->unix_path != NULL) {
        if ((fd = connect_unix(addr->unix_path, err, errlen)) < 0)
            goto failed;
        if (watch_fd(s, fd) != 0) {
            snprintf(err, errlen, "out of memory (fd watcher)");
            goto failed;
        }
    } else if (literal) {
        /* An IP address connects at once. */
        if (connect_next(s, 0, err, errlen) != 0)
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
    drop_fd(s);
    sock_free(s);
    return NULL;
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
    if (!s->connecting)
        set_events(s, LEASH_IO_READ | LEASH_IO_WRITE);
    return 0;
}

void leash__sock_unwrite(leash__sock *s, size_t n) {
    s->olen -= n;
}

void leash__sock_flush_now(leash__sock *s) {
    if (!s->dead && !s->connecting)
        (void)send_out(s);
}

size_t leash__sock_unsent(const leash__sock *s) {
    return s->olen - s->opos;
}

int leash__sock_has_input(const leash__sock *s) {
    char c;

    return s->fd >= 0 && recv(s->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) >= 0;
}

int leash__sock_resolving(const leash__sock *s) {
    return s->query != NULL;
}

int leash__sock_fd(const leash__sock *s) {
    return s->fd;
}

void leash__sock_close(leash__sock *s) {
    if (s->dead)
        return;
    shut(s);
    if (s->dispatching == 0)
        sock_free(s);
}
