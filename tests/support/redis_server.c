/* SPDX-License-Identifier: MIT */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* prctl, mkdtemp, syscall, setns */
#endif

#include "redis_server.h"

#include "check.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define READY_TIMEOUT_MS 5000
#define STOP_TIMEOUT_MS 3000
#define START_ATTEMPTS 5
#define ADMIN_CONNECT_TIMEOUT_MS 2000
#define ADMIN_COMMAND_TIMEOUT_MS 3000

static struct timeval ms_to_tv(int ms) {
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    return tv;
}

static const char *redis_binary(void) {
    static char found[4096];
    const char *env = getenv("LEASH_REDIS_SERVER");
    const char *path = getenv("PATH");

    if (env && *env)
        return env;
    while (path && *path) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);

        if (len > 0 && len < sizeof found - 16) {
            snprintf(found, sizeof found, "%.*s/redis-server", (int)len, path);
            if (access(found, X_OK) == 0)
                return found;
        }
        path = end ? end + 1 : NULL;
    }
    return "/usr/bin/redis-server";
}

/* Binds 127.0.0.1:port (0: a port the kernel picks) and lets it go: the
 * port, or -1 when it was taken. */
static int bind_port(int port) {
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    int fd;

    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((unsigned short)port);
    port = -1;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

/* The port is free now; nothing keeps it free until Redis binds it, which
 * is why a start that fails is tried again on another port. */
int test_redis_free_port(void) {
    return bind_port(0);
}

int test_redis_port_is_free(int port) {
    return port > 0 && port < 65536 && bind_port(port) == port;
}

static void path_in_dir(const test_redis *r, const char *name, char *out, size_t cap) {
    snprintf(out, cap, "%s/%s", r->dir, name);
}

/* Redis reads a config argument in double quotes with C-like escapes, so
 * paths and passwords survive spaces and quotes. */
void test_redis_put_config(FILE *f, const char *name, const char *value) {
    fprintf(f, "%s \"", name);
    for (; *value; value++) {
        if (*value == '"' || *value == '\\')
            fputc('\\', f);
        fputc(*value, f);
    }
    fputs("\"\n", f);
}

void test_redis_put_tls_config(FILE *f, const char *dir, const char *cert, int tls_port,
                               int auth_clients) {
    char path[4096];

    fprintf(f, "tls-port %d\n", tls_port);
    snprintf(path, sizeof path, "%s/%s.pem", dir, cert ? cert : "server");
    test_redis_put_config(f, "tls-cert-file", path);
    snprintf(path, sizeof path, "%s/%s.key", dir, cert ? cert : "server");
    test_redis_put_config(f, "tls-key-file", path);
    snprintf(path, sizeof path, "%s/ca.pem", dir);
    test_redis_put_config(f, "tls-ca-cert-file", path);
    fprintf(f, "tls-auth-clients %s\n", auth_clients ? "yes" : "no");
}

static char certs_dir[512];
static pid_t certs_owner;

/* At the exit of the process that made the certificates (not of its
 * forked children, which exit() too and share them). */
static void remove_certs(void) {
    if (getpid() == certs_owner)
        test_remove_tree(certs_dir);
}

const char *test_tls_certs(void) {
    static int state; /* 0: not tried, 1: made, -1: failed */
    char cmd[1200];

    if (state == 0) {
        /* A folder of this process' own: another that makes certificates
         * under the same test_tmpdir() (torture keeps its files in
         * TMPDIR, shared by concurrent runs) would replace its CA while
         * its servers and clients use it. */
        snprintf(certs_dir, sizeof certs_dir, "%s/certs-XXXXXX", test_tmpdir());
        if (mkdtemp(certs_dir) == NULL) {
            fprintf(stderr, "test_tls_certs: mkdtemp %s: %s\n", certs_dir, strerror(errno));
            state = -1;
            return NULL;
        }
        certs_owner = getpid();
        atexit(remove_certs);
        snprintf(cmd, sizeof cmd, "'%s/scripts/make-certs' '%s' >&2", LEASH_SOURCE_DIR, certs_dir);
        state = system(cmd) == 0 ? 1 : -1;
        if (state < 0)
            fprintf(stderr, "test_tls_certs: %s failed\n", cmd);
    }
    return state > 0 ? certs_dir : NULL;
}

const char *test_tls_file(int slot, const char *name) {
    static char paths[8][600];
    const char *dir = test_tls_certs();

    slot &= 7;
    snprintf(paths[slot], sizeof paths[slot], "%s/%s", dir ? dir : "/nonexistent", name);
    return paths[slot];
}

static const char *host_of(const test_redis *r) {
    return r->cfg.host != NULL ? r->cfg.host : "127.0.0.1";
}

const char *test_redis_host(const test_redis *r) {
    return host_of(r);
}

/* With cfg.netns, the calling thread goes into that namespace for a spawn
 * or a connect (a process stays in the namespace it was forked in, a
 * socket in the one it was made in). Returns what netns_leave needs: the
 * fd of the namespace to go back to, -1 when nothing was switched, -2 when
 * the switch failed (said on stderr). */
static int netns_enter(const test_redis *r) {
    int home, ns;

    if (r->cfg.netns == NULL)
        return -1;
    home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    ns = open(r->cfg.netns, O_RDONLY | O_CLOEXEC);
    if (home < 0 || ns < 0 || setns(ns, CLONE_NEWNET) != 0) {
        fprintf(stderr, "test_redis: cannot enter %s: %s\n", r->cfg.netns, strerror(errno));
        if (home >= 0)
            close(home);
        if (ns >= 0)
            close(ns);
        return -2;
    }
    close(ns);
    return home;
}

static void netns_leave(int home) {
    if (home < 0)
        return;
    if (setns(home, CLONE_NEWNET) != 0) {
        /* Going on in the wrong namespace would send the caller's traffic
         * where it does not belong. */
        fprintf(stderr, "test_redis: cannot go back to the caller's namespace: %s\n",
                strerror(errno));
        abort();
    }
    close(home);
}

int test_redis_version(void) {
    static int version = -1;
    char cmd[4200], out[256];
    int a, b, c;
    const char *v;
    FILE *p;

    if (version >= 0)
        return version;
    version = 0;
    snprintf(cmd, sizeof cmd, "'%s' --version 2>/dev/null", redis_binary());
    p = popen(cmd, "r");
    if (p == NULL)
        return version;
    if (fgets(out, sizeof out, p) != NULL && (v = strstr(out, "v=")) != NULL &&
        sscanf(v + 2, "%d.%d.%d", &a, &b, &c) == 3)
        version = a * 10000 + b * 100 + c;
    pclose(p);
    return version;
}

/* Whether an ACL rule (n bytes at p) names what the server lacks, which
 * is an error in its config: channel rules before 6.2 (every user may use
 * every channel there), the sharded pub/sub commands before 7.0. */
static int acl_rule_unknown(const char *p, size_t n) {
    static const char *const v62[] = {"resetchannels", "allchannels"};
    static const char *const v70[] = {"+spublish", "+ssubscribe", "+sunsubscribe"};
    int v = test_redis_version();
    size_t i;

    if (v == 0)
        return 0;
    for (i = 0; v < 60200 && i < sizeof v62 / sizeof v62[0]; i++)
        if (strlen(v62[i]) == n && strncmp(p, v62[i], n) == 0)
            return 1;
    for (i = 0; v < 70000 && i < sizeof v70 / sizeof v70[0]; i++)
        if (strlen(v70[i]) == n && strncmp(p, v70[i], n) == 0)
            return 1;
    return v < 60200 && p[0] == '&';
}

/* "user <rule>", without what this server does not know. */
static void put_acl_user(FILE *f, const char *rule) {
    const char *p = rule;

    fputs("user", f);
    while (*p) {
        size_t n;
        while (*p == ' ')
            p++;
        n = strcspn(p, " ");
        if (n > 0 && !acl_rule_unknown(p, n))
            fprintf(f, " %.*s", (int)n, p);
        p += n;
    }
    fputc('\n', f);
}

static int write_config(const test_redis *r) {
    char path[300], log[300];
    FILE *f;
    int ok;

    path_in_dir(r, "redis.conf", path, sizeof path);
    path_in_dir(r, "redis.log", log, sizeof log);
    f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "port %d\nbind %s\n", r->port, host_of(r));
    if (r->unix_path[0]) {
        test_redis_put_config(f, "unixsocket", r->unix_path);
        fputs("unixsocketperm 700\n", f);
    }
    fputs("save \"\"\nappendonly no\ndaemonize no\nprotected-mode no\n", f);
    test_redis_put_config(f, "dir", r->dir);
    test_redis_put_config(f, "logfile", log);
    if (r->cfg.requirepass)
        test_redis_put_config(f, "requirepass", r->cfg.requirepass);
    if (r->cfg.acl_user)
        put_acl_user(f, r->cfg.acl_user);
    if (r->cfg.extra)
        fprintf(f, "%s\n", r->cfg.extra);
    if (r->cfg.tls_dir)
        test_redis_put_tls_config(f, r->cfg.tls_dir, r->cfg.tls_cert, r->tls_port,
                                  r->cfg.tls_auth_clients);
    ok = !ferror(f);
    return fclose(f) == 0 && ok ? 0 : -1;
}

