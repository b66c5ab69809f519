/* SPDX-License-Identifier: MIT */
/*
 * What every layer of one client shares: the loop's hooks, the logger, the
 * counters, the resolver of host names, and re-entrancy.
 *
 * Re-entrancy: every entry from the loop (a timer, a hiredis callback) and
 * every public call that may run user callbacks is bracketed by
 * leash__env_enter/leave. A user callback may free anything, the client
 * included: objects freed inside are only marked, and the owner's settle
 * hook frees them when the outermost leave returns. After a callback, code
 * that goes on checks env->freeing (the client is going away: stop).
 */
#ifndef LEASH_BASE_ENV_H
#define LEASH_BASE_ENV_H

#include <leash/leash.h>
#include <leash/loop.h>

#include "base/log.h"

typedef struct leash__env {
    leash_loop loop; /* the adapter's hooks, copied at attach */
    int attached;
    leash__logger log;
    leash_stats *stats;
    unsigned depth; /* nesting of entries */
    int freeing;    /* the client is being freed */
    /* Runs when the outermost leave returns (deferred frees). */
    void (*settle)(struct leash__env *env);
    /* Sockets written to inside this entry, sent at the outermost leave
     * (wire/sock.c), before settle. */
    struct leash__sock *unsent;
    void (*send)(struct leash__env *env);
    /* Host names resolved without blocking (wire/resolve.h). */
    struct leash__resolver *resolver;
} leash__env;

static inline void leash__env_enter(leash__env *env) {
    env->depth++;
}

static inline void leash__env_leave(leash__env *env) {
    if (--env->depth != 0)
        return;
    if (env->unsent != NULL)
        env->send(env);
    if (env->settle != NULL)
        env->settle(env);
}

#endif
