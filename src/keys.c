#include "keys.h"

#include <stdlib.h>
#include <string.h>

#include <leash/leash.h>

/* Redis Cluster hashes the part between the first '{' and the first '}' after
 * it, when that part is not empty. */
static int find_tag(const char *s, size_t len, size_t *start, size_t *tag_len) {
    const char *open = memchr(s, '{', len);
    const char *close;
    if (open == NULL)
        return 0;
    close = memchr(open + 1, '}', len - (size_t)(open + 1 - s));
    if (close == NULL || close == open + 1)
        return 0;
    *start = (size_t)(open + 1 - s);
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
    if (find_tag(key, len, &start, &tag_len))
        return crc16_xmodem(key + start, tag_len) & 16383;
    return crc16_xmodem(key, len) & 16383;
}

int leash__keys_make(leash__keys *k, const leash__logger *lg, const char *prefix,
                     const char *name) {
    size_t plen, nlen, klen, start, tag_len, head_len, total;
    int tagged;
    char *p;

    if (name == NULL || name[0] == '\0') {
        leash__log(lg, LEASH_LOG_ERROR, "leash_lock_new: the lock name is empty");
        return LEASH_EINVAL;
    }
    nlen = strlen(name);
    if (nlen > LEASH_NAME_MAX) {
        leash__log(lg, LEASH_LOG_ERROR, "leash_lock_new: the lock name is %zu bytes, over %d", nlen,
                   LEASH_NAME_MAX);
        return LEASH_EINVAL;
    }
    plen = strlen(prefix);
    klen = plen + nlen;
    /* Braces without a valid tag would give the companions another slot. */
    tagged = 0;
    {
        char *full = malloc(klen + 1);
        if (full == NULL)
            return LEASH_ENOMEM;
        memcpy(full, prefix, plen);
        memcpy(full + plen, name, nlen + 1);
        tagged = find_tag(full, klen, &start, &tag_len);
        if (!tagged && (memchr(full, '{', klen) != NULL || memchr(full, '}', klen) != NULL)) {
            free(full);
            leash__log(lg, LEASH_LOG_ERROR,
                       "leash_lock_new: prefix+name has braces that are not a hash tag: "
                       "use a balanced, non-empty {tag}");
            return LEASH_EINVAL;
        }
        free(full);
    }

    /* head = the part every companion starts with */
    head_len = tagged ? klen : klen + 2;
    total = (klen + 1) + (head_len + sizeof(":fence")) + (head_len + sizeof(":rel:")) +
            (head_len + sizeof(":released"));
    p = malloc(total);
    if (p == NULL)
        return LEASH_ENOMEM;
    memset(k, 0, sizeof(*k));
    k->mem = p;

    k->key = p;
    memcpy(p, prefix, plen);
    memcpy(p + plen, name, nlen + 1);
    k->key_len = klen;
    p += klen + 1;

#define LEASH__COMPANION(field, suffix)                 \
    do {                                                \
        k->field = p;                                   \
        if (tagged) {                                   \
            memcpy(p, k->key, klen);                    \
        } else {                                        \
            p[0] = '{';                                 \
            memcpy(p + 1, k->key, klen);                \
            p[klen + 1] = '}';                          \
        }                                               \
        memcpy(p + head_len, suffix, sizeof(suffix));   \
        k->field##_len = head_len + sizeof(suffix) - 1; \
        p += head_len + sizeof(suffix);                 \
    } while (0)
    LEASH__COMPANION(fence, ":fence");
    LEASH__COMPANION(tomb_prefix, ":rel:");
    LEASH__COMPANION(channel, ":released");
#undef LEASH__COMPANION
    return LEASH_OK;
}

void leash__keys_clear(leash__keys *k) {
    free(k->mem);
    memset(k, 0, sizeof(*k));
}
