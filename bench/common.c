/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* sched_setaffinity, CPU_SET */

#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <leash/adapters/libev.h>

#include "dialect/dialect.h" /* leash's scripts and the commands that call them */
#include "lockdata.h"        /* test_cmd_args, test_cmd_run */

/* ---- time and resources ---- */

int64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* User + system CPU time of RUSAGE_SELF or RUSAGE_CHILDREN, in ns. */
static int64_t rusage_ns(int who) {
    struct rusage ru;
    if (getrusage(who, &ru) != 0)
        return 0;
    return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000 +
           ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

int64_t bench_cpu_ns(void) {
    return rusage_ns(RUSAGE_SELF);
}

int64_t bench_rss_bytes(void) {
    long long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    int ok;

    if (f == NULL)
        return -1;
    ok = fscanf(f, "%lld %lld", &size, &resident) == 2;
    fclose(f);
    return ok ? (int64_t)resident * sysconf(_SC_PAGESIZE) : -1;
}

/* ---- CPUs ---- */

static int pin_self(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set);
}

static void describe_affinity(pid_t pid, char *out, size_t cap) {
    cpu_set_t set;
    size_t len = 0;
    int cpu;

    out[0] = '\0';
    if (sched_getaffinity(pid, sizeof set, &set) != 0) {
        snprintf(out, cap, "?");
        return;
    }
    for (cpu = 0; cpu < CPU_SETSIZE && len + 8 < cap; cpu++)
        if (CPU_ISSET(cpu, &set))
            len += (size_t)snprintf(out + len, cap - len, "%s%d", len ? "," : "", cpu);
}

/* Chooses the server's and the client's CPUs (the first two this process
 * may use) when pin is 1 and there are two, and pins this process to the
 * server's, so that the servers it starts next inherit it. *allowed keeps
 * the mask to restore; *have_mask says whether there is one. */
static void pin_for_server(int pin, bench_cpus *cpus, cpu_set_t *allowed, int *have_mask) {
    *have_mask = sched_getaffinity(0, sizeof *allowed, allowed) == 0;
    cpus->server = cpus->client = -1;
    if (pin && *have_mask && CPU_COUNT(allowed) >= 2) {
        int cpu;
        for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
            if (!CPU_ISSET(cpu, allowed))
                continue;
            if (cpus->server < 0)
                cpus->server = cpu;
            else if (cpus->client < 0)
                cpus->client = cpu;
        }
        /* The server inherits this mask at fork. */
        if (pin_self(cpus->server) != 0)
            cpus->server = cpus->client = -1;
    }
}

/* Once the servers run: this process moves to the client's CPU (started
 * 1), or back to its old mask (started 0). */
static void pin_for_client(bench_cpus *cpus, const cpu_set_t *allowed, int have_mask, int started) {
    if (!started || (cpus->server >= 0 && pin_self(cpus->client) != 0)) {
        if (have_mask)
            sched_setaffinity(0, sizeof *allowed, allowed);
        cpus->client = -1;
    }
}

int bench_start_server(test_redis *r, const test_redis_config *cfg, int pin, bench_cpus *cpus) {
    cpu_set_t allowed;
    int have_mask;

    pin_for_server(pin, cpus, &allowed, &have_mask);
    if (test_redis_start(r, cfg) != 0) {
        pin_for_client(cpus, &allowed, have_mask, 0);
        return -1;
    }
    pin_for_client(cpus, &allowed, have_mask, 1);
    describe_affinity(r->pid, cpus->server_desc, sizeof cpus->server_desc);
    describe_affinity(0, cpus->client_desc, sizeof cpus->client_desc);
    return 0;
}

void bench_print_cpus(const bench_cpus *cpus) {
    printf("redis-server on CPU %s, benchmark on CPU %s%s.\n", cpus->server_desc, cpus->client_desc,
           cpus->server < 0 ? " (not pinned)" : "");
}

/* Fields of one CPU's line in /proc/stat, in ms: [7] is steal; busy is
 * user + nice + system + irq + softirq. 0, or -1 if unknown. */
static int cpu_times(int cpu, int64_t *steal, int64_t *busy) {
    char line[512], name[16];
    FILE *f;
    int rc = -1;
    long hz = sysconf(_SC_CLK_TCK);

    if (cpu < 0 || hz <= 0 || (f = fopen("/proc/stat", "r")) == NULL)
        return -1;
    snprintf(name, sizeof name, "cpu%d ", cpu);
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long long v[8];
        if (strncmp(line, name, strlen(name)) != 0)
            continue;
        if (sscanf(line + strlen(name), "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
                   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) == 8) {
            *steal = (int64_t)(v[7] * 1000ULL / (unsigned long long)hz);
            *busy =
                (int64_t)((v[0] + v[1] + v[2] + v[5] + v[6]) * 1000ULL / (unsigned long long)hz);
            rc = 0;
        }
        break;
    }
    fclose(f);
    return rc;
}

int64_t bench_steal_ms(int cpu) {
    int64_t steal, busy;
    return cpu_times(cpu, &steal, &busy) == 0 ? steal : -1;
}

