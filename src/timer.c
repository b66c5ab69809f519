#include "timer.h"

#include "client.h"
#include "clock.h"

static void timer_fired(void *arg) {
    leash__timer *t = arg;
    leash_client *c = t->client;

    leash__client_enter(c);
    t->due = 0;
    t->fn(t->arg);
    leash__client_leave(c);
}

void leash__timer_init(leash__timer *t, leash_client *c, leash__timer_fn *fn, void *arg) {
    t->client = c;
    t->handle = NULL;
    t->fn = fn;
    t->arg = arg;
    t->due = 0;
}

int leash__timer_create(leash__timer *t) {
    const leash_loop *lp = &t->client->loop;

    if (t->handle == NULL)
        t->handle = lp->timer_new(lp->data, timer_fired, t);
    return t->handle != NULL ? LEASH_OK : LEASH_ENOMEM;
}

int leash__timer_at(leash__timer *t, int64_t due, int keep_alive) {
    const leash_loop *lp = &t->client->loop;
    int64_t delay = due - leash__now_ms();

    if (leash__timer_create(t) != LEASH_OK)
        return LEASH_ENOMEM;
    t->due = due;
    lp->timer_start(lp->data, t->handle, delay > 0 ? (uint64_t)delay : 0, keep_alive);
    return LEASH_OK;
}

void leash__timer_stop(leash__timer *t) {
    if (t->handle != NULL && t->due != 0) {
        t->client->loop.timer_stop(t->client->loop.data, t->handle);
        t->due = 0;
    }
}

void leash__timer_clear(leash__timer *t) {
    if (t->handle != NULL) {
        t->client->loop.timer_free(t->client->loop.data, t->handle);
        t->handle = NULL;
    }
    t->due = 0;
}
