/* SPDX-License-Identifier: MIT */
/*
 * A map from byte strings to entries embedded in their owners (chained
 * hashing, FNV-1a, grows by doubling). The map owns only its buckets: the
 * entries, and the key bytes they point to, belong to the caller.
 */
#ifndef LEASH_BASE_STRMAP_H
#define LEASH_BASE_STRMAP_H

#include <stddef.h>

typedef struct leash__strmap_entry {
    struct leash__strmap_entry *next;
    unsigned hash;
    const char *key;
    size_t len;
} leash__strmap_entry;

typedef struct leash__strmap {
    leash__strmap_entry **buckets;
    size_t nbuckets, count;
} leash__strmap;

leash__strmap_entry *leash__strmap_find(const leash__strmap *m, const char *key, size_t len);
/* Inserts e (its key and len set; no entry with that key may exist).
 * 0, or -1 without memory (nothing inserted). */
int leash__strmap_insert(leash__strmap *m, leash__strmap_entry *e);
void leash__strmap_remove(leash__strmap *m, leash__strmap_entry *e);
/* The entry after e (NULL: the first), in no particular order; NULL at the
 * end. The map must not change during a walk, except that the entry just
 * returned may be removed if the walk continues from its successor taken
 * before the removal. */
leash__strmap_entry *leash__strmap_next(const leash__strmap *m, const leash__strmap_entry *e);
/* A zeroed owner of size bytes, with a copy of key (and a NUL) stored
 * after it, whose entry at entry_offset is keyed by that copy (not yet in
 * any map): one free() frees both. NULL without memory. */
void *leash__strmap_owner_new(size_t size, size_t entry_offset, const char *key, size_t len);
#define LEASH__STRMAP_OWNER_NEW(type, member, key, len) \
    ((type *)leash__strmap_owner_new(sizeof(type), offsetof(type, member), (key), (len)))
/* Frees the buckets (not the entries). */
void leash__strmap_free(leash__strmap *m);

#endif
