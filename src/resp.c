#include "resp.h"

#include <stdio.h>
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

char *leash__resp_format(size_t *out_len, int argc, const char *const *argv, const size_t *lens) {
    size_t total = 1 + digits((size_t)argc) + 2, pos;
    char *buf;
    int i;

    for (i = 0; i < argc; i++)
        total += 1 + digits(lens[i]) + 2 + lens[i] + 2;
    buf = malloc(total + 1);
    if (buf == NULL)
        return NULL;
    pos = (size_t)sprintf(buf, "*%d\r\n", argc);
    for (i = 0; i < argc; i++) {
        pos += (size_t)sprintf(buf + pos, "$%zu\r\n", lens[i]);
        memcpy(buf + pos, argv[i], lens[i]);
        pos += lens[i];
        buf[pos++] = '\r';
        buf[pos++] = '\n';
    }
    buf[pos] = '\0';
    *out_len = pos;
    return buf;
}
