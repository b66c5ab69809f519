/* SPDX-License-Identifier: MIT */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* prctl */
#endif

#include "dns_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
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
    OP_SET = 1,
    OP_FORGET,
    OP_DELAY,
    OP_QUERIES,
    OP_TTL
};

#define NAME_MAX_ 256
#define ADDRS_MAX 512

typedef struct ctl_msg {
    int op, value;
    char name[NAME_MAX_];
    char addrs[ADDRS_MAX];
} ctl_msg;

/* ---- the server's state (in the child) ---- */

#define NAMES 32
#define ADDRS_PER_NAME 8
#define PENDING 256
#define PACKET_MAX 512

typedef struct addr {
    int family; /* AF_INET or AF_INET6 */
    unsigned char bytes[16];
} addr;

typedef struct entry {
    char name[NAME_MAX_]; /* lower case, no final dot; "" for a free slot */
    int known;            /* in the table (else only counted) */
    addr addrs[ADDRS_PER_NAME];
    int naddrs;
    long queries;
} entry;

typedef struct pending {
    int64_t due;
    struct sockaddr_in to;
    unsigned char buf[PACKET_MAX];
    size_t len;
} pending;

static entry names[NAMES];
static pending queue[PENDING];
static int nqueue;
static int delay_ms;
static unsigned ttl_s;

