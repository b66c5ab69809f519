#include "renew.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "client.h"
#include "clock.h"
#include "lock.h"
#include "resp.h"
#include "scripts.h"

struct leash__renew_batch {
    leash_client *client;
    int64_t sent;
    int n;
    leash_lock *locks[LEASH__RENEW_BATCH]; /* NULL once a lock forgot it */
};

static void flush(void *arg);

void leash__renewer_init(leash__renewer *r, leash_client *c) {
    r->due_head = r->due_tail = NULL;
    leash__timer_init(&r->flush_timer, c, flush, c);
}

void leash__renewer_clear(leash__renewer *r) {
    leash__timer_clear(&r->flush_timer);
}

void leash__renew_request(leash_lock *l) {
    leash__renewer *r = &l->client->renewer;

    if (l->renew_state != LEASH__RENEW_IDLE)
        return;
    l->renew_state = LEASH__RENEW_DUE;
    l->renew_next = NULL;
    l->renew_prev = r->due_tail;
    if (r->due_tail)
        r->due_tail->renew_next = l;
    else
        r->due_head = l;
    r->due_tail = l;
    /* Flush after the locks due in this loop iteration joined the list. */
    if (r->flush_timer.due == 0)
        leash__timer_at(&r->flush_timer, 0, 0);
}

void leash__renew_forget(leash_lock *l) {
    leash__renewer *r = &l->client->renewer;

    if (l->renew_state == LEASH__RENEW_DUE) {
        if (l->renew_prev)
            l->renew_prev->renew_next = l->renew_next;
        else
            r->due_head = l->renew_next;
        if (l->renew_next)
            l->renew_next->renew_prev = l->renew_prev;
        else
            r->due_tail = l->renew_prev;
    } else if (l->renew_state == LEASH__RENEW_INFLIGHT) {
        l->renew_batch->locks[l->renew_slot] = NULL;
    }
    l->renew_state = LEASH__RENEW_IDLE;
    l->renew_next = l->renew_prev = NULL;
    l->renew_batch = NULL;
}

/* The script answers 1 (renewed) or 0 (the hold is gone or not ours) per
 * lock; anything else is a protocol error, never a verdict on the hold. */
static int element_result(const redisReply *e) {
    if (e->type != REDIS_REPLY_INTEGER || (e->integer != 0 && e->integer != 1))
        return -1;
    return (int)e->integer;
}

static void on_batch_reply(void *arg, redisReply *reply, int status) {
    leash__renew_batch *b = arg;
    int i, result;

    if (status == LEASH_OK && reply->type == REDIS_REPLY_ERROR) {
        leash__log(&b->client->cfg.log, LEASH_LOG_WARN, "renew: Redis error: %s", reply->str);
        status = LEASH_EREDIS;
    } else if (status == LEASH_OK &&
               (reply->type != REDIS_REPLY_ARRAY || reply->elements != (size_t)b->n)) {
        leash__log(&b->client->cfg.log, LEASH_LOG_WARN, "renew: reply of unexpected shape");
        status = LEASH_EPROTO;
    }
    for (i = 0; i < b->n; i++) {
        leash_lock *l = b->locks[i];
        int lock_status = status;
        if (l == NULL)
            continue;
        l->renew_state = LEASH__RENEW_IDLE;
        l->renew_batch = NULL;
        result = -1;
        if (status == LEASH_OK) {
            result = element_result(reply->element[i]);
            if (result < 0) {
                leash__log(&b->client->cfg.log, LEASH_LOG_WARN,
                           "renew: answer %d is neither 0 nor 1", i);
                lock_status = LEASH_EPROTO;
            }
        }
        /* May run a lost callback, which may free other locks of b. */
        leash__lock_renewed(l, result, lock_status, b->sent);
    }
    free(b);
}

static int send_batch(leash_client *c) {
    leash__renewer *r = &c->renewer;
    const char *argv[3 + 4 * LEASH__RENEW_BATCH];
    size_t lens[3 + 4 * LEASH__RENEW_BATCH], len;
    char leases[LEASH__RENEW_BATCH][21];
    leash__renew_batch *b;
    leash__cmd *cmd;
    leash_lock *l;
    int n = 0, i;
    int64_t deadline = 0;
    char *buf;

    b = calloc(1, sizeof(*b));
    if (b == NULL)
        return -1;
    b->client = c;
    b->sent = leash__now_ms();
    for (l = r->due_head; l != NULL && n < LEASH__RENEW_BATCH; l = l->renew_next, n++) {
        argv[3 + n] = l->keys.key;
        lens[3 + n] = l->keys.key_len;
        if (deadline == 0 || l->deadline < deadline)
            deadline = l->deadline;
    }
    for (l = r->due_head, i = 0; i < n; l = l->renew_next, i++) {
        const char **a = argv + 3 + n + 3 * i;
        size_t *al = lens + 3 + n + 3 * i;
        a[0] = l->token;
        al[0] = LEASH__TOKEN_LEN;
        al[1] = leash__resp_int(leases[i], l->hold_lease);
        a[1] = leases[i];
        a[2] = l->keys.channel;
        al[2] = l->keys.channel_len;
    }
    buf = leash__script_call(&len, &c->scripts, LEASH__SCRIPT_RENEW, n, 3 + 4 * n, argv, lens);
    cmd =
        buf ? leash__cmd_new(buf, len, LEASH__SCRIPT_RENEW, 0, deadline, on_batch_reply, b) : NULL;
    if (cmd == NULL) {
        free(buf);
        free(b);
        return -1;
    }
    for (i = 0; i < n; i++) {
        l = r->due_head;
        r->due_head = l->renew_next;
        l->renew_next = l->renew_prev = NULL;
        l->renew_state = LEASH__RENEW_INFLIGHT;
        l->renew_batch = b;
        l->renew_slot = i;
        b->locks[i] = l;
    }
    if (r->due_head)
        r->due_head->renew_prev = NULL;
    else
        r->due_tail = NULL;
    b->n = n;
    c->stats.renew_commands++;
    leash__conn_send(&c->cmd, cmd);
    return 0;
}

static void flush(void *arg) {
    leash_client *c = arg;

    while (c->renewer.due_head != NULL) {
        if (send_batch(c) != 0) {
            /* No memory now: the locks stay due; try again shortly. */
            leash__timer_at(&c->renewer.flush_timer, leash__now_ms() + 10, 0);
            return;
        }
    }
}
