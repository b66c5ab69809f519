/* SPDX-License-Identifier: MIT */
#define _DEFAULT_SOURCE 1 /* usleep */

#include "fixture.h"

#include "dialect/dialect.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the loop, one backend per build ---- */

#if defined(LEASH_TEST_LOOP_LIBEVENT)

const char *fx_loop_name(void) {
    return "libevent";
}

fx_loop *fx_loop_new(void) {
    /* A plain base, as most programs make it (coarse timers: see
     * adapters/libevent.h). */
    struct event_base *base = event_base_new();
    CHECK(base != NULL);
    return base;
}

void fx_loop_free(fx_loop *base) {
    int left;

    event_base_loop(base, EVLOOP_NONBLOCK);
    left = event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED | EVENT_BASE_COUNT_ACTIVE);
    CHECK_MSG(left == 0, "%d events are left in the base after the clients were freed", left);
    event_base_free(base);
}

int fx_attach(fx_loop *base, leash_client *c) {
    return leash_libevent_attach(base, c);
}

/* The deadline timer only has to wake the loop up; the caller checks the
 * clock. */
static void on_deadline(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    (void)arg;
}

int fx_run_until_flag(fx_loop *base, const int *flag, int64_t timeout_ms) {
    int64_t deadline = test_now_ms() + timeout_ms;
    int64_t left;
    struct event *timer = evtimer_new(base, on_deadline, NULL);
    struct timeval tv;

    CHECK(timer != NULL);
    while (!*flag) {
        left = deadline - test_now_ms();
        if (left <= 0)
            break;
        if (!evtimer_pending(timer, NULL)) {
            tv.tv_sec = (time_t)(left / 1000);
            tv.tv_usec = (long)(left % 1000) * 1000;
            evtimer_add(timer, &tv);
        }
        event_base_loop(base, EVLOOP_ONCE);
    }
    event_free(timer);
    return *flag ? 0 : -1;
}

void fx_run_nowait(fx_loop *base) {
    /* NONBLOCK alone goes round again while callbacks ran: a command
     * written in one round could have its answer read in the next. */
    event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
}

#elif defined(LEASH_TEST_LOOP_LIBUV)

const char *fx_loop_name(void) {
    return "libuv";
}

/* Each loop keeps one deadline timer for fx_run_until_flag in loop->data:
 * a handle on the stack would have to finish closing before the function
 * returns, which takes a turn of the loop that runs other callbacks. */
fx_loop *fx_loop_new(void) {
    uv_loop_t *loop = malloc(sizeof(*loop));
    uv_timer_t *timer = malloc(sizeof(*timer));

    CHECK(loop != NULL && timer != NULL);
    CHECK_EQ_INT(uv_loop_init(loop), 0);
    CHECK_EQ_INT(uv_timer_init(loop, timer), 0);
    loop->data = timer;
    return loop;
}

static void free_handle(uv_handle_t *h) {
    free(h);
}

static void count_handle(uv_handle_t *h, void *arg) {
    int *n = arg;
    (*n)++;
    fprintf(stderr, "  left over: a %s handle%s%s\n", uv_handle_type_name(uv_handle_get_type(h)),
            uv_is_active(h) ? ", active" : "", uv_is_closing(h) ? ", closing" : "");
}

void fx_loop_free(fx_loop *loop) {
    int rc, i, left = 0;

    uv_close((uv_handle_t *)loop->data, free_handle);
    /* Closed handles (ours, the adapter's timers, hiredis's polls) are done
     * with on the next turn of the loop. */
    for (i = 0; i < 10 && (rc = uv_loop_close(loop)) == UV_EBUSY; i++)
        uv_run(loop, UV_RUN_NOWAIT);
    if (rc != 0)
        uv_walk(loop, count_handle, &left);
    CHECK_MSG(rc == 0, "uv_loop_close: %s (%d handles left after the clients were freed)",
              uv_strerror(rc), left);
    free(loop);
}

int fx_attach(fx_loop *loop, leash_client *c) {
    return leash_libuv_attach(loop, c);
}

