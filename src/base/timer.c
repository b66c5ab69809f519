/* SPDX-License-Identifier: MIT */
#include "base/timer.h"

#include "base/clock.h"

static void timer_fired(void *arg) {
    leash__timer *t = arg;
    leash__env *env = t->env;

    leash__env_enter(env);
    t->due = 0;
    t->fn(t->arg);
    leash__env_leave(env);
}

void leash__timer_init(leash__timer *t, leash__env *env, leash__timer_fn *fn, void *arg) {
    t->env = env;
    t->handle = NULL;
    t->fn = fn;
    t->arg = arg;
    t->due = 0;
}

int leash__timer_create(leash__timer *t) {
    const leash_loop *lp = &t->env->loop;

    if (t->handle == NULL)
        t->handle = lp->timer_new(lp->data, timer_fired, t);
    return t->handle != NULL ? LEASH_OK : LEASH_ENOMEM;
}

int leash__timer_at(leash__timer *t, int64_t due, int keep_alive) {
    const leash_loop *lp = &t->env->loop;
    int64_t delay = due - leash__now_ms();

    if (leash__timer_create(t) != LEASH_OK)
        return LEASH_ENOMEM;
    t->due = due;
    lp->timer_start(lp->data, t->handle, delay > 0 ? (uint64_t)delay : 0, keep_alive);
    return LEASH_OK;
}

void leash__timer_stop(leash__timer *t) {
    if (t->handle != NULL && t->due != 0) {
        t->env->loop.timer_stop(t->env->loop.data, t->handle);
        t->due = 0;
    }
}

void leash__timer_clear(leash__timer *t) {
    if (t->handle != NULL) {
        t->env->loop.timer_free(t->env->loop.data, t->handle);
        t->handle = NULL;
    }
    t->due = 0;
}
