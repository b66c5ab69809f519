/* SPDX-License-Identifier: MIT */
/*
 * The network lab (tests/support/netlab.h) does what the fault tests build
 * on: nodes reach each other over the bridge; a cut, a one-way cut, a
 * black hole for new connects and an isolated node each stop what they
 * say and nothing else; healing brings the paths back; and a run that is
 * killed leaves no namespace and no process behind.
 *
 * Needs root, `ip` and `nft`; says SKIP and exits 77 without them.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "check.h"
#include "netlab.h"

/* A connect that gets no answer in this long counts as blocked: far more
 * than a round trip over a bridge, far less than a case's time. */
#define BLOCKED_MS 700
#define REDIS_PORT 6379

enum reach {
    REACH_PONG = 0,
    REACH_NONE = 1,
    REACH_REFUSED = 2,
    REACH_OTHER = 3
};

/* From a child in node `from`: connect to addr:port and PING. */
static enum reach reach_from(netlab *lab, int from, const char *addr, int port) {
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (netlab_enter(lab, from) != 0)
            _exit(REACH_OTHER);
        struct timeval tv = {BLOCKED_MS / 1000, (BLOCKED_MS % 1000) * 1000};
        redisContext *c = redisConnectWithTimeout(addr, port, tv);
        if (c == NULL)
            _exit(REACH_OTHER);
        if (c->err) {
            int refused = strstr(c->errstr, "refused") != NULL;
            _exit(refused ? REACH_REFUSED : REACH_NONE);
        }
        redisSetTimeout(c, tv);
        redisReply *r = redisCommand(c, "PING");
        int pong = r != NULL && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
        _exit(pong ? REACH_PONG : REACH_NONE);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    return (enum reach)WEXITSTATUS(status);
}

/* A redis-server on the node's address (every address with `any`),
 * answering PING from `probe`. */
static pid_t start_redis_on(netlab *lab, int node, int probe, int any) {
    char port[8];
    snprintf(port, sizeof port, "%d", REDIS_PORT);
    const char *bin = getenv("LEASH_REDIS_SERVER");
    char *argv[] = {(char *)(bin != NULL ? bin : "redis-server"),
                    "--bind",
                    (char *)(any ? "0.0.0.0" : netlab_addr(lab, node)),
                    "--port",
                    port,
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--protected-mode",
                    "no",
                    "--logfile",
                    "/dev/null",
                    NULL};
    pid_t pid = netlab_spawn(lab, node, argv);
    CHECK(pid > 0);
    int64_t until = test_now_ms() + 10000;
    while (reach_from(lab, probe, netlab_addr(lab, node), REDIS_PORT) != REACH_PONG) {
        CHECK(test_now_ms() < until);
        test_sleep_ms(50);
    }
    return pid;
}

static pid_t start_redis(netlab *lab, int node, int probe) {
    return start_redis_on(lab, node, probe, 0);
}

TEST(t_cut_and_heal) {
    netlab *lab = netlab_new(NULL);
    CHECK(lab != NULL);
    int srv = netlab_node(lab, "redis"), a = netlab_node(lab, "a"), b = netlab_node(lab, "b");
    CHECK(srv == 0 && a == 1 && b == 2);
    start_redis(lab, srv, a);
    const char *addr = netlab_addr(lab, srv);
    CHECK(reach_from(lab, b, addr, REDIS_PORT) == REACH_PONG);
    /* A closed port answers: the path is there. */
    CHECK(reach_from(lab, a, addr, REDIS_PORT + 1) == REACH_REFUSED);

    CHECK(netlab_cut(lab, srv, a) == 0);
    int64_t t0 = test_now_ms();
    CHECK(reach_from(lab, a, addr, REDIS_PORT) == REACH_NONE);
    CHECK(test_now_ms() - t0 >= BLOCKED_MS); /* silence, not a refusal */
    CHECK(reach_from(lab, b, addr, REDIS_PORT) == REACH_PONG);

    CHECK(netlab_heal(lab) == 0);
    CHECK(reach_from(lab, a, addr, REDIS_PORT) == REACH_PONG);
    netlab_free(lab);
}

