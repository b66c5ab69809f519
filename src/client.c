#include "client.h"

#include <stdlib.h>
#include <string.h>

#include "lock.h"
#include "pubsub.h"

int leash_client_new(leash_client **out, const leash_options *opts) {
    leash_client *c;
    int rc;

    if (out == NULL || opts == NULL)
        return LEASH_EINVAL;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return LEASH_ENOMEM;
    if ((rc = leash__config_from_options(&c->cfg, opts)) != LEASH_OK) {
        free(c);
        return rc;
    }
    c->magic = LEASH__CLIENT_MAGIC;
    leash__scripts_init(&c->scripts);
    leash__conn_init(&c->cmd, c, LEASH__CONN_CMD);
    leash__conn_init(&c->sub, c, LEASH__CONN_SUB);
    c->sub.on_ready = leash__pubsub_on_ready;
    c->sub.on_down = leash__pubsub_on_down;
    leash__renewer_init(&c->renewer, c);
    *out = c;
    return LEASH_OK;
}

static void deliver_soon(void *arg);

/* The timers of the client and of the handles made before it was attached. */
static int create_timers(leash_client *c) {
    leash_lock *l;

    if (leash__timer_create(&c->soon_timer) != LEASH_OK ||
        leash__timer_create(&c->renewer.flush_timer) != LEASH_OK ||
        leash__timer_create(&c->cmd.timer) != LEASH_OK ||
        leash__timer_create(&c->sub.timer) != LEASH_OK)
        return LEASH_ENOMEM;
    for (l = c->locks; l != NULL; l = l->next)
        if (leash__timer_create(&l->timer) != LEASH_OK)
            return LEASH_ENOMEM;
    return LEASH_OK;
}

static void clear_timers(leash_client *c) {
    leash_lock *l;

    leash__timer_clear(&c->soon_timer);
    leash__timer_clear(&c->renewer.flush_timer);
    leash__timer_clear(&c->cmd.timer);
    leash__timer_clear(&c->sub.timer);
    for (l = c->locks; l != NULL; l = l->next)
        leash__timer_clear(&l->timer);
}

int leash_client_attach_loop(leash_client *c, const leash_loop *loop) {
    if (c == NULL || c->magic != LEASH__CLIENT_MAGIC)
        return LEASH_EINVAL; /* no client: nowhere to log */
    if (loop == NULL || loop->attach == NULL || loop->timer_new == NULL ||
        loop->timer_start == NULL || loop->timer_stop == NULL || loop->timer_free == NULL ||
        loop->cleanup == NULL) {
        leash__log(&c->cfg.log, LEASH_LOG_ERROR,
                   "leash_client_attach_loop: the adapter leaves a hook NULL "
                   "(attach, timer_new/start/stop/free and cleanup are all required)");
        return LEASH_EINVAL;
    }
    if (c->freeing || c->attached) {
        leash__log(&c->cfg.log, LEASH_LOG_ERROR,
                   "leash_client_attach_loop: the client is already attached");
        return LEASH_ESTATE;
    }
    c->loop = *loop;
    leash__timer_init(&c->soon_timer, c, deliver_soon, c);
    /* Every timer exists before anything runs: arming one later never
     * allocates, so no event can be lost for want of a timer. */
    if (create_timers(c) != LEASH_OK) {
        clear_timers(c);
        memset(&c->loop, 0, sizeof(c->loop));
        leash__log(&c->cfg.log, LEASH_LOG_ERROR, "leash_client_attach_loop: out of memory");
        return LEASH_ENOMEM;
    }
    c->attached = 1;
    leash__conn_start(&c->cmd);
    leash__conn_start(&c->sub);
    return LEASH_OK;
}

/* ---- enter / leave: deferred frees ---- */

static void client_destroy(leash_client *c) {
    leash_lock *l;

    while ((l = c->graveyard) != NULL) {
        c->graveyard = l->next;
        leash__lock_destroy(l);
    }
    leash__chans_clear(&c->chans);
    if (c->attached) {
        leash__timer_clear(&c->soon_timer);
        leash__renewer_clear(&c->renewer);
        c->loop.cleanup(c->loop.data);
    }
    leash__config_clear(&c->cfg);
    c->magic = 0;
    free(c);
}

void leash__client_enter(leash_client *c) {
    c->depth++;
}

void leash__client_leave(leash_client *c) {
    leash_lock *l;

    if (--c->depth > 0)
        return;
    if (c->freeing) {
        client_destroy(c);
        return;
    }
    while ((l = c->graveyard) != NULL) {
        c->graveyard = l->next;
        leash__lock_destroy(l);
    }
}

/* ---- deferred completions ---- */

static void deliver(leash_client *c, leash__deferred *d) {
    leash_lock *l = d->lock;
    leash_acquire_cb *acq = d->acq_cb;
    leash_release_cb *rel = d->rel_cb;
    void *arg = d->arg;
    int status = d->status;

    free(d);
    if (acq != NULL)
        acq(l, status, arg);
    else if (rel != NULL)
        rel(l, status, arg);
    (void)c;
}

