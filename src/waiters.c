#include "waiters.h"

#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "clock.h"
#include "lock.h"
#include "pubsub.h"

/* ---- the channel table (chained hash, grows by doubling) ---- */

static unsigned hash_name(const char *s, size_t len) {
    unsigned h = 2166136261u; /* FNV-1a */
    size_t i;
    for (i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

leash__chan *leash__chans_find(const leash__chans *t, const char *name, size_t len) {
    leash__chan *ch;
    unsigned h;

    if (t->nbuckets == 0)
        return NULL;
    h = hash_name(name, len);
    for (ch = t->buckets[h & (t->nbuckets - 1)]; ch; ch = ch->hnext)
        if (ch->hash == h && ch->len == len && memcmp(ch->name, name, len) == 0)
            return ch;
    return NULL;
}

static int chans_grow(leash__chans *t) {
    size_t n = t->nbuckets ? t->nbuckets * 2 : 16, i;
    leash__chan **b = calloc(n, sizeof(*b)), *ch, *next;

    if (b == NULL)
        return -1;
    for (i = 0; i < t->nbuckets; i++) {
        for (ch = t->buckets[i]; ch; ch = next) {
            next = ch->hnext;
            ch->hnext = b[ch->hash & (n - 1)];
            b[ch->hash & (n - 1)] = ch;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = n;
    return 0;
}

static leash__chan *chans_add(leash__chans *t, const char *name, size_t len) {
    leash__chan *ch;
    size_t slot;

    if (t->count >= t->nbuckets && chans_grow(t) != 0)
        return NULL;
    ch = calloc(1, sizeof(*ch) + len + 1);
    if (ch == NULL)
        return NULL;
    ch->name = (char *)(ch + 1);
    memcpy(ch->name, name, len);
    ch->name[len] = '\0';
    ch->len = len;
    ch->hash = hash_name(name, len);
    slot = ch->hash & (t->nbuckets - 1);
    ch->hnext = t->buckets[slot];
    t->buckets[slot] = ch;
    t->count++;
    return ch;
}

static void chans_remove(leash__chans *t, leash__chan *ch) {
    leash__chan **pp = &t->buckets[ch->hash & (t->nbuckets - 1)];
    leash__timer_clear(&ch->linger);
    while (*pp != ch)
        pp = &(*pp)->hnext;
    *pp = ch->hnext;
    t->count--;
    free(ch);
}

void leash__chans_clear(leash__chans *t) {
    size_t i;
    leash__chan *ch, *next;

    for (i = 0; i < t->nbuckets; i++) {
        for (ch = t->buckets[i]; ch; ch = next) {
            next = ch->hnext;
            leash__timer_clear(&ch->linger);
            free(ch);
        }
    }
    free(t->buckets);
    memset(t, 0, sizeof(*t));
}

int leash__chan_wanted(const leash__chan *ch) {
    return ch->refs > 0 || ch->holders > 0 || ch->lingering;
}

void leash__waiters_maybe_free(leash_client *c, leash__chan *ch) {
    if (!leash__chan_wanted(ch) && ch->sub == LEASH__SUB_NONE)
        chans_remove(&c->chans, ch);
}

static void linger_over(void *arg) {
    leash__chan *ch = arg;

    ch->lingering = 0;
    leash__pubsub_sync(ch->linger.client, ch); /* may free ch */
}

/* Nobody local waits for or holds this name any more. */
static void chan_idle(leash_client *c, leash__chan *ch) {
    ch->kept = 0;
    if (c->cfg.sub_linger_ms > 0 &&
        (ch->sub == LEASH__SUB_ACTIVE || ch->sub == LEASH__SUB_PENDING) &&
        leash__timer_at(&ch->linger, leash__now_ms() + c->cfg.sub_linger_ms, 0) == LEASH_OK) {
        ch->lingering = 1;
        return;
    }
    leash__pubsub_sync(c, ch); /* may free ch */
}

/* ---- joining and leaving ---- */

int leash__waiters_join(leash_lock *l) {
    leash_client *c = l->client;
    leash__chan *ch;

    if (l->w.chan != NULL)
        return LEASH_OK;
    ch = leash__chans_find(&c->chans, l->keys.channel, l->keys.channel_len);
    if (ch == NULL) {
        ch = chans_add(&c->chans, l->keys.channel, l->keys.channel_len);
        if (ch == NULL)
            return LEASH_ENOMEM;
        leash__timer_init(&ch->linger, c, linger_over, ch);
        if (leash__timer_create(&ch->linger) != LEASH_OK) {
            chans_remove(&c->chans, ch);
            return LEASH_ENOMEM;
        }
    }
    if (ch->lingering) {
        ch->lingering = 0;
        leash__timer_stop(&ch->linger);
    }
    l->w.chan = ch;
    l->w.parked = 0;
    l->w.next = NULL;
    l->w.prev = ch->tail;
    if (ch->tail)
        ch->tail->w.next = l;
    else
        ch->head = l;
    ch->tail = l;
    ch->refs++;
    leash__pubsub_sync(c, ch);
    return LEASH_OK;
}

void leash__waiters_leave(leash_lock *l) {
    leash__chan *ch = l->w.chan;

    if (ch == NULL)
        return;
    if (l->w.prev)
        l->w.prev->w.next = l->w.next;
    else
        ch->head = l->w.next;
    if (l->w.next)
        l->w.next->w.prev = l->w.prev;
    else
        ch->tail = l->w.prev;
    l->w.chan = NULL;
    l->w.next = l->w.prev = NULL;
    l->w.parked = 0;
    /* A waiter that was sent to try for a release and leaves without the
     * lock (cancelled, freed, timed out, failed) hands that release on:
     * the lock may be free, and nobody else will say so. */
    if (l->w.woken) {
        l->w.woken = 0;
        ch->kept++;
    }
    if (ch->kept > (unsigned)ch->refs - 1)
        ch->kept = (unsigned)ch->refs - 1;
    if (--ch->refs == 0) {
        if (ch->holders == 0)
            chan_idle(l->client, ch);
        return;
    }
    /* The new head may be parked with a wake waiting for it. */
    if (ch->kept > 0 && ch->head != NULL && ch->head->w.parked) {
        ch->kept--;
        ch->head->w.parked = 0;
        ch->head->w.woken = 1;
        l->client->stats.wakeups++;
        leash__lock_wake(ch->head);
    }
}

void leash__waiters_granted(leash_lock *l) {
    /* Every release announced so far came before this grant: a kept wake
     * would only send the next waiter into a busy attempt. */
    leash__chan *ch = l->w.chan;

    if (ch != NULL) {
        ch->kept = 0;
        ch->holders++;
        l->w.hold_chan = ch;
    }
    l->w.woken = 0;
    leash__waiters_leave(l);
}

void leash__waiters_hold_ended(leash_lock *l) {
    leash__chan *ch = l->w.hold_chan;

    if (ch == NULL)
        return;
    l->w.hold_chan = NULL;
    if (--ch->holders == 0 && ch->refs == 0)
        chan_idle(l->client, ch);
}

unsigned leash__waiters_covered(const leash_lock *l) {
    return l->w.chan != NULL && l->w.chan->sub == LEASH__SUB_ACTIVE ? l->w.chan->epoch : 0;
}

int leash__waiters_park(leash_lock *l) {
    leash__chan *ch = l->w.chan;

    if (ch == NULL)
        return 0;
    if (ch->kept > 0) {
        ch->kept--;
        l->w.woken = 1;
        l->client->stats.wakeups++;
        return 1;
    }
    l->w.parked = 1;
    l->w.woken = 0;
    return 0;
}

/* ---- events ---- */

void leash__waiters_released(leash_client *c, const char *channel, size_t len, const char *token,
                             size_t token_len) {
    leash__chan *ch = leash__chans_find(&c->chans, channel, len);

    if (ch == NULL || ch->refs == 0)
        return;
    /* One release, two announcements (our own reply, then the message, or
     * the other way round): wake once. */
    if (token_len == LEASH__TOKEN_LEN) {
        if (memcmp(ch->last_token, token, LEASH__TOKEN_LEN) == 0)
            return;
        memcpy(ch->last_token, token, LEASH__TOKEN_LEN);
        ch->last_token[LEASH__TOKEN_LEN] = '\0';
    }
    if (ch->head->w.parked) {
        ch->head->w.parked = 0;
        ch->head->w.woken = 1;
        c->stats.wakeups++;
        leash__lock_wake(ch->head);
    } else if (ch->kept < (unsigned)ch->refs) {
        ch->kept++;
    }
}

void leash__waiters_holder_renewed(leash_client *c, const char *channel, size_t len,
                                   int64_t lease_ms) {
    leash__chan *ch = leash__chans_find(&c->chans, channel, len);
    leash_lock *l;

    if (ch == NULL || lease_ms <= 0)
        return;
    for (l = ch->head; l != NULL; l = l->w.next)
        leash__lock_holder_renewed(l, lease_ms);
}

void leash__waiters_subscribed(leash_client *c, leash__chan *ch) {
    leash_lock *l, *next;

    /* Each waiter may leave the queue (or free its handle) as it tries;
     * waiters that join meanwhile were covered when they sent. */
    for (l = ch->head; l != NULL && !c->freeing; l = next) {
        next = l->w.next;
        leash__lock_subscribed(l);
    }
}
