/*
 * The Redis names of one lock. The lock's hash lives at key_prefix + name.
 * Its companions (fence counter, release tombstones) and its pub/sub channel
 * carry the same hash tag, so every key of a lock lands in one cluster slot:
 * "{<key>}:fence" when the key has no tag of its own, "<key>:fence" when it
 * does (e.g. a name "order:{42}" keeps its tag "42").
 */
#ifndef LEASH_KEYS_H
#define LEASH_KEYS_H

#include <stddef.h>

#include "log.h"

typedef struct leash__keys {
    char *key;         /* the lock's hash */
    char *fence;       /* the fencing counter: INCR per new hold, never deleted */
    char *tomb_prefix; /* + owner token: "this hold was released" marker */
    char *channel;     /* release announcements */
    size_t key_len, fence_len, tomb_prefix_len, channel_len;
    char *mem; /* one allocation behind all of the above */
} leash__keys;

/* LEASH_OK, LEASH_EINVAL (bad name: logged) or LEASH_ENOMEM. */
int leash__keys_make(leash__keys *k, const leash__logger *lg, const char *prefix, const char *name);
void leash__keys_clear(leash__keys *k);

/* The cluster hash slot of a key (CRC16 of its hash tag, mod 16384). */
unsigned leash__key_slot(const char *key, size_t len);

#endif
