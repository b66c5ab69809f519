/* SPDX-License-Identifier: MIT */
/*
 * What leash keeps in Redis, read back for tests through the library's own
 * reader of its layout (read_state, src/dialect/dialect.h), so that a test
 * never parses the layout itself.
 */
#ifndef LEASH_TESTS_LOCKDATA_H
#define LEASH_TESTS_LOCKDATA_H

#include <stddef.h>
#include <stdint.h>

#include "redis_server.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The hold count of the mutex at `key` (db 0), 0 when there is no such key
 * or nobody holds it (it is only kept for a waiter), -1 when it is not a
 * mutex or its holder's token is not 32 digits (none leash writes). token
 * (33 bytes: 32 hex digits and a NUL) and fence may be NULL; they are set
 * only for a held lock. */
long long test_lock_value(test_redis *r, const char *key, char *token, uint64_t *fence);

/* The arguments of a command as the library builds it (buf: RESP, a
 * leash__cmd's bytes, src/wire/conn.h), as a reply array of strings (the
 * caller frees it with freeReplyObject), or NULL when buf is not one
 * whole command. */
redisReply *test_cmd_args(const char *buf, size_t len);

/* Runs cmd (a leash__cmd the library built) on c as its first send (its
 * stamps all zeros: none), as the library's connection would to a server
 * of test_redis_version(): its script's variant for that version, loaded
 * first. The reply (NULL when c failed); cmd is freed. */
struct leash__cmd;
redisReply *test_cmd_run(redisContext *c, struct leash__cmd *cmd);

#ifdef __cplusplus
}
#endif

#endif