static void on_deadline(uv_timer_t *timer) {
    (void)timer;
}

int fx_run_until_flag(fx_loop *loop, const int *flag, int64_t timeout_ms) {
    int64_t deadline = test_now_ms() + timeout_ms;
    int64_t left;
    uv_timer_t *timer = loop->data;

    while (!*flag) {
        left = deadline - test_now_ms();
        if (left <= 0)
            break;
        if (!uv_is_active((uv_handle_t *)timer)) {
            /* The loop's cached time may be old if nobody ran it for a
             * while; a timer from it would fire early. */
            uv_update_time(loop);
            uv_timer_start(timer, on_deadline, (uint64_t)left, 0);
        }
        uv_run(loop, UV_RUN_ONCE);
    }
    uv_timer_stop(timer);
    return *flag ? 0 : -1;
}

void fx_run_nowait(fx_loop *loop) {
    uv_run(loop, UV_RUN_NOWAIT);
}

#else /* libev */

const char *fx_loop_name(void) {
    return "libev";
}

fx_loop *fx_loop_new(void) {
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    CHECK(loop != NULL);
    return loop;
}

void fx_loop_free(fx_loop *loop) {
    ev_loop_destroy(loop);
}

int fx_attach(fx_loop *loop, leash_client *c) {
    return leash_libev_attach(loop, c);
}

int fx_run_until_flag(fx_loop *loop, const int *flag, int64_t timeout_ms) {
    return test_run_until(loop, flag, timeout_ms);
}

void fx_run_nowait(fx_loop *loop) {
    ev_run(loop, EVRUN_NOWAIT);
}

#endif

void fx_run_for(fx_loop *loop, int64_t ms) {
    static const int never = 0;

    fx_run_until_flag(loop, &never, ms);
}

/* ---- clients and callbacks ---- */

static char log_buf[1 << 18];
static size_t log_len;

void fx_log_cb(int level, const char *msg, void *arg) {
    size_t n = strlen(msg);
    (void)arg;
    if (getenv("LEASH_TEST_LOG"))
        fprintf(stderr, "  %lld log[%d] %s\n", (long long)(test_now_ms() % 100000), level, msg);
    if (log_len + n + 2 < sizeof(log_buf)) {
        memcpy(log_buf + log_len, msg, n);
        log_len += n;
        log_buf[log_len++] = '\n';
        log_buf[log_len] = '\0';
    }
}

int fx_log_contains(const char *needle) {
    return strstr(log_buf, needle) != NULL;
}

const char *fx_log_text(void) {
    return log_buf;
}

int fx_log_state_path(const char *name, const char *const *path, size_t n) {
    char tail[256];
    const char *at = log_buf;
    size_t i, tail_len;
    int lines = 0;

    for (i = 0; i < n; i++) {
        at = strstr(at, path[i]);
        if (at == NULL) {
            fprintf(stderr, "not in the log, or not after the line before: %s", path[i]);
            return -1;
        }
        at += strlen(path[i]);
    }
    snprintf(tail, sizeof(tail), " lock %s", name);
    tail_len = strlen(tail);
    for (at = log_buf; *at != '\0' && strchr(at, '\n') != NULL; at = strchr(at, '\n') + 1) {
        size_t len = (size_t)(strchr(at, '\n') - at);
        if (strncmp(at, "STATE: ", 7) == 0 && len > tail_len &&
            strncmp(at + len - tail_len, tail, tail_len) == 0)
            lines++;
    }
    return lines;
}

void fx_log_clear(void) {
    log_len = 0;
    log_buf[0] = '\0';
}

/* The end of the case's leash log, where a failure in CI can be read. */
static void print_log_tail(void) {
    size_t from = log_len > 6000 ? log_len - 6000 : 0;

    fflush(stdout);
    fprintf(stderr, "--- the case's leash log (its last %zu bytes):\n%s--- end of log\n",
            log_len - from, log_buf + from);
}

