/* SPDX-License-Identifier: MIT */
#include "hold/watchdog.h"

#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

typedef struct leash__renew_batch {
    leash__watchdog *dog;
    int64_t sent;
    size_t n;
    leash__hold *holds[LEASH__RENEW_BATCH]; /* NULL once a hold forgot it */
    unsigned char kept[LEASH__RENEW_BATCH]; /* its renewal carried the fence */
} leash__renew_batch;

static void flush(void *arg);

void leash__watchdog_init(leash__watchdog *w, leash__env *env, leash__route *route) {
    w->env = env;
    w->route = route;
    leash__list_init(&w->due);
    leash__timer_init(&w->flush_timer, env, flush, w);
}

int leash__watchdog_prepare(leash__watchdog *w) {
    return leash__timer_create(&w->flush_timer);
}

void leash__watchdog_clear(leash__watchdog *w) {
    leash__timer_clear(&w->flush_timer);
}

void leash__watchdog_request(leash__watchdog *w, leash__hold *h) {
    if (h->renew_state != LEASH__RENEW_IDLE)
        return;
    h->renew_state = LEASH__RENEW_DUE;
    leash__list_insert_tail(&w->due, &h->due_link);
    /* Flush after the holds due in this loop iteration joined the list. */
    if (w->flush_timer.due == 0)
        leash__timer_at(&w->flush_timer, 0, 0);
}

void leash__watchdog_forget(leash__hold *h) {
    if (h->renew_state == LEASH__RENEW_DUE)
        leash__list_remove(&h->due_link);
    else if (h->renew_state == LEASH__RENEW_INFLIGHT)
        h->batch->holds[h->batch_slot] = NULL;
    h->renew_state = LEASH__RENEW_IDLE;
    h->batch = NULL;
}

static void on_batch(void *arg, const leash__answer *answers, size_t n) {
    leash__renew_batch *b = arg;
    size_t i;

    for (i = 0; i < n && i < b->n; i++) {
        leash__hold *h = b->holds[i];
        if (h == NULL)
            continue;
        h->renew_state = LEASH__RENEW_IDLE;
        h->batch = NULL;
        /* Counted once it renewed, and its spread reached every server
         * that is up: after a failed one, or one that missed a server (it
         * answered BUSY), the next carries the fence again (the hold's
         * spread and floors wait for it). */
        if (b->kept[i] && answers[i].status == LEASH_OK && answers[i].kind == LEASH__ANS_RENEWED &&
            !answers[i].spread_short)
            h->floor_kept_at = b->sent;
        /* May run a lost callback, which may free other holds of b (they
         * forget it: their slot turns NULL) or the client. */
        /* From when its command was written, if the route knows. */
        h->renewed(h, &answers[i], answers[i].sent_ms > b->sent ? answers[i].sent_ms : b->sent);
        if (b->dog->env->freeing)
            break;
    }
    free(b);
}

/* Whether h's renewal at `now` carries its fence (Redlock): until one
 * that did has renewed and reached every server that is up (each renewed
 * it, took it, or refused it for good: route/quorum.c), which spreads a
 * hold granted by a bare majority onto the servers it missed; then the last one before a quarter of
 * the fence floor's life has passed since (the renewal after it would come later), which keeps the
 * floors of a long hold from running out, with room for three more to fail (and spreads the hold
 * onto a server back meanwhile). The others only extend: a floor read and written with every
 * renewal doubled the servers' renewal work. */
static int keeps_floor(const leash__hold *h, int64_t now) {
    return h->floor_kept_at == 0 ||
           now + h->renew_ms - h->floor_kept_at >= leash__floor_ttl_ms(h->lease_ms) / 4;
}

/* Sends holds[0..n) (one batch key) in one command. 0, or -1 without
 * memory (they stay due). */
