/* SPDX-License-Identifier: MIT */
/* SHA-1, only to name Lua scripts the way Redis does (EVALSHA). */
#ifndef LEASH_SHA1_H
#define LEASH_SHA1_H

#include <stddef.h>

/* Writes the 40 lowercase hex digits of SHA-1(data) and a NUL to out. */
void leash__sha1_hex(const void *data, size_t len, char out[41]);

#endif
