/* SPDX-License-Identifier: MIT */
/*
 * Self-test of the test support code: the harness (check.h), the Redis
 * servers (redis_server.h) and the loop helpers (evloop.h). Every other
 * test trusts these, so they get their own proof first.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* popen, readlink, realpath, usleep */
#endif

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "check.h"
#include "dialect/dialect.h"
#include "evloop.h"
#include "leashscripts.h"
#include "lockdata.h"
#include "redis_server.h"

/* ---- helpers ---- */

static redisContext *connect_tcp(int port, int timeout_ms) {
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);

    CHECK(c != NULL);
    CHECK_MSG(!c->err, "connect to port %d: %s", port, c->errstr);
    CHECK(redisSetTimeout(c, tv) == REDIS_OK);
    return c;
}

static redisContext *connect_unix(const char *path) {
    redisContext *c = redisConnectUnix(path);

    CHECK(c != NULL);
    CHECK_MSG(!c->err, "connect to %s: %s", path, c->errstr);
    return c;
}

/* The reply of a command as "+status", "-error", "$string", ":int" or
 * "nil", which reads well in CHECK_STR_EQ. */
static char *reply_text(redisReply *reply) {
    static char buf[256];

    if (!reply)
        snprintf(buf, sizeof buf, "(no reply)");
    else if (reply->type == REDIS_REPLY_STATUS)
        snprintf(buf, sizeof buf, "+%s", reply->str);
    else if (reply->type == REDIS_REPLY_ERROR)
        snprintf(buf, sizeof buf, "-%s", reply->str);
    else if (reply->type == REDIS_REPLY_STRING)
        snprintf(buf, sizeof buf, "$%s", reply->str);
    else if (reply->type == REDIS_REPLY_INTEGER)
        snprintf(buf, sizeof buf, ":%lld", reply->integer);
    else if (reply->type == REDIS_REPLY_NIL)
        snprintf(buf, sizeof buf, "nil");
    else
        snprintf(buf, sizeof buf, "(type %d)", reply->type);
    if (reply)
        freeReplyObject(reply);
    return buf;
}

#define RAW(c, ...) reply_text(redisCommand((c), __VA_ARGS__))
#define ADMIN(r, ...) reply_text(test_redis_cmd((r), __VA_ARGS__))

/* The value of a config parameter, read through the admin connection. */
static const char *config_get(test_redis *r, const char *name) {
    static char buf[256];
    redisReply *reply = test_redis_cmd(r, "CONFIG GET %s", name);

    CHECK(reply != NULL);
    CHECK_EQ_INT(reply->type, REDIS_REPLY_ARRAY);
    CHECK_EQ_INT(reply->elements, 2);
    snprintf(buf, sizeof buf, "%s", reply->element[1]->str);
    freeReplyObject(reply);
    return buf;
}

/* Gone means reaped too: a zombie left to pid 1 would still show up in
 * pgrep. */
static int process_gone(pid_t pid) {
    return kill(pid, 0) != 0 && errno == ESRCH;
}

static int dir_exists(const char *path) {
    struct stat st;

    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ---- the harness, driven through a second run of this program ---- */

TEST(demo_pass) {
    CHECK(1);
}
TEST(demo_check) {
    CHECK(1 + 1 == 3);
}
TEST(demo_eq_int) {
    CHECK_EQ_INT(2 + 2, 5);
}
TEST(demo_str_eq) {
    CHECK_STR_EQ("abc", "abd");
}
TEST(demo_str_null) {
    CHECK_STR_EQ(NULL, "abd");
}
TEST(demo_msg) {
    CHECK_MSG(0, "value %d", 7);
}

/* A crash with a server running: the server must not outlive the case. */
TEST(demo_abort) {
    test_redis r;

    CHECK(test_redis_start(&r, NULL) == 0);
    printf("server pid %d\n", (int)r.pid);
    fflush(stdout);
    abort();
}

TEST(demo_timeout) {
    sleep(30);
}

static const test_case demo_cases[] = {
    TEST_CASE(demo_pass),   TEST_CASE(demo_check),        TEST_CASE(demo_eq_int),
    TEST_CASE(demo_str_eq), TEST_CASE(demo_str_null),     TEST_CASE(demo_msg),
    TEST_CASE(demo_abort),  TEST_CASE_T(demo_timeout, 1), {0},
};

/* Runs this program with --harness-demo and the arguments; returns its
 * stdout (static) and sets *status to its wait status. */
static const char *run_demo(const char *args, int *status) {
    static char out[8192];
    char exe[1024], cmd[1400];
    size_t len = 0, n;
    ssize_t elen;
    FILE *p;

    /* /proc/self/exe inside popen's shell would name the shell. */
    elen = readlink("/proc/self/exe", exe, sizeof exe - 1);
    CHECK(elen > 0);
    exe[elen] = '\0';
    snprintf(cmd, sizeof cmd, "'%s' --harness-demo %s 2>/dev/null", exe, args);
    p = popen(cmd, "r");
    CHECK(p != NULL);
    while ((n = fread(out + len, 1, sizeof out - 1 - len, p)) > 0)
        len += n;
    out[len] = '\0';
    *status = pclose(p);
    return out;
}

static void check_line(const char *out, const char *start, const char *has) {
    const char *line = out;

    while (line && *line) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[1024];

        snprintf(buf, sizeof buf, "%.*s", (int)len, line);
        if (strncmp(buf, start, strlen(start)) == 0) {
            CHECK_MSG(strstr(buf, has) != NULL, "line '%s' lacks '%s'", buf, has);
            return;
        }
        line = end ? end + 1 : NULL;
    }
    CHECK_MSG(0, "no line starting with '%s' in:\n%s", start, out);
}