void bench_steal_begin(const bench_cpus *cpus, bench_steal *s) {
    if (cpu_times(cpus->server, &s->server_ms, &s->server_busy_ms) != 0)
        s->server_ms = s->server_busy_ms = -1;
    if (cpu_times(cpus->client, &s->client_ms, &s->client_busy_ms) != 0)
        s->client_ms = s->client_busy_ms = -1;
    s->wall_ns = bench_now_ns();
}

void bench_steal_end(const bench_cpus *cpus, bench_steal *s) {
    int64_t steal, busy;

    s->wall_ns = bench_now_ns() - s->wall_ns;
    if (s->server_ms >= 0 && cpu_times(cpus->server, &steal, &busy) == 0) {
        s->server_ms = steal - s->server_ms;
        s->server_busy_ms = busy - s->server_busy_ms;
    } else {
        s->server_ms = s->server_busy_ms = -1;
    }
    if (s->client_ms >= 0 && cpu_times(cpus->client, &steal, &busy) == 0) {
        s->client_ms = steal - s->client_ms;
        s->client_busy_ms = busy - s->client_busy_ms;
    } else {
        s->client_ms = s->client_busy_ms = -1;
    }
}

void bench_print_steal(const bench_steal *s) {
    double wall_ms = (double)s->wall_ns / 1e6;

    if (s->server_ms < 0 && s->client_ms < 0)
        return;
    printf("; CPU steal %lld ms (server CPU) + %lld ms (benchmark CPU)", (long long)s->server_ms,
           (long long)s->client_ms);
    if (wall_ms > 0. && s->server_busy_ms >= 0 && s->client_busy_ms >= 0)
        printf("; CPUs busy %.0f%% + %.0f%% (every process on them)",
               100. * (double)s->server_busy_ms / wall_ms,
               100. * (double)s->client_busy_ms / wall_ms);
}

/* ---- Redis ---- */

redisContext *bench_connect(int port) {
    struct timeval tv = {3, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);

    if (c != NULL && c->err) {
        redisFree(c);
        return NULL;
    }
    if (c != NULL)
        redisSetTimeout(c, tv);
    return c;
}

static redisReply *info(redisContext *c, const char *section) {
    redisReply *r;

    if (c == NULL)
        return NULL;
    r = redisCommand(c, "INFO %s", section);
    if (r != NULL && r->type != REDIS_REPLY_STRING) {
        freeReplyObject(r);
        r = NULL;
    }
    return r;
}

/* Lines "cmdstat_<name>:calls=N,usec=U,...". */
int bench_cmdstats_read(redisContext *c, bench_cmdstats *out) {
    redisReply *r = info(c, "commandstats");
    const char *p;

    out->n = 0;
    if (r == NULL)
        return -1;
    for (p = strstr(r->str, "cmdstat_"); p != NULL && out->n < BENCH_MAX_CMDSTATS;
         p = strstr(p, "cmdstat_")) {
        const char *colon, *calls, *usec, *eol;
        size_t len;

        p += 8;
        colon = strchr(p, ':');
        eol = strchr(p, '\n');
        if (colon == NULL || (eol != NULL && colon > eol))
            break;
        len = (size_t)(colon - p);
        if (len >= sizeof out->cmd[0].name)
            continue;
        memcpy(out->cmd[out->n].name, p, len);
        out->cmd[out->n].name[len] = '\0';
        calls = strstr(colon, "calls=");
        usec = strstr(colon, "usec=");
        out->cmd[out->n].calls = calls && (!eol || calls < eol) ? strtoll(calls + 6, NULL, 10) : 0;
        out->cmd[out->n].usec = usec && (!eol || usec < eol) ? strtoll(usec + 5, NULL, 10) : 0;
        out->n++;
    }
    freeReplyObject(r);
    return 0;
}

static int find_cmd(const bench_cmdstats *s, const char *name) {
    int i;
    for (i = 0; i < s->n; i++)
        if (strcmp(s->cmd[i].name, name) == 0)
            return i;
    return -1;
}

long long bench_cmdstats_calls(const bench_cmdstats *s, const char *name) {
    int i = find_cmd(s, name);
    return i < 0 ? 0 : s->cmd[i].calls;
}

long long bench_cmdstats_usec(const bench_cmdstats *s, const char *name) {
    int i = find_cmd(s, name);
    return i < 0 ? 0 : s->cmd[i].usec;
}

int bench_cmdstats_counted(const char *name) {
    return strcmp(name, "info") != 0 && strcmp(name, "cluster|info") != 0 &&
           strcmp(name, "replconf") != 0;
}

long long bench_cmdstats_total(const bench_cmdstats *s) {
    long long sum = 0;
    int i;
    for (i = 0; i < s->n; i++)
        if (bench_cmdstats_counted(s->cmd[i].name))
            sum += s->cmd[i].calls;
    return sum;
}

void bench_cmdstats_delta(const bench_cmdstats *before, const bench_cmdstats *after,
                          bench_cmdstats *out) {
    int i;

    out->n = 0;
    for (i = 0; i < after->n; i++) {
        int j = find_cmd(before, after->cmd[i].name);
        out->cmd[out->n] = after->cmd[i];
        if (j >= 0) {
            out->cmd[out->n].calls -= before->cmd[j].calls;
            out->cmd[out->n].usec -= before->cmd[j].usec;
        }
        out->n++;
    }
}

