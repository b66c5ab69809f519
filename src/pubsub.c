#include "pubsub.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "client.h"
#include "resp.h"

static void on_sub_reply(redisAsyncContext *ac, void *r, void *privdata);

static int send_sub(leash_client *c, const char *verb, leash__chan *ch) {
    const char *argv[2] = {verb, ch->name};
    size_t lens[2] = {strlen(verb), ch->len}, len;
    char *buf = leash__resp_format(&len, 2, argv, lens);
    int rc;

    if (buf == NULL)
        return -1;
    rc = leash__conn_send_raw(&c->sub, on_sub_reply, buf, len, 1);
    free(buf);
    return rc;
}

void leash__pubsub_sync(leash_client *c, leash__chan *ch) {
    int wanted = leash__chan_wanted(ch);

    if (wanted && ch->sub == LEASH__SUB_NONE) {
        /* With the subscriber connection down, on_ready subscribes. */
        if (send_sub(c, "SUBSCRIBE", ch) == 0)
            ch->sub = LEASH__SUB_PENDING;
    } else if (!wanted && ch->sub == LEASH__SUB_ACTIVE) {
        ch->sub = send_sub(c, "UNSUBSCRIBE", ch) == 0 ? LEASH__SUB_LEAVING : LEASH__SUB_NONE;
    }
    /* PENDING and LEAVING settle when their confirmation arrives. */
    leash__waiters_maybe_free(c, ch);
}

static void on_subscribe(leash_client *c, leash__chan *ch) {
    if (ch->sub != LEASH__SUB_PENDING)
        return;
    ch->sub = LEASH__SUB_ACTIVE;
    /* Never 0: 0 means "not covered". */
    if (++ch->epoch == 0)
        ch->epoch = 1;
    if (!leash__chan_wanted(ch)) {
        leash__pubsub_sync(c, ch);
        return;
    }
    leash__waiters_subscribed(c, ch);
}

static void on_unsubscribe(leash_client *c, leash__chan *ch) {
    if (ch->sub != LEASH__SUB_LEAVING)
        return;
    ch->sub = LEASH__SUB_NONE;
    leash__pubsub_sync(c, ch);
}

/* "renewed:<lease ms>" from a holder's watchdog, or a released token. */
static void on_message(leash_client *c, const redisReply *chan, const redisReply *msg) {
    static const char renewed[] = "renewed:";

    if (msg->len > sizeof(renewed) - 1 && memcmp(msg->str, renewed, sizeof(renewed) - 1) == 0)
        leash__waiters_holder_renewed(c, chan->str, chan->len,
                                      strtoll(msg->str + sizeof(renewed) - 1, NULL, 10));
    else
        leash__waiters_released(c, chan->str, chan->len, msg->str, msg->len);
}

static void on_sub_reply(redisAsyncContext *ac, void *r, void *privdata) {
    leash__conn *conn = ac->data;
    redisReply *reply = r, *kind, *chan;
    leash_client *c;
    leash__chan *ch;

    (void)privdata;
    if (conn == NULL || conn->ac != ac || reply == NULL)
        return;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 3 ||
        reply->element[0]->type != REDIS_REPLY_STRING ||
        reply->element[1]->type != REDIS_REPLY_STRING)
        return;
    kind = reply->element[0];
    chan = reply->element[1];
    c = conn->client;
    leash__client_enter(c);
    if (strcasecmp(kind->str, "message") == 0) {
        leash__conn_progress(conn, 0);
        if (reply->element[2]->type == REDIS_REPLY_STRING)
            on_message(c, chan, reply->element[2]);
    } else {
        leash__conn_progress(conn, 1);
        ch = leash__chans_find(&c->chans, chan->str, chan->len);
        if (ch != NULL) {
            if (strcasecmp(kind->str, "subscribe") == 0)
                on_subscribe(c, ch);
            else if (strcasecmp(kind->str, "unsubscribe") == 0)
                on_unsubscribe(c, ch);
        }
    }
    leash__client_leave(c);
}

void leash__pubsub_on_ready(leash__conn *conn) {
    leash_client *c = conn->client;
    size_t i;
    leash__chan *ch, *next;

    for (i = 0; i < c->chans.nbuckets; i++) {
        for (ch = c->chans.buckets[i]; ch; ch = next) {
            next = ch->hnext;
            leash__pubsub_sync(c, ch);
        }
    }
}

void leash__pubsub_on_down(leash__conn *conn) {
    leash_client *c = conn->client;
    size_t i;
    leash__chan *ch, *next;

    /* Every subscription died with the connection. Waiters keep their TTL
     * timers; once resubscribed, each of them tries again. */
    for (i = 0; i < c->chans.nbuckets; i++) {
        for (ch = c->chans.buckets[i]; ch; ch = next) {
            next = ch->hnext;
            ch->sub = LEASH__SUB_NONE;
            if (ch->lingering) { /* nothing to keep alive any more */
                ch->lingering = 0;
                leash__timer_stop(&ch->linger);
            }
            leash__waiters_maybe_free(c, ch);
        }
    }
}
