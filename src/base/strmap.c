/* SPDX-License-Identifier: MIT */
#include "base/strmap.h"

#include <stdlib.h>
#include <string.h>

static unsigned hash_bytes(const char *s, size_t len) {
    unsigned h = 2166136261u;
    size_t i;
    for (i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

leash__strmap_entry *leash__strmap_find(const leash__strmap *m, const char *key, size_t len) {
    leash__strmap_entry *e;
    unsigned h;

    if (m->nbuckets == 0)
        return NULL;
    h = hash_bytes(key, len);
    for (e = m->buckets[h & (m->nbuckets - 1)]; e != NULL; e = e->next)
        if (e->hash == h && e->len == len && memcmp(e->key, key, len) == 0)
            return e;
    return NULL;
}

static int grow(leash__strmap *m) {
    size_t n = m->nbuckets ? m->nbuckets * 2 : 16, i;
    leash__strmap_entry **b = calloc(n, sizeof(*b)), *e, *next;

    if (b == NULL)
        return -1;
    for (i = 0; i < m->nbuckets; i++) {
        for (e = m->buckets[i]; e != NULL; e = next) {
            next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    }
    free(m->buckets);
    m->buckets = b;
    m->nbuckets = n;
    return 0;
}

int leash__strmap_insert(leash__strmap *m, leash__strmap_entry *e) {
    size_t slot;

    if (m->count >= m->nbuckets && grow(m) != 0)
        return -1;
    e->hash = hash_bytes(e->key, e->len);
    slot = e->hash & (m->nbuckets - 1);
    e->next = m->buckets[slot];
    m->buckets[slot] = e;
    m->count++;
    return 0;
}

void leash__strmap_remove(leash__strmap *m, leash__strmap_entry *e) {
    leash__strmap_entry **pp = &m->buckets[e->hash & (m->nbuckets - 1)];

    while (*pp != e)
        pp = &(*pp)->next;
    *pp = e->next;
    m->count--;
}

leash__strmap_entry *leash__strmap_next(const leash__strmap *m, const leash__strmap_entry *e) {
    size_t i;

    if (e != NULL && e->next != NULL)
        return e->next;
    for (i = e != NULL ? (e->hash & (m->nbuckets - 1)) + 1 : 0; i < m->nbuckets; i++)
        if (m->buckets[i] != NULL)
            return m->buckets[i];
    return NULL;
}

void leash__strmap_free(leash__strmap *m) {
    free(m->buckets);
    memset(m, 0, sizeof(*m));
}

void *leash__strmap_owner_new(size_t size, size_t entry_offset, const char *key, size_t len) {
    char *owner = calloc(1, size + len + 1);
    leash__strmap_entry *e;

    if (owner == NULL)
        return NULL;
    memcpy(owner + size, key, len);
    e = (leash__strmap_entry *)(owner + entry_offset);
    e->key = owner + size;
    e->len = len;
    return owner;
}