TEST(t_harness_reports) {
    int status;
    const char *out = run_demo("", &status);
    const char *p;
    int pid = 0;

    CHECK(WIFEXITED(status));
    CHECK_EQ_INT(WEXITSTATUS(status), 1);
    check_line(out, "PASS demo_pass (", " ms)");
    check_line(out, "FAIL demo_check: ", "test_support.c:");
    check_line(out, "FAIL demo_check: ", ": CHECK(1 + 1 == 3) failed");
    check_line(out, "FAIL demo_eq_int: ", "CHECK_EQ_INT(2 + 2, 5) failed: 4 != 5");
    check_line(out,
               "FAIL demo_str_eq: ", "CHECK_STR_EQ(\"abc\", \"abd\") failed: \"abc\" != \"abd\"");
    check_line(out, "FAIL demo_str_null: ", "failed: NULL != \"abd\"");
    check_line(out, "FAIL demo_msg: ", "CHECK_MSG(0) failed: value 7");
    check_line(out, "FAIL demo_abort: ", "killed by signal 6");
    check_line(out, "FAIL demo_timeout: ", "timed out after 1 s");
    /* The summary is the last line, alone. */
    p = strstr(out, "\n1 passed, 7 failed\n");
    CHECK_MSG(p && p[strlen("\n1 passed, 7 failed\n")] == '\0', "bad summary in:\n%s", out);

    p = strstr(out, "server pid ");
    CHECK(p != NULL);
    pid = atoi(p + strlen("server pid "));
    CHECK(pid > 0);
    CHECK_MSG(process_gone((pid_t)pid), "redis-server %d outlived its crashed case", pid);
}

TEST(t_harness_selects) {
    int status;
    const char *out = run_demo("demo_msg demo_pass", &status);
    const char *second, *third;

    CHECK(WIFEXITED(status));
    CHECK_EQ_INT(WEXITSTATUS(status), 1);
    /* In the order of the list, not of the command line. */
    CHECK_MSG(strncmp(out, "PASS demo_pass (", 16) == 0, "%s", out);
    second = strchr(out, '\n');
    CHECK(second != NULL);
    CHECK_MSG(strncmp(second + 1, "FAIL demo_msg: ", 15) == 0, "%s", out);
    third = strchr(second + 1, '\n');
    CHECK(third != NULL);
    CHECK_STR_EQ(third + 1, "1 passed, 1 failed\n");

    out = run_demo("no_such_case", &status);
    CHECK(WIFEXITED(status));
    CHECK_EQ_INT(WEXITSTATUS(status), 2);
    CHECK_STR_EQ(out, "");

    out = run_demo("--list", &status);
    CHECK_EQ_INT(WEXITSTATUS(status), 0);
    CHECK(strstr(out, "demo_timeout\n") != NULL);
}

/* ---- Redis servers ---- */

TEST(t_tcp_ping) {
    test_redis r;
    redisContext *c;
    char dir[sizeof r.dir], real[PATH_MAX];
    pid_t pid;

    CHECK(test_redis_start(&r, NULL) == 0);
    CHECK(r.pid > 0);
    CHECK(r.port > 0 && r.port < 65536);
    CHECK_STR_EQ(r.unix_path, "");
    CHECK_STR_EQ(ADMIN(&r, "PING"), "+PONG");

    c = connect_tcp(r.port, 2000);
    CHECK_STR_EQ(RAW(c, "PING"), "+PONG");
    redisFree(c);
    CHECK_STR_EQ(config_get(&r, "save"), "");
    CHECK_STR_EQ(config_get(&r, "appendonly"), "no");
    CHECK_STR_EQ(config_get(&r, "bind"), "127.0.0.1");
    /* Redis reports the folder with symlinks resolved. */
    CHECK_STR_EQ(config_get(&r, "dir"), realpath(r.dir, real));

    pid = r.pid;
    snprintf(dir, sizeof dir, "%s", r.dir);
    CHECK(dir_exists(dir));
    test_redis_stop(&r);
    CHECK(r.pid == 0);
    CHECK(process_gone(pid));
    CHECK(!dir_exists(dir));
    test_redis_stop(&r); /* twice is fine */
    CHECK(test_redis_cmd(&r, "PING") == NULL);
}

TEST(t_unix_ping) {
    test_redis_config cfg = {.unix_socket = 1};
    test_redis r;
    redisContext *c;
    struct stat st;

    CHECK(test_redis_start(&r, &cfg) == 0);
    CHECK_EQ_INT(r.port, 0);
    CHECK(r.unix_path[0] == '/');
    CHECK(stat(r.unix_path, &st) == 0 && S_ISSOCK(st.st_mode));
    CHECK_STR_EQ(ADMIN(&r, "PING"), "+PONG");

    c = connect_unix(r.unix_path);
    CHECK_STR_EQ(RAW(c, "PING"), "+PONG");
    redisFree(c);
    CHECK_STR_EQ(config_get(&r, "port"), "0");
    test_redis_stop(&r);
}

TEST(t_requirepass) {
    /* A copy of the password must be kept: this buffer changes. */
    char pass[] = "s3cret \"pass\"";
    test_redis_config cfg = {.requirepass = pass};
    test_redis r;
    redisContext *c;
    redisReply *reply;

    CHECK(test_redis_start(&r, &cfg) == 0);
    memset(pass, 'x', sizeof pass - 1);
    CHECK_STR_EQ(ADMIN(&r, "PING"), "+PONG");

    c = connect_tcp(r.port, 2000);
    reply = redisCommand(c, "PING");
    CHECK(reply && reply->type == REDIS_REPLY_ERROR);
    CHECK_MSG(strncmp(reply->str, "NOAUTH", 6) == 0, "%s", reply->str);
    freeReplyObject(reply);
    reply = redisCommand(c, "AUTH %s", "wrong");
    CHECK(reply && reply->type == REDIS_REPLY_ERROR);
    CHECK_MSG(strncmp(reply->str, "WRONGPASS", 9) == 0, "%s", reply->str);
    freeReplyObject(reply);
    CHECK_STR_EQ(RAW(c, "AUTH %s", "s3cret \"pass\""), "+OK");
    CHECK_STR_EQ(RAW(c, "PING"), "+PONG");
    redisFree(c);

    /* The restart config still has the password. */
    CHECK(test_redis_restart(&r) == 0);
    CHECK_STR_EQ(ADMIN(&r, "PING"), "+PONG");
    test_redis_stop(&r);
}

