/* SPDX-License-Identifier: MIT */
/* Redis Cluster's key -> hash slot rule, and the hash tag it hashes. */
#ifndef LEASH_BASE_SLOT_H
#define LEASH_BASE_SLOT_H

#include <stddef.h>

#define LEASH__SLOTS 16384

/* 1 if key has a hash tag (the part between the first '{' and the first
 * '}' after it, when that part is not empty): its offset and length. */
int leash__hash_tag(const char *key, size_t len, size_t *start, size_t *tag_len);

/* The cluster hash slot of a key (CRC16 of its hash tag, mod 16384). */
unsigned leash__key_slot(const char *key, size_t len);

#endif
