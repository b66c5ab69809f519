/* SPDX-License-Identifier: MIT */
/* Redis commands in the wire format (RESP arrays of bulk strings). */
#ifndef LEASH_RESP_H
#define LEASH_RESP_H

#include <stddef.h>

/* Writes v in decimal (NUL-terminated) into out, which must hold 21 bytes;
 * returns the length. */
size_t leash__resp_int(char out[21], long long v);

/* A malloc'ed command of argc arguments, or NULL without memory. */
char *leash__resp_format(size_t *out_len, int argc, const char *const *argv, const size_t *lens);

#endif