TEST(t_acl_user) {
    test_redis_config cfg = {
        .acl_user = "alice on >wonderland ~* &* +@all",
    };
    test_redis r;
    redisContext *c;
    redisReply *reply;

    CHECK(test_redis_start(&r, &cfg) == 0);
    c = connect_tcp(r.port, 2000);
    reply = redisCommand(c, "AUTH alice nope");
    CHECK(reply && reply->type == REDIS_REPLY_ERROR);
    freeReplyObject(reply);
    CHECK_STR_EQ(RAW(c, "ACL WHOAMI"), "$default");
    CHECK_STR_EQ(RAW(c, "AUTH alice wonderland"), "+OK");
    CHECK_STR_EQ(RAW(c, "ACL WHOAMI"), "$alice");
    redisFree(c);
    test_redis_stop(&r);
}

/* The default user locked without requirepass: the server still counts
 * as up, and the admin gets Redis's refusal rather than nothing. */
TEST(t_acl_default_locked) {
    test_redis_config cfg = {.acl_user = "default on >pw ~* &* +@all"};
    test_redis r;
    redisReply *reply;

    CHECK(test_redis_start(&r, &cfg) == 0);
    reply = test_redis_cmd(&r, "PING");
    CHECK(reply != NULL);
    CHECK_EQ_INT(reply->type, REDIS_REPLY_ERROR);
    CHECK_MSG(strncmp(reply->str, "NOAUTH", 6) == 0, "%s", reply->str);
    freeReplyObject(reply);
    CHECK_STR_EQ(ADMIN(&r, "AUTH pw"), "+OK");
    test_redis_stop(&r);
}

/* A config Redis refuses fails the start quickly and leaves nothing. */
TEST(t_bad_config) {
    test_redis_config cfg = {.extra = "no-such-directive yes"};
    test_redis r;
    int64_t t0 = test_now_ms();

    CHECK_EQ_INT(test_redis_start(&r, &cfg), -1);
    CHECK_MSG(test_now_ms() - t0 < 3000, "took %lld ms", (long long)(test_now_ms() - t0));
    CHECK_EQ_INT(r.pid, 0);
    CHECK_STR_EQ(r.dir, "");
    test_redis_stop(&r);
}

TEST(t_extra_config) {
    test_redis_config cfg = {.extra = "maxclients 77\nhz 20"};
    test_redis r;

    CHECK(test_redis_start(&r, &cfg) == 0);
    CHECK_STR_EQ(config_get(&r, "maxclients"), "77");
    CHECK_STR_EQ(config_get(&r, "hz"), "20");
    test_redis_stop(&r);
}

TEST(t_restart_same_port_no_data) {
    test_redis r;
    int port;
    pid_t pid;

    CHECK(test_redis_start(&r, NULL) == 0);
    CHECK_STR_EQ(ADMIN(&r, "SET %s %s", "k", "v"), "+OK");
    CHECK_STR_EQ(ADMIN(&r, "GET k"), "$v");
    port = r.port;
    pid = r.pid;

    CHECK(test_redis_restart(&r) == 0);
    CHECK_EQ_INT(r.port, port);
    CHECK(r.pid > 0 && r.pid != pid);
    CHECK(process_gone(pid));
    /* The cached admin connection went with the old server. */
    CHECK_STR_EQ(ADMIN(&r, "GET k"), "nil");
    CHECK_EQ_INT(test_redis_int(&r, "DBSIZE"), 0);
    test_redis_stop(&r);
}

TEST(t_restart_unix) {
    test_redis_config cfg = {.unix_socket = 1};
    test_redis r;
    redisContext *c;
    char path[sizeof r.unix_path];

    CHECK(test_redis_start(&r, &cfg) == 0);
    CHECK_STR_EQ(ADMIN(&r, "SET k v"), "+OK");
    snprintf(path, sizeof path, "%s", r.unix_path);
    CHECK(test_redis_restart(&r) == 0);
    CHECK_STR_EQ(r.unix_path, path);
    c = connect_unix(path);
    CHECK_STR_EQ(RAW(c, "GET k"), "nil");
    redisFree(c);
    test_redis_stop(&r);
}

TEST(t_kill_then_restart) {
    test_redis r;
    pid_t pid;
    char dir[sizeof r.dir];

    CHECK(test_redis_start(&r, NULL) == 0);
    CHECK_STR_EQ(ADMIN(&r, "PING"), "+PONG");
    pid = r.pid;
    snprintf(dir, sizeof dir, "%s", r.dir);
    CHECK_EQ_INT(test_redis_kill(&r), 0);
    CHECK(process_gone(pid));
    CHECK(dir_exists(dir));
    CHECK(test_redis_cmd(&r, "PING") == NULL);
    CHECK_EQ_INT(test_redis_int(&r, "DBSIZE"), -1);
    CHECK_EQ_INT(test_redis_kill(&r), -1);

    CHECK(test_redis_restart(&r) == 0);
    CHECK_STR_EQ(ADMIN(&r, "PING"), "+PONG");
    test_redis_stop(&r);
    CHECK(!dir_exists(dir));
}

TEST(t_freeze_thaw) {
    test_redis r;
    redisContext *c;
    redisReply *reply;
    int64_t t0, took;

    CHECK(test_redis_start(&r, NULL) == 0);
    c = connect_tcp(r.port, 500);
    CHECK_STR_EQ(RAW(c, "PING"), "+PONG");

    test_redis_freeze(&r);
    t0 = test_now_ms();
    reply = redisCommand(c, "PING");
    took = test_now_ms() - t0;
    CHECK(reply == NULL);
    CHECK(c->err != 0);
    CHECK_MSG(took >= 450 && took < 2000, "the timeout took %lld ms", (long long)took);
    redisFree(c);

    test_redis_thaw(&r);
    /* The timed-out connection would read the late PONG; use a new one. */
    c = connect_tcp(r.port, 500);
    CHECK_STR_EQ(RAW(c, "PING"), "+PONG");
    redisFree(c);
    CHECK_STR_EQ(ADMIN(&r, "PING"), "+PONG");

    /* Stopping a frozen server works too. */
    test_redis_freeze(&r);
    t0 = test_now_ms();
    test_redis_stop(&r);
    CHECK_MSG(test_now_ms() - t0 < 2000,
              "stop of a frozen server took "
              "%lld ms",
              (long long)(test_now_ms() - t0));
}

