#include "base/token.h"

#include <errno.h>
#include <stddef.h>
#include <sys/random.h>

static int fill_random(unsigned char *buf, size_t len) {
    size_t got = 0;
    while (got < len) {
        ssize_t n = getrandom(buf + got, len - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        got += (size_t)n;
    }
    return 0;
}

int leash__token_new(char out[LEASH__TOKEN_LEN + 1]) {
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[LEASH__TOKEN_LEN / 2];
    size_t i;

    if (fill_random(raw, sizeof(raw)) != 0)
        return -1;
    for (i = 0; i < sizeof(raw); i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    out[LEASH__TOKEN_LEN] = '\0';
    return 0;
}

uint64_t leash__random_below(uint64_t n) {
    uint64_t x = 0;
    if (fill_random((unsigned char *)&x, sizeof(x)) != 0)
        x = (uint64_t)(uintptr_t)&x; /* jitter only: any value will do */
    return x % n;
}
