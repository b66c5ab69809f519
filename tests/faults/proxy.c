/* SPDX-License-Identifier: MIT */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* prctl, accept4, SOCK_CLOEXEC */
#endif

#include "proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the control protocol: one request, one reply ---- */

enum {
    OP_DELAY = 1,
    OP_STALL,
    OP_HOLE,
    OP_CUT,
    OP_REFUSE,
    OP_CLEAR,
    OP_STATS,
    OP_RETARGET,
    OP_TRICKLE
};

typedef struct ctl_msg {
    int op, roles, dirs, value;
} ctl_msg;

typedef struct ctl_reply {
    int rc;
    fp_stats st;
} ctl_reply;

/* ---- the proxy's state (in the child) ---- */

/* Role of a connection, an index into the settings. */
enum {
    R_UNKNOWN = 0,
    R_CMD = 1,
    R_SUB = 2,
    R_COUNT
};
/* Direction of a flow: UP reads the client and writes the server. */
enum {
    D_UP = 0,
    D_DOWN = 1
};

#define FLOW_MAX (1 << 20) /* read no more while this much waits */
#define SCAN_KEEP 16

typedef struct chunk {
    struct chunk *next;
    int64_t due;
    size_t len, off;
    char data[];
} chunk;

typedef struct flow {
    chunk *head, *tail;
    size_t bytes;
} flow;

typedef struct pconn {
    struct pconn *next;
    int fd[2]; /* client, server */
    int role;
    int tainted;    /* a blackhole took bytes: close when it is lifted */
    int server_eof; /* close once everything for the client went out */
    flow f[2];
    char scan[SCAN_KEEP];
    size_t scan_len;
} pconn;

static struct {
    int listen_fd, ctl_fd, port, target_port;
    int refuse_all;
    int delay[R_COUNT][2], stall[R_COUNT][2], hole[R_COUNT][2], refuse[R_COUNT];
    int trickle[R_COUNT][2];
    pconn *conns;
    fp_stats st;
} px;

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int listen_on(int port) {
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;

    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)port);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 128) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int bound_port(int fd) {
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    if (getsockname(fd, (struct sockaddr *)&sa, &len) != 0)
        return -1;
    return ntohs(sa.sin_port);
}

static void flow_clear(flow *f) {
    chunk *c;
    while ((c = f->head) != NULL) {
        f->head = c->next;
        free(c);
    }
    f->tail = NULL;
    f->bytes = 0;
}