static void record(fx_result *r, leash_lock *l, int status) {
    r->calls++;
    r->done = 1;
    r->status = status;
    r->at_ms = test_now_ms();
    r->lock = l;
}

void fx_acquire_cb(leash_lock *l, int status, void *arg) {
    record(arg, l, status);
}

void fx_release_cb(leash_lock *l, int status, void *arg) {
    record(arg, l, status);
}

void fx_lost_cb(leash_lock *l, int reason, void *arg) {
    record(arg, l, reason);
}

/* Options with the log captured and the given timings. */
static void options_timed(leash_options *o, int64_t lease_ms, int64_t timeout_ms,
                          int64_t backoff_min_ms, int64_t backoff_max_ms) {
    leash_options_init(o);
    o->lease_ms = lease_ms;
    o->command_timeout_ms = timeout_ms;
    o->connect_timeout_ms = timeout_ms;
    o->reconnect_min_ms = backoff_min_ms;
    o->reconnect_max_ms = backoff_max_ms;
    o->log_cb = fx_log_cb;
    o->log_level = LEASH_LOG_DEBUG;
}

void fx_options(leash_options *o, const test_redis *r, int64_t lease_ms) {
    options_timed(o, lease_ms, 1000, 20, 200);
    if (r->unix_path[0] != '\0') {
        o->unix_path = r->unix_path;
    } else {
        o->host = "127.0.0.1";
        o->port = r->port;
    }
    o->password = r->cfg.requirepass;
}

void fx_fault_options(leash_options *o, int port, int64_t lease_ms) {
    options_timed(o, lease_ms, 300, 10, 100);
    o->host = "127.0.0.1";
    o->port = port;
}

leash_client *fx_client_opts(fx_loop *loop, const leash_options *o) {
    leash_client *c = NULL;
    CHECK_EQ_INT(leash_client_new(&c, o), LEASH_OK);
    CHECK_EQ_INT(fx_attach(loop, c), LEASH_OK);
    return c;
}

leash_client *fx_client(fx_loop *loop, const test_redis *r, int64_t lease_ms) {
    leash_options o;
    fx_options(&o, r, lease_ms);
    return fx_client_opts(loop, &o);
}

leash_client *fx_fault_client(fx_loop *loop, int port, int64_t lease_ms) {
    leash_options o;
    fx_fault_options(&o, port, lease_ms);
    return fx_client_opts(loop, &o);
}

void fx_wait_connected(fx_loop *loop, leash_client *c, int64_t timeout_ms) {
    int64_t deadline = test_now_ms() + timeout_ms;

    /* Looked at every 2 ms, as the loop turns. */
    while (!leash_client_connected(c) && test_now_ms() < deadline)
        fx_run_for(loop, 2);
    CHECK_MSG(leash_client_connected(c), "client did not connect within %lld ms",
              (long long)timeout_ms);
}

void fx_wait_every_server(fx_loop *loop, leash_client *c, int servers, int64_t timeout_ms) {
    int64_t deadline = test_now_ms() + timeout_ms;
    leash_stats st;

    fx_wait_connected(loop, c, timeout_ms);
    for (;;) {
        leash_client_stats(c, &st);
        if (st.connects >= (uint64_t)servers && st.sub_connects >= (uint64_t)servers)
            break;
        CHECK_MSG(test_now_ms() < deadline, "%llu of %d servers connected within %lld ms",
                  (unsigned long long)st.connects, servers, (long long)timeout_ms);
        fx_run_for(loop, 2);
    }
}

#ifdef LEASH_TEST_TOPOLOGY_CLUSTER

/* The program's cluster: started by fx_main before the first case, shared
 * by every case (each its own process), emptied by each world. */
static test_cluster suite_cluster;

static int is_master(test_cluster *c, int i) {
    return test_cluster_alive(c, i) && test_cluster_role(c, i) == TEST_CLUSTER_MASTER;
}

