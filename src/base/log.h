/* SPDX-License-Identifier: MIT */
/* Log lines go to the user's callback only; leash prints nothing itself. */
#ifndef LEASH_LOG_H
#define LEASH_LOG_H

#include <stdarg.h>

#include <leash/leash.h>

typedef struct leash__logger {
    leash_log_cb *cb;
    void *arg;
    int level;
} leash__logger;

#if defined(__GNUC__)
#define LEASH__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define LEASH__PRINTF(a, b)
#endif

void leash__log(const leash__logger *lg, int level, const char *fmt, ...) LEASH__PRINTF(3, 4);

/* Whether a line of `level` would reach the user: asked before work that
 * only a log line needs (a state machine's trace, on every transition). */
static inline int leash__log_on(const leash__logger *lg, int level) {
    return lg != NULL && lg->cb != NULL && level <= lg->level;
}

#endif
