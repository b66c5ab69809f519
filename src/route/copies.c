/* SPDX-License-Identifier: MIT */
#include "route/copies.h"

#include <stdlib.h>

#include "base/clock.h"
#include <leash/leash.h>

int leash__copies_init(leash__copies *c, leash__conn *const *conns, unsigned n,
                       leash__copy_answer_fn *answer, void *owner) {
    c->conns = conns;
    c->n = n;
    c->answer = answer;
    c->owner = owner;
    c->out = calloc(n, sizeof(*c->out));
    c->slots = calloc(n, sizeof(*c->slots));
    if (c->out == NULL || c->slots == NULL) {
        free(c->out);
        free(c->slots);
        c->out = NULL;
        c->slots = NULL;
        return LEASH_ENOMEM;
    }
    return LEASH_OK;
}

void leash__copies_fini(leash__copies *c) {
    if (c->out != NULL)
        (void)leash__copies_withdraw(c);
    free(c->out);
    free(c->slots);
    c->out = NULL;
    c->slots = NULL;
}

static void on_copy_reply(void *arg, struct redisReply *reply, int status,
                          const leash__reply_info *info) {
    leash__copy_slot *slot = arg;
    leash__copies *c = slot->set;

    c->out[slot->server] = NULL;
    c->answer(c->owner, slot->server, reply, status, info);
}

/* Hands cmd to conn: at once, or in its delayed list until send_at. */
static void deliver(leash__conn *conn, leash__cmd *cmd, int64_t send_at) {
    if (send_at > leash__now_ms())
        leash__conn_send_at(conn, cmd, send_at);
    else
        leash__conn_send(conn, cmd);
}

/* copies[s] for every s in `to`: tmpl for the first, clones for the rest.
 * 0, or -1 without memory (then every one made, tmpl included, is freed). */
static int make_copies(leash__cmd **copies, unsigned n, uint64_t to, leash__cmd *tmpl,
                       unsigned *made) {
    unsigned s, k;

    *made = 0;
    for (s = 0; s < n; s++) {
        if (!(to & ((uint64_t)1 << s)))
            continue;
        copies[s] = *made == 0 ? tmpl : leash__cmd_clone(tmpl);
        if (copies[s] == NULL) {
            for (k = 0; k < s; k++)
                if ((to & ((uint64_t)1 << k)) && copies[k] != tmpl)
                    leash__cmd_free(copies[k]);
            leash__cmd_free(tmpl);
            return -1;
        }
        (*made)++;
    }
    if (*made == 0)
        leash__cmd_free(tmpl);
    return 0;
}

int leash__copies_send(leash__copies *c, uint64_t to, leash__cmd *tmpl) {
    leash__cmd *copies[64];
    int64_t send_at = tmpl->send_at;
    unsigned s, made;

    if (make_copies(copies, c->n, to, tmpl, &made) != 0)
        return -1;
    for (s = 0; s < c->n && made > 0; s++) {
        if (!(to & ((uint64_t)1 << s)))
            continue;
        c->slots[s].set = c;
        c->slots[s].server = s;
        copies[s]->fn = on_copy_reply;
        copies[s]->arg = &c->slots[s];
        c->out[s] = copies[s];
        deliver(c->conns[s], copies[s], send_at);
    }
    return 0;
}

void leash__copies_let_go(leash__copies *c) {
    unsigned s;

    for (s = 0; s < c->n; s++) {
        if (c->out[s] != NULL) {
            leash__cmd_orphan(c->out[s]);
            c->out[s] = NULL;
        }
    }
}

void leash__copies_drop(leash__copies *c) {
    unsigned s;

    for (s = 0; s < c->n; s++) {
        if (c->out[s] != NULL) {
            c->out[s]->flags &= ~(unsigned)LEASH__CMD_RETRY;
            leash__cmd_drop(c->out[s]);
            c->out[s] = NULL;
        }
    }
}

int leash__copies_withdraw(leash__copies *c) {
    unsigned s;
    int written = 0;

    for (s = 0; s < c->n; s++) {
        if (c->out[s] != NULL) {
            written |= (c->out[s]->flags & LEASH__CMD_WRITTEN) != 0;
            leash__cmd_cancel(c->out[s]);
            c->out[s] = NULL;
        }
    }
    return written;
}

void leash__copies_background(leash__copies *c) {
    unsigned s;

    for (s = 0; s < c->n; s++)
        if (c->out[s] != NULL)
            c->out[s]->flags |= LEASH__CMD_BACKGROUND;
}

unsigned leash__copies_post(leash__conn *const *conns, unsigned n, uint64_t to, leash__cmd *tmpl,
                            int64_t send_at) {
    leash__cmd *copies[64];
    unsigned s, made;

    if (make_copies(copies, n, to, tmpl, &made) != 0)
        return 0;
    for (s = 0; s < n && made > 0; s++) {
        if (!(to & ((uint64_t)1 << s)))
            continue;
        leash__cmd_orphan(copies[s]);
        deliver(conns[s], copies[s], send_at);
    }
    return made;
}
