/* SPDX-License-Identifier: MIT */
/*
 * cli_holder: takes locks with the library for tests/test_cli.sh, one
 * command a line on stdin, one answer a line on stdout:
 *
 *   new ID KIND NAME [PERMITS]   KIND: mutex fair read write sem
 *   acquire ID [WAIT_MS]         -> "ID granted fence F count C" | "ID status NAME"
 *   release ID                   -> "ID released STATUS"
 *   quit
 *
 * and, unasked, "ID lost REASON". Connection: cli_holder URL, or
 * cli_holder --cluster host:port,... / --redlock host:port,... . Leases are
 * LEASE_MS, renewed every third, so that a test sees renewals soon.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <leash/adapters/libev.h>
#include <leash/leash.h>
#include <leash/url.h>

#define LEASE_MS 3000
#define HANDLES 16

static struct ev_loop *loop;
static leash_client *client;
static leash_lock *handles[HANDLES];
static char line[4096];
static size_t have;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

static int id_of(leash_lock *l) {
    int i;
    for (i = 0; i < HANDLES; i++)
        if (handles[i] == l)
            return i;
    return -1;
}

static void on_acquired(leash_lock *l, int status, void *arg) {
    (void)arg;
    if (status == LEASH_OK)
        say("%d granted fence %" PRIu64 " count %d", id_of(l), leash_fence(l), leash_hold_count(l));
    else
        say("%d status %s", id_of(l), leash_status_name(status));
}

static void on_released(leash_lock *l, int status, void *arg) {
    (void)arg;
    say("%d released %s", id_of(l), leash_status_name(status));
}

static void on_lost(leash_lock *l, int reason, void *arg) {
    (void)arg;
    say("%d lost %s", id_of(l), leash_lost_reason_name(reason));
}

static void run(char *cmd) {
    char *words[6] = {0};
    int n = 0, id;
    char *save = NULL, *w;

    for (w = strtok_r(cmd, " \t", &save); w && n < 6; w = strtok_r(NULL, " \t", &save))
        words[n++] = w;
    if (n == 0)
        return;
    if (strcmp(words[0], "quit") == 0) {
        leash_client_free(client);
        client = NULL;
        ev_break(loop, EVBREAK_ALL);
        return;
    }
    id = n > 1 ? atoi(words[1]) : -1;
    if (id < 0 || id >= HANDLES) {
        say("? bad handle");
        return;
    }
    if (strcmp(words[0], "new") == 0 && n >= 4) {
        const char *k = words[2], *name = words[3];
        leash_lock *l = strcmp(k, "mutex") == 0   ? leash_lock_new(client, name)
                        : strcmp(k, "fair") == 0  ? leash_fair_lock_new(client, name)
                        : strcmp(k, "read") == 0  ? leash_read_lock_new(client, name)
                        : strcmp(k, "write") == 0 ? leash_write_lock_new(client, name)
                        : strcmp(k, "sem") == 0
                            ? leash_semaphore_new(client, name, n > 4 ? atoi(words[4]) : 2)
                            : NULL;
        if (l == NULL) {
            say("%d new failed", id);
            return;
        }
        handles[id] = l;
        leash_lock_set_watchdog(l, LEASE_MS, 0);
        leash_on_lost(l, on_lost, NULL);
        say("%d new", id);
    } else if (strcmp(words[0], "acquire") == 0 && handles[id]) {
        int rc = leash_acquire(handles[id], n > 2 ? atoll(words[2]) : 0, on_acquired, NULL);
        if (rc != LEASH_OK)
            say("%d status %s", id, leash_status_name(rc));
    } else if (strcmp(words[0], "release") == 0 && handles[id]) {
        int rc = leash_release(handles[id], on_released, NULL);
        if (rc != LEASH_OK)
            say("%d released %s", id, leash_status_name(rc));
    } else {
        say("? %s", words[0]);
    }
}

static void on_stdin(EV_P_ ev_io *w, int revents) {
    ssize_t got;
    char *nl;
    (void)revents;

    got = read(w->fd, line + have, sizeof(line) - 1 - have);
    if (got <= 0) {
        ev_io_stop(EV_A_ w);
        run(strcpy(line, "quit"));
        return;
    }
    have += (size_t)got;
    line[have] = '\0';
    while ((nl = strchr(line, '\n')) != NULL) {
        *nl = '\0';
        run(line);
        if (client == NULL) {
            ev_io_stop(EV_A_ w);
            return;
        }
        have -= (size_t)(nl + 1 - line);
        memmove(line, nl + 1, have + 1);
    }
}

int main(int argc, char **argv) {
    static const char *nodes[LEASH_NODES_MAX];
    leash_options o;
    leash_url u;
    static char *list;
    char err[LEASH_URL_ERR_MAX];
    ev_io in;
    int n = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: cli_holder URL | --cluster NODES | --redlock NODES\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    leash_options_init(&o);
    if (strcmp(argv[1], "--cluster") == 0 || strcmp(argv[1], "--redlock") == 0) {
        if (argc < 3)
            return 2;
        o.topology = argv[1][2] == 'c' ? LEASH_TOPOLOGY_CLUSTER : LEASH_TOPOLOGY_REDLOCK;
        list = strdup(argv[2]);
        for (char *s = NULL, *t = strtok_r(list, ",", &s); t && n < LEASH_NODES_MAX;
             t = strtok_r(NULL, ",", &s))
            nodes[n++] = t;
        o.nodes = nodes;
        o.nodes_count = n;
    } else {
        if (leash_url_parse(argv[1], &u, err, sizeof(err)) != LEASH_OK) {
            fprintf(stderr, "cli_holder: %s\n", err);
            return 2;
        }
        leash_url_apply(&u, &o);
    }
    loop = EV_DEFAULT;
    if (leash_client_new(&client, &o) != LEASH_OK || leash_libev_attach(loop, client) != LEASH_OK)
        return 1;
    ev_io_init(&in, on_stdin, 0, EV_READ);
    ev_io_start(loop, &in);
    say("ready");
    ev_run(loop, 0);
    return 0;
}