void fx_world_options(fx_world *w, leash_options *o, int64_t lease_ms) {
    int i, n = 0;

    options_timed(o, lease_ms, 1000, 20, 200);
    if (w->command_timeout_ms > 0)
        o->command_timeout_ms = w->command_timeout_ms;
    for (i = 0; i < w->cl->count && n < TEST_CLUSTER_MAX_NODES; i++) {
        if (!test_cluster_alive(w->cl, i))
            continue;
        snprintf(w->seed_text[n], sizeof(w->seed_text[n]), "127.0.0.1:%d",
                 test_cluster_port(w->cl, i));
        w->seeds[n] = w->seed_text[n];
        n++;
    }
    o->topology = LEASH_TOPOLOGY_CLUSTER;
    o->nodes = w->seeds;
    o->nodes_count = n;
    o->password = w->cl->cfg.requirepass;
}

void fx_world_up(fx_world *w, int64_t lease_ms, int64_t command_timeout_ms) {
    leash_options o;

    memset(w, 0, sizeof(*w));
    w->cl = &suite_cluster;
    w->command_timeout_ms = command_timeout_ms;
    fx_all(w, "FLUSHALL");
    w->loop = fx_loop_new();
    fx_world_options(w, &o, lease_ms);
    w->c = fx_client_opts(w->loop, &o);
    fx_wait_connected(w->loop, w->c, 5000);
}

void fx_world_down(fx_world *w) {
    leash_client_free(w->c);
    fx_loop_free(w->loop);
}

test_redis *fx_redis_of(fx_world *w, const char *key) {
    int m = test_cluster_master_of_slot(w->cl, test_cluster_slot_of_key(key));

    CHECK_MSG(m >= 0, "no master for the slot of %s", key);
    return &w->cl->node[m].server;
}

long long fx_dbsize(fx_world *w) {
    long long n = 0;
    int i;

    for (i = 0; i < w->cl->count; i++)
        if (is_master(w->cl, i))
            n += test_cluster_int(w->cl, i, "DBSIZE");
    return n;
}

void fx_all(fx_world *w, const char *cmd) {
    int i;

    for (i = 0; i < w->cl->count; i++) {
        redisReply *rep;
        if (!is_master(w->cl, i))
            continue;
        rep = test_cluster_cmd(w->cl, i, cmd);
        CHECK_MSG(rep != NULL && rep->type != REDIS_REPLY_ERROR, "%s on node %d: %s", cmd, i,
                  rep ? rep->str : "no reply");
        freeReplyObject(rep);
    }
}

long long fx_subscribers(fx_world *w, const char *chan, size_t len) {
    int m = test_cluster_master_of_slot(w->cl, test_cluster_slot_of(chan, len));
    redisReply *rep;
    long long n = -1;

    CHECK(m >= 0);
    /* Before 7.0 leash subscribes with classic pub/sub, on the same node. */
    rep = test_cluster_cmd(
        w->cl, m, test_redis_version() >= 70000 ? "PUBSUB SHARDNUMSUB %b" : "PUBSUB NUMSUB %b",
        chan, len);
    if (rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
        rep->element[1]->type == REDIS_REPLY_INTEGER)
        n = rep->element[1]->integer;
    if (rep != NULL)
        freeReplyObject(rep);
    return n;
}

/* The length of an array reply, -1 for anything else. */
static long long array_len(redisReply *rep) {
    long long n = -1;

    if (rep != NULL && rep->type == REDIS_REPLY_ARRAY)
        n = (long long)rep->elements;
    if (rep != NULL)
        freeReplyObject(rep);
    return n;
}

long long fx_channels(fx_world *w) {
    long long n = 0, k;
    int i, j;
    static const char *const cmds[] = {"PUBSUB CHANNELS *", "PUBSUB SHARDCHANNELS *"};

    for (i = 0; i < w->cl->count; i++) {
        if (!is_master(w->cl, i))
            continue;
        for (j = 0; j < (test_redis_version() >= 70000 ? 2 : 1); j++) {
            k = array_len(test_cluster_cmd(w->cl, i, cmds[j]));
            CHECK_MSG(k >= 0, "%s on node %d: no array", cmds[j], i);
            n += k;
        }
    }
    return n;
}

