/* SPDX-License-Identifier: MIT */
#include "base/log.h"

#include <stdio.h>

void leash__log(const leash__logger *lg, int level, const char *fmt, ...) {
    char line[512];
    va_list ap;

    if (lg == NULL || lg->cb == NULL || level > lg->level)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    lg->cb(level, line, lg->arg);
}
