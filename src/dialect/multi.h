/* SPDX-License-Identifier: MIT */
/*
 * A multi-lock's members of one hash slot, taken in one script
 * (dialect/multi.c), in leash's own mutex layout (dialect/leash.c).
 */
#ifndef LEASH_DIALECT_MULTI_H
#define LEASH_DIALECT_MULTI_H

#include <stddef.h>
#include <stdint.h>

#include "dialect/dialect.h"

/* The most members one such script takes (prim/multi.c's LEASH_MULTI_MAX). */
#define LEASH__MULTI_SCRIPT_MAX 64

/* Makes the scripts' SHA1s (leash__dialects_init). */
void leash__multi_scripts_init(void);

/* The scripts, one server's and Redlock's: in dialect/leash.c's list, so
 * that the handshake loads them (a multi-lock's first acquire after a
 * restart or SCRIPT FLUSH then costs no NOSCRIPT round trip, which on
 * Redlock would come out of the grant's validity). */
extern leash__script leash__multi_acquire_script, leash__multi_acquire_fenced_script;

/* The command that takes the locks names[0..n) (one server's; one slot
 * in a cluster; 2..
 * LEASH__MULTI_SCRIPT_MAX) for tokens[0..n), all or none, with the lease
 * of lease_ms; validity_ms and deadline as dialect.h's acquire_cmd. Its
 * reply reads as leash__op_acquire's: GRANTED with the one fence of every
 * member; BUSY with n the busy key's PTTL and fence the index (from 1) of
 * that key in names; LATE. Fenced names (Redlock) take the Redlock
 * form, which reads and writes every member's fence floor and carries a
 * fence proposal (dialect.h, propose_fence). NULL without memory or out
 * of range. */
leash__cmd *leash__multi_acquire_cmd(const leash__names *const *names, const char *const *tokens,
                                     size_t n, int64_t lease_ms, int64_t validity_ms,
                                     int64_t deadline);

#endif
