/* SPDX-License-Identifier: MIT */
/*
 * The copies of one command on the servers of a quorum (route/quorum.c),
 * and what each owes its server: delivery. A copy is written to its
 * server's command connection, written again after a reconnect when the
 * command may run twice (LEASH__CMD_RETRY), and given up at its deadline.
 * The quorum decides; this file delivers.
 *
 * While the quorum decides it hears every copy's answer. Once it has
 * decided it lets go, or drops, what is still out:
 *   let go   the copies stay their servers' duty, delivered unheard until
 *            their deadlines: a release must reach every server that takes
 *            connections again before the hold's deadline, or a minority
 *            keeps a hold nobody owns (its deadline is the hold's); a
 *            give-back likewise; a renewal that arrives late makes the
 *            renewing majority stronger, and its "not after" stamp voids
 *            one that runs too late; a fence raise only ever raises.
 *   drop     a grant's copies: one that landed after the release that
 *            follows it would leave a key nobody holds (a copy retried
 *            after BUSY waits in the delayed list, behind which the
 *            release can pass). Only a copy already on its way (written,
 *            or queued on a ready connection, where the release queues
 *            behind it) goes, once: never again after a reconnect, a
 *            transient answer or NOSCRIPT (wire/conn.h).
 * Withdrawing is for an owner that gave up the operation itself (an
 * acquire cancelled): a copy not written yet never is, a written one
 * finishes unheard and is not written again.
 *
 * Posting hands copies to their servers with nobody listening at all.
 */
#ifndef LEASH_ROUTE_COPIES_H
#define LEASH_ROUTE_COPIES_H

#include <stdint.h>

#include "wire/conn.h"

struct redisReply;
typedef struct leash__copies leash__copies;

/* A copy's answer (or why none came: status, as wire/conn.h). */
typedef void leash__copy_answer_fn(void *owner, unsigned server, struct redisReply *reply,
                                   int status, const leash__reply_info *info);

typedef struct leash__copy_slot {
    leash__copies *set;
    unsigned server;
} leash__copy_slot;

struct leash__copies {
    leash__conn *const *conns; /* per server: its command connection */
    unsigned n;                /* servers, at most 64 */
    leash__cmd **out;          /* per server: the copy whose answer is awaited */
    leash__copy_slot *slots;
    leash__copy_answer_fn *answer;
    void *owner;
};

/* LEASH_OK, or LEASH_ENOMEM (then nothing is held). conns must outlive c. */
int leash__copies_init(leash__copies *c, leash__conn *const *conns, unsigned n,
                       leash__copy_answer_fn *answer, void *owner);
/* Withdraws what is still out and frees c's memory. */
void leash__copies_fini(leash__copies *c);

/* A copy of tmpl to every server in `to` (tmpl itself goes too, or is
 * freed), not before tmpl->send_at. All copies are made before any is
 * sent: 0, or -1 without memory, and then nothing was sent. */
int leash__copies_send(leash__copies *c, uint64_t to, leash__cmd *tmpl);

/* The decision is made: every copy still out is delivered to its
 * deadline, unheard. */
void leash__copies_let_go(leash__copies *c);
/* The decision is made, and a copy that landed late could do harm: see
 * "drop" above. */
void leash__copies_drop(leash__copies *c);
/* The operation is given up: copies not written are never written;
 * written ones finish unheard. Returns 1 if some copy was written. */
int leash__copies_withdraw(leash__copies *c);
/* The owner still listens, but the copies out are written at a teardown
 * (LEASH__CMD_BACKGROUND): a release whose handle is freed. */
void leash__copies_background(leash__copies *c);

/* Copies of tmpl (which goes too, or is freed) to every server of conns
 * in `to`, not before send_at (0: now), that nobody listens to: each is
 * delivered to its deadline. Returns how many went: all, or 0 without
 * memory. */
unsigned leash__copies_post(leash__conn *const *conns, unsigned n, uint64_t to, leash__cmd *tmpl,
                            int64_t send_at);

#endif