static int send_batch(leash__watchdog *w, leash__hold **holds, size_t n, unsigned slot) {
    leash__renew_item items[LEASH__RENEW_BATCH];
    leash__renew_batch *b = calloc(1, sizeof(*b));
    leash__send s;
    int64_t deadline = 0, timeout = w->route->cfg->conn->command_timeout_ms;
    size_t i;
    int kept = 0;

    if (b == NULL)
        return -1;
    b->dog = w;
    b->sent = leash__now_ms();
    b->n = n;
    for (i = 0; i < n; i++) {
        items[i].names = holds[i]->names;
        items[i].token = holds[i]->token;
        items[i].lease_ms = holds[i]->lease_ms;
        items[i].fence = 0;
        if (deadline == 0 || holds[i]->deadline < deadline)
            deadline = holds[i]->deadline;
    }
    memset(&s, 0, sizeof(s));
    s.slot = slot;
    s.op = w->route->dialect->renew;
    for (i = 0; i < n && w->route->fenced; i++)
        if (keeps_floor(holds[i], b->sent)) {
            items[i].fence = holds[i]->fence;
            b->kept[i] = 1;
            kept = 1;
        }
    s.cmd = w->route->dialect->renew_cmd(items, n, timeout, deadline);
    /* The resend to servers that failed it must not spread: the same
     * renewal without the fences (the route clones the plain one itself). */
    for (i = 0; i < n && kept; i++)
        items[i].fence = 0;
    if (kept)
        s.again = w->route->dialect->renew_cmd(items, n, timeout, deadline);
    s.nanswers = n;
    s.what = "(batch)";
    s.done = on_batch;
    s.arg = b;
    if (s.cmd == NULL || (kept && s.again == NULL)) {
        if (s.cmd != NULL)
            leash__cmd_free(s.cmd);
        if (s.again != NULL)
            leash__cmd_free(s.again);
        free(b);
        return -1;
    }
    if (leash__route_send(w->route, &s) == NULL) {
        free(b);
        return -1;
    }
    for (i = 0; i < n; i++) {
        leash__list_remove(&holds[i]->due_link);
        holds[i]->renew_state = LEASH__RENEW_INFLIGHT;
        holds[i]->batch = b;
        holds[i]->batch_slot = (int)i;
        b->holds[i] = holds[i];
    }
    return 0;
}

/* A due hold and where it stands, for the sort by batch key. */
typedef struct due_entry {
    unsigned key;
    size_t order;
    leash__hold *h;
} due_entry;

static int by_key_then_order(const void *a, const void *b) {
    const due_entry *x = a, *y = b;

    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Sends the due holds, grouped by batch key (a sort: a cluster's holds
 * spread over many slots), each group in commands of up to
 * LEASH__RENEW_BATCH, oldest first within a group. */
static void flush(void *arg) {
    leash__watchdog *w = arg;
    leash__hold *batch[LEASH__RENEW_BATCH];
    due_entry *all;
    leash__list *n;
    size_t count = 0, i, j;

    for (n = w->due.next; n != &w->due; n = n->next)
        count++;
    if (count == 0)
        return;
    all = malloc(count * sizeof(*all));
    if (all == NULL) {
        /* No memory now: the holds stay due; try again shortly. */
        leash__timer_at(&w->flush_timer, leash__now_ms() + 10, 0);
        return;
    }
    for (i = 0, n = w->due.next; n != &w->due; n = n->next, i++) {
        all[i].h = LEASH__CONTAINER(n, leash__hold, due_link);
        all[i].key = leash__route_batch_key(w->route, all[i].h->names->slot);
        all[i].order = i;
    }
    qsort(all, count, sizeof(*all), by_key_then_order);
    for (i = 0; i < count; i = j) {
        size_t k = 0;
        for (j = i; j < count && all[j].key == all[i].key && k < LEASH__RENEW_BATCH; j++)
            batch[k++] = all[j].h;
        if (send_batch(w, batch, k, batch[0]->names->slot) != 0) {
            leash__timer_at(&w->flush_timer, leash__now_ms() + 10, 0);
            break;
        }
    }
    free(all);
}