static int by_calls_desc(const void *a, const void *b) {
    const bench_cmdstat *x = a, *y = b;
    if (x->calls != y->calls)
        return (x->calls < y->calls) - (x->calls > y->calls);
    return strcmp(x->name, y->name);
}

void bench_print_calls(const bench_cmdstats *d, double per, const char *lead) {
    bench_cmdstats sorted = *d;
    int i, any = 0;

    qsort(sorted.cmd, (size_t)sorted.n, sizeof sorted.cmd[0], by_calls_desc);
    for (i = 0; i < sorted.n; i++) {
        double v = (double)sorted.cmd[i].calls / per;
        if (!bench_cmdstats_counted(sorted.cmd[i].name) || sorted.cmd[i].calls <= 0 || !(per > 0.))
            continue;
        printf("%s%s %.*f", any++ ? ", " : lead, sorted.cmd[i].name, v < 0.01 ? 4 : 2, v);
    }
    if (!any)
        printf("%sn/a", lead);
}

/* The number after "\n<name>" in an INFO text, or `absent`. */
static double info_number(const char *text, const char *name, double absent) {
    char needle[64];
    const char *p;

    snprintf(needle, sizeof needle, "\n%s", name);
    p = strstr(text, needle);
    return p != NULL ? strtod(p + strlen(needle), NULL) : absent;
}

double bench_server_cpu_s(redisContext *c) {
    redisReply *r = info(c, "cpu");
    double sys, user;

    if (r == NULL)
        return -1.;
    sys = info_number(r->str, "used_cpu_sys:", -1.);
    user = info_number(r->str, "used_cpu_user:", -1.);
    freeReplyObject(r);
    return sys >= 0. && user >= 0. ? sys + user : -1.;
}

long long bench_used_memory(redisContext *c) {
    redisReply *r = info(c, "memory");
    long long v;

    if (r == NULL)
        return -1;
    v = (long long)info_number(r->str, "used_memory:", -1.);
    freeReplyObject(r);
    return v;
}

long long bench_db_keys(redisContext *c) {
    redisReply *r = info(c, "keyspace");
    long long v;

    if (r == NULL)
        return -1;
    /* An empty db has no line at all. */
    v = (long long)info_number(r->str, "db0:keys=", 0.);
    freeReplyObject(r);
    return v;
}

void bench_flushall(test_redis *r) {
    redisReply *reply = test_redis_cmd(r, "FLUSHALL");
    if (reply != NULL)
        freeReplyObject(reply);
}

/* ---- one server or a Redis Cluster ---- */

void bench_target_single(bench_target *t, int port) {
    memset(t, 0, sizeof *t);
    t->masters = 1;
    t->port[0] = port;
    t->pubsub = LEASH_PUBSUB_AUTO;
}

const char *bench_target_name(const bench_target *t) {
    if (t->redlock)
        return "Redlock, 5 servers";
    if (!t->cluster)
        return "one server";
    return t->pubsub == LEASH_PUBSUB_CLASSIC ? "cluster, classic pub/sub"
                                             : "cluster, sharded pub/sub";
}

int bench_start_cluster(test_cluster *c, const bench_cpus *cpus, bench_target *t) {
    test_cluster_config cfg;
    cpu_set_t allowed;
    int have_mask = sched_getaffinity(0, sizeof allowed, &allowed) == 0, rc, i;

    memset(c, 0, sizeof *c); /* test_cluster_stop is safe on it whatever happens */
    memset(&cfg, 0, sizeof cfg);
    cfg.masters = 3;
    cfg.replicas = 1;
    cfg.node_timeout_ms = 5000;
    /* Every node inherits the server's CPU at fork; the harness' own
     * waiting runs there meanwhile. */
    if (cpus->server >= 0 && pin_self(cpus->server) != 0) {
        fprintf(stderr, "could not pin to CPU %d for the cluster\n", cpus->server);
        return -1;
    }
    rc = test_cluster_start(c, &cfg);
    if (cpus->server >= 0 && (cpus->client < 0 || pin_self(cpus->client) != 0) && have_mask)
        sched_setaffinity(0, sizeof allowed, &allowed);
    if (rc != 0) {
        fprintf(stderr, "the Redis Cluster did not start\n");
        return -1;
    }
    memset(t, 0, sizeof *t);
    t->cluster = 1;
    t->masters = cfg.masters;
    t->replicas = cfg.masters * cfg.replicas;
    t->pubsub = LEASH_PUBSUB_AUTO;
    /* The harness starts the masters first, then the replicas. */
    for (i = 0; i < c->count && i < BENCH_MAX_NODES; i++)
        t->port[i] = test_cluster_port(c, i);
    return 0;
}

int bench_cluster_intact(test_cluster *c, const bench_target *t) {
    int i;

    for (i = 0; i < t->masters + t->replicas; i++) {
        int want = i < t->masters ? TEST_CLUSTER_MASTER : TEST_CLUSTER_REPLICA;
        if (test_cluster_role(c, i) != want)
            return 0;
    }
    return 1;
}

