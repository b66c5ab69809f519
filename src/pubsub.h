/*
 * The subscriber connection: SUBSCRIBE / UNSUBSCRIBE of the waiter channels,
 * confirmations and release messages. One subscription per channel, never a
 * SUBSCRIBE while its UNSUBSCRIBE is unconfirmed (hiredis keys its callbacks
 * by channel name), and all of them again after a reconnect.
 */
#ifndef LEASH_PUBSUB_H
#define LEASH_PUBSUB_H

#include "conn.h"
#include "waiters.h"

/* Moves ch's subscription toward what its waiters need. */
void leash__pubsub_sync(leash_client *c, leash__chan *ch);
void leash__pubsub_on_ready(leash__conn *conn);
void leash__pubsub_on_down(leash__conn *conn);

#endif