TEST(t_one_way) {
    netlab *lab = netlab_new(NULL);
    CHECK(lab != NULL);
    int srv = netlab_node(lab, "redis"), a = netlab_node(lab, "a"), b = netlab_node(lab, "b");
    start_redis(lab, srv, b);
    /* Replies from the server to a are lost: a's SYN arrives, its SYN-ACK
     * does not. */
    CHECK(netlab_cut_oneway(lab, srv, a) == 0);
    CHECK(reach_from(lab, a, netlab_addr(lab, srv), REDIS_PORT) == REACH_NONE);
    CHECK(reach_from(lab, b, netlab_addr(lab, srv), REDIS_PORT) == REACH_PONG);
    /* The other way round, a's requests are lost instead. */
    CHECK(netlab_heal(lab) == 0);
    CHECK(netlab_cut_oneway(lab, a, srv) == 0);
    CHECK(reach_from(lab, a, netlab_addr(lab, srv), REDIS_PORT) == REACH_NONE);
    CHECK(netlab_heal(lab) == 0);
    CHECK(reach_from(lab, a, netlab_addr(lab, srv), REDIS_PORT) == REACH_PONG);
    netlab_free(lab);
}

/* New connects vanish; a connection made before goes on answering. */
TEST(t_drop_syn) {
    netlab *lab = netlab_new(NULL);
    CHECK(lab != NULL);
    int srv = netlab_node(lab, "redis"), a = netlab_node(lab, "a");
    start_redis(lab, srv, a);
    int ready[2], go[2];
    CHECK(pipe(ready) == 0 && pipe(go) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (netlab_enter(lab, a) != 0)
            _exit(3);
        struct timeval tv = {2, 0};
        redisContext *c = redisConnectWithTimeout(netlab_addr(lab, srv), REDIS_PORT, tv);
        if (c == NULL || c->err)
            _exit(3);
        redisSetTimeout(c, tv);
        char byte = 'r';
        if (write(ready[1], &byte, 1) != 1 || read(go[0], &byte, 1) != 1)
            _exit(3);
        redisReply *r = redisCommand(c, "PING");
        _exit(r != NULL && r->type == REDIS_REPLY_STATUS ? 0 : 1);
    }
    char byte;
    CHECK(read(ready[0], &byte, 1) == 1);
    CHECK(netlab_drop_syn(lab, srv, REDIS_PORT) == 0);
    CHECK(reach_from(lab, a, netlab_addr(lab, srv), REDIS_PORT) == REACH_NONE);
    /* Only that port: another one still refuses at once. */
    CHECK(reach_from(lab, a, netlab_addr(lab, srv), REDIS_PORT + 1) == REACH_REFUSED);
    CHECK(write(go[1], "g", 1) == 1);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    netlab_free(lab);
}

TEST(t_isolate) {
    netlab *lab = netlab_new(NULL);
    CHECK(lab != NULL);
    int srv = netlab_node(lab, "redis"), a = netlab_node(lab, "a"), b = netlab_node(lab, "b");
    start_redis(lab, srv, a);
    CHECK(netlab_isolate(lab, a) == 0);
    CHECK(reach_from(lab, a, netlab_addr(lab, srv), REDIS_PORT) == REACH_NONE);
    CHECK(reach_from(lab, b, netlab_addr(lab, srv), REDIS_PORT) == REACH_PONG);
    CHECK(netlab_heal(lab) == 0);
    CHECK(reach_from(lab, a, netlab_addr(lab, srv), REDIS_PORT) == REACH_PONG);
    netlab_free(lab);
}

/* A node that moves: its old address goes silent, the new one answers;
 * and back. */