int fx_main(int argc, char **argv, const test_case *cases) {
    int rc, i;

    test_on_fail = print_log_tail;
    for (i = 1; i < argc; i++)
        if (strcmp(argv[i], "--list") == 0)
            return test_main(argc, argv, cases);
    if (test_cluster_start(&suite_cluster, NULL) != 0) {
        printf("FAIL the cluster for the cases did not start\n");
        return 1;
    }
    rc = test_main(argc, argv, cases);
    test_cluster_stop(&suite_cluster);
    return rc;
}

#elif defined(LEASH_TEST_TOPOLOGY_REDLOCK)

/* The program's servers: started by fx_main, shared by every case, emptied
 * by each world. */
static test_redis suite_servers[FX_REDLOCK_N];

void fx_world_options(fx_world *w, leash_options *o, int64_t lease_ms) {
    int i;

    options_timed(o, lease_ms, 1000, 20, 200);
    if (w->command_timeout_ms > 0)
        o->command_timeout_ms = w->command_timeout_ms;
    for (i = 0; i < FX_REDLOCK_N; i++) {
        snprintf(w->seed_text[i], sizeof(w->seed_text[i]), "127.0.0.1:%d", suite_servers[i].port);
        w->seeds[i] = w->seed_text[i];
    }
    o->topology = LEASH_TOPOLOGY_REDLOCK;
    o->nodes = w->seeds;
    o->nodes_count = FX_REDLOCK_N;
}

void fx_world_up(fx_world *w, int64_t lease_ms, int64_t command_timeout_ms) {
    leash_options o;

    memset(w, 0, sizeof(*w));
    w->servers = suite_servers;
    w->command_timeout_ms = command_timeout_ms;
    fx_all(w, "FLUSHALL");
    w->loop = fx_loop_new();
    fx_world_options(w, &o, lease_ms);
    w->c = fx_client_opts(w->loop, &o);
    fx_wait_every_server(w->loop, w->c, FX_REDLOCK_N, 5000);
}

void fx_world_down(fx_world *w) {
    leash_client_free(w->c);
    fx_loop_free(w->loop);
}

test_redis *fx_redis_of(fx_world *w, const char *key) {
    (void)key;
    return &w->servers[0];
}

long long fx_dbsize(fx_world *w) {
    /* Lock names hold no NUL; fence floors (companions) do. */
    return test_redis_int(&w->servers[0], "EVAL %s 0",
                          "local n = 0 for _, k in ipairs(redis.call('keys', '*')) do "
                          "if not string.find(k, '\\0', 1, true) then n = n + 1 end end "
                          "return n");
}

void fx_all(fx_world *w, const char *cmd) {
    int i;

    for (i = 0; i < FX_REDLOCK_N; i++) {
        redisReply *rep = test_redis_cmd(&w->servers[i], cmd);
        CHECK_MSG(rep != NULL && rep->type != REDIS_REPLY_ERROR, "%s on server %d: %s", cmd, i,
                  rep ? rep->str : "no reply");
        freeReplyObject(rep);
    }
}

long long fx_subscribers(fx_world *w, const char *chan, size_t len) {
    redisReply *rep = test_redis_cmd(&w->servers[0], "PUBSUB NUMSUB %b", chan, len);
    long long n = -1;

    if (rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
        rep->element[1]->type == REDIS_REPLY_INTEGER)
        n = rep->element[1]->integer;
    if (rep != NULL)
        freeReplyObject(rep);
    return n;
}

long long fx_channels(fx_world *w) {
    long long n = 0;
    int i;

    for (i = 0; i < FX_REDLOCK_N; i++) {
        redisReply *rep = test_redis_cmd(&w->servers[i], "PUBSUB CHANNELS *");
        CHECK_MSG(rep != NULL && rep->type == REDIS_REPLY_ARRAY, "PUBSUB CHANNELS: no array");
        n += (long long)rep->elements;
        freeReplyObject(rep);
    }
    return n;
}

