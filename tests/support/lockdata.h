/*
 * What leash keeps in Redis, read back for tests: a lock is one string key
 * "<token>:<w>:<count>:<fence>", maybe followed by ":<token>:<since>" for
 * each starving waiter queued behind it (src/dialect/leash.c describes it).
 */
#ifndef LEASH_TESTS_LOCKDATA_H
#define LEASH_TESTS_LOCKDATA_H

#include <stdint.h>

#include "redis_server.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The hold count of the lock at `key` (db 0), 0 when there is no such
 * key, -1 when it is not a lock. token (33 bytes: 32 hex digits and a NUL)
 * and fence may be NULL; they are set only for a lock. */
long long test_lock_value(test_redis *r, const char *key, char *token, uint64_t *fence);

#ifdef __cplusplus
}
#endif

#endif