TEST(t_calls) {
    test_redis r;
    redisContext *c;
    long long before;
    int i;

    CHECK(test_redis_start(&r, NULL) == 0);
    before = test_redis_calls(&r, "ping");
    CHECK(before >= 0);
    c = connect_tcp(r.port, 2000);
    for (i = 0; i < 3; i++)
        CHECK_STR_EQ(RAW(c, "PING"), "+PONG");
    CHECK_EQ_INT(test_redis_calls(&r, "ping"), before + 3);
    CHECK_EQ_INT(test_redis_calls(&r, "PING"), before + 3);
    CHECK_EQ_INT(test_redis_calls(&r, "evalsha"), 0);

    CHECK_STR_EQ(RAW(c, "CLIENT SETNAME %s", "x"), "+OK");
    CHECK_EQ_INT(test_redis_calls(&r, "client|setname"), 1);

    CHECK_STR_EQ(ADMIN(&r, "CONFIG RESETSTAT"), "+OK");
    CHECK_EQ_INT(test_redis_calls(&r, "ping"), 0);
    redisFree(c);
    test_redis_stop(&r);
}

TEST(t_two_servers) {
    test_redis a, b;

    CHECK(test_redis_start(&a, NULL) == 0);
    CHECK(test_redis_start(&b, NULL) == 0);
    CHECK(a.port != b.port);
    CHECK(strcmp(a.dir, b.dir) != 0);
    CHECK_STR_EQ(ADMIN(&a, "SET k a"), "+OK");
    CHECK_STR_EQ(ADMIN(&b, "GET k"), "nil");
    test_redis_stop(&a);
    test_redis_stop(&b);
}

/* ---- the loop helpers ---- */

static void set_flag(struct ev_loop *loop, ev_timer *w, int revents) {
    (void)loop;
    (void)revents;
    *(int *)w->data = 1;
}

TEST(t_evloop) {
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    ev_timer t;
    int flag = 0;
    int64_t t0, took;

    CHECK(loop != NULL);

    /* Set by an event before the timeout. */
    ev_timer_init(&t, set_flag, 0.05, 0.0);
    t.data = &flag;
    ev_timer_start(loop, &t);
    t0 = test_now_ms();
    CHECK_EQ_INT(test_run_until(loop, &flag, 2000), 0);
    took = test_now_ms() - t0;
    CHECK_MSG(took >= 40 && took < 1000, "took %lld ms", (long long)took);

    /* Never set, on a loop with nothing else to wait for. */
    flag = 0;
    t0 = test_now_ms();
    CHECK_EQ_INT(test_run_until(loop, &flag, 150), -1);
    took = test_now_ms() - t0;
    CHECK_MSG(took >= 150 && took < 1000, "took %lld ms", (long long)took);

    /* Already set: returns at once. */
    flag = 1;
    CHECK_EQ_INT(test_run_until(loop, &flag, 5000), 0);

    /* A stale loop clock must not shorten the wait. */
    usleep(200 * 1000);
    t0 = test_now_ms();
    test_run_for(loop, 100);
    took = test_now_ms() - t0;
    CHECK_MSG(took >= 100 && took < 1000, "took %lld ms", (long long)took);
    CHECK(ev_run(loop, EVRUN_NOWAIT) == 0); /* no watcher left behind */
    ev_loop_destroy(loop);
}
/* A server's wall clock in ms, read with TIME (by_script: the clock a
 * script reads, redis.call('time')), or -1. */
static long long server_ms(test_redis *r, int by_script) {
    redisReply *reply = by_script ? test_redis_cmd(r, "EVAL %s 0", "return redis.call('time')")
                                  : test_redis_cmd(r, "TIME");
    long long ms = -1;

    if (reply && reply->type == REDIS_REPLY_ARRAY && reply->elements == 2) {
        const redisReply *sec = reply->element[0], *usec = reply->element[1];
        /* TIME answers strings; a script's array comes back as integers. */
        if (sec->type == REDIS_REPLY_STRING && usec->type == REDIS_REPLY_STRING)
            ms = atoll(sec->str) * 1000 + atoll(usec->str) / 1000;
        else if (sec->type == REDIS_REPLY_INTEGER && usec->type == REDIS_REPLY_INTEGER)
            ms = sec->integer * 1000 + usec->integer / 1000;
    }
    if (reply)
        freeReplyObject(reply);
    return ms;
}

/* How far r's clock is from the machine's, in ms (by TIME or a script's). */
static long long shift_of(test_redis *r, int by_script) {
    struct timeval before, after;
    long long ms;

    gettimeofday(&before, NULL);
    ms = server_ms(r, by_script);
    gettimeofday(&after, NULL);
    CHECK(ms > 0);
    return ms - ((long long)before.tv_sec * 1000 + before.tv_usec / 1000 +
                 (long long)after.tv_sec * 1000 + after.tv_usec / 1000) /
                    2;
}

/* A server whose clock runs 10 s ahead (or behind): TIME and the scripts'
 * clock say so, and a key's expiry runs on that same clock (a PX of 300 ms
 * lives 300 ms, not 10 s or none), also after a restart. */
TEST(t_clock_shift) {
    static const int shifts[] = {10000, -10000};
    size_t i;

    for (i = 0; i < sizeof shifts / sizeof shifts[0]; i++) {
        test_redis_config cfg = {.clock_shift_ms = shifts[i]};
        test_redis r;
        int64_t set_at;
        long long pttl;
        int pass;

        CHECK(test_redis_start(&r, &cfg) == 0);
        for (pass = 0; pass < 2; pass++) {
            long long by_time = shift_of(&r, 0), by_script = shift_of(&r, 1);

            CHECK_MSG(by_time > shifts[i] - 1000 && by_time < shifts[i] + 1000,
                      "TIME is %lld ms off, %d asked", by_time, shifts[i]);
            CHECK_MSG(by_script > shifts[i] - 1000 && by_script < shifts[i] + 1000,
                      "a script's clock is %lld ms off, %d asked", by_script, shifts[i]);
            set_at = test_now_ms();
            CHECK_STR_EQ(ADMIN(&r, "SET k v PX 300"), "+OK");
            pttl = test_redis_int(&r, "PTTL k");
            CHECK_MSG(pttl > 0 && pttl <= 300, "PTTL %lld right after PX 300", pttl);
            test_sleep_ms(150);
            if (test_now_ms() - set_at < 300)
                CHECK_EQ_INT(test_redis_int(&r, "EXISTS k"), 1);
            while (test_redis_int(&r, "EXISTS k") == 1 &&
                   test_now_ms() - set_at <= 300 + TEST_SLACK_MS)
                test_sleep_ms(5);
            CHECK_MSG(test_redis_int(&r, "EXISTS k") == 0, "a PX 300 key still there after %lld ms",
                      (long long)(test_now_ms() - set_at));
            CHECK(test_redis_restart(&r) == 0);
        }
        test_redis_stop(&r);
    }
}

