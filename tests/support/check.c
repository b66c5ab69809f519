/* SPDX-License-Identifier: MIT */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* prctl, pipe2, nftw, mkdtemp */
#endif

#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Failure text sent from a case's child to the runner. Kept below
 * PIPE_BUF so that one write() is atomic and never blocks on a full pipe
 * while the runner is not reading. */
#define FAIL_MSG_MAX 1024

/* Write end of the pipe to the runner, in a case's child; -1 elsewhere. */
static int fail_fd = -1;
static char run_dir[256];

int64_t test_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void test_sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static const test_case *current_case;

const test_case *test_current(void) {
    return current_case;
}

const char *test_tmpdir(void) {
    const char *t;

    if (run_dir[0])
        return run_dir;
    t = getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

void (*test_on_fail)(void);

static TEST_NORETURN_ void fail_out(const char *msg) {
    size_t len = strlen(msg);
    void (*on_fail)(void) = test_on_fail;

    test_on_fail = NULL; /* a CHECK that fails inside it ends here */
    if (on_fail != NULL)
        on_fail();

    /* stdout may hold output of the case that helps to read the failure. */
    fflush(stdout);
    fprintf(stderr, "%s\n", msg);
    fflush(stderr);
    if (fail_fd >= 0) {
        ssize_t n = write(fail_fd, msg, len);
        (void)n;
    }
    exit(1);
}

void test_fail_(const char *file, int line, const char *what) {
    char msg[FAIL_MSG_MAX];

    snprintf(msg, sizeof msg, "%s:%d: %s failed", file, line, what);
    fail_out(msg);
}

void test_failf_(const char *file, int line, const char *what, const char *fmt, ...) {
    char msg[FAIL_MSG_MAX];
    va_list ap;
    int n;

    n = snprintf(msg, sizeof msg, "%s:%d: %s failed: ", file, line, what);
    if (n < 0)
        n = 0;
    if ((size_t)n < sizeof msg) {
        va_start(ap, fmt);
        vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
        va_end(ap);
    }
    fail_out(msg);
}

void test_check_str_eq_(const char *file, int line, const char *what, const char *a,
                        const char *b) {
    if (a == b || (a && b && strcmp(a, b) == 0))
        return;
    if (!a || !b)
        test_failf_(file, line, what, "%s%s%s != %s%s%s", a ? "\"" : "", a ? a : "NULL",
                    a ? "\"" : "", b ? "\"" : "", b ? b : "NULL", b ? "\"" : "");
    test_failf_(file, line, what, "\"%s\" != \"%s\"", a, b);
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st;
    (void)type;
    (void)ftw;
    remove(path);
    return 0;
}

void test_remove_tree(const char *path) {
    nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void make_run_dir(void) {
    const char *base = test_tmpdir();

    /* Unix socket paths must fit 108 bytes; a long $TMPDIR would leave no
     * room for the servers' folders, so fall back to /tmp. */
    if (strlen(base) > 40)
        base = "/tmp";
    snprintf(run_dir, sizeof run_dir, "%s/leash-test-XXXXXX", base);
    if (!mkdtemp(run_dir))
        run_dir[0] = '\0';
}

/* Only in the child: the case runs in a process group of its own, so that
 * the runner can end it together with everything it started. */
static TEST_NORETURN_ void run_child(const test_case *tc, int wfd, pid_t runner) {
    setpgid(0, 0);
    /* Without the runner nobody reports the result; and a case stuck
     * because its runner was killed by ctest must not live on. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != runner)
        _exit(1);
    fail_fd = wfd;
    current_case = tc;
    tc->fn();
    fflush(stdout);
    exit(0);
}

static void read_msg(int fd, char *buf, size_t *len, size_t cap) {
    char scratch[512];
    ssize_t n;

    for (;;) {
        n = read(fd, scratch, sizeof scratch);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        /* Keep the first message; a later one (from a grandchild, say) is
         * dropped rather than blocking the writer. */
        if (*len + 1 < cap) {
            size_t take = (size_t)n;
            if (take > cap - 1 - *len)
                take = cap - 1 - *len;
            memcpy(buf + *len, scratch, take);
            *len += take;
            buf[*len] = '\0';
        }
    }
}

/* Returns 1 when the case passed. */
static int run_case(const test_case *tc) {
    char msg[FAIL_MSG_MAX + 1] = "";
    size_t msg_len = 0;
    int timeout_s = tc->timeout_s > 0 ? tc->timeout_s : TEST_DEFAULT_TIMEOUT_S;
    int fds[2];
    int status = 0, timed_out = 0;
    int64_t start, deadline, elapsed;
    pid_t runner = getpid(), pid;

    if (pipe2(fds, O_CLOEXEC) != 0) {
        printf("FAIL %s: pipe: %s\n", tc->name, strerror(errno));
        return 0;
    }
    /* Whatever is buffered would otherwise be printed twice. */
    fflush(stdout);
    fflush(stderr);
    start = test_now_ms();
    pid = fork();
    if (pid < 0) {
        printf("FAIL %s: fork: %s\n", tc->name, strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return 0;
    }
    if (pid == 0) {
        close(fds[0]);
        run_child(tc, fds[1], runner);
    }
    close(fds[1]);
    /* Set on both sides: whichever runs first, the group exists before
     * the runner could need to kill it. */
    setpgid(pid, pid);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);

    deadline = start + (int64_t)timeout_s * 1000;
    for (;;) {
        siginfo_t si;
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};

        /* WNOWAIT leaves the child a zombie, so its pid, which is also
         * the id of its group, cannot be reused before the kill below. */
        memset(&si, 0, sizeof si);
        if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid)
            break;
        if (test_now_ms() >= deadline) {
            timed_out = 1;
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            break;
        }
        if (poll(&pfd, 1, 10) > 0)
            read_msg(fds[0], msg, &msg_len, sizeof msg);
    }
    /* Servers and helpers that the case left behind end with it. */
    kill(-pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    /* As subreaper the runner inherited the case's orphans; reaping them
     * here leaves no zombie, whatever pid 1 does about them. */
    while (waitpid(-pid, NULL, 0) > 0 || errno == EINTR)
        ;
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
    elapsed = test_now_ms() - start;
    read_msg(fds[0], msg, &msg_len, sizeof msg);
    close(fds[0]);

    if (timed_out) {
        printf("FAIL %s: timed out after %d s\n", tc->name, timeout_s);
        return 0;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        printf("PASS %s (%lld ms)\n", tc->name, (long long)elapsed);
        return 1;
    }
    if (msg_len > 0)
        printf("FAIL %s: %s\n", tc->name, msg);
    else if (WIFSIGNALED(status))
        printf("FAIL %s: killed by signal %d (%s)\n", tc->name, WTERMSIG(status),
               strsignal(WTERMSIG(status)));
    else
        printf("FAIL %s: exited with status %d\n", tc->name, WEXITSTATUS(status));
    return 0;
}

