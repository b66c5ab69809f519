/* SPDX-License-Identifier: MIT */
#include "base/slot.h"

#include <string.h>

int leash__hash_tag(const char *key, size_t len, size_t *start, size_t *tag_len) {
    const char *open = memchr(key, '{', len);
    const char *close;

    if (open == NULL)
        return 0;
    close = memchr(open + 1, '}', len - (size_t)(open + 1 - key));
    if (close == NULL || close == open + 1)
        return 0;
    *start = (size_t)(open + 1 - key);
    *tag_len = (size_t)(close - open - 1);
    return 1;
}

static unsigned crc16_xmodem(const char *p, size_t len) {
    unsigned crc = 0;
    size_t i;
    int b;

    for (i = 0; i < len; i++) {
        crc ^= (unsigned)(unsigned char)p[i] << 8;
        for (b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
    return crc;
}

unsigned leash__key_slot(const char *key, size_t len) {
    size_t start, tag_len;

    if (leash__hash_tag(key, len, &start, &tag_len))
        return crc16_xmodem(key + start, tag_len) & (LEASH__SLOTS - 1);
    return crc16_xmodem(key, len) & (LEASH__SLOTS - 1);
}