int bench_start_redlock(bench_redlock *rl, const bench_cpus *cpus, bench_target *t) {
    cpu_set_t allowed;
    int have_mask = sched_getaffinity(0, sizeof allowed, &allowed) == 0, rc = 0, i;

    memset(rl, 0, sizeof *rl); /* bench_stop_redlock is safe on it whatever happens */
    /* Every server inherits the server's CPU at fork. */
    if (cpus->server >= 0 && pin_self(cpus->server) != 0) {
        fprintf(stderr, "could not pin to CPU %d for the Redlock servers\n", cpus->server);
        return -1;
    }
    for (i = 0; i < BENCH_REDLOCK_N && rc == 0; i++)
        rc = test_redis_start(&rl->s[i], NULL);
    if (cpus->server >= 0 && (cpus->client < 0 || pin_self(cpus->client) != 0) && have_mask)
        sched_setaffinity(0, sizeof allowed, &allowed);
    if (rc != 0) {
        fprintf(stderr, "the Redlock servers did not start\n");
        bench_stop_redlock(rl);
        return -1;
    }
    memset(t, 0, sizeof *t);
    t->redlock = 1;
    t->masters = BENCH_REDLOCK_N;
    t->pubsub = LEASH_PUBSUB_AUTO;
    for (i = 0; i < BENCH_REDLOCK_N; i++)
        t->port[i] = rl->s[i].port;
    return 0;
}

void bench_stop_redlock(bench_redlock *rl) {
    int i;

    for (i = 0; i < BENCH_REDLOCK_N; i++)
        test_redis_stop(&rl->s[i]);
}

int bench_redlock_intact(bench_redlock *rl) {
    int i;

    for (i = 0; i < BENCH_REDLOCK_N; i++) {
        redisContext *c = rl->s[i].pid > 0 ? bench_connect(rl->s[i].port) : NULL;
        redisReply *r = c != NULL ? redisCommand(c, "PING") : NULL;
        int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
        if (r != NULL)
            freeReplyObject(r);
        if (c != NULL)
            redisFree(c);
        if (!ok)
            return 0;
    }
    return 1;
}

int bench_admin_open(bench_admin *a, const bench_target *t) {
    int i;

    memset(a, 0, sizeof *a);
    a->masters = t->masters;
    for (i = 0; i < t->masters + t->replicas && i < BENCH_MAX_NODES; i++) {
        if ((a->c[i] = bench_connect(t->port[i])) == NULL) {
            bench_admin_close(a);
            return -1;
        }
        a->count = i + 1;
    }
    return 0;
}

void bench_admin_close(bench_admin *a) {
    int i;

    for (i = 0; i < a->count; i++)
        if (a->c[i] != NULL)
            redisFree(a->c[i]);
    memset(a, 0, sizeof *a);
}

int bench_admin_cmdstats(bench_admin *a, bench_cmdstats *out) {
    bench_cmdstats one;
    int i, j;

    out->n = 0;
    for (i = 0; i < a->masters; i++) {
        if (bench_cmdstats_read(a->c[i], &one) != 0)
            return -1;
        for (j = 0; j < one.n; j++) {
            int k = find_cmd(out, one.cmd[j].name);
            if (k < 0) {
                if (out->n == BENCH_MAX_CMDSTATS)
                    continue;
                k = out->n++;
                out->cmd[k] = one.cmd[j];
                continue;
            }
            out->cmd[k].calls += one.cmd[j].calls;
            out->cmd[k].usec += one.cmd[j].usec;
        }
    }
    return 0;
}

double bench_admin_cpu_s(bench_admin *a, int replicas) {
    double sum = 0.;
    int i;

    for (i = replicas ? a->masters : 0; i < (replicas ? a->count : a->masters); i++) {
        double v = bench_server_cpu_s(a->c[i]);
        if (v < 0.)
            return -1.;
        sum += v;
    }
    return sum;
}

/* read() of every master summed, -1 when one fails. */
static long long sum_masters(bench_admin *a, long long (*read)(redisContext *c)) {
    long long sum = 0, v;
    int i;

    for (i = 0; i < a->masters; i++) {
        if ((v = read(a->c[i])) < 0)
            return -1;
        sum += v;
    }
    return sum;
}

long long bench_admin_used_memory(bench_admin *a) {
    return sum_masters(a, bench_used_memory);
}

long long bench_admin_db_keys(bench_admin *a) {
    return sum_masters(a, bench_db_keys);
}

void bench_admin_flushall(bench_admin *a) {
    int i;

    for (i = 0; i < a->masters; i++) {
        redisReply *r = redisCommand(a->c[i], "FLUSHALL");
        if (r != NULL)
            freeReplyObject(r);
    }
}

int bench_admin_bus(bench_admin *a, bench_bus *out) {
    int i;

    memset(out, 0, sizeof *out);
    for (i = 0; i < a->count; i++) {
        redisReply *r = redisCommand(a->c[i], "CLUSTER INFO");
        if (r == NULL || r->type != REDIS_REPLY_STRING) {
            if (r != NULL)
                freeReplyObject(r);
            return -1;
        }
        out->publish_sent +=
            (long long)info_number(r->str, "cluster_stats_messages_publish_sent:", 0.);
        out->publish_received +=
            (long long)info_number(r->str, "cluster_stats_messages_publish_received:", 0.);
        out->shard_sent +=
            (long long)info_number(r->str, "cluster_stats_messages_publishshard_sent:", 0.);
        out->shard_received +=
            (long long)info_number(r->str, "cluster_stats_messages_publishshard_received:", 0.);
        freeReplyObject(r);
    }
    out->ok = 1;
    return 0;
}

