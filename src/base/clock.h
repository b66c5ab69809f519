/* SPDX-License-Identifier: MIT */
/* Monotonic time for every safety decision (never a loop's cached time). */
#ifndef LEASH_CLOCK_H
#define LEASH_CLOCK_H

#include <stdint.h>

/* Milliseconds of CLOCK_MONOTONIC. */
int64_t leash__now_ms(void);
/* The same clock in microseconds: what the stats measure waits and holds in. */
int64_t leash__now_us(void);

#endif