static void close_from(int lowfd) {
    long max, fd;

#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)lowfd, ~0U, 0) == 0)
        return;
#endif
    max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 65536)
        max = 65536;
    for (fd = lowfd; fd < max; fd++)
        close((int)fd);
}

extern char **environ;

/* The environment a server starts with: the test's, and with
 * cfg.clock_shift_ms its two variables, the clock library ahead of what
 * LD_PRELOAD held. */
typedef struct server_env {
    char **vars;    /* NULL-terminated; its strings are environ's or owned[] */
    char *owned[3]; /* LD_PRELOAD=..., LEASH_TEST_CLOCK_SHIFT_MS=..., _FILE=... */
} server_env;

static void server_env_free(server_env *e) {
    free(e->vars);
    free(e->owned[0]);
    free(e->owned[1]);
    free(e->owned[2]);
}

static int starts_with(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* 0, or -1 (said on stderr) with nothing left to free. */
static int server_env_make(const test_redis *r, server_env *e) {
    const char *lib = NULL, *preload = getenv("LD_PRELOAD");
    size_t n = 0, i, k = 0, cap;

    memset(e, 0, sizeof *e);
    if (r->cfg.clock_shift_ms != 0) {
#ifdef LEASH_TEST_CLOCK_SHIFT_LIB
        lib = LEASH_TEST_CLOCK_SHIFT_LIB;
#else
        fprintf(stderr, "test_redis: clock_shift_ms needs support/clock_shift.c, "
                        "not built here\n");
        return -1;
#endif
    }
    while (environ[n])
        n++;
    e->vars = calloc(n + 4, sizeof *e->vars);
    if (!e->vars)
        goto oom;
    if (lib) {
        if (!preload)
            preload = "";
        cap = sizeof "LD_PRELOAD=:" + strlen(lib) + strlen(preload);
        e->owned[0] = malloc(cap);
        e->owned[1] = malloc(64);
        e->owned[2] = malloc(400);
        if (!e->owned[0] || !e->owned[1] || !e->owned[2])
            goto oom;
        snprintf(e->owned[0], cap, "LD_PRELOAD=%s%s%s", lib, *preload ? ":" : "", preload);
        snprintf(e->owned[1], 64, "LEASH_TEST_CLOCK_SHIFT_MS=%d", r->cfg.clock_shift_ms);
        memcpy(e->owned[2], "LEASH_TEST_CLOCK_SHIFT_FILE=", 28);
        path_in_dir(r, "clock_shift", e->owned[2] + 28, 400 - 28);
        e->vars[k++] = e->owned[0];
        e->vars[k++] = e->owned[1];
        e->vars[k++] = e->owned[2];
    }
    for (i = 0; i < n; i++)
        if (!lib || (!starts_with(environ[i], "LD_PRELOAD=") &&
                     !starts_with(environ[i], "LEASH_TEST_CLOCK_SHIFT_MS=") &&
                     !starts_with(environ[i], "LEASH_TEST_CLOCK_SHIFT_FILE=")))
            e->vars[k++] = environ[i];
    return 0;
oom:
    fprintf(stderr, "test_redis: out of memory\n");
    server_env_free(e);
    return -1;
}

/* Forks and execs the server. Everything that allocates is done before
 * fork, since the child of a threaded test may only call
 * async-signal-safe functions. */
static pid_t spawn(const test_redis *r) {
    char conf[300], log[300];
    const char *bin = redis_binary();
    char *argv[4];
    pid_t parent = getpid(), pid;
    int logfd, nullfd;
    server_env env;

    path_in_dir(r, "redis.conf", conf, sizeof conf);
    path_in_dir(r, "redis.log", log, sizeof log);
    argv[0] = (char *)bin;
    argv[1] = conf;
    argv[2] = r->cfg.sentinel ? (char *)"--sentinel" : NULL;
    argv[3] = NULL;

    if (server_env_make(r, &env) != 0)
        return -1;
    logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (logfd < 0 || nullfd < 0) {
        fprintf(stderr, "test_redis: open %s: %s\n", log, strerror(errno));
        if (logfd >= 0)
            close(logfd);
        if (nullfd >= 0)
            close(nullfd);
        server_env_free(&env);
        return -1;
    }

    pid = fork();
    if (pid == 0) {
        struct sigaction sa;
        sigset_t none;
        int sig;

        /* A server outliving its test would hold the port and a folder
         * nobody removes. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        /* Ignored and blocked signals survive exec; the test may have
         * either, and stop/kill rely on the defaults. */
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        for (sig = 1; sig < NSIG; sig++)
            sigaction(sig, &sa, NULL);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);

        dup2(nullfd, 0);
        dup2(logfd, 1);
        dup2(logfd, 2);
        /* An inherited socket of the test (a proxy's end, a client
         * connection) would keep that connection open after the test
         * closes it. */
        close_from(3);
        execve(bin, argv, env.vars);
        {
            static const char msg[] = "test_redis: exec of redis-server "
                                      "failed\n";
            ssize_t n = write(2, msg, sizeof msg - 1);
            (void)n;
        }
        _exit(127);
    }
    close(logfd);
    close(nullfd);
    server_env_free(&env);
    if (pid < 0)
        fprintf(stderr, "test_redis: fork: %s\n", strerror(errno));
    return pid;
}