void bench_bus_delta(const bench_bus *before, const bench_bus *after, bench_bus *out) {
    out->ok = before->ok && after->ok;
    out->publish_sent = after->publish_sent - before->publish_sent;
    out->publish_received = after->publish_received - before->publish_received;
    out->shard_sent = after->shard_sent - before->shard_sent;
    out->shard_received = after->shard_received - before->shard_received;
}

/* ---- leash's scripts ---- */

int bench_load_scripts(redisContext *c, bench_scripts *s) {
    const leash__dialect *d = &leash__dialect_leash;
    redisReply *info = redisCommand(c, "INFO server");
    int i;

    /* The variant of each script that the library sends to this server. */
    s->version = 0;
    if (info != NULL && info->type == REDIS_REPLY_STRING)
        s->version = leash__info_version(info->str);
    if (info != NULL)
        freeReplyObject(info);
    leash__dialects_init();
    for (i = 0; i < d->nscripts; i++) {
        const leash__script *variant = leash__script_for(d->scripts[i], s->version);
        redisReply *r = redisCommand(c, "SCRIPT LOAD %b", variant->src, variant->len);
        int ok = r != NULL && r->type == REDIS_REPLY_STRING;
        if (r != NULL)
            freeReplyObject(r);
        if (!ok)
            return -1;
    }
    return 0;
}

int bench_start_with_scripts(const char *prog, test_redis *r, int pin, bench_cpus *cpus,
                             redisContext **admin, bench_scripts *s) {
    if (bench_start_server(r, NULL, pin, cpus) != 0) {
        fprintf(stderr, "%s: could not start redis-server\n", prog);
        return -1;
    }
    *admin = bench_connect(r->port);
    if (*admin == NULL || bench_load_scripts(*admin, s) != 0) {
        fprintf(stderr, "%s: could not load leash's scripts\n", prog);
        if (*admin != NULL)
            redisFree(*admin);
        test_redis_stop(r);
        return -1;
    }
    return 0;
}

/* The names of the lock at key whose releases are announced on channel,
 * for the dialect's commands: a channel of the benchmark's choice (leash's
 * own holds a NUL, which no command-line argument can). */
static leash__names names_of(const char *key, const char *channel) {
    leash__names n;

    memset(&n, 0, sizeof n);
    n.key = (char *)key;
    n.key_len = strlen(key);
    n.channel = (char *)channel;
    n.channel_len = strlen(channel);
    return n;
}

/* cmd (freed here) as c: its script's variant for s->version, each of
 * its arguments copied. -1 when there is none or it does not fit. */
static int call_of(bench_call *c, const bench_scripts *s, leash__cmd *cmd) {
    redisReply *args;
    size_t i;
    int rc = 0;

    if (cmd == NULL)
        return -1;
    leash__script_retarget(cmd->buf, cmd->len, leash__script_for(cmd->script, s->version));
    args = test_cmd_args(cmd->buf, cmd->len);
    leash__cmd_free(cmd);
    c->argc = 0;
    c->used = 0;
    for (i = 0; args != NULL && i < args->elements && rc == 0; i++) {
        const redisReply *a = args->element[i];
        if ((size_t)c->argc + 1 >= sizeof c->argv / sizeof c->argv[0] ||
            a->len + 1 > sizeof c->pool - c->used || memchr(a->str, '\0', a->len) != NULL) {
            rc = -1;
            break;
        }
        memcpy(c->pool + c->used, a->str, a->len + 1);
        c->argv[c->argc++] = c->pool + c->used;
        c->used += a->len + 1;
    }
    c->argv[c->argc] = NULL;
    if (args != NULL)
        freeReplyObject(args);
    return args != NULL ? rc : -1;
}

int bench_call_acquire(bench_call *c, const bench_scripts *s, const char *key, const char *token,
                       long lease_ms) {
    leash__names n = names_of(key, "");

    return call_of(c, s, leash__dialect_leash.acquire_cmd(&n, token, lease_ms, 1, 1, 0, 0));
}

int bench_call_release(bench_call *c, const bench_scripts *s, const char *key, const char *token,
                       const char *channel) {
    leash__names n = names_of(key, channel);

    return call_of(c, s, leash__dialect_leash.release_cmd(&n, token, 0, 0, 0));
}

int bench_call_renew(bench_call *c, const bench_scripts *s, const char *const *keys, int n,
                     const char *token, long lease_ms, const char *channel) {
    leash__names names[BENCH_RENEW_BATCH];
    leash__renew_item items[BENCH_RENEW_BATCH];
    int i;

    if (n < 1 || n > BENCH_RENEW_BATCH)
        return -1;
    for (i = 0; i < n; i++) {
        names[i] = names_of(keys[i], channel);
        items[i] = (leash__renew_item){&names[i], token, lease_ms, 0};
    }
    return call_of(c, s, leash__dialect_leash.renew_cmd(items, (size_t)n, 0, 0));
}

