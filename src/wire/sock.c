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
    int events; /* what the watcher waits for */
    int connecting;
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

/* Releases the fd and its watcher; hooks fire no more. */
static void shut(leash__sock *s) {
    s->dead = 1;
    if (s->io != NULL) {
        s->env->loop.io_free(s->env->loop.data, s->io);
        s->io = NULL;
    }
    if (s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
}

static void sock_free(leash__sock *s) {
    if (s->reader != NULL)
        redisReaderFree(s->reader);
    free(s->obuf);
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

static void finish_connect(leash__sock *s) {
    int err = 0;
    socklen_t len = sizeof(err);

    if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    if (err != 0) {
        fail(s, "connect failed", err);
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

static int connect_tcp(const char *host, int port, char *err, size_t errlen) {
    struct addrinfo hints, *res = NULL, *ai;
    char service[16];
    int rc, fd = -1, last = 0;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    snprintf(service, sizeof(service), "%d", port);
    rc = getaddrinfo(host, service, &hints, &res);
    if (rc == EAI_NONAME) {
        /* A name, not an address: the system resolves it (may block). */
        hints.ai_flags = AI_NUMERICSERV;
        rc = getaddrinfo(host, service, &hints, &res);
    }
    if (rc != 0) {
        snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(rc));
        return -1;
    }
    for (ai = res; ai != NULL; ai = ai->ai_next) {
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            last = errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 || errno == EINPROGRESS)
            break;
        last = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, errlen, "connect %s:%d: %s", host, port, strerror(last));
        return -1;
    }
    tune_tcp(fd);
    return fd;
}

leash__sock *leash__sock_open(leash__env *env, const leash__sock_addr *addr,
                              const leash__sock_hooks *hooks, void *owner, char *err,
                              size_t errlen) {
    leash__sock *s = calloc(1, sizeof(*s));

    if (s == NULL || (s->reader = reader_new()) == NULL) {
        snprintf(err, errlen, "out of memory");
        free(s);
        return NULL;
    }
    s->env = env;
    s->hooks = hooks;
    s->owner = owner;
    s->fd = addr->unix_path != NULL ? connect_unix(addr->unix_path, err, errlen)
                                    : connect_tcp(addr->host, addr->port, err, errlen);
    if (s->fd < 0) {
        sock_free(s);
        return NULL;
    }
    s->io = env->loop.io_new(env->loop.data, s->fd, on_io, s);
    if (s->io == NULL) {
        snprintf(err, errlen, "out of memory (fd watcher)");
        close(s->fd);
        sock_free(s);
        return NULL;
    }
    /* The connect's end shows as writable, even when it is already done:
     * the owner hears of it from the loop either way. */
    s->connecting = 1;
    set_events(s, LEASH_IO_WRITE);
    return s;
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
