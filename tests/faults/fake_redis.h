/* SPDX-License-Identifier: MIT */
/*
 * A fake Redis server for tests of hostile and broken replies.
 *
 * It runs on the test's own libev loop, listens on a free port of
 * 127.0.0.1 and, left alone, behaves like a Redis that is just good enough
 * for leash: AUTH, SELECT, PING, TIME, SCRIPT LOAD, EVALSHA / EVAL of
 * leash's scripts (emulated: a lock table with owners, counts, expiries,
 * fences and the "someone waits" mark), SUBSCRIBE, UNSUBSCRIBE and PUBLISH.
 *
 * A hook sees every command first and may answer it itself: with any bytes
 * (wrong types, errors, truncated or huge frames), with silence, or by
 * closing the connection. fr_send() pushes bytes nobody asked for.
 *
 *     fake_redis *f = fr_start(loop);
 *     fr_set_hook(f, my_hook, &state);
 *     ... leash client on 127.0.0.1:fr_port(f) ...
 *     fr_stop(f);
 */
#ifndef LEASH_TESTS_FAULTS_FAKE_REDIS_H
#define LEASH_TESTS_FAULTS_FAKE_REDIS_H

#include <stddef.h>

#include <ev.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fake_redis fake_redis;
typedef struct fr_conn fr_conn;

/* Which of leash's scripts a command runs (EVALSHA or EVAL). */
enum {
    FR_NOT_A_SCRIPT = -1,
    FR_ACQUIRE = 0,
    FR_RELEASE = 1,
    FR_RENEW = 2,
    FR_FORCE = 3
};

/* A command as received: argv[0] is its name. Returns 1 when the hook
 * answered (or chose not to answer), 0 to let the fake behave. */
typedef int fr_hook(fake_redis *f, fr_conn *c, int argc, const char **argv, const size_t *lens,
                    void *arg);

fake_redis *fr_start(struct ev_loop *loop);
/* Closes every connection and the listener; frees everything. */
void fr_stop(fake_redis *f);
int fr_port(const fake_redis *f);
void fr_set_hook(fake_redis *f, fr_hook *hook, void *arg);

/* Queues raw bytes for the client of c. */
void fr_send(fr_conn *c, const void *buf, size_t len);
void fr_send_str(fr_conn *c, const char *s);
/* c answers nothing from now on (what it received is read and dropped),
 * like a server that froze: a real server never answers out of order. */
void fr_mute(fr_conn *c);
/* Closes c now (what was queued and not yet written is lost). */
void fr_close(fr_conn *c);
/* Closes every connection; new ones are accepted as before. */
void fr_close_all(fake_redis *f);

/* The script a command runs, FR_NOT_A_SCRIPT for other commands. */
int fr_script_of(int argc, const char **argv, const size_t *lens);
/* 1 once c sent a SUBSCRIBE. */
int fr_is_subscriber(const fr_conn *c);
/* Commands received on c. */
int fr_conn_commands(const fr_conn *c);
/* The same but PING (a subscriber's handshake asks only PING). */
int fr_conn_commands_but_ping(const fr_conn *c);
/* The n-th open connection in accept order (0 = oldest), or NULL. */
fr_conn *fr_conn_at(fake_redis *f, int n);
int fr_conn_count(const fake_redis *f);
/* Commands received whose name is `name` (case does not matter). */
int fr_calls(const fake_redis *f, const char *name);
/* Forgets every lock. */
void fr_reset_locks(fake_redis *f);
/* Sends a pub/sub message to every subscriber of channel (a C string, or
 * len bytes that may hold a NUL). */
void fr_publish(fake_redis *f, const char *channel, const char *msg);
void fr_publish_len(fake_redis *f, const char *channel, size_t len, const char *msg);

#ifdef __cplusplus
}
#endif

#endif
