#include "keys.h"

#include <stdlib.h>
#include <string.h>

#include <leash/leash.h>

#include "resp.h"

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

size_t leash__companion_len(const char *key, size_t key_len, size_t kind_len) {
    size_t start, tag_len;

    if (find_tag(key, key_len, &start, &tag_len))
        return key_len + 1 + kind_len;
    return key_len + 1 + 1 + key_len + 1 + kind_len; /* key \0 { key } kind */
}

void leash__companion(char *out, const char *key, size_t key_len, const char *kind,
                      size_t kind_len) {
    size_t start, tag_len;

    memcpy(out, key, key_len);
    out += key_len;
    *out++ = '\0';
    if (!find_tag(key, key_len, &start, &tag_len)) {
        /* Untagged keys have no braces at all (leash__keys_make refuses
         * stray ones), so "{key}" is a tag that hashes like the key. */
        *out++ = '{';
        memcpy(out, key, key_len);
        out += key_len;
        *out++ = '}';
    }
    memcpy(out, kind, kind_len);
}

int leash__keys_make(leash__keys *k, const leash__logger *lg, const char *prefix, const char *name,
                     int db) {
    size_t plen, nlen, klen, start, tag_len, kind_len, chan_len;
    char kind[32], *p;

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
    p = malloc(klen + 1);
    if (p == NULL)
        return LEASH_ENOMEM;
    memcpy(p, prefix, plen);
    memcpy(p + plen, name, nlen + 1);
    /* Braces without a valid tag would give a companion another slot. */
    if (!find_tag(p, klen, &start, &tag_len) &&
        (memchr(p, '{', klen) != NULL || memchr(p, '}', klen) != NULL)) {
        free(p);
        leash__log(lg, LEASH_LOG_ERROR,
                   "leash_lock_new: prefix+name has braces that are not a hash tag: "
                   "use a balanced, non-empty {tag}");
        return LEASH_EINVAL;
    }
    memcpy(kind, "released:", 9);
    kind_len = 9 + leash__resp_int(kind + 9, db);
    chan_len = leash__companion_len(p, klen, kind_len);
    k->mem = realloc(p, klen + 1 + chan_len + 1);
    if (k->mem == NULL) {
        free(p);
        return LEASH_ENOMEM;
    }
    k->key = k->mem;
    k->key_len = klen;
    k->channel = k->mem + klen + 1;
    k->channel_len = chan_len;
    leash__companion(k->channel, k->key, klen, kind, kind_len);
    k->channel[chan_len] = '\0';
    return LEASH_OK;
}

void leash__keys_clear(leash__keys *k) {
    free(k->mem);
    memset(k, 0, sizeof(*k));
}