/* Closes both sides; with rst, the peers see a reset instead of a FIN. */
static void conn_close(pconn *c, int rst) {
    pconn **pp = &px.conns;
    int i;

    while (*pp != c)
        pp = &(*pp)->next;
    *pp = c->next;
    for (i = 0; i < 2; i++) {
        if (c->fd[i] < 0)
            continue;
        if (rst) {
            struct linger lg = {1, 0};
            setsockopt(c->fd[i], SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        }
        close(c->fd[i]);
    }
    flow_clear(&c->f[0]);
    flow_clear(&c->f[1]);
    free(c);
}

static int role_bit(int role) {
    return role == R_CMD ? FP_CMD : role == R_SUB ? FP_SUB : 0;
}

/* Settings made for a set of roles: FP_ALL covers unclassified ones too. */
static void set_for(int arr[R_COUNT][2], int roles, int dirs, int value) {
    int r, d;
    for (r = 0; r < R_COUNT; r++) {
        if (r == R_UNKNOWN ? roles != FP_ALL : !(roles & role_bit(r)))
            continue;
        for (d = 0; d < 2; d++)
            if (dirs & (1 << d))
                arr[r][d] = value;
    }
}

/* ---- classification ---- */

static int contains_word(const char *buf, size_t len, const char *word) {
    size_t wl = strlen(word), i;
    for (i = 0; i + wl <= len; i++)
        if (strncasecmp(buf + i, word, wl) == 0)
            return 1;
    return 0;
}

static void classify(pconn *c, const char *data, size_t len) {
    char buf[SCAN_KEEP + 4096];
    size_t n = c->scan_len, take = len > 4096 ? 4096 : len;

    memcpy(buf, c->scan, n);
    memcpy(buf + n, data, take);
    n += take;
    if (contains_word(buf, n, "SUBSCRIBE"))
        c->role = R_SUB;
    else if (contains_word(buf, n, "SCRIPT") || contains_word(buf, n, "EVAL"))
        c->role = R_CMD;
    c->scan_len = n > SCAN_KEEP ? SCAN_KEEP : n;
    memcpy(c->scan, buf + n - c->scan_len, c->scan_len);
}

/* ---- moving bytes ---- */

/* Reads what side `from` sent; returns -1 when the connection must close. */
static int pump_in(pconn *c, int d) {
    char buf[65536];
    ssize_t n;
    int from = d == D_UP ? 0 : 1;
    chunk *ch;

    n = read(c->fd[from], buf, sizeof buf);
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    if (n == 0) {
        if (d == D_UP)
            return -1; /* the client left: nothing more to do */
        c->server_eof = 1;
        return 0;
    }
    if (d == D_UP && c->role == R_UNKNOWN) {
        classify(c, buf, (size_t)n);
        if (c->role != R_UNKNOWN && px.refuse[c->role]) {
            px.st.refused++;
            return -2;
        }
    }
    if (px.hole[c->role][d] || c->tainted) {
        /* Bytes of a stream that already lost some are worthless too. */
        c->tainted = 1;
        px.st.bytes_dropped += (uint64_t)n;
        return 0;
    }
    ch = malloc(sizeof(*ch) + (size_t)n);
    if (ch == NULL)
        return -1;
    ch->next = NULL;
    ch->due = now_ms() + px.delay[c->role][d];
    ch->len = (size_t)n;
    ch->off = 0;
    memcpy(ch->data, buf, (size_t)n);
    if (c->f[d].tail)
        c->f[d].tail->next = ch;
    else
        c->f[d].head = ch;
    c->f[d].tail = ch;
    c->f[d].bytes += (size_t)n;
    return 0;
}

static int flow_ready(const pconn *c, int d, int64_t now) {
    const chunk *h = c->f[d].head;
    return h != NULL && !px.stall[c->role][d] && h->due <= now;
}

/* Writes what is due; -1 when the connection must close. */
static int pump_out(pconn *c, int d) {
    int to = d == D_UP ? 1 : 0;
    int64_t now = now_ms();
    chunk *h;

    while (flow_ready(c, d, now)) {
        size_t piece, trickle = (size_t)px.trickle[c->role][d];
        h = c->f[d].head;
        piece = h->len - h->off;
        if (trickle > 0 && piece > trickle)
            piece = trickle;
        ssize_t n = send(c->fd[to], h->data + h->off, piece, MSG_NOSIGNAL);
        if (n < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        if (trickle > 0)
            h->due = now + FP_TRICKLE_GAP_MS; /* the next piece, of this chunk or the next */
        h->off += (size_t)n;
        c->f[d].bytes -= (size_t)n;
        if (d == D_UP)
            px.st.bytes_up += (uint64_t)n;
        else
            px.st.bytes_down += (uint64_t)n;
        if (h->off < h->len)
            return 0;
        c->f[d].head = h->next;
        if (c->f[d].head == NULL)
            c->f[d].tail = NULL;
        else if (trickle > 0 && c->f[d].head->due < h->due)
            c->f[d].head->due = h->due;
        free(h);
    }
    return 0;
}

static int connect_target(void) {
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

    if (fd < 0)
        return -1;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)px.target_port);
    /* Loopback: this takes microseconds, or fails at once. */
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

static void accept_all(void) {
    for (;;) {
        int cfd = accept4(px.listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK), sfd, one = 1;
        pconn *c;

        if (cfd < 0)
            return;
        px.st.accepted++;
        sfd = connect_target();
        c = sfd >= 0 ? calloc(1, sizeof(*c)) : NULL;
        if (c == NULL) {
            struct linger lg = {1, 0};
            setsockopt(cfd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
            close(cfd);
            if (sfd >= 0)
                close(sfd);
            continue;
        }
        setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->fd[0] = cfd;
        c->fd[1] = sfd;
        c->role = R_UNKNOWN;
        c->next = px.conns;
        px.conns = c;
    }
}

/* ---- control ---- */

static void count_open(fp_stats *st) {
    pconn *c;
    st->open_cmd = st->open_sub = st->open_unknown = 0;
    for (c = px.conns; c; c = c->next) {
        if (c->role == R_CMD)
            st->open_cmd++;
        else if (c->role == R_SUB)
            st->open_sub++;
        else
            st->open_unknown++;
    }
}

static void cut_roles(int roles, int only_tainted) {
    pconn *c, *next;
    for (c = px.conns; c; c = next) {
        next = c->next;
        if (only_tainted && !c->tainted)
            continue;
        if (!only_tainted && !(roles == FP_ALL || (roles & role_bit(c->role))))
            continue;
        px.st.cut++;
        conn_close(c, 1);
    }
}

static void set_refuse_all(int on) {
    px.refuse_all = on;
    if (on && px.listen_fd >= 0) {
        close(px.listen_fd);
        px.listen_fd = -1;
    }
    /* Off: listen again before the caller hears back, so that its next
     * connect finds the port open (the loop retries if bind failed). */
    if (!on && px.listen_fd < 0)
        px.listen_fd = listen_on(px.port);
}

static void handle_ctl(const ctl_msg *m, ctl_reply *rep) {
    rep->rc = 0;
    switch (m->op) {
    case OP_DELAY:
        set_for(px.delay, m->roles, m->dirs, m->value);
        break;
    case OP_STALL:
        set_for(px.stall, m->roles, m->dirs, m->value != 0);
        break;
    case OP_TRICKLE:
        set_for(px.trickle, m->roles, m->dirs, m->value > 0 ? m->value : 0);
        break;
    case OP_HOLE:
        set_for(px.hole, m->roles, m->dirs, m->value != 0);
        if (!m->value)
            cut_roles(FP_ALL, 1);
        break;
    case OP_CUT:
        cut_roles(m->roles, 0);
        break;
    case OP_REFUSE:
        if (m->roles == FP_ALL) {
            set_refuse_all(m->value);
        } else {
            if (m->roles & FP_CMD)
                px.refuse[R_CMD] = m->value != 0;
            if (m->roles & FP_SUB)
                px.refuse[R_SUB] = m->value != 0;
        }
        break;
    case OP_CLEAR:
        memset(px.delay, 0, sizeof px.delay);
        memset(px.stall, 0, sizeof px.stall);
        memset(px.trickle, 0, sizeof px.trickle);
        memset(px.hole, 0, sizeof px.hole);
        memset(px.refuse, 0, sizeof px.refuse);
        cut_roles(FP_ALL, 1);
        set_refuse_all(0);
        break;
    case OP_STATS:
        break;
    case OP_RETARGET:
        px.target_port = m->value;
        break;
    default:
        rep->rc = -1;
    }
    rep->st = px.st;
    count_open(&rep->st);
}

static int read_full(int fd, void *buf, size_t len) {
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    return 0;
}

static int write_full(int fd, const void *buf, size_t len) {
    size_t put = 0;
    while (put < len) {
        ssize_t n = write(fd, (const char *)buf + put, len - put);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        put += (size_t)n;
    }
    return 0;
}

/* ---- the loop ---- */

#define MAX_FDS 4096

static void run(void) {
    static struct pollfd pfd[MAX_FDS];
    static pconn *owner[MAX_FDS];
    static int side[MAX_FDS];

    for (;;) {
        int n = 0, i, timeout = 100;
        int64_t now = now_ms();
        pconn *c, *next;

        if (px.listen_fd < 0 && !px.refuse_all)
            px.listen_fd = listen_on(px.port); /* may fail while the port frees */
        pfd[n].fd = px.ctl_fd;
        pfd[n].events = POLLIN;
        owner[n++] = NULL;
        if (px.listen_fd >= 0) {
            pfd[n].fd = px.listen_fd;
            pfd[n].events = POLLIN;
            owner[n++] = NULL;
        }
        for (c = px.conns; c && n + 2 <= MAX_FDS; c = c->next) {
            int d;
            for (d = 0; d < 2; d++) {
                /* fd[d] is read for flow d and written for flow 1 - d. */
                short ev = 0;
                const chunk *h = c->f[1 - d].head;
                if (c->f[d].bytes < FLOW_MAX && !(d == 1 && c->server_eof))
                    ev |= POLLIN;
                if (h != NULL && !px.stall[c->role][1 - d]) {
                    if (h->due <= now)
                        ev |= POLLOUT;
                    else if (h->due - now < timeout)
                        timeout = (int)(h->due - now);
                }
                /* A server that closed reports POLLHUP for ever: leave it
                 * out; what it sent waits in the down flow. */
                pfd[n].fd = d == 1 && c->server_eof ? -1 : c->fd[d];
                pfd[n].events = ev;
                owner[n] = c;
                side[n++] = d;
            }
        }
        if (poll(pfd, (nfds_t)n, timeout) < 0 && errno != EINTR)
            _exit(3);

        if (pfd[0].revents) {
            ctl_msg m;
            ctl_reply rep;
            if (read_full(px.ctl_fd, &m, sizeof m) != 0)
                _exit(0); /* the test is gone */
            memset(&rep, 0, sizeof rep);
            handle_ctl(&m, &rep);
            if (write_full(px.ctl_fd, &rep, sizeof rep) != 0)
                _exit(0);
            continue; /* the connection list may have changed */
        }
        if (px.listen_fd >= 0 && n > 1 && pfd[1].fd == px.listen_fd && pfd[1].revents)
            accept_all();

        for (i = 0; i < n; i++) {
            int rc = 0, d = side[i];
            c = owner[i];
            if (c == NULL || pfd[i].revents == 0)
                continue;
            /* The connection may be gone already (its other side failed). */
            for (next = px.conns; next && next != c; next = next->next)
                ;
            if (next == NULL)
                continue;
            if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))
                rc = pump_in(c, d == 0 ? D_UP : D_DOWN);
            if (rc == 0 && (pfd[i].revents & POLLOUT))
                rc = pump_out(c, d == 0 ? D_DOWN : D_UP);
            if (rc != 0)
                conn_close(c, rc == -2);
        }
        /* Delayed bytes whose time came, and servers that closed. */
        for (c = px.conns; c; c = next) {
            next = c->next;
            if (pump_out(c, D_UP) != 0 || pump_out(c, D_DOWN) != 0) {
                conn_close(c, 0);
                continue;
            }
            if (c->server_eof && c->f[D_DOWN].head == NULL)
                conn_close(c, 0);
        }
    }
}