static void reap(pid_t pid) {
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

static redisContext *connect_raw(const test_redis *r, int timeout_ms) {
    struct timeval tv = ms_to_tv(timeout_ms);
    redisContext *c;
    int home = netns_enter(r);

    if (home == -2)
        return NULL;
    if (r->unix_path[0])
        c = redisConnectUnixWithTimeout(r->unix_path, tv);
    else
        c = redisConnectWithTimeout(host_of(r), r->port, tv);
    netns_leave(home);
    if (c && c->err) {
        redisFree(c);
        c = NULL;
    }
    return c;
}

/* Authenticated when the server has a password, and with a command
 * timeout so that a frozen server fails the command instead of hanging the
 * test. */
redisContext *test_redis_connect_admin(const test_redis *r, int connect_timeout_ms) {
    redisContext *c = connect_raw(r, connect_timeout_ms);
    redisReply *reply;

    if (!c)
        return NULL;
    redisSetTimeout(c, ms_to_tv(ADMIN_COMMAND_TIMEOUT_MS));
    if (r->cfg.requirepass) {
        reply = redisCommand(c, "AUTH %s", r->cfg.requirepass);
        if (!reply || reply->type == REDIS_REPLY_ERROR) {
            if (reply)
                freeReplyObject(reply);
            redisFree(c);
            return NULL;
        }
        freeReplyObject(reply);
    }
    return c;
}

/* 0: the server answers; -1: it exited (r->pid is 0 then) or did not
 * answer in time (r->pid is still set). */
static int wait_ready(test_redis *r) {
    int64_t deadline = test_now_ms() + READY_TIMEOUT_MS;

    for (;;) {
        redisContext *c;
        pid_t w = waitpid(r->pid, NULL, WNOHANG);

        if (w == r->pid || (w < 0 && errno == ECHILD)) {
            r->pid = 0;
            return -1;
        }
        c = connect_raw(r, 200);
        if (c) {
            /* Any reply will do, NOAUTH included: the server is up, and
             * whether the admin may log in is a question for later. */
            redisReply *reply;

            redisSetTimeout(c, ms_to_tv(1000));
            reply = redisCommand(c, "PING");
            redisFree(c);
            if (reply) {
                freeReplyObject(reply);
                return 0;
            }
        }
        if (test_now_ms() >= deadline)
            return -1;
        test_sleep_ms(5);
    }
}

void test_redis_close_admin(redisContext **admin) {
    if (*admin) {
        redisFree(*admin);
        *admin = NULL;
    }
}

static void print_log_tail(const test_redis *r) {
    char path[300], buf[2048];
    FILE *f;
    long size;
    size_t n;

    path_in_dir(r, "redis.log", path, sizeof path);
    f = fopen(path, "r");
    if (!f)
        return;
    if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) > 0) {
        long from = size > (long)sizeof buf - 1 ? size - (long)sizeof buf + 1 : 0;
        fseek(f, from, SEEK_SET);
        n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fprintf(stderr, "--- end of %s ---\n%s\n---\n", path, buf);
    }
    fclose(f);
}