int fx_main(int argc, char **argv, const test_case *cases) {
    int rc, i;

    test_on_fail = print_log_tail;
    for (i = 1; i < argc; i++)
        if (strcmp(argv[i], "--list") == 0)
            return test_main(argc, argv, cases);
    for (i = 0; i < FX_REDLOCK_N; i++) {
        if (test_redis_start(&suite_servers[i], NULL) != 0) {
            printf("FAIL the Redlock servers for the cases did not start\n");
            while (i-- > 0)
                test_redis_stop(&suite_servers[i]);
            return 1;
        }
    }
    rc = test_main(argc, argv, cases);
    for (i = 0; i < FX_REDLOCK_N; i++)
        test_redis_stop(&suite_servers[i]);
    return rc;
}

#else /* one server */

void fx_world_options(fx_world *w, leash_options *o, int64_t lease_ms) {
    fx_options(o, &w->r, lease_ms);
    if (w->command_timeout_ms > 0)
        o->command_timeout_ms = w->command_timeout_ms;
}

void fx_world_up(fx_world *w, int64_t lease_ms, int64_t command_timeout_ms) {
    leash_options o;

    memset(w, 0, sizeof(*w));
    w->command_timeout_ms = command_timeout_ms;
    CHECK_EQ_INT(test_redis_start(&w->r, NULL), 0);
    w->loop = fx_loop_new();
    fx_world_options(w, &o, lease_ms);
    w->c = fx_client_opts(w->loop, &o);
    fx_wait_connected(w->loop, w->c, 5000);
}

void fx_world_down(fx_world *w) {
    leash_client_free(w->c);
    test_redis_stop(&w->r);
    fx_loop_free(w->loop);
}

test_redis *fx_redis_of(fx_world *w, const char *key) {
    (void)key;
    return &w->r;
}

long long fx_dbsize(fx_world *w) {
    return test_redis_int(&w->r, "DBSIZE");
}

void fx_all(fx_world *w, const char *cmd) {
    redisReply *rep = test_redis_cmd(&w->r, cmd);

    CHECK_MSG(rep != NULL && rep->type != REDIS_REPLY_ERROR, "%s: %s", cmd,
              rep ? rep->str : "no reply");
    freeReplyObject(rep);
}

long long fx_subscribers(fx_world *w, const char *chan, size_t len) {
    redisReply *rep = test_redis_cmd(&w->r, "PUBSUB NUMSUB %b", chan, len);
    long long n = -1;

    if (rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
        rep->element[1]->type == REDIS_REPLY_INTEGER)
        n = rep->element[1]->integer;
    if (rep != NULL)
        freeReplyObject(rep);
    return n;
}

long long fx_channels(fx_world *w) {
    redisReply *rep = test_redis_cmd(&w->r, "PUBSUB CHANNELS *");
    long long n;

    CHECK_MSG(rep != NULL && rep->type == REDIS_REPLY_ARRAY, "PUBSUB CHANNELS: no array");
    n = (long long)rep->elements;
    freeReplyObject(rep);
    return n;
}

int fx_main(int argc, char **argv, const test_case *cases) {
    test_on_fail = print_log_tail;
    return test_main(argc, argv, cases);
}
#endif

/* What one server said to fx_key_cmd. */
static long long key_reply(redisReply *rep) {
    long long n = rep == NULL                        ? -1000
                  : rep->type == REDIS_REPLY_INTEGER ? rep->integer
                  : rep->type == REDIS_REPLY_STATUS  ? 1
                                                     : -1000;
    if (rep != NULL)
        freeReplyObject(rep);
    return n;
}

long long fx_key_cmd(fx_world *w, const char *key, const char *fmt, ...) {
    long long sum = 0;
    int i;

    for (i = 0; i < FX_COPIES; i++) {
        test_redis *r;
        test_redis_request rq;
        va_list ap;

#ifdef LEASH_TEST_TOPOLOGY_REDLOCK
        r = &w->servers[i];
#else
        r = fx_redis_of(w, key);
#endif
        va_start(ap, fmt);
        memset(&rq, 0, sizeof(rq));
        rq.fmt = fmt;
        rq.ap = &ap;
        sum += key_reply(test_redis_send(r, &r->admin_, 2000, &rq));
        va_end(ap);
    }
    (void)key;
    return sum;
}

