/* SPDX-License-Identifier: MIT */
/*
 * prefork-server: an nginx-style HTTP server that uses leash for two jobs.
 *
 * The master (this file) opens one listening socket on 127.0.0.1, forks N
 * workers that share it, restarts a worker that dies, and on SIGTERM or
 * SIGINT stops them all. It never runs an event loop itself: each worker
 * makes its own libev loop and its own leash client after the fork (a loop
 * or a hiredis connection must never cross a fork). See worker.c and
 * maintenance.c, and README.md beside them.
 *
 *   prefork-server --port 8080 --workers 4 --redis-port 6379
 */
#define _GNU_SOURCE /* sigtimedwait, getopt_long */

#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "server.h"

#define MAX_WORKERS 64

typedef struct slot {
    pid_t pid;          /* 0: not running */
    int64_t started_ms; /* when it was forked */
    int64_t respawn_ms; /* when to fork it again, if pid is 0 */
} slot;

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void usage(FILE *to) {
    fprintf(to,
            "usage: prefork-server [options]\n"
            "  --port N           listen on 127.0.0.1:N (0: a free port; default 8080)\n"
            "  --workers N        worker processes (default 2)\n"
            "  --redis-host IP    Redis address (default 127.0.0.1)\n"
            "  --redis-port N     Redis port (default 6379)\n"
            "  --lease-ms N       lease of every lock, renewed by the watchdog (default 3000)\n"
            "  --wait-ms N        how long a payment waits for its order's lock (default 2000)\n"
            "  --pay-ms N         how long the pretend payment provider takes (default 100)\n"
            "  --job-every-ms N   how often each worker tries the maintenance job (default 1000)\n"
            "  --job-steps N      steps of one maintenance run (default 5)\n"
            "  --step-ms N        duration of one step (default 200)\n");
}

static int parse_args(int argc, char **argv, server_config *cfg) {
    static const struct option opts[] = {
        {"port", required_argument, NULL, 'p'},
        {"workers", required_argument, NULL, 'w'},
        {"redis-host", required_argument, NULL, 'H'},
        {"redis-port", required_argument, NULL, 'P'},
        {"lease-ms", required_argument, NULL, 'l'},
        {"wait-ms", required_argument, NULL, 't'},
        {"pay-ms", required_argument, NULL, 'y'},
        {"job-every-ms", required_argument, NULL, 'e'},
        {"job-steps", required_argument, NULL, 's'},
        {"step-ms", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    cfg->redis_host = "127.0.0.1";
    cfg->redis_port = 6379;
    cfg->port = 8080;
    cfg->workers = 2;
    cfg->lease_ms = 3000;
    cfg->wait_ms = 2000;
    cfg->pay_ms = 100;
    cfg->job_every_ms = 1000;
    cfg->job_steps = 5;
    cfg->step_ms = 200;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            cfg->port = atoi(optarg);
            break;
        case 'w':
            cfg->workers = atoi(optarg);
            break;
        case 'H':
            cfg->redis_host = optarg;
            break;
        case 'P':
            cfg->redis_port = atoi(optarg);
            break;
        case 'l':
            cfg->lease_ms = atoll(optarg);
            break;
        case 't':
            cfg->wait_ms = atoll(optarg);
            break;
        case 'y':
            cfg->pay_ms = atoll(optarg);
            break;
        case 'e':
            cfg->job_every_ms = atoll(optarg);
            break;
        case 's':
            cfg->job_steps = atoi(optarg);
            break;
        case 'S':
            cfg->step_ms = atoll(optarg);
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            return -1;
        }
    }
    if (optind != argc || cfg->port < 0 || cfg->port > 65535 || cfg->workers < 1 ||
        cfg->workers > MAX_WORKERS || cfg->redis_port <= 0 || cfg->lease_ms < 10 ||
        cfg->wait_ms < 0 || cfg->pay_ms < 0 || cfg->job_every_ms < 1 || cfg->job_steps < 1 ||
        cfg->step_ms < 1)
        return -1;
    return 0;
}

/* The socket every worker accepts on: non-blocking, so that a worker that
 * lost the race for a connection gets EAGAIN instead of blocking. */