/* Starts the server on r's current port or socket. On failure *exited
 * tells a server that quit (most likely: the port was taken) from one
 * that hung, which is not worth a second try. */
static int launch(test_redis *r, int *exited) {
    *exited = 0;
    if (write_config(r) != 0) {
        fprintf(stderr, "test_redis: cannot write the config in %s\n", r->dir);
        return -1;
    }
    int home = netns_enter(r);
    if (home == -2)
        return -1;
    r->pid = spawn(r);
    netns_leave(home);
    if (r->pid < 0) {
        r->pid = 0;
        return -1;
    }
    if (wait_ready(r) == 0)
        return 0;
    *exited = r->pid == 0;
    if (r->pid > 0) {
        kill(r->pid, SIGKILL);
        reap(r->pid);
        r->pid = 0;
    }
    return -1;
}

static char *dup_or_null(const char *s) {
    return s ? strdup(s) : NULL;
}

int test_redis_start(test_redis *r, const test_redis_config *cfg) {
    static const test_redis_config none = {0};
    const char *base = test_tmpdir();
    int attempt, exited, home;

    memset(r, 0, sizeof *r);
    if (!cfg)
        cfg = &none;
    r->cfg.unix_socket = cfg->unix_socket;
    r->cfg.sentinel = cfg->sentinel;
    r->cfg.port = cfg->port;
    r->strings_[0] = dup_or_null(cfg->requirepass);
    r->strings_[1] = dup_or_null(cfg->acl_user);
    r->strings_[2] = dup_or_null(cfg->extra);
    r->strings_[3] = dup_or_null(cfg->host);
    r->strings_[4] = dup_or_null(cfg->tls_dir);
    r->strings_[5] = dup_or_null(cfg->tls_cert);
    r->strings_[6] = dup_or_null(cfg->netns);
    if ((cfg->requirepass && !r->strings_[0]) || (cfg->acl_user && !r->strings_[1]) ||
        (cfg->extra && !r->strings_[2]) || (cfg->host && !r->strings_[3]) ||
        (cfg->tls_dir && !r->strings_[4]) || (cfg->tls_cert && !r->strings_[5]) ||
        (cfg->netns && !r->strings_[6])) {
        fprintf(stderr, "test_redis_start: out of memory\n");
        test_redis_stop(r);
        return -1;
    }
    r->cfg.requirepass = r->strings_[0];
    r->cfg.acl_user = r->strings_[1];
    r->cfg.extra = r->strings_[2];
    r->cfg.host = r->strings_[3];
    r->cfg.port = cfg->port;
    r->cfg.tls_dir = r->strings_[4];
    r->cfg.tls_cert = r->strings_[5];
    r->cfg.netns = r->strings_[6];
    r->cfg.tls_auth_clients = cfg->tls_auth_clients;
    r->cfg.clock_shift_ms = cfg->clock_shift_ms;
    if (cfg->clock_shift_ms > TEST_REDIS_CLOCK_SHIFT_MAX_MS ||
        cfg->clock_shift_ms < -TEST_REDIS_CLOCK_SHIFT_MAX_MS) {
        fprintf(stderr, "test_redis_start: clock_shift_ms %d is beyond a day\n",
                cfg->clock_shift_ms);
        test_redis_stop(r);
        return -1;
    }

    /* Leave room for "/redis-XXXXXX/redis.sock" within sun_path. */
    if (strlen(base) > sizeof r->unix_path - 32)
        base = "/tmp";
    snprintf(r->dir, sizeof r->dir, "%s/redis-XXXXXX", base);
    if (!mkdtemp(r->dir)) {
        fprintf(stderr, "test_redis_start: mkdtemp %s: %s\n", r->dir, strerror(errno));
        r->dir[0] = '\0';
        test_redis_stop(r);
        return -1;
    }
    if (cfg->unix_socket && snprintf(r->unix_path, sizeof r->unix_path, "%s/redis.sock", r->dir) >=
                                (int)sizeof r->unix_path) {
        fprintf(stderr, "test_redis_start: socket path in %s too long\n", r->dir);
        test_redis_stop(r);
        return -1;
    }

    /* Free ports are looked for where the server will listen. */
    home = netns_enter(r);
    for (attempt = 0; home != -2 && attempt < START_ATTEMPTS; attempt++) {
        if (!cfg->unix_socket && cfg->port != 0) {
            r->port = cfg->port;
        } else if (!cfg->unix_socket) {
            r->port = test_redis_free_port();
            if (r->port <= 0) {
                fprintf(stderr, "test_redis_start: no free port: %s\n", strerror(errno));
                break;
            }
        }
        if (cfg->tls_dir && (r->tls_port = test_redis_free_port()) <= 0) {
            fprintf(stderr, "test_redis_start: no free port: %s\n", strerror(errno));
            break;
        }
        if (attempt > 0) {
            char log[300];

            /* The log of a failure shows one attempt, not five. */
            path_in_dir(r, "redis.log", log, sizeof log);
            unlink(log);
        }
        if (launch(r, &exited) == 0) {
            netns_leave(home);
            return 0;
        }
        /* Only a lost race for the port is worth another try. */
        if (cfg->unix_socket || cfg->port != 0 || !exited)
            break;
    }
    netns_leave(home);
    fprintf(stderr, "test_redis_start: %s did not come up\n", redis_binary());
    print_log_tail(r);
    test_redis_stop(r);
    return -1;
}