void fx_run_until_key_exists(fx_world *w, const char *key) {
    int64_t end = test_now_ms() + 2000;

    while (fx_key_cmd(w, key, "EXISTS %s", key) < FX_COPIES && test_now_ms() < end) {
        fx_run_nowait(w->loop);
        /* Redis runs what that turn wrote before this client's EXISTS,
         * which it reads later. */
        usleep(2000);
    }
    CHECK_MSG(fx_key_cmd(w, key, "EXISTS %s", key) == FX_COPIES, "%s not written within 2 s", key);
}

void fx_acquire_unread(fx_world *w, leash_lock *l, const char *key, int64_t wait_ms,
                       fx_result *got) {
    int tries;

    for (tries = 0; tries < 20; tries++) {
        memset(got, 0, sizeof(*got));
        CHECK_EQ_INT(leash_acquire(l, wait_ms, fx_acquire_cb, got), LEASH_OK);
        fx_run_until_key_exists(w, key);
        if (!got->done)
            return;
        CHECK_EQ_INT(fx_release_sync(w->loop, l, 3000), LEASH_OK);
    }
    CHECK_MSG(0, "the grant of %s was always read in the turn that sent it", key);
}

leash_client *fx_world_client(fx_world *w, int64_t lease_ms) {
    leash_options o;

    fx_world_options(w, &o, lease_ms);
    return fx_client_opts(w->loop, &o);
}

void fx_run_until(fx_loop *loop, fx_result *r, int64_t timeout_ms) {
    int rc = fx_run_until_flag(loop, &r->done, timeout_ms);
    CHECK_MSG(rc == 0, "no callback within %lld ms", (long long)timeout_ms);
}

/* The one completion of a call that returned LEASH_OK into r. */
static int completion(fx_loop *loop, fx_result *r, int64_t timeout_ms) {
    CHECK_EQ_INT(r->calls, 0); /* never inside the call */
    fx_run_until(loop, r, timeout_ms);
    fx_run_for(loop, 1); /* a second call would show now */
    CHECK_EQ_INT(r->calls, 1);
    return r->status;
}

int fx_acquire_sync(fx_loop *loop, leash_lock *l, int64_t wait_ms, int64_t timeout_ms) {
    fx_result r = {0};
    CHECK_EQ_INT(leash_acquire(l, wait_ms, fx_acquire_cb, &r), LEASH_OK);
    return completion(loop, &r, timeout_ms);
}

int fx_release_sync(fx_loop *loop, leash_lock *l, int64_t timeout_ms) {
    fx_result r = {0};
    CHECK_EQ_INT(leash_release(l, fx_release_cb, &r), LEASH_OK);
    return completion(loop, &r, timeout_ms);
}

int fx_force_release_sync(fx_loop *loop, leash_lock *l, int64_t timeout_ms) {
    fx_result r = {0};
    CHECK_EQ_INT(leash_force_release(l, fx_release_cb, &r), LEASH_OK);
    return completion(loop, &r, timeout_ms);
}

long long fx_redis_exists(test_redis *r, const char *key) {
    return test_redis_int(r, "EXISTS %s", key);
}

size_t fx_channel(const char *name, int db, char buf[FX_CHANNEL_MAX]) {
    leash__names k;
    leash__logger lg = {NULL, NULL, LEASH_LOG_ERROR};
    size_t n;

    CHECK_EQ_INT(leash__dialect_leash.names(&k, &lg, "leash:", name, db), LEASH_OK);
    CHECK(k.channel_len < FX_CHANNEL_MAX);
    memcpy(buf, k.channel, k.channel_len);
    n = k.channel_len;
    leash__names_clear(&k);
    return n;
}
