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

#endif