static int selected(const test_case *tc, int argc, char **argv) {
    int i, any = 0;

    for (i = 1; i < argc; i++) {
        if (argv[i][0] == '-')
            continue;
        any = 1;
        if (strcmp(argv[i], tc->name) == 0)
            return 1;
    }
    return !any;
}

int test_main(int argc, char **argv, const test_case *cases) {
    const test_case *tc;
    int i, no_fork = 0, passed = 0, failed = 0;

    /* As leash asks of every program: a write to a socket that the server
     * closed (a killed or restarted redis-server) is an error, not death. */
    signal(SIGPIPE, SIG_IGN);
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--list") == 0) {
            for (tc = cases; tc->name; tc++)
                printf("%s\n", tc->name);
            return 0;
        } else if (strcmp(argv[i], "--no-fork") == 0) {
            no_fork = 1;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: %s [--list] [--no-fork] [case...]\n", argv[0]);
            return 2;
        } else {
            for (tc = cases; tc->name; tc++)
                if (strcmp(argv[i], tc->name) == 0)
                    break;
            if (!tc->name) {
                fprintf(stderr, "%s: no test case named '%s'\n", argv[0], argv[i]);
                return 2;
            }
        }
    }

    /* A test killed halfway through may leave Redis folders behind; under
     * one folder per run they are at least easy to find. */
    if (!no_fork) {
        make_run_dir();
        prctl(PR_SET_CHILD_SUBREAPER, 1);
    }

    for (tc = cases; tc->name; tc++) {
        if (!selected(tc, argc, argv))
            continue;
        if (no_fork) {
            int64_t start = test_now_ms();
            current_case = tc;
            tc->fn();
            current_case = NULL;
            printf("PASS %s (%lld ms)\n", tc->name, (long long)(test_now_ms() - start));
            passed++;
        } else if (run_case(tc)) {
            passed++;
        } else {
            failed++;
        }
        fflush(stdout);
    }

    if (run_dir[0]) {
        test_remove_tree(run_dir);
        run_dir[0] = '\0';
    }
    printf("%d passed, %d failed\n", passed, failed);
    fflush(stdout);
    return failed ? 1 : 0;
}
