/*
 * The Redis names of one lock: its key (key_prefix + name) and its pub/sub
 * channel.
 *
 * Everything else a lock needs in Redis lives in that one key, so no other
 * key of leash can ever collide with a lock's key. Names that belong to a
 * lock but are not its key (its channel here; companion keys of other kinds
 * of lock later) are companions: key + NUL + a part that starts with the
 * key's hash tag. A lock name never holds a NUL, so a companion equals no
 * lock key; the part before the first NUL is the whole key, so two
 * companions of different keys never meet; and the first {tag} of a
 * companion is the key's own, so it lands in the key's cluster slot:
 *   "leash:x"       -> "leash:x\0{leash:x}released:3"
 *   "app:{42}:lock" -> "app:{42}:lock\0released:3"
 * Pub/sub is shared by every db of a server: a channel carries the db, so
 * the same name in two dbs never meets.
 */
#ifndef LEASH_KEYS_H
#define LEASH_KEYS_H

#include <stddef.h>

#include "log.h"

typedef struct leash__keys {
    char *key;     /* the lock */
    char *channel; /* release announcements (a companion of key) */
    size_t key_len, channel_len;
    char *mem; /* one allocation behind both */
} leash__keys;

/* LEASH_OK, LEASH_EINVAL (bad name: logged) or LEASH_ENOMEM. */
int leash__keys_make(leash__keys *k, const leash__logger *lg, const char *prefix, const char *name,
                     int db);
void leash__keys_clear(leash__keys *k);

/* Bytes of the companion `kind` of a key of key_len bytes. */
size_t leash__companion_len(const char *key, size_t key_len, size_t kind_len);
/* Writes that companion at out (leash__companion_len bytes, no NUL added). */
void leash__companion(char *out, const char *key, size_t key_len, const char *kind,
                      size_t kind_len);

/* The cluster hash slot of a key (CRC16 of its hash tag, mod 16384). */
unsigned leash__key_slot(const char *key, size_t len);

#endif