/* ---- the test's side ---- */

int fp_start(fault_proxy *p, int target_port) {
    int sv[2], lfd, fd;
    pid_t parent = getpid(), pid;

    memset(p, 0, sizeof *p);
    p->ctl = -1;
    lfd = listen_on(0);
    if (lfd < 0) {
        perror("fault proxy: listen");
        return -1;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        perror("fault proxy: socketpair");
        close(lfd);
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0) {
        perror("fault proxy: fork");
        close(lfd);
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(0);
        signal(SIGPIPE, SIG_IGN);
        /* Sockets of the test (its Redis connections) must not live on in
         * here after the test closed them. */
        for (fd = 3; fd < 1024; fd++)
            if (fd != lfd && fd != sv[1])
                close(fd);
        memset(&px, 0, sizeof px);
        px.listen_fd = lfd;
        px.ctl_fd = sv[1];
        px.port = bound_port(lfd);
        px.target_port = target_port;
        run();
        _exit(0);
    }
    close(sv[1]);
    p->pid = pid;
    p->ctl = sv[0];
    p->port = bound_port(lfd);
    close(lfd);
    return 0;
}

void fp_stop(fault_proxy *p) {
    if (p->pid > 0) {
        kill(p->pid, SIGKILL);
        while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    if (p->ctl >= 0 && p->pid > 0)
        close(p->ctl);
    memset(p, 0, sizeof *p);
    p->ctl = -1;
}

static int request(fault_proxy *p, int op, int roles, int dirs, int value, fp_stats *st) {
    ctl_msg m = {op, roles, dirs, value};
    ctl_reply rep;

    if (p->pid <= 0)
        return -1;
    if (write_full(p->ctl, &m, sizeof m) != 0 || read_full(p->ctl, &rep, sizeof rep) != 0)
        return -1;
    if (st != NULL)
        *st = rep.st;
    return rep.rc;
}

int fp_delay(fault_proxy *p, int roles, int dirs, int ms) {
    return request(p, OP_DELAY, roles, dirs, ms, NULL);
}
int fp_stall(fault_proxy *p, int roles, int dirs, int on) {
    return request(p, OP_STALL, roles, dirs, on, NULL);
}
int fp_trickle(fault_proxy *p, int roles, int dirs, int bytes) {
    return request(p, OP_TRICKLE, roles, dirs, bytes, NULL);
}
int fp_blackhole(fault_proxy *p, int roles, int dirs, int on) {
    return request(p, OP_HOLE, roles, dirs, on, NULL);
}
int fp_cut(fault_proxy *p, int roles) {
    return request(p, OP_CUT, roles, 0, 0, NULL);
}
int fp_refuse(fault_proxy *p, int roles, int on) {
    return request(p, OP_REFUSE, roles, 0, on, NULL);
}
int fp_clear(fault_proxy *p) {
    return request(p, OP_CLEAR, 0, 0, 0, NULL);
}
int fp_stats_get(fault_proxy *p, fp_stats *out) {
    return request(p, OP_STATS, 0, 0, 0, out);
}
int fp_retarget(fault_proxy *p, int target_port) {
    return request(p, OP_RETARGET, 0, 0, target_port, NULL);
}