/* Copies the lock at KEYS[1] (DUMP, RESTORE: whatever its layout) to
 * ARGV[1] .. i as 12 digits for i in [ARGV[2], ARGV[3]), each with a TTL
 * of ARGV[4] ms. */
static const char copy_lua[] =
    "local v = redis.call('dump', KEYS[1])\n"
    "for i = tonumber(ARGV[2]), tonumber(ARGV[3]) - 1 do\n"
    "  redis.call('restore', ARGV[1] .. string.format('%012d', i), ARGV[4], v, 'REPLACE')\n"
    "end\n"
    "return 1\n";

int bench_populate_holds(redisContext *c, const char *prefix, long n, const char *token,
                         long ttl_ms) {
    char first[256];
    leash__names names;
    leash__answer granted = {.status = LEASH_ENOMEM};
    redisReply *r;
    long from;
    int ok;

    if (strlen(token) != BENCH_TOKEN_LEN || n < 1 ||
        (size_t)snprintf(first, sizeof first, "%s%012d", prefix, 0) >= sizeof first)
        return -1;
    /* The first by leash's own acquire; the rest copies of it. */
    names = names_of(first, "");
    r = test_cmd_run(c, leash__dialect_leash.acquire_cmd(&names, token, ttl_ms, 1, 1, 0, 0));
    if (r != NULL) /* the dialect reads its answer */
        leash__dialect_leash.acquire->parse(r, &granted, 1, NULL, first);
    ok = r != NULL && granted.status == LEASH_OK && granted.kind == LEASH__ANS_GRANTED;
    if (r != NULL)
        freeReplyObject(r);
    for (from = 1; ok && from < n; from += 50000) {
        long to = from + 50000 < n ? from + 50000 : n;
        r = redisCommand(c, "EVAL %s 1 %s %s %ld %ld %ld", copy_lua, first, prefix, from, to,
                         ttl_ms);
        ok = r != NULL && r->type == REDIS_REPLY_INTEGER;
        if (r != NULL)
            freeReplyObject(r);
    }
    return ok ? 0 : -1;
}

/* Every command leash's scripts run inside the server (see
 * bench_script_runs): a client of leash never sends these itself. */
static const char *const inner_cmds[] = {"time",    "set",  "get",     "del",
                                         "pexpire", "pttl", "publish", "spublish"};

void bench_script_runs_of(const bench_cmdstats *d, bench_script_runs *out) {
    size_t i;

    memset(out, 0, sizeof *out);
    out->total = bench_cmdstats_total(d);
    out->scripts = bench_cmdstats_calls(d, "evalsha") + bench_cmdstats_calls(d, "eval");
    out->script_usec = bench_cmdstats_usec(d, "evalsha") + bench_cmdstats_usec(d, "eval");
    for (i = 0; i < sizeof inner_cmds / sizeof inner_cmds[0]; i++)
        out->inner += bench_cmdstats_calls(d, inner_cmds[i]);
    out->sent = out->total - out->inner;
    out->acquires = bench_cmdstats_calls(d, "time");
    out->busy = bench_cmdstats_calls(d, "pttl");
    out->grants = out->acquires - out->busy;
    out->deletes = bench_cmdstats_calls(d, "del");
    out->publishes = bench_cmdstats_calls(d, "publish") + bench_cmdstats_calls(d, "spublish");
    out->renewed = bench_cmdstats_calls(d, "pexpire");
    out->subscribes = bench_cmdstats_calls(d, "subscribe") + bench_cmdstats_calls(d, "ssubscribe");
    out->unsubscribes =
        bench_cmdstats_calls(d, "unsubscribe") + bench_cmdstats_calls(d, "sunsubscribe");
}

const char *bench_script_inner_names(void) {
    static char names[128];
    size_t i, len = 0, k;

    if (names[0] == '\0')
        for (i = 0; i < sizeof inner_cmds / sizeof inner_cmds[0]; i++) {
            if (i > 0 && len + 2 < sizeof names) {
                names[len++] = ',';
                names[len++] = ' ';
            }
            for (k = 0; inner_cmds[i][k] != '\0' && len + 1 < sizeof names; k++)
                names[len++] = (char)(inner_cmds[i][k] - 'a' + 'A');
            names[len] = '\0';
        }
    return names;
}

/* ---- redis-benchmark ---- */

/* CPU time of the reaped children (redis-benchmark runs one at a time). */
static int64_t children_cpu_ns(void) {
    return rusage_ns(RUSAGE_CHILDREN);
}

int bench_have_redis_benchmark(void) {
    const char *path = getenv("PATH");
    char buf[4096];

    while (path != NULL && *path) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        if (len > 0 && len < sizeof buf - 20) {
            snprintf(buf, sizeof buf, "%.*s/redis-benchmark", (int)len, path);
            if (access(buf, X_OK) == 0)
                return 1;
        }
        path = end ? end + 1 : NULL;
    }
    return 0;
}

/* The last 7 quoted fields of a CSV row: rps, avg, min, p50, p95, p99, max
 * (the first field, the test's name, is the whole command line). */