/* A drifting clock (test_redis_drift_clock): 5% fast for 1 s moves the
 * server's clock 50 ms ahead of where it was, gradually (half of it half
 * way), and no further once the drift ended; TIME never goes back; a slow
 * drift moves it back as far, gradually too. */
TEST(t_clock_drift) {
    static const int ppms[] = {50000, -50000};
    size_t i;

    for (i = 0; i < sizeof ppms / sizeof ppms[0]; i++) {
        test_redis_config cfg = {.clock_shift_ms = 1000};
        test_redis r;
        long long before, half, after, later, prev = 0, t;
        int end = 0, ppm = ppms[i], want = 1000 + ppm / 1000;
        int64_t until;

        CHECK(test_redis_start(&r, &cfg) == 0);
        before = shift_of(&r, 0);
        CHECK(test_redis_drift_clock(&r, ppm, 1000, &end) == 0);
        CHECK_EQ_INT(end, want);
        until = test_now_ms() + 1030;
        test_sleep_ms(530);
        half = shift_of(&r, 1);
        while (test_now_ms() < until + 20) {
            t = server_ms(&r, 0);
            CHECK_MSG(t >= prev, "TIME went back from %lld to %lld", prev, t);
            prev = t;
            test_sleep_ms(10);
        }
        after = shift_of(&r, 0);
        test_sleep_ms(300);
        later = shift_of(&r, 0);
        CHECK_MSG(before > 1000 - 20 && before < 1000 + 20, "%lld ms ahead before", before);
        CHECK_MSG(half > 1000 + ppm / 2000 - 15 && half < 1000 + ppm / 2000 + 15,
                  "%lld ms ahead half way (ppm %d)", half, ppm);
        CHECK_MSG(after > want - 15 && after < want + 15, "%lld ms ahead after, %d wanted", after,
                  want);
        CHECK_MSG(later > want - 15 && later < want + 15, "%lld ms ahead later, %d wanted", later,
                  want);
        CHECK(test_redis_restart(&r) == 0);
        after = shift_of(&r, 1);
        CHECK_MSG(after > want - 15 && after < want + 15, "%lld ms ahead after a restart", after);
        test_redis_stop(&r);
    }
}

/* With persistence turned on, a restart that keeps the folder brings the
 * data back; test_redis_restart's does not. */
/* The bytes of a file, in out (NUL-terminated); how many. */
static size_t slurp(const char *path, char *out, size_t cap) {
    FILE *f = fopen(path, "rb");
    size_t n = 0;

    if (f != NULL) {
        n = fread(out, 1, cap - 1, f);
        fclose(f);
    }
    out[n] = '\0';
    return n;
}

/* Two processes that make certificates under one TMPDIR (two torture runs
 * of a ctest -j, both in /dev/shm) each keep their own: a CA made by the
 * second must not replace the first's while its servers and clients use
 * it. Two children of one parent that has made none, each as another
 * program would. */
TEST(t_tls_certs_are_per_process) {
    int go[2], done[2], status;
    pid_t first, second;
    char c;

    CHECK(pipe(go) == 0 && pipe(done) == 0);
    first = fork();
    CHECK(first >= 0);
    if (first == 0) {
        static char before[8192], after[8192];
        const char *dir = test_tls_certs();
        char ca[700];

        if (dir == NULL)
            _exit(3);
        snprintf(ca, sizeof ca, "%s/ca.pem", dir);
        slurp(ca, before, sizeof before);
        if (write(go[1], "x", 1) != 1 || read(done[0], &c, 1) != 1)
            _exit(3);
        _exit(slurp(ca, after, sizeof after) > 0 && strcmp(before, after) == 0 ? 0 : 1);
    }
    CHECK(read(go[0], &c, 1) == 1); /* the first has its certificates */
    second = fork();
    CHECK(second >= 0);
    if (second == 0)
        _exit(test_tls_certs() != NULL ? 0 : 3);
    CHECK(waitpid(second, &status, 0) == second);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(write(done[1], "x", 1) == 1);
    CHECK(waitpid(first, &status, 0) == first);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the first process' ca.pem changed under it (status 0x%x)", status);
    close(go[0]);
    close(go[1]);
    close(done[0]);
    close(done[1]);
}

TEST(t_restart_keeping_data) {
    test_redis_config cfg = {.extra = "appendonly yes\nappendfsync always"};
    test_redis r;

    CHECK(test_redis_start(&r, &cfg) == 0);
    CHECK_STR_EQ(ADMIN(&r, "SET k v"), "+OK");
    CHECK(test_redis_restart_keeping_data(&r) == 0);
    CHECK_STR_EQ(ADMIN(&r, "GET k"), "$v");
    CHECK(test_redis_restart(&r) == 0);
    CHECK_STR_EQ(ADMIN(&r, "GET k"), "nil");
    test_redis_stop(&r);
}

/* ---- leash's layout: the scripts by id, and read back ---- */