TEST(t_readdress) {
    netlab *lab = netlab_new(NULL);
    CHECK(lab != NULL);
    int srv = netlab_node(lab, "redis"), a = netlab_node(lab, "a");
    start_redis_on(lab, srv, a, 1);
    const char *addr = netlab_addr(lab, srv), *alt = netlab_alt_addr(lab, srv);
    CHECK(strcmp(addr, alt) != 0);
    CHECK(reach_from(lab, a, alt, REDIS_PORT) == REACH_NONE);
    CHECK(netlab_readdress(lab, srv, 1) == 0);
    CHECK(strcmp(netlab_addr(lab, srv), addr) == 0); /* still its own address */
    CHECK(reach_from(lab, a, alt, REDIS_PORT) == REACH_PONG);
    CHECK(reach_from(lab, a, addr, REDIS_PORT) == REACH_NONE);
    CHECK(netlab_readdress(lab, srv, 1) == 0); /* already there */
    CHECK(netlab_readdress(lab, srv, 0) == 0);
    CHECK(reach_from(lab, a, addr, REDIS_PORT) == REACH_PONG);
    CHECK(reach_from(lab, a, alt, REDIS_PORT) == REACH_NONE);
    netlab_free(lab);
}

/* The inode of the network namespace that process pid is in; 0 if gone. */
static ino_t netns_of(pid_t pid) {
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
    return stat(path, &st) == 0 ? st.st_ino : 0;
}

/* Whether any process on the machine is in the namespace with this inode. */
static int netns_in_use(ino_t ino) {
    DIR *proc = opendir("/proc");
    CHECK(proc != NULL);
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(proc)) != NULL;) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end == '\0' && pid > 0 && netns_of((pid_t)pid) == ino)
            found = 1;
    }
    closedir(proc);
    return found;
}

/* A run killed by SIGKILL, which runs no cleanup of its own, leaves no
 * namespace and no process of the lab behind. */
TEST(t_killed_run_leaves_nothing) {
    int report[2];
    CHECK(pipe(report) == 0);
    pid_t run = fork();
    CHECK(run >= 0);
    if (run == 0) {
        netlab *lab = netlab_new(NULL);
        if (lab == NULL)
            _exit(1);
        int node = netlab_node(lab, "n");
        char *argv[] = {"sleep", "600", NULL};
        pid_t sleeper = node < 0 ? -1 : netlab_spawn(lab, node, argv);
        if (sleeper < 0)
            _exit(1);
        /* Wait until the sleeper is in the node's namespace, not ours. */
        ino_t own = netns_of(getpid()), ino;
        while ((ino = netns_of(sleeper)) == own || ino == 0)
            test_sleep_ms(5);
        if (write(report[1], &sleeper, sizeof sleeper) != sizeof sleeper ||
            write(report[1], &ino, sizeof ino) != sizeof ino)
            _exit(1);
        pause();
        _exit(0);
    }
    pid_t sleeper;
    ino_t ino;
    CHECK(read(report[0], &sleeper, sizeof sleeper) == sizeof sleeper);
    CHECK(read(report[0], &ino, sizeof ino) == sizeof ino);
    CHECK(netns_in_use(ino));
    CHECK(kill(run, SIGKILL) == 0);
    CHECK(waitpid(run, NULL, 0) == run);
    int64_t until = test_now_ms() + 3000 + TEST_SLACK_MS;
    while (netns_in_use(ino)) {
        CHECK(test_now_ms() < until);
        test_sleep_ms(20);
    }
}

int main(int argc, char **argv) {
    char why[160];
    if (!netlab_usable(why, sizeof why)) {
        printf("SKIP test_netlab: %s\n", why);
        return 77;
    }
    return test_main(argc, argv,
                     (test_case[]){
                         TEST_CASE(t_cut_and_heal),
                         TEST_CASE(t_one_way),
                         TEST_CASE(t_drop_syn),
                         TEST_CASE(t_isolate),
                         TEST_CASE(t_readdress),
                         TEST_CASE(t_killed_run_leaves_nothing),
                         {0},
                     });
}