static int parse_rb_row(const char *line, bench_rb *out) {
    const char *q[14];
    const char *p = line + strlen(line);
    double v[7];
    int nq = 0, i;

    while (p > line && nq < 14)
        if (*--p == '"')
            q[13 - nq++] = p;
    if (nq < 14)
        return -1;
    for (i = 0; i < 7; i++) {
        char *end;
        const char *start = q[2 * i] + 1;
        v[i] = strtod(start, &end);
        if (end == start)
            return -1;
    }
    out->rps = v[0];
    out->avg_us = v[1] * 1000.;
    out->min_us = v[2] * 1000.;
    out->p50_us = v[3] * 1000.;
    out->p95_us = v[4] * 1000.;
    out->p99_us = v[5] * 1000.;
    out->max_us = v[6] * 1000.;
    return 0;
}

int bench_redis_benchmark(int port, double timeout_s, const char *const *args, bench_rb *out) {
    const char *argv[1024];
    enum {
        TEXT_MAX = 1 << 18
    }; /* a row repeats the command line */
    char portbuf[16], *text;
    size_t len = 0;
    int argc = 0, fds[2], status = 0, killed = 0;
    int64_t start = bench_now_ns(), deadline = start + (int64_t)(timeout_s * 1e9);
    int64_t cpu0 = children_cpu_ns();
    long requests = 0;
    pid_t pid;
    char *line;

    memset(out, 0, sizeof *out);
    snprintf(portbuf, sizeof portbuf, "%d", port);
    argv[argc++] = "redis-benchmark";
    argv[argc++] = "-h";
    argv[argc++] = "127.0.0.1";
    argv[argc++] = "-p";
    argv[argc++] = portbuf;
    argv[argc++] = "--csv";
    argv[argc++] = "--precision";
    argv[argc++] = "3";
    while (*args != NULL && argc < 1023) {
        if (strcmp(*args, "-n") == 0 && args[1] != NULL)
            requests = strtol(args[1], NULL, 10);
        argv[argc++] = *args++;
    }
    argv[argc] = NULL;

    if ((text = malloc(TEXT_MAX)) == NULL)
        return -1;
    if (pipe(fds) != 0) {
        free(text);
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        free(text);
        return -1;
    }
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(fds[1], 1);
        if (devnull >= 0)
            dup2(devnull, 2);
        close(fds[0]);
        close(fds[1]);
        execvp("redis-benchmark", (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    for (;;) {
        struct pollfd pfd = {fds[0], POLLIN, 0};
        int64_t left = (deadline - bench_now_ns()) / 1000000;
        ssize_t n;

        if (left <= 0) {
            kill(pid, SIGKILL);
            killed = 1;
            break;
        }
        if (poll(&pfd, 1, (int)(left > 1000 ? 1000 : left)) <= 0)
            continue;
        n = read(fds[0], text + len, TEXT_MAX - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
        if (len == TEXT_MAX - 1)
            break;
    }
    close(fds[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    out->seconds = (double)(bench_now_ns() - start) / 1e9;
    if (requests > 0)
        out->cpu_us = (double)(children_cpu_ns() - cpu0) / 1e3 / (double)requests;
    text[len] = '\0';
    if (!killed && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        for (line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
            if (strncmp(line, "\"test\"", 6) != 0 && parse_rb_row(line, out) == 0) {
                out->ok = 1;
                break;
            }
        }
    }
    free(text);
    return out->ok ? 0 : -1;
}

int bench_redis_benchmark_call(int port, double timeout_s, const char *const *opts,
                               const bench_call *call, bench_rb *out) {
    const char *args[64 + sizeof call->argv / sizeof call->argv[0]];
    int n = 0, i;

    while (*opts != NULL && n < 64)
        args[n++] = *opts++;
    for (i = 0; i < call->argc; i++)
        args[n++] = call->argv[i];
    args[n] = NULL;
    return bench_redis_benchmark(port, timeout_s, args, out);
}

int bench_ping_rtt(int port, bench_rb *out) {
    static const char *const args[] = {"-c",    "1",  "-P",         "1", "-n",
                                       "20000", "-t", "ping_mbulk", NULL};

    memset(out, 0, sizeof *out);
    if (!bench_have_redis_benchmark())
        return -1;
    return bench_redis_benchmark(port, 60., args, out);
}

/* ---- leash ---- */

void bench_log_stderr(int level, const char *msg, void *arg) {
    (void)arg;
    fprintf(stderr, "leash[%d] pid %d: %s\n", level, (int)getpid(), msg);
}

leash_client *bench_client_new(struct ev_loop *loop, int port) {
    bench_target t;

    bench_target_single(&t, port);
    return bench_client_new_at(loop, &t);
}

leash_client *bench_client_new_at(struct ev_loop *loop, const bench_target *t) {
    char seed_text[BENCH_MAX_NODES][32];
    const char *seeds[BENCH_MAX_NODES];
    leash_options o;
    leash_client *c;
    int i;

    leash_options_init(&o);
    o.host = "127.0.0.1";
    o.port = t->port[0];
    if (t->cluster) {
        for (i = 0; i < t->masters && i < BENCH_MAX_NODES; i++) {
            snprintf(seed_text[i], sizeof seed_text[i], "127.0.0.1:%d", t->port[i]);
            seeds[i] = seed_text[i];
        }
        o.topology = LEASH_TOPOLOGY_CLUSTER;
        o.nodes = seeds;
        o.nodes_count = i;
    } else if (t->redlock) {
        for (i = 0; i < t->masters && i < BENCH_MAX_NODES; i++) {
            snprintf(seed_text[i], sizeof seed_text[i], "127.0.0.1:%d", t->port[i]);
            seeds[i] = seed_text[i];
        }
        o.topology = LEASH_TOPOLOGY_REDLOCK;
        o.nodes = seeds;
        o.nodes_count = i;
    }
    o.pubsub = t->pubsub;
    o.log_cb = bench_log_stderr;
    o.log_level = LEASH_LOG_WARN;
    if (leash_client_new(&c, &o) != LEASH_OK)
        return NULL;
    if (leash_libev_attach(loop, c) != LEASH_OK) {
        leash_client_free(c);
        return NULL;
    }
    return c;
}

int bench_wait_connected(struct ev_loop *loop, leash_client *const *clients, int n,
                         int timeout_ms) {
    int64_t deadline = bench_now_ns() + (int64_t)timeout_ms * 1000000;
    int i, all;

    do {
        ev_run(loop, EVRUN_NOWAIT);
        all = 1;
        for (i = 0; i < n && all; i++)
            all = leash_client_connected(clients[i]);
        if (all)
            return 0;
        test_sleep_ms(1);
    } while (bench_now_ns() < deadline);
    return -1;
}

int bench_wait_ready(struct ev_loop *loop, leash_client *const *clients, int n,
                     const bench_target *t, int timeout_ms) {
    int64_t deadline = bench_now_ns() + (int64_t)timeout_ms * 1000000;
    leash_stats st;
    int i, all;

    if (bench_wait_connected(loop, clients, n, timeout_ms) != 0)
        return -1;
    if (!t->redlock)
        return 0;
    /* Each connection counts once when it first becomes ready (nothing
     * breaks on loopback meanwhile). */
    do {
        ev_run(loop, EVRUN_NOWAIT);
        all = 1;
        for (i = 0; i < n && all; i++) {
            leash_client_stats(clients[i], &st);
            all = st.connects >= (uint64_t)t->masters && st.sub_connects >= (uint64_t)t->masters;
        }
        if (all)
            return 0;
        test_sleep_ms(1);
    } while (bench_now_ns() < deadline);
    return -1;
}

/* ---- handoff samples ---- */

void bench_write_samples(const char *prog, const char *dir, const char *tag, const char *label,
                         const int64_t *sorted, int64_t n) {
    char path[512];
    FILE *f;
    int64_t i;

    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/handoff-%s.txt", dir, tag);
    if ((f = fopen(path, "w")) == NULL) {
        fprintf(stderr, "%s: cannot write %s\n", prog, path);
        return;
    }
    fprintf(f, "# handoff latency in microseconds, sorted; %s\n", label);
    for (i = 0; i < n; i++)
        fprintf(f, "%.1f\n", (double)sorted[i] / 1000.);
    fclose(f);
}

/* ---- child processes ---- */

pid_t bench_fork(void) {
    pid_t parent = getpid(), pid;

    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* The parent may have died before the line above. */
        if (getppid() != parent)
            _exit(1);
    }
    return pid;
}

int bench_reap_exited(pid_t *pids, int n) {
    int i, alive = 0;

    for (i = 0; i < n; i++) {
        if (pids[i] > 0 && waitpid(pids[i], NULL, WNOHANG) == pids[i])
            pids[i] = 0;
        if (pids[i] > 0)
            alive++;
    }
    return alive;
}

int bench_reap(pid_t *pids, int n, int timeout_ms, const char *prog) {
    int64_t deadline = bench_now_ns() + (int64_t)timeout_ms * 1000000;
    int alive, i;

    while ((alive = bench_reap_exited(pids, n)) > 0 && bench_now_ns() < deadline)
        test_sleep_ms(2);
    if (alive == 0)
        return 0;
    fprintf(stderr, "%s: %d child process(es) did not stop; killing them\n", prog, alive);
    for (i = 0; i < n; i++)
        if (pids[i] > 0) {
            kill(pids[i], SIGKILL);
            waitpid(pids[i], NULL, 0);
            pids[i] = 0;
        }
    return -1;
}

void *bench_shared_alloc(size_t size) {
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p; /* mmap gives zeroed pages */
}

void bench_shared_free(void *p, size_t size) {
    if (p != NULL)
        munmap(p, size);
}

/* ---- options and statistics ---- */

int bench_parse_list(const char *s, int *out, int max, long lo, long hi) {
    const char *p = s;
    int n = 0;

    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < lo || v > hi || (*end != ',' && *end != '\0') || n == max) {
            fprintf(stderr, "bad list '%s' (at most %d numbers, each %ld..%ld)\n", s, max, lo, hi);
            return -1;
        }
        out[n++] = (int)v;
        p = *end == ',' ? end + 1 : end;
    }
    if (n == 0)
        fprintf(stderr, "empty list\n");
    return n > 0 ? n : -1;
}

int bench_cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int64_t bench_pct(const int64_t *sorted, int64_t n, double p) {
    int64_t idx = (int64_t)(p * (double)n + 0.999999) - 1;
    if (n <= 0)
        return 0;
    if (idx < 0)
        idx = 0;
    if (idx >= n)
        idx = n - 1;
    return sorted[idx];
}