static const char tok_a[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
static const char tok_b[] = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

/* The id of the script of d that cmd calls (cmd is freed). */
static int script_called(const leash__dialect *d, leash__cmd *cmd) {
    const char *argv[16];
    size_t lens[16], i;
    redisReply *args;
    int id;

    CHECK(cmd != NULL);
    args = test_cmd_args(cmd->buf, cmd->len);
    CHECK(args != NULL && args->elements >= 3);
    for (i = 0; i < args->elements && i < 16; i++) {
        argv[i] = args->element[i]->str;
        lens[i] = args->element[i]->len;
    }
    id = leash_script_in(d, (int)i, argv, lens);
    freeReplyObject(args);
    leash__cmd_free(cmd);
    return id;
}

/* Each command of a dialect calls the script its id names: the fake
 * servers and the benchmarks tell the scripts apart by these ids, so a
 * script put under another id in a dialect's array fails here. */
TEST(t_script_ids_name_the_scripts_each_command_calls) {
    const leash__dialect *d = &leash__dialect_leash, *rs = &leash__dialect_redisson;
    leash__names n, fam, rn;
    leash__renew_item item;
    int i, j;

    leash__dialects_init();
    memset(&n, 0, sizeof(n)); /* names() leaves what the owner sets (sharded, fenced) */
    memset(&fam, 0, sizeof(fam));
    memset(&rn, 0, sizeof(rn));
    CHECK_EQ_INT(d->nscripts, LEASH__LEASH_SCRIPT_COUNT);
    CHECK_EQ_INT(rs->nscripts, LEASH__REDISSON_SCRIPT_COUNT);
    for (i = 0; i < d->nscripts; i++)
        for (j = 0; j < i; j++)
            CHECK(d->scripts[i] != NULL && d->scripts[i] != d->scripts[j]);
    CHECK_EQ_INT(d->names(&n, NULL, "leash:", "ids", 0), LEASH_OK);
    CHECK_EQ_INT(d->family_names(&fam, NULL, "leash:", "ids", 0, tok_b), LEASH_OK);
    CHECK_EQ_INT(rs->names(&rn, NULL, "", "ids", 0), LEASH_OK);
    CHECK_EQ_INT(script_called(d, d->acquire_cmd(&n, tok_a, 1000, 1, 1, 0, 0)), LS_ACQUIRE);
    CHECK_EQ_INT(script_called(d, d->release_cmd(&n, tok_a, 0, 0, 0)), LS_RELEASE);
    item = (leash__renew_item){&n, tok_a, 1000, 0};
    CHECK_EQ_INT(script_called(d, d->renew_cmd(&item, 1, 0, 0)), LS_RENEW);
    CHECK_EQ_INT(script_called(d, d->force_cmd(&n, 0)), LS_FORCE);
    CHECK_EQ_INT(script_called(d, d->raise_cmd(&n, 7, 60000, 0)), LS_RAISE);
    CHECK_EQ_INT(
        script_called(d, d->family_acquire_cmd(&fam, tok_a, 1000, 'f', 0, 0, 1, NULL, 0, 0)),
        LS_FAMILY_ACQUIRE);
    CHECK_EQ_INT(script_called(d, d->family_release_cmd(&fam, tok_a, 0, 0, 0)), LS_FAMILY_RELEASE);
    CHECK_EQ_INT(script_called(rs, rs->acquire_cmd(&rn, tok_a, 1000, 1, 1, 0, 0)),
                 LEASH__REDISSON_SCRIPT_ACQUIRE);
    CHECK_EQ_INT(script_called(rs, rs->release_cmd(&rn, tok_a, 0, 0, 0)),
                 LEASH__REDISSON_SCRIPT_RELEASE);
    item = (leash__renew_item){&rn, tok_a, 1000, 0};
    CHECK_EQ_INT(script_called(rs, rs->renew_cmd(&item, 1, 0, 0)), LEASH__REDISSON_SCRIPT_RENEW);
    CHECK_EQ_INT(script_called(rs, rs->force_cmd(&rn, 0)), LEASH__REDISSON_SCRIPT_FORCE);
    CHECK_EQ_INT(script_called(rs, rs->raise_cmd(&rn, 7, 60000, 0)), LEASH__REDISSON_SCRIPT_RAISE);
    leash__names_clear(&n);
    leash__names_clear(&fam);
    leash__names_clear(&rn);
}

/* test_cmd_run, which must not fail. */
static redisReply *run_cmd(redisContext *c, leash__cmd *cmd) {
    redisReply *reply;

    CHECK(cmd != NULL);
    reply = test_cmd_run(c, cmd);
    CHECK(reply != NULL);
    CHECK_MSG(reply->type != REDIS_REPLY_ERROR, "%s", reply->str);
    return reply;
}

/* What d's read_state makes of key on c now. */
static void read_back(redisContext *c, const leash__dialect *d, const char *key, leash__state *st) {
    redisReply *type = redisCommand(c, "TYPE %s", key), *value = NULL, *pttl, *now;
    const char *cmd;

    CHECK(type != NULL && type->type == REDIS_REPLY_STATUS);
    if ((cmd = d->state_cmd(type->str)) != NULL)
        CHECK((value = redisCommand(c, "%s %s", cmd, key)) != NULL);
    pttl = redisCommand(c, "PTTL %s", key);
    now = redisCommand(c, "TIME");
    CHECK(pttl != NULL && now != NULL && now->elements == 2);
    CHECK_EQ_INT(d->read_state(type->str, value, pttl->integer,
                               strtoll(now->element[0]->str, NULL, 10) * 1000 +
                                   strtoll(now->element[1]->str, NULL, 10) / 1000,
                               st),
                 0);
    freeReplyObject(type);
    if (value != NULL)
        freeReplyObject(value);
    freeReplyObject(pttl);
    freeReplyObject(now);
}

/* read_state (and test_lock_value on it) reads what the dialects' own
 * scripts write: a mutex held, held twice, with a starving waiter queued,
 * kept for it; a read hold of the family; a Redisson hold; and keys that
 * are no lock. */
TEST(t_read_state_reads_what_the_scripts_write) {
    const leash__dialect *d = &leash__dialect_leash, *rs = &leash__dialect_redisson;
    leash__names n, fam, rn;
    leash__state st;
    test_redis r;
    redisContext *c;
    char token[33];
    uint64_t fence = 0;

    leash__dialects_init();
    CHECK(test_redis_start(&r, NULL) == 0);
    c = test_redis_connect_admin(&r, 2000);
    CHECK(c != NULL);
    memset(&n, 0, sizeof(n)); /* names() leaves what the owner sets (sharded, fenced) */
    memset(&fam, 0, sizeof(fam));
    memset(&rn, 0, sizeof(rn));
    CHECK_EQ_INT(d->names(&n, NULL, "leash:", "m", 0), LEASH_OK);
    CHECK_EQ_INT(d->family_names(&fam, NULL, "leash:", "f", 0, tok_b), LEASH_OK);
    CHECK_EQ_INT(rs->names(&rn, NULL, "", "rs", 0), LEASH_OK);

    CHECK_EQ_INT(test_lock_value(&r, "leash:m", token, &fence), 0);
    freeReplyObject(run_cmd(c, d->acquire_cmd(&n, tok_a, 60000, 1, 1, 0, 0)));
    CHECK_EQ_INT(test_lock_value(&r, "leash:m", token, &fence), 1);
    CHECK_STR_EQ(token, tok_a);
    CHECK(fence > 0);
    freeReplyObject(run_cmd(c, d->acquire_cmd(&n, tok_a, 60000, 2, 1, 0, 0)));
    CHECK_EQ_INT(test_lock_value(&r, "leash:m", NULL, NULL), 2);
    /* A waiter that waited 5 s past LEASH_STARVE_MS queues behind the hold. */
    freeReplyObject(
        run_cmd(c, d->acquire_cmd(&n, tok_b, 60000, -(LEASH_STARVE_MS + 5000), 1, 0, 0)));
    read_back(c, d, "leash:m", &st);
    CHECK_EQ_INT(st.kind, LEASH__STATE_MUTEX);
    CHECK_MSG(st.nholders == 1 && st.nwaiters == 1, "%zu holders, %zu waiters", st.nholders,
              st.nwaiters);
    CHECK_STR_EQ(st.holders[0].token, tok_a);
    CHECK_EQ_INT(st.holders[0].count, 2);
    CHECK(st.holders[0].fence == fence && st.fence == fence && st.marked);
    CHECK(st.holders[0].ttl_ms > 0 && st.holders[0].ttl_ms <= 60000);
    CHECK_STR_EQ(st.waiters[0].token, tok_b);
    CHECK_EQ_INT(st.waiters[0].count, 1);
    leash__state_clear(&st);
    /* The release keeps the lock for that waiter: nobody holds it. */
    freeReplyObject(run_cmd(c, d->release_cmd(&n, tok_a, 0, 0, 0)));
    read_back(c, d, "leash:m", &st);
    CHECK(st.kind == LEASH__STATE_MUTEX && st.nholders == 0 && st.nwaiters == 1);
    CHECK_STR_EQ(st.waiters[0].token, tok_b);
    leash__state_clear(&st);
    CHECK_EQ_INT(test_lock_value(&r, "leash:m", NULL, NULL), 0);

    freeReplyObject(
        run_cmd(c, d->family_acquire_cmd(&fam, tok_a, 60000, 'r', 0, 0, 1, NULL, 0, 0)));
    read_back(c, d, "leash:f", &st);
    CHECK(st.kind == LEASH__STATE_RW && st.nholders == 1 && st.nwaiters == 0);
    CHECK_STR_EQ(st.holders[0].token, tok_a);
    CHECK(st.holders[0].mode == 'r' && st.holders[0].count == 1 && st.holders[0].fence > 0);
    CHECK(st.holders[0].ttl_ms > 0 && st.holders[0].ttl_ms <= 60000);
    leash__state_clear(&st);
    CHECK_EQ_INT(test_lock_value(&r, "leash:f", NULL, NULL), -1); /* no mutex */

    freeReplyObject(run_cmd(c, rs->acquire_cmd(&rn, tok_a, 60000, 1, 1, 0, 0)));
    read_back(c, d, "rs", &st);
    CHECK_EQ_INT(st.kind, LEASH__STATE_OTHER); /* no lock of leash's own layout */
    read_back(c, rs, "rs", &st);
    CHECK(st.kind == LEASH__STATE_REDISSON && st.nholders == 1 && st.holders[0].count == 1);
    CHECK_STR_EQ(st.holders[0].token, "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa:0");
    leash__state_clear(&st);

    freeReplyObject(redisCommand(c, "SET leash:text %s", tok_a));
    CHECK_EQ_INT(test_lock_value(&r, "leash:text", NULL, NULL), -1);
    read_back(c, rs, "leash:text", &st);
    CHECK_EQ_INT(st.kind, LEASH__STATE_OTHER);
    read_back(c, d, "leash:none", &st);
    CHECK_EQ_INT(st.kind, LEASH__STATE_NONE);

    leash__names_clear(&n);
    leash__names_clear(&fam);
    leash__names_clear(&rn);
    redisFree(c);
    test_redis_stop(&r);
}

/* A Redlock renewal of several holds in one command (the watchdog batches
 * the holds due together): a spreading item has two keys, its lock's and
 * its fence floor's, so the item after it must read its own lock, whether
 * the one before renewed in place or spread. Each renews; and a floor gone
 * (its TTL: a hold renewed longer than the floor lives) must never have
 * the next lock's key written as a floor. */
TEST(t_redlock_renew_batch_reads_each_locks_own_keys) {
    const leash__dialect *d = &leash__dialect_leash;
    leash__names n1, n2;
    leash__renew_item items[2];
    test_redis r;
    redisContext *c;
    redisReply *rep;
    char floor1[LEASH__FLOOR_MAX], floor2[LEASH__FLOOR_MAX], v[64];
    size_t f1, f2;
    int round;

    leash__dialects_init();
    CHECK(test_redis_start(&r, NULL) == 0);
    c = test_redis_connect_admin(&r, 2000);
    CHECK(c != NULL);
    memset(&n1, 0, sizeof(n1));
    memset(&n2, 0, sizeof(n2));
    CHECK_EQ_INT(d->names(&n1, NULL, "leash:", "rb1", 0), LEASH_OK);
    CHECK_EQ_INT(d->names(&n2, NULL, "leash:", "rb2", 0), LEASH_OK);
    n1.fenced = n2.fenced = 1;
    f1 = leash__floor_name(&n1, floor1);
    f2 = leash__floor_name(&n2, floor2);
    freeReplyObject(redisCommand(c, "SET leash:rb1 %s:0:1:100 PX 60000", tok_a));
    freeReplyObject(redisCommand(c, "SET %b 100 PX 60000", floor1, f1));
    freeReplyObject(redisCommand(c, "SET leash:rb2 %s:0:1:200 PX 60000", tok_b));
    freeReplyObject(redisCommand(c, "SET %b 200 PX 60000", floor2, f2));
    items[0] = (leash__renew_item){&n1, tok_a, 60000, 100};
    items[1] = (leash__renew_item){&n2, tok_b, 60000, 200};
    for (round = 0; round < 2; round++) {
        if (round == 1) /* the first lock's floor expired */
            freeReplyObject(redisCommand(c, "DEL %b", floor1, f1));
        rep = run_cmd(c, d->renew_cmd(items, 2, 0, 0));
        /* Two answers and the server's clock. */
        CHECK(rep->type == REDIS_REPLY_ARRAY && rep->elements == 3);
        CHECK_MSG(rep->element[0]->integer == 1 && rep->element[1]->integer == 1,
                  "round %d: renewed %lld, %lld", round, rep->element[0]->integer,
                  rep->element[1]->integer);
        freeReplyObject(rep);
        rep = redisCommand(c, "GET leash:rb2");
        CHECK(rep != NULL);
        snprintf(v, sizeof(v), "%s", rep->type == REDIS_REPLY_STRING ? rep->str : "");
        freeReplyObject(rep);
        CHECK_MSG(strncmp(v, tok_b, 32) == 0, "round %d: leash:rb2 is \"%s\"", round, v);
    }
    leash__names_clear(&n1);
    leash__names_clear(&n2);
    redisFree(c);
    test_redis_stop(&r);
}

/* read_state takes for a lock what the scripts take for one, no more:
 * a hash with a fence but no held field, or a mutex string whose tail is
 * no queue, is a WRONGTYPE to the scripts and "other" here (the tool
 * showed the hash as a fair lock whose force release then failed). And
 * test_lock_value answers -1 for a holder token that is not 32 digits,
 * rather than copying 33 bytes of it without a NUL. */
TEST(t_read_state_takes_what_the_scripts_take_for_a_lock) {
    const leash__dialect *d = &leash__dialect_leash;
    leash__names fam, n;
    leash__state st;
    test_redis r;
    redisContext *c;
    redisReply *rep;
    char token[33];
    static const char live[] = "f:1:5:cccccccccccccccccccccccccccccccc:99999999999999";

    leash__dialects_init();
    CHECK(test_redis_start(&r, NULL) == 0);
    c = test_redis_connect_admin(&r, 2000);
    CHECK(c != NULL);
    memset(&fam, 0, sizeof(fam));
    memset(&n, 0, sizeof(n));
    CHECK_EQ_INT(d->family_names(&fam, NULL, "leash:", "nh", 0, tok_b), LEASH_OK);
    CHECK_EQ_INT(d->names(&n, NULL, "leash:", "tail", 0), LEASH_OK);

    /* A family hash without held: the scripts refuse it, so does the reader. */
    freeReplyObject(redisCommand(c, "HSET leash:nh fence2 5 h%s %s", tok_a, live));
    rep = test_cmd_run(c, d->family_acquire_cmd(&fam, tok_b, 1000, 'f', 0, 0, 1, NULL, 0, 0));
    CHECK(rep != NULL && rep->type == REDIS_REPLY_ERROR && strstr(rep->str, "WRONGTYPE") != NULL);
    freeReplyObject(rep);
    read_back(c, d, "leash:nh", &st);
    CHECK_EQ_INT(st.kind, LEASH__STATE_OTHER);
    CHECK(st.nholders == 0 && st.holders == NULL);
    /* With held, it is the fair lock it says it is. */
    freeReplyObject(redisCommand(c, "HSET leash:nh held 1"));
    read_back(c, d, "leash:nh", &st);
    CHECK_EQ_INT(st.kind, LEASH__STATE_FAIR);
    CHECK(st.nholders == 1 && st.holders[0].count == 1 && st.holders[0].fence == 5);
    leash__state_clear(&st);

    /* A mutex whose tail is no queue of ":<token>:<since>". */
    freeReplyObject(redisCommand(c, "SET leash:tail %s:1:2:17:zz:1 PX 60000", tok_a));
    rep = test_cmd_run(c, d->acquire_cmd(&n, tok_b, 1000, 1, 1, 0, 0));
    CHECK(rep != NULL && rep->type == REDIS_REPLY_ERROR && strstr(rep->str, "WRONGTYPE") != NULL);
    freeReplyObject(rep);
    read_back(c, d, "leash:tail", &st);
    CHECK_EQ_INT(st.kind, LEASH__STATE_OTHER);
    CHECK_EQ_INT(test_lock_value(&r, "leash:tail", NULL, NULL), -1);

    /* A holder token of 40 hex digits: the scripts' %x+ takes it, the
     * 33-byte token of test_lock_value cannot. */
    freeReplyObject(redisCommand(c, "SET leash:long %s01234567:0:1:5 PX 60000", tok_a));
    memset(token, 'x', sizeof(token));
    CHECK_EQ_INT(test_lock_value(&r, "leash:long", token, NULL), -1);
    read_back(c, d, "leash:long", &st);
    CHECK(st.kind == LEASH__STATE_MUTEX && st.nholders == 1 && strlen(st.holders[0].token) == 40);
    leash__state_clear(&st);

    leash__names_clear(&fam);
    leash__names_clear(&n);
    redisFree(c);
    test_redis_stop(&r);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--harness-demo") == 0)
        return test_main(argc - 1, argv + 1, demo_cases);
    return test_main(argc, argv,
                     (test_case[]){
                         TEST_CASE(t_harness_reports),
                         TEST_CASE(t_harness_selects),
                         TEST_CASE(t_tcp_ping),
                         TEST_CASE(t_unix_ping),
                         TEST_CASE(t_requirepass),
                         TEST_CASE(t_acl_user),
                         TEST_CASE(t_acl_default_locked),
                         TEST_CASE(t_bad_config),
                         TEST_CASE(t_extra_config),
                         TEST_CASE(t_restart_same_port_no_data),
                         TEST_CASE(t_restart_unix),
                         TEST_CASE(t_kill_then_restart),
                         TEST_CASE(t_clock_shift),
                         TEST_CASE(t_clock_drift),
                         TEST_CASE(t_restart_keeping_data),
                         TEST_CASE(t_tls_certs_are_per_process),
                         TEST_CASE(t_freeze_thaw),
                         TEST_CASE(t_calls),
                         TEST_CASE(t_two_servers),
                         TEST_CASE(t_evloop),
                         TEST_CASE(t_script_ids_name_the_scripts_each_command_calls),
                         TEST_CASE(t_read_state_reads_what_the_scripts_write),
                         TEST_CASE(t_read_state_takes_what_the_scripts_take_for_a_lock),
                         TEST_CASE(t_redlock_renew_batch_reads_each_locks_own_keys),
                         {0},
                     });
}