static int64_t now_ms(void) {
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* name's entry; with make, a new one when there is none (NULL when full). */
static entry *entry_of(const char *name, int make) {
    entry *free_slot = NULL;

    for (int i = 0; i < NAMES; i++) {
        if (names[i].name[0] == '\0') {
            if (free_slot == NULL)
                free_slot = &names[i];
        } else if (strcasecmp(names[i].name, name) == 0) {
            return &names[i];
        }
    }
    if (!make || free_slot == NULL)
        return NULL;
    memset(free_slot, 0, sizeof(*free_slot));
    snprintf(free_slot->name, sizeof(free_slot->name), "%s", name);
    return free_slot;
}

static int set_name(const char *name, const char *list) {
    entry *e = entry_of(name, 1);
    char copy[ADDRS_MAX], *tok, *save = NULL;

    if (e == NULL)
        return -1;
    e->known = 1;
    e->naddrs = 0;
    snprintf(copy, sizeof(copy), "%s", list);
    for (tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        addr *a = &e->addrs[e->naddrs];
        if (e->naddrs == ADDRS_PER_NAME)
            return -1;
        if (inet_pton(AF_INET, tok, a->bytes) == 1)
            a->family = AF_INET;
        else if (inet_pton(AF_INET6, tok, a->bytes) == 1)
            a->family = AF_INET6;
        else
            return -1;
        e->naddrs++;
    }
    return 0;
}

/* The question of a query: its name (lower case, dotted), type, and where
 * the question ends. 0, or -1 for a packet we do not answer. */
static int parse_question(const unsigned char *p, size_t len, char *name, int *type, size_t *end) {
    size_t at = 12, out = 0;

    if (len < 12 || (p[2] & 0x80) != 0 || ((p[4] << 8) | p[5]) < 1)
        return -1;
    for (;;) {
        size_t l;
        if (at >= len)
            return -1;
        l = p[at++];
        if (l == 0)
            break;
        if (l > 63 || at + l > len || out + l + 2 > NAME_MAX_)
            return -1;
        if (out > 0)
            name[out++] = '.';
        for (size_t i = 0; i < l; i++)
            name[out++] = (char)(p[at + i] >= 'A' && p[at + i] <= 'Z' ? p[at + i] + 32 : p[at + i]);
        at += l;
    }
    name[out] = '\0';
    if (at + 4 > len)
        return -1;
    *type = (p[at] << 8) | p[at + 1];
    *end = at + 4;
    return 0;
}

static void put16(unsigned char *p, unsigned v) {
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
}

/* The answer to the query in q, in out. Its length, or 0 for none. */
static size_t answer(const unsigned char *q, size_t qlen, unsigned char *out) {
    char name[NAME_MAX_];
    int type, rcode = 0, count = 0;
    size_t end, len;
    entry *e;

    if (parse_question(q, qlen, name, &type, &end) != 0 || end > PACKET_MAX)
        return 0;
    e = entry_of(name, 1);
    if (e != NULL)
        e->queries++;
    if (e == NULL || !e->known)
        rcode = 3; /* NXDOMAIN */
    /* The header and the question (the query's other sections, an EDNS
     * record say, do not come back). QR, the query's opcode and RD, AA,
     * RA, the rcode. */
    memcpy(out, q, end);
    out[2] = (unsigned char)(0x80 | (q[2] & 0x79) | 0x04);
    out[3] = (unsigned char)(0x80 | rcode);
    put16(out + 4, 1);
    put16(out + 8, 0);
    put16(out + 10, 0);
    len = end;
    for (int i = 0; rcode == 0 && i < e->naddrs; i++) {
        const addr *a = &e->addrs[i];
        size_t size = a->family == AF_INET ? 4 : 16;
        if ((type == 1 && a->family != AF_INET) || (type == 28 && a->family != AF_INET6) ||
            (type != 1 && type != 28) || len + 12 + size > PACKET_MAX)
            continue;
        put16(out + len, 0xC00C); /* the name: a pointer to the question's */
        put16(out + len + 2, (unsigned)type);
        put16(out + len + 4, 1); /* IN */
        put16(out + len + 6, ttl_s >> 16);
        put16(out + len + 8, ttl_s & 0xFFFF);
        put16(out + len + 10, (unsigned)size);
        memcpy(out + len + 12, a->bytes, size);
        len += 12 + size;
        count++;
    }
    put16(out + 6, (unsigned)count);
    return len;
}

static void on_query(int udp) {
    unsigned char in[PACKET_MAX];
    struct sockaddr_in from;
    socklen_t flen = sizeof(from);
    ssize_t n = recvfrom(udp, in, sizeof(in), 0, (struct sockaddr *)&from, &flen);
    pending *p;

    if (n <= 0 || nqueue == PENDING)
        return;
    p = &queue[nqueue];
    p->len = answer(in, (size_t)n, p->buf);
    if (p->len == 0)
        return;
    p->to = from;
    p->due = now_ms() + delay_ms;
    nqueue++;
}

/* Sends the answers that are due; the time left to the next, or -1. */
static int send_due(int udp) {
    int64_t now = now_ms(), next = -1;
    int i = 0;

    while (i < nqueue) {
        if (queue[i].due <= now) {
            (void)sendto(udp, queue[i].buf, queue[i].len, 0, (struct sockaddr *)&queue[i].to,
                         sizeof(queue[i].to));
            memmove(&queue[i], &queue[i + 1], (size_t)(nqueue - i - 1) * sizeof(queue[0]));
            nqueue--;
        } else {
            if (next < 0 || queue[i].due - now < next)
                next = queue[i].due - now;
            i++;
        }
    }
    return (int)next;
}

static long on_ctl(const ctl_msg *m) {
    entry *e;

    switch (m->op) {
    case OP_SET:
        return set_name(m->name, m->addrs);
    case OP_FORGET:
        if ((e = entry_of(m->name, 0)) != NULL) {
            e->known = 0;
            e->naddrs = 0;
        }
        return 0;
    case OP_DELAY:
        delay_ms = m->value;
        return 0;
    case OP_TTL:
        ttl_s = (unsigned)m->value;
        return 0;
    case OP_QUERIES:
        return (e = entry_of(m->name, 0)) != NULL ? e->queries : 0;
    default:
        return -1;
    }
}

static void serve(int udp, int ctl) {
    for (;;) {
        struct pollfd pf[2] = {{ctl, POLLIN, 0}, {udp, POLLIN, 0}};
        int wait = send_due(udp);

        if (poll(pf, 2, wait) < 0 && errno != EINTR)
            _exit(3);
        if (pf[0].revents) {
            ctl_msg m;
            long rc;
            if (recv(ctl, &m, sizeof(m), 0) != (ssize_t)sizeof(m))
                _exit(0); /* the test is gone */
            rc = on_ctl(&m);
            if (send(ctl, &rc, sizeof(rc), MSG_NOSIGNAL) != (ssize_t)sizeof(rc))
                _exit(0);
        }
        if (pf[1].revents & POLLIN)
            on_query(udp);
    }
}

/* ---- the test's side ---- */

int test_dns_start(test_dns *d) {
    return test_dns_start_at(d, "127.0.0.1");
}

int test_dns_start_at(test_dns *d, const char *ipv4) {
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    int sv[2], udp;
    pid_t pid;

    memset(d, 0, sizeof(*d));
    d->ctl = -1;
    udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    if (inet_pton(AF_INET, ipv4, &sa.sin_addr) != 1) {
        fprintf(stderr, "test_dns: %s is not an IPv4 address\n", ipv4);
        if (udp >= 0)
            close(udp);
        return -1;
    }
    if (udp < 0 || bind(udp, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        getsockname(udp, (struct sockaddr *)&sa, &len) != 0) {
        perror("test_dns: udp socket");
        if (udp >= 0)
            close(udp);
        return -1;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        perror("test_dns: socketpair");
        close(udp);
        return -1;
    }
    pid = fork();
    if (pid < 0) {
        perror("test_dns: fork");
        close(udp);
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == 1)
            _exit(0);
        close(sv[0]);
        serve(udp, sv[1]);
        _exit(0);
    }
    close(udp);
    close(sv[1]);
    d->pid = pid;
    d->ctl = sv[0];
    d->port = ntohs(sa.sin_port);
    snprintf(d->servers, sizeof(d->servers), "%s:%d", ipv4, d->port);
    return 0;
}

void test_dns_stop(test_dns *d) {
    if (d->pid > 0) {
        kill(d->pid, SIGKILL);
        while (waitpid(d->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        d->pid = 0;
    }
    if (d->ctl > 0)
        close(d->ctl);
    d->ctl = -1;
}

static long ask(test_dns *d, int op, const char *name, const char *addrs, int value) {
    ctl_msg m;
    long rc;

    if (d->pid <= 0)
        return -1;
    memset(&m, 0, sizeof(m));
    m.op = op;
    m.value = value;
    if (name != NULL)
        snprintf(m.name, sizeof(m.name), "%s", name);
    if (addrs != NULL)
        snprintf(m.addrs, sizeof(m.addrs), "%s", addrs);
    if (send(d->ctl, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m) ||
        recv(d->ctl, &rc, sizeof(rc), 0) != (ssize_t)sizeof(rc))
        return -1;
    return rc;
}

int test_dns_set(test_dns *d, const char *name, const char *addrs) {
    return (int)ask(d, addrs != NULL ? OP_SET : OP_FORGET, name, addrs, 0);
}

int test_dns_delay(test_dns *d, int ms) {
    return (int)ask(d, OP_DELAY, NULL, NULL, ms);
}

int test_dns_ttl(test_dns *d, int seconds) {
    return (int)ask(d, OP_TTL, NULL, NULL, seconds);
}

long test_dns_queries(test_dns *d, const char *name) {
    return ask(d, OP_QUERIES, name, NULL, 0);
}