void test_redis_stop(test_redis *r) {
    size_t i;

    test_redis_close_admin(&r->admin_);
    if (r->pid > 0) {
        int64_t deadline = test_now_ms() + STOP_TIMEOUT_MS;
        pid_t w;

        kill(r->pid, SIGTERM);
        /* A frozen server would sit on the SIGTERM. */
        kill(r->pid, SIGCONT);
        while ((w = waitpid(r->pid, NULL, WNOHANG)) == 0 && test_now_ms() < deadline)
            test_sleep_ms(5);
        if (w == 0) {
            kill(r->pid, SIGKILL);
            reap(r->pid);
        }
    }
    if (r->dir[0])
        test_remove_tree(r->dir);
    for (i = 0; i < sizeof r->strings_ / sizeof r->strings_[0]; i++)
        free(r->strings_[i]);
    memset(r, 0, sizeof *r);
}

int test_redis_kill(test_redis *r) {
    test_redis_close_admin(&r->admin_);
    if (r->pid <= 0)
        return -1;
    kill(r->pid, SIGKILL);
    reap(r->pid);
    r->pid = 0;
    return 0;
}

static int restart(test_redis *r, int keep_data) {
    char path[300];
    int attempt, exited;

    if (!r->dir[0])
        return -1;
    if (r->pid > 0)
        test_redis_kill(r);
    test_redis_close_admin(&r->admin_);
    if (!keep_data) {
        /* An empty start also when the test's config turned persistence on. */
        path_in_dir(r, "dump.rdb", path, sizeof path);
        unlink(path);
        path_in_dir(r, "appendonlydir", path, sizeof path);
        test_remove_tree(path);
        path_in_dir(r, "appendonly.aof", path, sizeof path); /* before Redis 7.0 */
        unlink(path);
    }
    if (r->unix_path[0])
        unlink(r->unix_path);

    /* The port cannot change, so a process that took it meanwhile can
     * only be waited out. */
    for (attempt = 0; attempt < START_ATTEMPTS; attempt++) {
        if (launch(r, &exited) == 0)
            return 0;
        if (!exited)
            break;
        test_sleep_ms(100);
    }
    fprintf(stderr, "test_redis_restart: %s did not come up again\n", redis_binary());
    print_log_tail(r);
    test_redis_stop(r);
    return -1;
}

