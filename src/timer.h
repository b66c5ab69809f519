/*
 * A one-shot timer of the client's loop, embedded in its owner. Its callback
 * runs between leash__client_enter/leave, so it may free anything.
 */
#ifndef LEASH_TIMER_H
#define LEASH_TIMER_H

#include <stdint.h>

typedef struct leash_client leash_client;
typedef void leash__timer_fn(void *arg);

typedef struct leash__timer {
    leash_client *client;
    void *handle; /* the adapter's timer; NULL until first armed */
    leash__timer_fn *fn;
    void *arg;
    int64_t due; /* monotonic ms when armed, else 0 */
} leash__timer;

void leash__timer_init(leash__timer *t, leash_client *c, leash__timer_fn *fn, void *arg);
/* Makes the loop's timer now (the client must be attached), so that
 * arming it later cannot fail. LEASH_OK or LEASH_ENOMEM. */
int leash__timer_create(leash__timer *t);
/* Arms the timer to fire at monotonic time `due` (re-arms if armed).
 * LEASH_OK or LEASH_ENOMEM (the adapter could not make a timer). */
int leash__timer_at(leash__timer *t, int64_t due, int keep_alive);
void leash__timer_stop(leash__timer *t);
void leash__timer_clear(leash__timer *t);

#endif
