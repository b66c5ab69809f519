/* Redis commands in the wire format (RESP arrays of bulk strings). */
#ifndef LEASH_RESP_H
#define LEASH_RESP_H

#include <stddef.h>

/* A malloc'ed command of argc arguments, or NULL without memory. */
char *leash__resp_format(size_t *out_len, int argc, const char *const *argv, const size_t *lens);

#endif
