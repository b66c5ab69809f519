/* SPDX-License-Identifier: MIT */
/*
 * A small client that speaks Redisson's RLock layout (Redisson 3.x,
 * RedissonLock), written from its documented behaviour: its Lua scripts
 * for tryLock, unlock (with the unlock latch), the watchdog's renewal and
 * forceUnlock, and a waiter that subscribes to the lock's channel and tries
 * again on the message "0". It stands in for a Java service that shares
 * lock names with a leash program (Redisson itself cannot be fetched on the
 * test machines).
 *
 * Blocking hiredis calls, made between turns of the test's loop: a call
 * takes a round trip on loopback. The waiter's subscription is read without
 * blocking (rs_waiter_poll), so the test can turn its loop meanwhile.
 */
#ifndef LEASH_TESTS_REDISSON_H
#define LEASH_TESTS_REDISSON_H

#include <stdint.h>

#include <hiredis/hiredis.h>

#include "redis_server.h"

/* One Redisson "instance" on one server (the one holding the lock's key):
 * its UUID, and a thread id per caller. */
typedef struct rs_client {
    redisContext *c;
    char uuid[37];
    int sharded; /* SPUBLISH/SSUBSCRIBE, as Redisson in a Redis 7 cluster */
} rs_client;

/* Connects to r; fails the test on error. */
void rs_client_init(rs_client *rc, test_redis *r, int sharded);
void rs_client_close(rs_client *rc);

/* "<uuid>:<thread>" into out (64 bytes). */
void rs_field(const rs_client *rc, long thread, char *out);
/* The channel of lock `name` as Redisson names it, into out (1024 bytes). */
void rs_channel(const char *name, char *out);

/* tryLock's script: -1 granted (Redisson's nil), else the key's PTTL. */
long long rs_try_lock(rs_client *rc, const char *name, long thread, int64_t lease_ms);
/* unlock's script with the latch of request_id: -1 not ours (nil), 0 still
 * held (count decremented), 1 released (and "0" published). A latch that
 * exists answers what it recorded. */
long long rs_unlock(rs_client *rc, const char *name, long thread, int64_t lease_ms,
                    const char *request_id);
/* The watchdog's renewal: 1 renewed, 0 not held by this thread. */
long long rs_renew(rs_client *rc, const char *name, long thread, int64_t lease_ms);
/* forceUnlock: 1 removed (and "0" published), 0 nothing to remove. */
long long rs_force_unlock(rs_client *rc, const char *name);

/* A waiter's subscription to lock `name`'s channel. */
typedef struct rs_waiter {
    redisContext *sub;
    char channel[1024];
    int messages; /* "0" messages seen */
} rs_waiter;

/* Subscribes and waits for the confirmation; fails the test on error. */
void rs_waiter_init(rs_waiter *w, test_redis *r, const char *name, int sharded);
void rs_waiter_close(rs_waiter *w);
/* Reads what arrived, without blocking: the number of new "0" messages. */
int rs_waiter_poll(rs_waiter *w);

#endif
