/* SPDX-License-Identifier: MIT */
#include "wire/resp.h"

#include <stdlib.h>
#include <string.h>

static size_t digits(size_t v) {
    size_t n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

/* Writes v in decimal at p (digits(v) bytes); printf was most of the
 * client's CPU per lock cycle. */
static char *put_decimal(char *p, size_t v) {
    size_t n = digits(v), i;
    for (i = n; i > 0; i--) {
        p[i - 1] = (char)('0' + v % 10);
        v /= 10;
    }
    return p + n;
}

size_t leash__resp_int(char out[21], long long v) {
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    char tmp[20];
    size_t n = 0, len = 0;

    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    if (v < 0)
        out[len++] = '-';
    while (n > 0)
        out[len++] = tmp[--n];
    out[len] = '\0';
    return len;
}

char *leash__resp_format(size_t *out_len, int argc, const char *const *argv, const size_t *lens) {
    size_t total = 1 + digits((size_t)argc) + 2;
    char *buf, *p;
    int i;

    for (i = 0; i < argc; i++)
        total += 1 + digits(lens[i]) + 2 + lens[i] + 2;
    buf = malloc(total + 1);
    if (buf == NULL)
        return NULL;
    p = buf;
    *p++ = '*';
    p = put_decimal(p, (size_t)argc);
    *p++ = '\r';
    *p++ = '\n';
    for (i = 0; i < argc; i++) {
        *p++ = '$';
        p = put_decimal(p, lens[i]);
        *p++ = '\r';
        *p++ = '\n';
        memcpy(p, argv[i], lens[i]);
        p += lens[i];
        *p++ = '\r';
        *p++ = '\n';
    }
    *p = '\0';
    *out_len = (size_t)(p - buf);
    return buf;
}
