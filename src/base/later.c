/* SPDX-License-Identifier: MIT */
#include "base/later.h"

static void run_one(leash__later *item) {
    leash__list_remove(&item->link);
    item->run(item);
}

/* Only what was queued before this run: items queued meanwhile wait for
 * the next one, so a callback that queues again cannot starve the loop.
 * Each is taken from the shared queue as it runs: a callback that frees
 * the client finds the rest there (the free runs them). */
static void on_timer(void *arg) {
    leash__laterq *q = arg;
    leash__env *env = q->timer.env;
    size_t n = 0;
    leash__list *it;

    for (it = q->items.next; it != &q->items; it = it->next)
        n++;
    while (n-- > 0 && !env->freeing && !leash__list_empty(&q->items))
        run_one(LEASH__CONTAINER(LEASH__LIST_FIRST(&q->items), leash__later, link));
    if (!env->freeing && !leash__list_empty(&q->items))
        leash__timer_at(&q->timer, 0, 1);
}

void leash__laterq_init(leash__laterq *q, leash__env *env) {
    leash__list_init(&q->items);
    leash__timer_init(&q->timer, env, on_timer, q);
}

void leash__later_push(leash__laterq *q, leash__later *item) {
    leash__list_insert_tail(&q->items, &item->link);
    if (q->timer.due == 0)
        leash__timer_at(&q->timer, 0, 1);
}

void leash__later_run_owner(leash__laterq *q, const void *owner) {
    leash__list *n = q->items.next;

    /* A callback may change the list: start over after each. */
    while (n != &q->items) {
        leash__later *item = LEASH__CONTAINER(n, leash__later, link);
        if (item->owner != owner) {
            n = n->next;
            continue;
        }
        run_one(item);
        n = q->items.next;
    }
}

void leash__later_run_all(leash__laterq *q) {
    while (!leash__list_empty(&q->items))
        run_one(LEASH__CONTAINER(LEASH__LIST_FIRST(&q->items), leash__later, link));
}

int leash__later_idle(const leash__laterq *q) {
    return leash__list_empty(&q->items);
}