static int listen_on(int port) {
    struct sockaddr_in sa;
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 511) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static pid_t spawn(int listen_fd, const server_config *cfg, const sigset_t *old_mask) {
    pid_t pid = fork();

    if (pid != 0)
        return pid; /* the master, or -1 */
    /* The worker: signals as they were before the master blocked them. */
    sigprocmask(SIG_SETMASK, old_mask, NULL);
    exit(worker_main(listen_fd, cfg)); /* stdout was flushed before the fork */
}

static void stop_all(slot *slots, int n) {
    int64_t deadline = now_ms() + 5000;
    int i, alive, status;
    pid_t pid;

    for (i = 0; i < n; i++)
        if (slots[i].pid > 0)
            kill(slots[i].pid, SIGTERM);
    do {
        alive = 0;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
            for (i = 0; i < n; i++)
                if (slots[i].pid == pid)
                    slots[i].pid = 0;
        for (i = 0; i < n; i++)
            alive += slots[i].pid > 0;
        if (alive)
            usleep(10 * 1000);
    } while (alive && now_ms() < deadline);
    for (i = 0; i < n; i++) {
        if (slots[i].pid > 0) {
            fprintf(stderr, "[master] worker %d did not stop: SIGKILL\n", (int)slots[i].pid);
            kill(slots[i].pid, SIGKILL);
            waitpid(slots[i].pid, &status, 0);
        }
    }
}

int main(int argc, char **argv) {
    server_config cfg;
    slot slots[MAX_WORKERS];
    sigset_t set, old_mask;
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    struct timespec wait;
    int listen_fd, i, sig, status;
    int64_t next, now;
    pid_t pid;

    if (parse_args(argc, argv, &cfg) != 0) {
        usage(stderr);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN); /* inherited: a closed peer is an error, not a signal */
    listen_fd = listen_on(cfg.port);
    if (listen_fd < 0 || getsockname(listen_fd, (struct sockaddr *)&sa, &len) != 0) {
        fprintf(stderr, "[master] cannot listen on 127.0.0.1:%d: %s\n", cfg.port, strerror(errno));
        return 1;
    }
    printf("listening on 127.0.0.1:%d\n", ntohs(sa.sin_port));
    fflush(stdout); /* before forking, or the workers would print it again */

    /* The master handles its signals synchronously (sigtimedwait): no
     * handler runs between a fork and the bookkeeping of its pid. */
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, &old_mask);

    memset(slots, 0, sizeof(slots));
    for (;;) {
        now = now_ms();
        next = now + 1000;
        for (i = 0; i < cfg.workers; i++) {
            if (slots[i].pid == 0 && slots[i].respawn_ms <= now) {
                pid = spawn(listen_fd, &cfg, &old_mask);
                if (pid < 0) {
                    fprintf(stderr, "[master] fork: %s\n", strerror(errno));
                    slots[i].respawn_ms = now + 1000;
                } else {
                    slots[i].pid = pid;
                    slots[i].started_ms = now;
                    fprintf(stderr, "[master] worker %d started\n", (int)pid);
                }
            }
            if (slots[i].pid == 0 && slots[i].respawn_ms < next)
                next = slots[i].respawn_ms;
        }
        wait.tv_sec = (time_t)((next - now) / 1000);
        wait.tv_nsec = (long)((next - now) % 1000) * 1000000;
        sig = sigtimedwait(&set, NULL, &wait);
        if (sig == SIGTERM || sig == SIGINT) {
            fprintf(stderr, "[master] stopping the workers\n");
            stop_all(slots, cfg.workers);
            return 0;
        }
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            for (i = 0; i < cfg.workers; i++) {
                if (slots[i].pid != pid)
                    continue;
                if (WIFSIGNALED(status))
                    fprintf(stderr, "[master] worker %d killed by signal %d\n", (int)pid,
                            WTERMSIG(status));
                else
                    fprintf(stderr, "[master] worker %d exited with status %d\n", (int)pid,
                            WEXITSTATUS(status));
                slots[i].pid = 0;
                /* One that dies young is restarted after a pause, not in a
                 * tight loop. */
                slots[i].respawn_ms = now_ms() - slots[i].started_ms < 1000 ? now_ms() + 1000 : 0;
            }
        }
    }
}
