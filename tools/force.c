/* SPDX-License-Identifier: MIT */
/*
 * `leash release --force NAME`: removes a lock whoever holds it, through
 * the library's own leash_force_release() on a handle of the lock's kind,
 * so that every topology is handled as the library handles it (the
 * script, the channel and its verb, each Redlock server). The library
 * runs on a libev loop of the CLI's own for the one request.
 */
#include "cli.h"

#include <leash/adapters/libev.h>

#include <inttypes.h>
#include <string.h>

typedef struct forcing {
    struct ev_loop *loop;
    int status;
    int done;
} forcing;

static void on_forced(leash_lock *l, int status, void *arg) {
    forcing *f = arg;
    (void)l;
    f->status = status;
    f->done = 1;
    ev_break(f->loop, EVBREAK_ALL);
}

static void on_log(int level, const char *msg, void *arg) {
    (void)level;
    (void)arg;
    fprintf(stderr, "leash: %s\n", msg);
}

static int force(cli_conn *c, const char *name, int kind, int *status) {
    const char *nodes[LEASH_NODES_MAX];
    leash_options o;
    leash_client *client = NULL;
    leash_lock *l = NULL;
    forcing f = {ev_loop_new(EVFLAG_AUTO), 0, 0};
    int i, n = 0, rc;

    if (f.loop == NULL)
        return -1;
    leash_options_init(&o);
    o.key_prefix = c->prefix;
    o.username = c->username;
    o.password = c->password;
    o.db = c->db;
    o.topology = c->topology;
    o.pubsub = c->pubsub;
    o.connect_timeout_ms = c->timeout_ms;
    o.command_timeout_ms = c->timeout_ms;
    o.log_cb = on_log;
    o.log_level = LEASH_LOG_ERROR;
    o.tls = c->tls;
    o.tls_ca_file = c->tls_ca_file;
    o.tls_ca_dir = c->tls_ca_dir;
    o.tls_cert_file = c->tls_cert_file;
    o.tls_key_file = c->tls_key_file;
    o.tls_key_password = c->tls_key_password;
    o.tls_server_name = c->tls_server_name;
    o.tls_verify = c->tls_verify;
    if (c->topology == LEASH_TOPOLOGY_SINGLE) {
        leash_url_apply(&c->nodes[0].url, &o);
        o.username = c->username;
        o.password = c->password;
        o.tls = c->tls;
    } else {
        for (i = 0; i < c->nseeds && n < LEASH_NODES_MAX; i++)
            nodes[n++] = c->nodes[i].label;
        o.nodes = nodes;
        o.nodes_count = n;
    }
    rc = leash_client_new(&client, &o);
    if (rc == LEASH_OK)
        rc = leash_libev_attach(f.loop, client);
    if (rc == LEASH_OK) {
        /* A fair lock's handle serves every kind of the family: they share
         * one layout and one force script. */
        l = kind == LEASH__STATE_MUTEX ? leash_lock_new(client, name)
                                       : leash_fair_lock_new(client, name);
        rc = l == NULL ? LEASH_EINVAL : leash_force_release(l, on_forced, &f);
    }
    /* On Redlock the force is done once every server answered
     * (route/quorum.c), so a new client's copies all go out. */
    if (rc == LEASH_OK)
        ev_run(f.loop, 0);
    leash_client_free(client);
    ev_loop_destroy(f.loop);
    *status = f.done ? f.status : rc;
    return 0;
}

static int confirm(const cli_lockstate *s, const char *name, int agree, int of) {
    char answer[16];

    fprintf(stderr, "Force-release %s lock \"", cli_kind_name(s->kind));
    cli_text_str(stderr, name, strlen(name));
    fprintf(stderr, "\", held by %zu holder%s", s->nholders, s->nholders == 1 ? "" : "s");
    if (s->nholders == 1)
        fprintf(stderr, " (%s, fence %" PRIu64 ")", s->holders[0].token, s->holders[0].fence);
    if (of > 1)
        fprintf(stderr, " on %d of %d servers", agree, of);
    fprintf(stderr, "?\nIts holder is not asked: it finds out at its next renewal. [y/N] ");
    if (fgets(answer, sizeof(answer), stdin) == NULL)
        return 0;
    return answer[0] == 'y' || answer[0] == 'Y';
}

int cli_release(cli_conn *c, const cli_args *a) {
    cli_lockstate s;
    int rc, agree = 0, of = 1, status;

    rc = cli_read_one(c, a->name, &s, &agree, &of);
    if (rc != CLI_OK) {
        if (rc == CLI_NOT_FOUND)
            fprintf(stderr, "leash: no lock named \"%s\"\n", a->name);
        cli_lockstate_clear(&s);
        return rc;
    }
    if (s.kind == LEASH__STATE_REDISSON || s.kind == LEASH__STATE_REDISSON_RW) {
        fprintf(stderr,
                "leash: %s is a Redisson lock: release it with Redisson's "
                "forceUnlock()\n",
                a->name);
        cli_lockstate_clear(&s);
        return CLI_USAGE;
    }
    if (!a->yes && !confirm(&s, a->name, agree, of)) {
        fprintf(stderr, "leash: not released\n");
        cli_lockstate_clear(&s);
        return CLI_USAGE;
    }
    if (force(c, a->name, s.kind, &status) != 0)
        status = LEASH_ENOMEM;
    cli_lockstate_clear(&s);
    if (a->json) {
        printf("{\"name\":");
        cli_json_str(stdout, a->name, strlen(a->name));
        printf(",\"released\":%s,\"status\":\"%s\"}\n", status == LEASH_OK ? "true" : "false",
               leash_status_name(status));
    } else if (status == LEASH_OK) {
        printf("released %s\n", a->name);
    }
    if (status == LEASH_OK)
        return CLI_OK;
    fprintf(stderr, "leash: force release of %s: %s\n", a->name, leash_strerror(status));
    if (status == LEASH_ENOTHELD)
        return CLI_NOT_FOUND;
    return status == LEASH_ECONN || status == LEASH_EAUTH ? CLI_UNREACHABLE : CLI_USAGE;
}