int test_redis_restart(test_redis *r) {
    return restart(r, 0);
}

/* wait_ready takes any answer, LOADING too: a server that reads its data
 * back answers commands only once it has. 0, or -1 if it did not in time. */
static int wait_loaded(test_redis *r) {
    int64_t deadline = test_now_ms() + READY_TIMEOUT_MS;

    for (;;) {
        redisReply *reply = test_redis_cmd(r, "INFO persistence");
        /* A line of its own: "async_loading:0" (7.0) says nothing here. */
        int loaded =
            reply && reply->type == REDIS_REPLY_STRING && strstr(reply->str, "\nloading:0");

        if (reply)
            freeReplyObject(reply);
        if (loaded)
            return 0;
        if (test_now_ms() >= deadline)
            return -1;
        test_sleep_ms(5);
    }
}

int test_redis_restart_keeping_data(test_redis *r) {
    if (restart(r, 1) != 0)
        return -1;
    if (wait_loaded(r) == 0)
        return 0;
    fprintf(stderr, "test_redis_restart_keeping_data: %s did not load its data\n", redis_binary());
    print_log_tail(r);
    test_redis_stop(r);
    return -1;
}

/* Linux /proc/<pid>/stat: the state letter follows the ")" of the name. */
static char proc_state(pid_t pid) {
    char path[64], buf[512], *p;
    ssize_t n;
    int fd;

    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return '?';
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return '?';
    buf[n] = '\0';
    p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p[2] : '?';
}

