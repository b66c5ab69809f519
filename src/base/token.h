/* SPDX-License-Identifier: MIT */
/* Owner tokens: 128 bits from the kernel's random source, as 32 hex digits. */
#ifndef LEASH_TOKEN_H
#define LEASH_TOKEN_H

#include <stdint.h>

#define LEASH__TOKEN_LEN 32

/* Fills out[0..32] (NUL-terminated). 0 on success, -1 if no randomness. */
int leash__token_new(char out[LEASH__TOKEN_LEN + 1]);

/* A random number in [0, n) for jitter (not for secrets); n > 0. */
uint64_t leash__random_below(uint64_t n);

#endif
