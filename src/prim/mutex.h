/* The mutex's states (prim/mutex.c has the table of what every event does
 * in each); the handle's state is one of these while its kind is the
 * mutex. */
#ifndef LEASH_PRIM_MUTEX_H
#define LEASH_PRIM_MUTEX_H

enum leash__mutex_state {
    LEASH__MUTEX_IDLE,
    LEASH__MUTEX_AFTER_FORCE,
    LEASH__MUTEX_ATTEMPT,
    LEASH__MUTEX_LAST,
    LEASH__MUTEX_SUBSCRIBING,
    LEASH__MUTEX_PARKED,
    LEASH__MUTEX_NOMEM,
    LEASH__MUTEX_HELD,
    LEASH__MUTEX_EXTRA,
    LEASH__MUTEX_XNOMEM,
    LEASH__MUTEX_STATES
};

#endif
