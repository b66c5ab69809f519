/* SPDX-License-Identifier: MIT */
/*
 * The fixture of the tests on the simulated Redis (sim.h): recorders for
 * leash's callbacks, a client on the sim, and the server's side of leash's
 * own scripts (leashscripts.h), so that a case writes only what is its own.
 * sim.h knows nothing of leash's scripts; this file does.
 *
 *     sim *s = sim_new();
 *     leash_client *c = simfx_client(s, NULL);
 *     leash_lock *l = leash_lock_new(c, "x");
 *     simfx_rec got = {0};
 *     leash_acquire(l, 0, simfx_on_acquired, &got);
 *     sim_run(s);
 *     simfx_grant(simfx_pending(s, LS_ACQUIRE));
 *     sim_run(s);                            // got.calls == 1, LEASH_OK
 *
 * Linking: part of leash_test_sim (CMake), with sim.c.
 */
#ifndef LEASH_TESTS_SIM_FIXTURE_H
#define LEASH_TESTS_SIM_FIXTURE_H

#include <stdint.h>

#include <leash/leash.h>

#include "leashscripts.h"
#include "sim.h"

/* What one callback did: how often it fired, the status (or the lost
 * reason), the virtual time of its last call, and whether it ever fired
 * while simfx_in_call was set. */
typedef struct simfx_rec {
    int calls, status;
    int64_t at;
    int inside_call;
} simfx_rec;

/* 1 while a test is inside a call into leash that must not call back from
 * inside (leash calls back from the loop): a recorder that fires while it
 * is set fails the case. The test sets and clears it around the call. */
extern int simfx_in_call;

/* Recorders; arg is a simfx_rec. The acquire, release and close ones fail
 * the case when they fire inside a call (simfx_in_call); the lost one
 * records only. */
void simfx_on_acquired(leash_lock *l, int status, void *arg);
void simfx_on_released(leash_lock *l, int status, void *arg);
void simfx_on_lost(leash_lock *l, int reason, void *arg);
void simfx_on_closed(int status, void *arg);

/* A client made with o (NULL: sim_options's) and attached to s; nothing
 * has run on the wire yet (sim_run does). */
leash_client *simfx_client(sim *s, const leash_options *o);

/* A release of the lock elsewhere: its message on the first channel the
 * newest subscriber connection is subscribed to, which must exist. Runs
 * the sim. */
void simfx_publish_release(sim *s);

/* ---- leash's scripts, as the server sees them ---- */

/* Which of leash's scripts cmd runs (LS_*, EVALSHA or EVAL); LS_NONE for
 * any other command. */
int simfx_script_of(const sim_cmd *cmd);

/* The server's clock in ms, as the scripts return it. */
long long simfx_server_ms(void);

/* The oldest pending command that runs `script` on the newest command
 * connection, or NULL; and how many such are pending there. */
sim_cmd *simfx_pending(const sim *s, int script);
int simfx_count_pending(const sim *s, int script);

/* Commands still unanswered on every connection of s, closed ones too
 * (what a client wrote before it went), that run `script` and, unless
 * token is NULL, carry that owner token (argument 4). */
int simfx_count_unanswered(const sim *s, int script, const char *token);

/* The oldest pending command of the newest command connection; fails the
 * case unless there is one and it runs `script`. */
sim_cmd *simfx_oldest(const sim *s, int script);

/* Answers simfx_oldest(s, script) with the printf-formatted reply, then
 * runs the sim. */
void simfx_answer(sim *s, int script, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Answers cmd, an acquire of the mutex (LS_ACQUIRE) or of the family
 * (LS_FAMILY_ACQUIRE) that must be the oldest pending one on its
 * connection: granted (fence 77, the hold count it asked for), or busy
 * with the holder's pttl. The reply is queued; sim_run delivers it. */
void simfx_grant(sim_cmd *cmd);
void simfx_busy(sim_cmd *cmd, long long pttl);

#endif