/* leash_client_close is done: every release it waited for ended. The free
 * delivers what is still owed (ECANCELED to the cancelled acquires). */
static void close_finish(leash_client *c) {
    leash_close_cb *cb = c->close_cb;
    void *arg = c->close_arg;
    int status = c->close_status;

    c->close_cb = NULL;
    leash_client_free(c);
    if (cb != NULL)
        cb(status, arg);
}

static void deliver_soon(void *arg) {
    leash_client *c = arg;
    leash__deferred *d, *last = c->soon_tail;
    int more = 1;

    /* Only what was queued before this run: new ones wait for the next. */
    while (more && !c->freeing && (d = c->soon_head) != NULL) {
        more = d != last;
        c->soon_head = d->next;
        if (c->soon_head == NULL)
            c->soon_tail = NULL;
        deliver(c, d);
    }
    if (!c->freeing && c->soon_head != NULL)
        leash__timer_at(&c->soon_timer, 0, 1);
    else if (!c->freeing && c->closing && c->close_pending == 0)
        close_finish(c);
}

void leash__client_defer(leash_client *c, leash__deferred *d) {
    d->next = NULL;
    if (c->soon_tail)
        c->soon_tail->next = d;
    else
        c->soon_head = d;
    c->soon_tail = d;
    if (c->soon_timer.due == 0)
        leash__timer_at(&c->soon_timer, 0, 1);
}

void leash__client_deliver_now(leash_client *c, leash_lock *l) {
    leash__deferred **pp = &c->soon_head, *d, *prev = NULL;

    while ((d = *pp) != NULL) {
        if (d->lock != l) {
            prev = d;
            pp = &d->next;
            continue;
        }
        *pp = d->next;
        if (c->soon_tail == d)
            c->soon_tail = prev;
        deliver(c, d);
        /* the callback may have changed the list: start over */
        pp = &c->soon_head;
        prev = NULL;
    }
}

/* ---- graceful close ---- */

void leash__client_close_wait(leash_client *c) {
    c->close_pending++;
}

void leash__client_close_step(leash_client *c, int status) {
    if (!c->closing || c->freeing)
        return;
    if (status != LEASH_OK && status != LEASH_ENOTHELD)
        c->close_status = LEASH_ECONN;
    if (--c->close_pending == 0)
        leash__timer_at(&c->soon_timer, 0, 1);
}

int leash_client_close(leash_client *c, leash_close_cb *cb, void *arg) {
    leash_lock *l;

    if (c == NULL || c->magic != LEASH__CLIENT_MAGIC)
        return LEASH_EINVAL;
    if (c->freeing || c->closing) {
        leash__log(&c->cfg.log, LEASH_LOG_ERROR, "leash_client_close: already closing or freed");
        return LEASH_ESTATE;
    }
    if (!c->attached) {
        leash__log(&c->cfg.log, LEASH_LOG_ERROR,
                   "leash_client_close: the client is not attached to a loop (free it instead)");
        return LEASH_ELOOP;
    }
    leash__client_enter(c);
    c->closing = 1;
    c->close_cb = cb;
    c->close_arg = arg;
    c->close_status = LEASH_OK;
    for (l = c->locks; l != NULL; l = l->next)
        leash__lock_close(l);
    /* Finishes from the loop, also when nothing was held. */
    leash__timer_at(&c->soon_timer, 0, 1);
    leash__client_leave(c);
    return LEASH_OK;
}

/* ---- teardown ---- */

void leash_client_free(leash_client *c) {
    leash_lock *l;
    leash__deferred *d;

    if (c == NULL || c->magic != LEASH__CLIENT_MAGIC || c->freeing)
        return;
    leash__client_enter(c);
    c->freeing = 1;
    /* Completions already decided are delivered as decided. */
    while ((d = c->soon_head) != NULL) {
        c->soon_head = d->next;
        if (c->soon_head == NULL)
            c->soon_tail = NULL;
        deliver(c, d);
    }
    while ((l = c->locks) != NULL)
        leash__lock_teardown(l);
    leash__renewer_clear(&c->renewer);
    if (c->attached) {
        leash__conn_teardown(&c->cmd);
        leash__conn_teardown(&c->sub);
    }
    if (c->close_cb != NULL) {
        leash_close_cb *cb = c->close_cb;
        c->close_cb = NULL;
        cb(LEASH_ECANCELED, c->close_arg);
    }
    leash__client_leave(c);
}

/* ---- accessors ---- */

void leash_client_set_data(leash_client *c, void *data) {
    if (c != NULL)
        c->data = data;
}

void *leash_client_get_data(const leash_client *c) {
    return c ? c->data : NULL;
}

int leash_client_connected(const leash_client *c) {
    return c != NULL && leash__conn_ready(&c->cmd);
}

void leash_client_stats(const leash_client *c, leash_stats *out) {
    if (out == NULL)
        return;
    if (c == NULL) {
        memset(out, 0, sizeof(*out));
        return;
    }
    *out = c->stats;
}