void test_redis_freeze(test_redis *r) {
    int64_t deadline;

    if (r->pid <= 0)
        return;
    kill(r->pid, SIGSTOP);
    /* The stop is asynchronous; the test's next step assumes it took. */
    deadline = test_now_ms() + 1000;
    while (proc_state(r->pid) != 'T' && test_now_ms() < deadline)
        test_sleep_ms(1);
}

void test_redis_thaw(test_redis *r) {
    if (r->pid > 0)
        kill(r->pid, SIGCONT);
}

int test_redis_step_clock(test_redis *r, int shift_ms) {
    char path[300], tmp[310];
    FILE *f;

    if (r->cfg.clock_shift_ms == 0 || shift_ms == 0 || shift_ms > TEST_REDIS_CLOCK_SHIFT_MAX_MS ||
        shift_ms < -TEST_REDIS_CLOCK_SHIFT_MAX_MS) {
        fprintf(stderr, "test_redis_step_clock: the server must start with a clock_shift_ms, "
                        "and a step is a shift other than 0, at most a day\n");
        return -1;
    }
    path_in_dir(r, "clock_shift", path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.new", path);
    f = fopen(tmp, "w");
    if (f == NULL || fprintf(f, "%d\n", shift_ms) < 0 || fclose(f) != 0 || rename(tmp, path) != 0)
        return -1;
    r->cfg.clock_shift_ms = shift_ms;
    usleep(30 * 1000); /* the server reads the file again within 10 ms */
    return 0;
}

int test_redis_drift_clock(test_redis *r, int ppm, int duration_ms, int *end_ms) {
    char path[300], tmp[310];
    struct timespec now;
    long long since, end;
    FILE *f;

    if (r->cfg.clock_shift_ms == 0 || ppm == 0 || ppm > TEST_REDIS_DRIFT_MAX_PPM ||
        ppm < -TEST_REDIS_DRIFT_MAX_PPM || duration_ms <= 0 ||
        duration_ms > TEST_REDIS_CLOCK_SHIFT_MAX_MS) {
        fprintf(stderr, "test_redis_drift_clock: the server must start with a clock_shift_ms; "
                        "a drift is 1 to 500000 ppm either way, for 1 ms to a day\n");
        return -1;
    }
    end = r->cfg.clock_shift_ms +
          ((long long)duration_ms * ppm + (ppm > 0 ? 500000 : -500000)) / 1000000;
    if (end == 0 || end > TEST_REDIS_CLOCK_SHIFT_MAX_MS || end < -TEST_REDIS_CLOCK_SHIFT_MAX_MS) {
        fprintf(stderr, "test_redis_drift_clock: the shift would end at %lld ms\n", end);
        return -1;
    }
    /* It starts once the server has read the file (within STEP_READ_MS of
     * clock_shift.c): a drift that started before would make the shift
     * jump when read, backwards for a slow one. */
    clock_gettime(CLOCK_MONOTONIC, &now);
    since = (long long)now.tv_sec * 1000000000LL + now.tv_nsec + 30 * 1000000LL;
    path_in_dir(r, "clock_shift", path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.new", path);
    f = fopen(tmp, "w");
    if (f == NULL ||
        fprintf(f, "%d %d %lld %lld\n", r->cfg.clock_shift_ms, ppm, since,
                since + duration_ms * 1000000LL) < 0 ||
        fclose(f) != 0 || rename(tmp, path) != 0)
        return -1;
    r->cfg.clock_shift_ms = (int)end;
    *end_ms = (int)end;
    return 0;
}

/* A timeout is not a broken connection: the server is alive but slow or
 * frozen, and sending the command again would only wait again. */
static int connection_broke(const redisContext *c, int err_no) {
    if (c->err == REDIS_ERR_EOF)
        return 1;
    return c->err == REDIS_ERR_IO && err_no != EAGAIN && err_no != EWOULDBLOCK;
}

static redisReply *send_request(redisContext *c, const test_redis_request *rq) {
    redisReply *reply;
    va_list ap;

    if (!rq->fmt)
        return redisCommandArgv(c, rq->argc, rq->argv, rq->lens);
    va_copy(ap, *rq->ap);
    reply = redisvCommand(c, rq->fmt, ap);
    va_end(ap);
    return reply;
}

redisReply *test_redis_send(test_redis *r, redisContext **admin, int connect_timeout_ms,
                            const test_redis_request *rq) {
    redisReply *reply;
    int err_no, retry;

    if (r->pid <= 0)
        return NULL;
    if (*admin && (*admin)->err)
        test_redis_close_admin(admin);
    retry = *admin != NULL; /* a fresh connection is not retried */
    if (!*admin)
        *admin = test_redis_connect_admin(r, connect_timeout_ms);
    if (!*admin)
        return NULL;

    errno = 0;
    reply = send_request(*admin, rq);
    err_no = errno;
    if (!reply) {
        /* The cached connection may be to a server since killed or
         * restarted; only a reply on a new one tells. */
        retry = retry && connection_broke(*admin, err_no);
        test_redis_close_admin(admin);
        if (retry) {
            *admin = test_redis_connect_admin(r, connect_timeout_ms);
            if (*admin) {
                reply = send_request(*admin, rq);
                if (!reply)
                    test_redis_close_admin(admin);
            }
        }
    }
    return reply;
}

long long test_redis_int_reply(redisReply *reply) {
    long long v = -1;

    if (reply && reply->type == REDIS_REPLY_INTEGER)
        v = reply->integer;
    if (reply)
        freeReplyObject(reply);
    return v;
}

redisReply *test_redis_cmd(test_redis *r, const char *fmt, ...) {
    test_redis_request rq = {fmt, NULL, 0, NULL, NULL};
    redisReply *reply;
    va_list ap;

    va_start(ap, fmt);
    rq.ap = &ap;
    reply = test_redis_send(r, &r->admin_, ADMIN_CONNECT_TIMEOUT_MS, &rq);
    va_end(ap);
    return reply;
}

long long test_redis_int(test_redis *r, const char *fmt, ...) {
    test_redis_request rq = {fmt, NULL, 0, NULL, NULL};
    redisReply *reply;
    va_list ap;

    va_start(ap, fmt);
    rq.ap = &ap;
    reply = test_redis_send(r, &r->admin_, ADMIN_CONNECT_TIMEOUT_MS, &rq);
    va_end(ap);
    return test_redis_int_reply(reply);
}

long long test_redis_calls(test_redis *r, const char *command) {
    char needle[128];
    const char *p;
    redisReply *reply;
    long long calls = 0;
    size_t i, len;

    len = (size_t)snprintf(needle, sizeof needle, "cmdstat_%s:calls=", command);
    if (len >= sizeof needle)
        return -1;
    for (i = 0; i < len; i++)
        needle[i] = (char)tolower((unsigned char)needle[i]);

    reply = test_redis_cmd(r, "INFO commandstats");
    if (!reply)
        return -1;
    if (reply->type != REDIS_REPLY_STRING) {
        freeReplyObject(reply);
        return -1;
    }
    /* The lines read "cmdstat_<name>:calls=N,usec=...". */
    p = strstr(reply->str, needle);
    if (p)
        calls = strtoll(p + len, NULL, 10);
    freeReplyObject(reply);
    return calls;
}

long long test_redis_lock_calls(test_redis *r) {
    static const char *const others[] = {"info",    "config", "replconf", "ping",
                                         "cluster", "client", "command",  "select",
                                         "auth",    "hello",  "readonly", "role"};
    redisReply *rep = test_redis_cmd(r, "INFO commandstats");
    const char *p;
    long long n = 0;

    if (rep == NULL || rep->type != REDIS_REPLY_STRING) {
        if (rep != NULL)
            freeReplyObject(rep);
        return -1;
    }
    for (p = strstr(rep->str, "cmdstat_"); p != NULL; p = strstr(p + 1, "cmdstat_")) {
        const char *name = p + 8, *calls = strstr(p, ":calls=");
        size_t i, len = strcspn(name, ":|");
        int other = 0;
        for (i = 0; i < sizeof(others) / sizeof(others[0]); i++)
            if (strlen(others[i]) == len && strncmp(name, others[i], len) == 0)
                other = 1;
        if (calls != NULL && !other)
            n += strtoll(calls + 7, NULL, 10);
    }
    freeReplyObject(rep);
    return n;
}
