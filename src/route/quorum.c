/* SPDX-License-Identifier: MIT */
/*
 * The route to N independent servers (Redlock, DESIGN 9.2): every
 * operation goes to all of them at once, and their answers combine into
 * one per lock, by the operation's class, as soon as the outcome is
 * decided (a server that is down does not hold everyone up until its
 * deadline). M = N / 2 + 1 is a majority.
 *
 *   grant    A new hold: granted by M servers. The attempt proposes one
 *            fence to all N (propose_fence); each server grants it, or
 *            its own clock when the proposal lags that by more than W (a
 *            quarter lease, at most a second), or its floor + 1 when that
 *            is larger, and writes what it granted as its floor in the
 *            same script. When M granting servers returned one fence (the
 *            usual case: the proposal won everywhere), that is the hold's
 *            fence and the grant is reported in its own round. Else the
 *            hold's fence is the largest returned, the granting servers
 *            below it have their floors raised to it (a second round: the
 *            raise), and the grant is reported once the raised ones and
 *            the ones already at it make M. An extra (reentrant) hold:
 *            granted by M. Not granted: given back on all N (the
 *            ones that answered busy or nothing included; giveback_cmd,
 *            dialect.h), and reported busy, with the time after which a
 *            majority could be free, or a short random pause when nobody
 *            can hold a majority (a split vote); late or failed otherwise.
 *            A multi-lock's one script (dialect/multi.c: several locks,
 *            all or none on each server, one fence per server for all of
 *            them) is granted as one lock is: by M servers that each
 *            granted every lock; the raise raises every lock's floor; a
 *            busy answer names a lock one server found busy; not granted,
 *            every lock's token (leash__send.group_tokens) is given back
 *            on the servers that granted or did not answer only (one
 *            that answered busy, late or gone wrote nothing there: locks
 *            x N give-backs would be mostly for nothing). An attempt its
 *            owner stops waiting for (quorum_cancel) counts as written
 *            where a server answered it other than that, not only where
 *            a copy is still out: the owner gives that back.
 *   release  released by M (or M holds left), or by some where the others
 *            of M said "not ours" (they never had it: a dropped grant
 *            copy); not ours for M; else the failure.
 *   renew    per lock: renewed by M; not ours as soon as more than N - M
 *            said so (no majority is possible); else the failure. Servers
 *            that failed get the renewal again shortly, in the background,
 *            so a hold does not run on a bare majority longer than needed.
 *            A hold's first renewal (and one in every quarter of the
 *            floor's life: hold/watchdog.c) also spreads it onto servers
 *            that lack it and never had it (dialect/leash.c, renew: the
 *            key missing, the floor below the hold's fence), and keeps its
 *            floor where it is: a grant by a bare majority reaches all N
 *            by then, and a long hold's floors never run out. That resend
 *            does not spread (leash__send.again): it is written after the
 *            holder's release when that came in between. A renewal that
 *            spreads, renewed by M, waits SPREAD_GRACE_MS at most (never
 *            for the slowest server: a frozen one that is up would decide
 *            when the hold lives on) for the other servers that are up
 *            (command connection ready), and says whether one of them
 *            failed it or had not answered by then (spread_short): the
 *            watchdog then spreads again with the next renewal, not a
 *            quarter floor later.
 *   read     a lock's state: every server's answer, in the servers' order,
 *            once each answered (one that is down, by its command
 *            timeout), or at the read's deadline (its command's), where
 *            the ones that had not answered count as LEASH_ECONN: a
 *            server that answers too slowly to go silent holds no read
 *            up; the reader makes the majority's view of them.
 *   force    removed by any, and removed or nobody's on M (decided once
 *            every server answered), where either counts only with a
 *            fence floor at least the M-th largest of the N (kept_out: a
 *            server below the hold's fence, one that never had the hold
 *            or removed an older holder's key, would take the hold from
 *            the holder's next spreading renewal); else removed on
 *            a few only (the others did not answer, or had no such floor)
 *            is the failure, logged with the count, since the holder may
 *            renew on a majority of the others (the floor keeps it off the
 *            servers it was removed from: dialect/leash.c, force).
 *
 * Copies: route/copies.c delivers them, and this file only decides. Once
 * decided, a request lets go of its copies still out: each stays its
 * server's due until its own deadline (a release's is the hold's), so a
 * server that was unreachable at the decision still gets the release, the
 * give-back or the renewal when it is back in time (a renewal's stamp
 * voids one that runs too late). A grant's copies are dropped instead: one
 * that landed after the release would leave a key nobody holds; the
 * servers it missed get the hold from its renewals (renew, above). Only a
 * cancelled acquire withdraws copies outright.
 *
 * Validity: the primitive measures a hold from the send of its attempt
 * (lease - elapsed - drift), as for one server; a raise happens inside
 * that time.
 *
 * Why fences only grow. (1) A hold's fence F is the floor of M servers
 * before the grant is reported: M granting servers returned F and wrote it
 * as their floor while granting, or the raise wrote F onto enough of the
 * granting servers below it. (2) A floor only grows (a grant writes a fence
 * above it, a raise, a spread and a renewal the larger of the two) and lives
 * LEASH__FENCE_FLOOR_LEASES leases, at least a minute, after its last
 * write. (3) The next hold's fence F' is at least what each server of a
 * majority of its own granting servers returned (F' is the one value M of
 * them returned, or the largest of all). That majority shares a server
 * with the M of (1), which granted above its floor, so F' > F however far
 * the clocks differ - as long as that server kept its floor. One that lost
 * it (a restart without its data, an eviction, the floor's TTL) grants the
 * proposal or its clock, as do the others of the later majority that never
 * had F. Each grants at least its clock less W, and the proposal is at
 * least the largest clock, at its send, of the servers the proposing
 * client has heard from; F itself is at most the largest clock when it
 * was granted plus E, the proposing client's error (its bound on a clock
 * is at most its best round trip of the last CLOCK_VIEW_MS, plus two
 * milliseconds of rounding, ahead; PROPOSE_AHEAD_US before the first
 * reply), and floors hold only such fences. So F' > F once more time has
 * passed since F's grant than F's clock was ahead of the clocks the later
 * grant goes by (the later client's known ones, or the granting servers'
 * less W), plus E. Fences only grow while the servers' clocks differ by
 * less than a floor lives and by less than a server that lost its data
 * stays down (Redlock's delayed restart: at least a lease, so clocks
 * within a lease of each other, less W and E, or that server keeps its
 * data: appendonly with fsync always); a later client that has heard from
 * the server ahead proposes above its clock, which takes the difference
 * out. Otherwise they can go back (docs/redlock.md "Redlock"; tests/test_redlock.c
 * shows it with clocks 10 s apart). The proposal never makes a fence
 * smaller than that: a server grants above its floor and its clock less W
 * whatever it is told.
 *
 * Attempts: each attempt of an acquire has a token of its own
 * (fresh_tokens): a release of a failed attempt, sent to all N, can never
 * remove a later attempt's grant.
 *
 * Channels are subscribed on every server and count as covered once M
 * confirmed; each waiter then tries once, which marks the key as waited on
 * wherever that try finds it held. The holder's majority shares a server
 * with the M confirmed, and that server publishes the release if its copy
 * of the key carries the mark; one that does not (a copy a renewal spread
 * there later, unmarked, or one the try did not reach) stays silent, and
 * the waiter learns of the release at its TTL wake, as of a dead holder's.
 * A release announced by several servers (the same token on the same
 * channel within DEDUP_MS) passes once.
 *
 * A server that refuses subscriptions (node.c, refused) makes every
 * waiter of the client poll, from the first one on, for the client's life
 * (leash__route_polls): a release publishes only on the servers where the
 * key is marked as waited on (a waiter's busy attempt marks it where that
 * attempt ran; a renewal's spread writes it unmarked), so no subset of the
 * subscriptions, a majority of the servers that still subscribe included,
 * is known to hear it. With one refusing and another down, no channel
 * could even be covered (fewer than M confirm), and a waiter would sleep
 * until the holder's lease ran out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "base/clock.h"
#include "base/strmap.h"
#include "base/timer.h"
#include "base/token.h"
#include "route/copies.h"
#include "route/node.h"
#include "route/route.h"

/* A repeated message within this is dropped. */
#define DEDUP_MS 1000
/* A split vote tries again after a pause of SPLIT_MIN_MS..SPLIT_MAX_MS. */
#define SPLIT_MIN_MS 5
#define SPLIT_MAX_MS 60
/* Servers that failed a renewal get it again this much later. */
#define RENEW_AGAIN_MS 50
/* A renewal that spreads, renewed by a majority, waits at most this long
 * (and a quarter of what its holds have left) for the other servers that
 * are up, to tell whether its spread is done. */
#define SPREAD_GRACE_MS 50
#define MSG_MAX 64
/* A fence proposal made from a server's clock as its connection's
 * handshake saw it (a lower bound) is this far ahead of it. */
#define PROPOSE_AHEAD_US 2000
/* The best view of a server's clock is kept this long (clocks drift). */
#define CLOCK_VIEW_MS 10000

typedef struct qnode {
    leash__node node;
    leash__conn_cfg cfg; /* the client's, with this server's address */
    unsigned index;
    /* The least upper bound of (server ms - monotonic ms) its replies gave
     * within CLOCK_VIEW_MS, for fence proposals. */
    int64_t clock_ahead, clock_ahead_at;
    int clock_known;
} qnode;

typedef struct quorum {
    leash__route base;
    unsigned n, majority;
    qnode *nodes;
    leash__conn **conns; /* per server: its command connection */
    leash__strmap chans; /* channel -> qchan */
} quorum;

typedef struct qchan {
    leash__strmap_entry e; /* key: the channel, stored after the struct */
    uint64_t confirmed;    /* nodes where it is confirmed */
    int covered;           /* confirmed on a majority, as last said */
    char last[MSG_MAX];    /* the last message passed up, for repeats */
    size_t last_len;
    int64_t last_at;
} qchan;

typedef struct qreq {
    leash__req base;
    quorum *qu;
    const leash__opdef *op;
    const char *what;
    const leash__names *names;  /* grant: for the raise, or the release after a failure */
    const leash__names **group; /* a multi-lock's grant: every lock it takes, for the raise */
    char (*group_tokens)[LEASH__TOKEN_LEN + 1]; /* and their tokens, for the give-back */
    size_t ngroup;
    char token[LEASH__TOKEN_LEN + 1];
    leash__done_fn *done;
    void *arg;
    size_t n;                /* answers per server */
    int raising;             /* the grant's second step */
    uint64_t fence;          /* the hold's fence */
    uint64_t granted;        /* servers that granted */
    uint64_t raise_to;       /* granting servers whose fence is below the hold's */
    unsigned at_fence;       /* granting servers whose fence is the hold's */
    int64_t deadline;        /* the operation's */
    int64_t lease_ms;        /* grant: the hold's lease */
    leash__cmd *again;       /* renew: a copy kept for servers that fail it */
    int spreads;             /* renew: it carries fences (leash__send.again) */
    int spread_waits;        /* renew: a decision waits for the spread's answers */
    int grace_over;          /* renew: it waits no longer (spread_short then) */
    leash__timer grace;      /* renew: ends that wait; read: its deadline */
    int64_t read_turn;       /* read: leash__deadline_ends's */
    leash__copies copies;    /* the command's copies, one per server */
    leash__answer *got;      /* per server, n answers each */
    char *answered;          /* per server: its answers are in got */
    leash__answer answers[]; /* n combined */
} qreq;

static const leash__logger *log_of(const quorum *qu) {
    return &qu->base.env->log;
}

/* ---- combining answers ---- */

enum {
    UNDECIDED = -1
};

static int ok_kind(const leash__answer *a, int kind) {
    return a->status == LEASH_OK && a->kind == kind && !a->replicas_short;
}

/* The first failure among the answers of lock i, as the status to report
 * (ECONN before others: a server that did not answer). */
static int failure_of(const qreq *q, size_t i) {
    int status = LEASH_ECONN, seen = 0;
    unsigned s;

    for (s = 0; s < q->qu->n; s++) {
        const leash__answer *a = &q->got[s * q->n + i];
        if (!q->answered[s] || a->status == LEASH_OK)
            continue;
        if (a->status == LEASH_ECONN)
            return LEASH_ECONN;
        if (!seen) {
            status = a->status;
            seen = 1;
        }
    }
    return status;
}

static void set_failed(leash__answer *out, int status) {
    memset(out, 0, sizeof(*out));
    out->status = status;
}

/* Busy after a failed grant: when a majority could be free. The granting
 * servers are released, so they count as free; busy ones free up as their
 * keys expire; `unavailable` ones (down, or no answer in time) may stay so.
 * Free servers enough for a majority (a split vote: every contender gives
 * its part back): a short random pause. Else the TTL after which enough
 * busy keys have expired (all of them when even that is not enough: the
 * attempt then tells whether the unavailable ones came back); -1 when that
 * is a key without expiry (the primitive looks again after a lease). */
static int64_t busy_wait(const qreq *q, unsigned busy, unsigned unavailable, const int64_t *pttls,
                         int *split) {
    unsigned free_now = q->qu->n - busy - unavailable, need;
    int64_t sorted[64];
    unsigned i, j;

    *split = free_now >= q->qu->majority;
    if (*split)
        return SPLIT_MIN_MS +
               (int64_t)leash__random_below((uint64_t)(SPLIT_MAX_MS - SPLIT_MIN_MS + 1));
    need = q->qu->majority - free_now;
    if (need > busy)
        need = busy;
    memcpy(sorted, pttls, busy * sizeof(sorted[0]));
    for (i = 1; i < busy; i++)
        for (j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
            int64_t t = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t;
        }
    return sorted[need - 1] == INT64_MAX ? -1 : sorted[need - 1];
}

/* A new hold's fence, once a majority granted: a fence that a majority of
 * the granting servers returned alike (each wrote it as its floor while
 * granting) needs nothing more; else the largest, to which the ones below
 * are raised (raise_to) before the grant counts. */
static void choose_fence(qreq *q) {
    unsigned s, t, same;

    q->raise_to = 0;
    for (s = 0; s < q->qu->n; s++) {
        if (!(q->granted & ((uint64_t)1 << s)))
            continue;
        for (t = s, same = 0; t < q->qu->n; t++)
            same += (q->granted & ((uint64_t)1 << t)) && q->got[t].fence == q->got[s].fence;
        if (same >= q->qu->majority) {
            q->fence = q->got[s].fence;
            q->at_fence = same;
            return;
        }
    }
    q->at_fence = 0;
    for (s = 0; s < q->qu->n; s++) {
        if (!(q->granted & ((uint64_t)1 << s)))
            continue;
        if (q->got[s].fence == q->fence)
            q->at_fence++;
        else
            q->raise_to |= (uint64_t)1 << s;
    }
}

/* Whether a server's answer to grant q says nothing was written there:
 * busy, late or gone, from its only copy. A grant (whatever the others
 * said: nobody gives it back once the owner stops listening) or a failure
 * (the copy may have run) may have left a key. */
static int wrote_nothing(const qreq *q, unsigned s) {
    const leash__answer *a = &q->got[s * q->n];

    return a->status == LEASH_OK && !a->resent &&
           (a->kind == LEASH__ANS_BUSY || a->kind == LEASH__ANS_LATE || a->kind == LEASH__ANS_GONE);
}

/* The grant's step 1. Returns the decision: 1 granted (go on), 0 not
 * granted (out filled), UNDECIDED. A grant short of its replicas (WAIT)
 * does not count; when only such grants make the majority, the answer is
 * that: a grant short of replicas (LEASH_EREPLICAS). A busy server's PTTL
 * -1 (a key without expiry) is the largest. */
static int decide_grant(qreq *q, leash__answer *out) {
    unsigned s, granted = 0, unreplicated = 0, busy = 0, late = 0, gone = 0, answered = 0;
    int64_t pttls[64], sent = 0;
    const leash__answer *first = NULL;
    uint64_t busy_at = 0;

    q->granted = 0;
    q->fence = 0;
    for (s = 0; s < q->qu->n; s++) {
        const leash__answer *a = &q->got[s];
        if (!q->answered[s])
            continue;
        answered++;
        if (a->status != LEASH_OK)
            continue;
        switch (a->kind) {
        case LEASH__ANS_GRANTED:
            if (a->replicas_short) {
                unreplicated++;
                break;
            }
            granted++;
            q->granted |= (uint64_t)1 << s;
            if (a->fence > q->fence)
                q->fence = a->fence;
            if (first == NULL || (a->sent_ms != 0 && a->sent_ms < sent))
                sent = a->sent_ms;
            first = first ? first : a;
            break;
        case LEASH__ANS_BUSY:
            pttls[busy++] = a->n < 0 ? INT64_MAX : a->n;
            if (busy_at == 0)
                busy_at = a->fence;
            break;
        case LEASH__ANS_LATE:
            late++;
            break;
        case LEASH__ANS_GONE:
            gone++;
            break;
        default:
            break;
        }
    }
    if (granted >= q->qu->majority) {
        if (first->n == 1)
            choose_fence(q);
        *out = *first;
        out->fence = q->fence;
        out->sent_ms = sent;
        return 1;
    }
    /* Still possible while enough answers are to come. */
    if (granted + (q->qu->n - answered) >= q->qu->majority)
        return UNDECIDED;
    memset(out, 0, sizeof(*out));
    if (gone >= q->qu->majority) {
        out->kind = LEASH__ANS_GONE;
    } else if (granted + unreplicated >= q->qu->majority) {
        out->kind = LEASH__ANS_GRANTED;
        out->replicas_short = 1;
    } else if (busy > 0) {
        out->kind = LEASH__ANS_BUSY;
        /* A multi-lock's one script: which of its locks a server found
         * busy (the first server's that said; dialect/multi.h). */
        out->fence = busy_at;
        out->n = busy_wait(q, busy, q->qu->n - granted - unreplicated - busy - late - gone, pttls,
                           &out->split);
        /* Some servers granted this attempt, others another's: a race
         * between attempts, whose waiters a give-back wakes in step. */
        out->split |= granted + unreplicated > 0;
    } else if (late > 0) {
        out->kind = LEASH__ANS_LATE;
    } else {
        out->status = failure_of(q, 0);
    }
    return 0;
}

/* The raise: 1 done (with the servers already at the fence, M have it as
 * their floor), 0 failed, UNDECIDED. */
static int decide_raise(qreq *q) {
    unsigned s, raised = 0, failed = 0;

    for (s = 0; s < q->qu->n; s++) {
        if (!(q->raise_to & ((uint64_t)1 << s)) || !q->answered[s])
            continue;
        if (ok_kind(&q->got[s], LEASH__ANS_RAISED))
            raised++;
        else
            failed++;
    }
    if (q->at_fence + raised >= q->qu->majority)
        return 1;
    if (q->at_fence + (unsigned)__builtin_popcountll(q->raise_to) - failed < q->qu->majority)
        return 0;
    return UNDECIDED;
}

/* A release that fewer than M released is done all the same when some
 * server released the hold and, with the ones that answered "not ours", M
 * no longer have it: "not ours" from a server that never had the hold (its
 * grant copy was dropped while its connection got ready, or it was
 * unreachable at the grant) is no sign that the hold was gone. Only a
 * majority of them says that (LEASH_ENOTHELD). */
static int released_anyway(const qreq *q, unsigned yes, unsigned not_ours) {
    return yes > 0 && not_ours < q->qu->majority && yes + not_ours >= q->qu->majority;
}

/* A spreading renewal of lock i that a majority renewed: whether its
 * spread is not done yet (spread_short), so that the next renewal spreads
 * again: a server that is up (its command connection ready) neither
 * renewed the hold nor took it nor refused it for good ("not ours": the
 * hold was there and is gone, or another hold's fence is on its floor;
 * neither changes by asking again), but failed (BUSY, no answer in time),
 * refused it for now (an older hold still there), or has not answered
 * (UNDECIDED: the decision waits for it, SPREAD_GRACE_MS at most). A
 * server that is down counts for done (it gets the hold at the quarterly
 * spread once back: hold/watchdog.c). The decision never waits longer: a
 * slow server that is up (frozen, its connection not yet broken for
 * silence) held a renewal that a majority made until after the hold's
 * deadline, and every hold of the batch with it. Nor is it made at the
 * majority's answer alone: with every server well, the others would not
 * have answered yet, and every renewal would spread. */
static int spread_short(const qreq *q, size_t i) {
    unsigned s;
    int unheard = 0;

    for (s = 0; s < q->qu->n; s++) {
        const leash__answer *a = &q->got[s * q->n + i];
        if (!q->answered[s]) {
            unheard |= leash__conn_ready(q->qu->conns[s]) != 0;
            continue;
        }
        if (a->status != LEASH_OK ||
            (a->kind != LEASH__ANS_RENEWED && a->kind != LEASH__ANS_NOT_OURS) ||
            (a->kind == LEASH__ANS_NOT_OURS && a->n == 1))
            return 1;
    }
    return unheard ? UNDECIDED : 0;
}

/* Whether answer a of a force release says the hold is gone there. */
static int gone(const leash__answer *a) {
    return a->status == LEASH_OK && (a->kind == LEASH__ANS_REMOVED || a->kind == LEASH__ANS_NOBODY);
}

/* Answers of lock i with "gone" and a fence floor at least f. */
static unsigned gone_at_least(const qreq *q, size_t i, uint64_t f) {
    unsigned s, n = 0;

    for (s = 0; s < q->qu->n; s++) {
        const leash__answer *a = &q->got[s * q->n + i];
        n += gone(a) && (a->n != 1 || a->fence >= f);
    }
    return n;
}

/* A force release of lock i that removed a hold somewhere: the servers
 * that count toward its majority, removed or "nobody holds it" alike:
 * those whose fence floor is at least any fence a hold that may still
 * stand can have. The holder's spreading renewal writes its hold where the
 * key is missing and the floor below its fence (dialect/leash.c, renew):
 * a server that never had the hold (its grant copy dropped, restarted
 * empty), or removed an older holder's key that still stood there (its
 * floor that key's fence), takes it back, so counting it made LEASH_OK of
 * a hold that stays on a majority. That fence is unknown here (a server
 * reports its floor only), but it is the floor of M servers (why fences
 * only grow, above): it is at most the M-th largest floor of the N, with
 * every server that did not report one (silent, failed) taken as above
 * them all, that is the (M - u)-th largest reported, u such servers. The
 * servers at or above it count. With every server reported, M do: each
 * holds the hold out or has a floor above its fence. A counted server
 * keeps its floor a floor's life (dialect/leash.c, force): the holder's
 * renewals find at most the servers left, fewer than M, and it is lost.
 * Answers without floors (a layout that never spreads) all count. */
static unsigned kept_out(const qreq *q, size_t i) {
    unsigned s, u = 0, m = q->qu->majority;
    uint64_t ref = 0;

    for (s = 0; s < q->qu->n; s++)
        u += !gone(&q->got[s * q->n + i]);
    if (u >= m)
        return 0;
    for (s = 0; s < q->qu->n; s++) {
        const leash__answer *a = &q->got[s * q->n + i];
        if (gone(a) && a->n == 1 && a->fence > ref && gone_at_least(q, i, a->fence) >= m - u)
            ref = a->fence;
    }
    return gone_at_least(q, i, ref);
}

/* One lock's answer of a release, renew or force. */
static int decide_one(qreq *q, size_t i, leash__answer *out) {
    unsigned s, answered = 0, yes = 0, not_ours = 0, nobody = 0, unsure = 0, kept_n = 0;
    unsigned m = q->qu->majority;
    const leash__answer *kept = NULL;
    int64_t sent = 0;
    int cls = q->op->cls;

    for (s = 0; s < q->qu->n; s++) {
        const leash__answer *a = &q->got[s * q->n + i];
        if (!q->answered[s])
            continue;
        answered++;
        if (a->status != LEASH_OK)
            continue;
        switch (a->kind) {
        case LEASH__ANS_RELEASED:
        case LEASH__ANS_LEFT:
        case LEASH__ANS_RENEWED:
            if (!a->replicas_short) {
                yes++;
                kept = kept ? kept : a;
                if (a->sent_ms != 0 && (sent == 0 || a->sent_ms < sent))
                    sent = a->sent_ms;
            }
            break;
        case LEASH__ANS_REMOVED:
            yes++;
            kept = a;
            break;
        case LEASH__ANS_NOT_OURS:
            not_ours++;
            break;
        case LEASH__ANS_NOBODY:
            nobody++;
            break;
        case LEASH__ANS_UNSURE:
            unsure++;
            break;
        default:
            break;
        }
    }
    memset(out, 0, sizeof(*out));
    if (cls == LEASH__OP_FORCE) {
        /* Decided once every server had its say (a down or silent one by
         * its command timeout): deciding sooner drops the copies not yet
         * written (a new client's, while its connections get ready), and
         * the holder keeps a majority on the servers they were for. */
        if (answered < q->qu->n)
            return 0;
        if (yes > 0)
            kept_n = kept_out(q, i);
        if (yes > 0 && kept_n < m) {
            /* Removed on too few: the holder may still renew on a majority
             * of the others. Not a force release, and not to be taken for
             * one; where it was removed, the floor keeps it out. */
            leash__log(log_of(q->qu), LEASH_LOG_WARN,
                       "force release %s reached only %u of %u servers that keep the hold out "
                       "(removed one on %u): the hold may stand on the others; force it again "
                       "once they answer",
                       q->what, kept_n, q->qu->n, yes);
            out->status = failure_of(q, i);
        } else if (yes > 0)
            out->kind = LEASH__ANS_REMOVED;
        else if (nobody >= m)
            out->kind = LEASH__ANS_NOBODY;
        else
            out->status = failure_of(q, i);
        return 1;
    }
    if (yes >= m || (cls == LEASH__OP_RELEASE && released_anyway(q, yes, not_ours))) {
        int short_ = cls == LEASH__OP_RENEW && q->spreads ? spread_short(q, i) : 0;
        if (short_ == UNDECIDED && !q->grace_over) {
            q->spread_waits = 1;
            return 0;
        }
        *out = *kept;
        out->sent_ms = sent;
        out->spread_short = short_ != 0;
        return 1;
    }
    if (cls == LEASH__OP_RELEASE ? not_ours >= m : not_ours > q->qu->n - m) {
        out->kind = LEASH__ANS_NOT_OURS; /* a release: a majority; else no majority is possible */
        return 1;
    }
    if (answered < q->qu->n &&
        (cls == LEASH__OP_RELEASE ? yes + not_ours : yes) + (q->qu->n - answered) >= m)
        return 0; /* still possible */
    if (cls == LEASH__OP_RELEASE && unsure + yes + not_ours >= m && unsure > 0)
        out->kind = LEASH__ANS_UNSURE;
    else
        out->status = failure_of(q, i);
    return 1;
}

/* ---- requests ---- */

static void settle(qreq *q);

static void req_free(qreq *q) {
    leash__timer_clear(&q->grace);
    leash__copies_fini(&q->copies);
    if (q->again != NULL)
        leash__cmd_free(q->again);
    free(q->group);
    free(q->group_tokens);
    free(q->got);
    free(q->answered);
    free(q);
}

/* What the copies still out owe their servers once q is decided
 * (route/copies.h): a grant's are dropped, the others' delivered. */
static void let_go(qreq *q) {
    if (q->op->cls == LEASH__OP_GRANT)
        leash__copies_drop(&q->copies);
    else
        leash__copies_let_go(&q->copies);
}

static void finish(qreq *q) {
    leash__done_fn *done = q->done;
    void *arg = q->arg;

    let_go(q);
    if (done == NULL) {
        req_free(q);
        return;
    }
    q->done = NULL;
    if (q->op->cls == LEASH__OP_READ)
        done(arg, q->got, q->qu->n); /* every server's, in their order */
    else
        done(arg, q->answers, q->n);
    req_free(q);
}

static uint64_t all_servers(const quorum *qu) {
    return qu->n == 64 ? ~(uint64_t)0 : (((uint64_t)1 << qu->n) - 1);
}

/* A give-back of the attempt's token on every server, nobody listening,
 * delivered for as long as a grant of the attempt can stand (a copy that
 * landed after the decision holds for a lease). An extra hold's attempt
 * has no token of its own: the hold stays. A multi-lock's script: each
 * lock's token, on the servers `to` only (each lock's give-back on every
 * server would cost locks x N scripts where most wrote nothing). */
static void release_everywhere(qreq *q, uint64_t to) {
    const leash__dialect *d = q->qu->base.dialect;
    int64_t timeout = q->qu->base.cfg->conn->command_timeout_ms, until;
    leash__cmd *cmd;
    size_t k;

    until = leash__now_ms() + (q->lease_ms > timeout ? q->lease_ms : timeout);
    if (q->group_tokens != NULL) {
        for (k = 0; k < q->ngroup && to != 0; k++) {
            cmd = d->giveback_cmd(q->group[k], q->group_tokens[k], until);
            if (cmd == NULL || leash__copies_post(q->qu->conns, q->qu->n, to, cmd, 0) == 0)
                leash__log(log_of(q->qu), LEASH_LOG_WARN,
                           "acquire %s: no memory to give back a partial grant; it expires with "
                           "its lease",
                           q->what);
        }
        return;
    }
    if (q->token[0] == '\0')
        return;
    cmd = d->giveback_cmd(q->names, q->token, until);
    if (cmd == NULL || leash__copies_post(q->qu->conns, q->qu->n, all_servers(q->qu), cmd, 0) == 0)
        leash__log(log_of(q->qu), LEASH_LOG_WARN,
                   "acquire %s: no memory to give back a partial grant; it expires with its lease",
                   q->what);
}

/* The servers where a grant decided as no grant may have written: all
 * but those that answered that they wrote nothing. */
static uint64_t maybe_written(const qreq *q) {
    uint64_t to = 0;
    unsigned s;

    for (s = 0; s < q->qu->n; s++)
        if (!q->answered[s] || !wrote_nothing(q, s))
            to |= (uint64_t)1 << s;
    return to;
}

/* Renewals again, in the background, on the servers that failed them:
 * the hold should not run on a bare majority for longer than it must. A
 * copy still out (written, or waiting for its connection) is delivered
 * anyway once let go. */
static void renew_again(qreq *q) {
    uint64_t to = 0;
    leash__cmd *c;
    unsigned s;

    for (s = 0; s < q->qu->n; s++) {
        /* A copy ended by its connection's teardown (the client is being
         * freed): nothing is posted again, nor could it be, to connections
         * already torn down (it would stay on them, never freed). */
        if (q->answered[s] && q->got[s * q->n].status == LEASH_ECANCELED)
            return;
        if (q->answered[s] && q->got[s * q->n].status != LEASH_OK)
            to |= (uint64_t)1 << s;
    }
    if (to == 0 || (c = leash__cmd_clone(q->again)) == NULL)
        return;
    (void)leash__copies_post(q->qu->conns, q->qu->n, to, c, leash__now_ms() + RENEW_AGAIN_MS);
}

/* A grant's copies (and its raise's) wait for a server's connection no
 * longer than the command timeout or the lease (a grant after that counts
 * for nothing), whatever the wait's own deadline: a server that is down
 * must not hold the decision (and the grants of the others, whose validity
 * runs) until the wait ends. */
static void bound_grant(leash__cmd *cmd, int64_t command_timeout_ms, int64_t lease_ms) {
    int64_t from = cmd->send_at > 0 ? cmd->send_at : leash__now_ms();
    int64_t bound = lease_ms > 0 && lease_ms < command_timeout_ms ? lease_ms : command_timeout_ms;

    if (cmd->deadline == 0 || cmd->deadline > from + bound)
        cmd->deadline = from + bound;
}

static int start_raise(qreq *q) {
    leash__cmd *cmd;
    unsigned s;

    if (q->ngroup > 0)
        cmd = leash__raise_many_cmd((const leash__names *const *)q->group, q->ngroup, q->fence,
                                    leash__floor_ttl_ms(q->lease_ms), q->deadline);
    else
        cmd = q->qu->base.dialect->raise_cmd(q->names, q->fence, leash__floor_ttl_ms(q->lease_ms),
                                             q->deadline);
    if (cmd != NULL)
        bound_grant(cmd, q->qu->base.cfg->conn->command_timeout_ms, q->lease_ms);
    if (cmd == NULL)
        return -1;
    let_go(q);
    q->raising = 1;
    q->op = q->qu->base.dialect->raise;
    for (s = 0; s < q->qu->n; s++)
        q->answered[s] = 0;
    return leash__copies_send(&q->copies, q->raise_to, cmd);
}

static void grace_over(void *arg) {
    qreq *q = arg;
    unsigned s;

    if (q->op->cls == LEASH__OP_READ) {
        if (!leash__timer_deadline_ends(&q->grace, q->deadline, &q->read_turn, leash__now_ms()))
            return;
        /* The read's deadline: what did not answer by now counts as down. */
        for (s = 0; s < q->qu->n; s++)
            if (!q->answered[s]) {
                set_failed(&q->got[s * q->n], LEASH_ECONN);
                q->answered[s] = 1;
            }
    }
    q->grace_over = 1;
    settle(q);
}

/* A renewal that a majority made waits a little for the answers that say
 * whether its spread is done (spread_short): SPREAD_GRACE_MS, at most a
 * quarter of what its holds have left; without a timer, not at all. */
static void wait_for_spread(qreq *q) {
    int64_t now = leash__now_ms(), wait = SPREAD_GRACE_MS;

    if (q->deadline > 0 && (q->deadline - now) / 4 < wait)
        wait = (q->deadline - now) / 4; /* none once a hold's deadline passed */
    if (wait <= 0 || q->qu->base.env->freeing ||
        (q->grace.handle == NULL && leash__timer_create(&q->grace) != LEASH_OK) ||
        leash__timer_at(&q->grace, now + wait, 1) != LEASH_OK) {
        q->grace_over = 1;
        settle(q);
    }
}

/* Looks whether q's outcome is decided now, and acts on it. */
static void settle(qreq *q) {
    size_t i;
    int d;

    if (q->op->cls == LEASH__OP_GRANT && !q->raising) {
        d = decide_grant(q, &q->answers[0]);
        if (d == UNDECIDED)
            return;
        if (d == 1 && q->answers[0].n == 1 && q->at_fence < q->qu->majority) {
            /* A new hold whose fence is not yet M servers' floor: it goes
             * onto the floors of the granting servers below it first. */
            if (start_raise(q) != 0) {
                release_everywhere(q, all_servers(q->qu));
                set_failed(&q->answers[0], LEASH_ENOMEM);
                finish(q);
            }
            return;
        }
        if (d == 0)
            release_everywhere(q, maybe_written(q));
        finish(q);
        return;
    }
    if (q->raising) {
        d = decide_raise(q);
        if (d == UNDECIDED)
            return;
        if (d == 0) {
            leash__log(log_of(q->qu), LEASH_LOG_WARN,
                       "acquire %s: granted by a majority, but too few raised the fence: giving "
                       "it back",
                       q->what);
            release_everywhere(q, all_servers(q->qu));
            set_failed(&q->answers[0], LEASH_ECONN);
        }
        finish(q);
        return;
    }
    if (q->op->cls == LEASH__OP_READ) {
        unsigned s;
        for (s = 0; s < q->qu->n; s++)
            if (!q->answered[s])
                return;
        finish(q);
        return;
    }
    q->spread_waits = 0;
    for (i = 0; i < q->n; i++)
        if (!decide_one(q, i, &q->answers[i])) {
            if (q->spread_waits && q->grace.due == 0)
                wait_for_spread(q);
            return;
        }
    if (q->again != NULL) {
        unsigned s;
        for (s = 0; s < q->qu->n; s++)
            if (!q->answered[s] || q->got[s * q->n].status != LEASH_OK)
                break;
        if (s < q->qu->n)
            renew_again(q);
    }
    finish(q);
}

/* What a reply says of its server's clock: the server read server_ms (in
 * whole ms) after the copy was written at written_at (monotonic ms, whole
 * too), so server ms - monotonic ms is at most server_ms + 1 - written_at
 * (the clocks' rates taken as equal); the least recent bound is the
 * closest. */
static void note_clock(qnode *qn, int64_t server_ms, int64_t written_at) {
    int64_t now = leash__now_ms(), ahead = server_ms + 1 - written_at;

    if (written_at <= 0)
        return;
    if (!qn->clock_known || ahead < qn->clock_ahead || now - qn->clock_ahead_at > CLOCK_VIEW_MS) {
        qn->clock_ahead = ahead;
        qn->clock_ahead_at = now;
        qn->clock_known = 1;
    }
}

/* The fence a new hold's attempt proposes to every server (Redlock): the
 * largest server clock, in microseconds, as the client bounds it from
 * above (a server's replies: at most its best round trip ahead; before any
 * reply, its handshake's lower bound and PROPOSE_AHEAD_US). Every server
 * grants the largest of the proposal, its own clock and its floor + 1: a
 * proposal at or above the granting servers' clocks and floors makes their
 * fences agree, and the grant needs no raise. One that is off costs a
 * raise, never a fence that goes back: the servers decide. 0 (no clock
 * known): each server's own. */
static uint64_t propose_fence(quorum *qu) {
    int64_t now_us = leash__now_us(), best = 0;
    unsigned s;

    for (s = 0; s < qu->n; s++) {
        const qnode *qn = &qu->nodes[s];
        const leash__conn *c = qu->conns[s];
        int64_t v;
        if (qn->clock_known)
            v = now_us + qn->clock_ahead * 1000;
        else if (c->server_offset_known)
            v = now_us + c->server_offset * 1000 + PROPOSE_AHEAD_US;
        else
            continue;
        if (v > best)
            best = v;
    }
    return best > 0 ? (uint64_t)best : 0;
}

static void on_answer(void *owner, unsigned s, redisReply *reply, int status,
                      const leash__reply_info *info) {
    qreq *q = owner;

    leash__route_read(&q->qu->base, q->op, reply, status, info, &q->got[s * q->n], q->n, q->what);
    if (q->got[s * q->n].status == LEASH_OK && q->got[s * q->n].server_ms > 0) {
        leash__conn_server_time(q->qu->conns[s], q->got[s * q->n].server_ms,
                                info != NULL ? info->written_at : 0);
        note_clock(&q->qu->nodes[s], q->got[s * q->n].server_ms,
                   info != NULL ? info->written_at : 0);
    }
    q->answered[s] = 1;
    settle(q);
}

static leash__req *quorum_send(leash__route *r, const leash__send *snd) {
    quorum *qu = (quorum *)r;
    qreq *q = calloc(1, sizeof(*q) + snd->nanswers * sizeof(q->answers[0]));
    int copies = LEASH_ENOMEM;

    if (q != NULL) {
        copies = leash__copies_init(&q->copies, qu->conns, qu->n, on_answer, q);
        q->got = calloc(qu->n * snd->nanswers, sizeof(*q->got));
        q->answered = calloc(qu->n, 1);
        leash__timer_init(&q->grace, qu->base.env, grace_over, q);
        if (snd->ngroup > 0 && (q->group = malloc(snd->ngroup * sizeof(*q->group))) != NULL) {
            memcpy(q->group, snd->group, snd->ngroup * sizeof(*q->group));
            q->ngroup = snd->ngroup;
        }
        if (snd->group_tokens != NULL &&
            (q->group_tokens = calloc(snd->ngroup, sizeof(*q->group_tokens))) != NULL) {
            size_t k;
            for (k = 0; k < snd->ngroup; k++)
                memcpy(q->group_tokens[k], snd->group_tokens[k], LEASH__TOKEN_LEN);
        }
        if (snd->op->cls == LEASH__OP_RENEW) {
            q->spreads = snd->again != NULL;
            q->again = snd->again != NULL ? snd->again : leash__cmd_clone(snd->cmd);
        }
    }
    if (q == NULL || copies != LEASH_OK || q->got == NULL || q->answered == NULL ||
        (snd->ngroup > 0 && q->group == NULL) ||
        (snd->group_tokens != NULL && q->group_tokens == NULL) ||
        (snd->op->cls == LEASH__OP_RENEW && q->again == NULL)) {
        if (q != NULL)
            req_free(q);
        else if (snd->again != NULL)
            leash__cmd_free(snd->again);
        leash__cmd_free(snd->cmd);
        return NULL;
    }
    leash__route_prepare_cmd(r, snd->op, snd->cmd);
    q->base.route = r;
    q->qu = qu;
    q->op = snd->op;
    q->what = snd->what;
    q->names = snd->names;
    if (snd->token != NULL)
        memcpy(q->token, snd->token, LEASH__TOKEN_LEN);
    q->done = snd->done;
    q->arg = snd->arg;
    q->n = snd->nanswers;
    q->deadline = snd->cmd->deadline;
    q->lease_ms = snd->lease_ms;
    snd->cmd->send_at = snd->send_at;
    if (q->done == NULL)
        snd->cmd->flags |= LEASH__CMD_BACKGROUND; /* and every copy */
    if (snd->op->cls == LEASH__OP_GRANT)
        bound_grant(snd->cmd, qu->base.cfg->conn->command_timeout_ms, snd->lease_ms);
    if (snd->op->cls == LEASH__OP_GRANT && snd->names != NULL && snd->names->fenced &&
        qu->base.dialect->propose_fence != NULL)
        (void)qu->base.dialect->propose_fence(snd->cmd, propose_fence(qu));
    if (leash__copies_send(&q->copies, all_servers(qu), snd->cmd) != 0) {
        req_free(q);
        return NULL;
    }
    /* Without a timer, a read waits for every server, as before. */
    if (q->op->cls == LEASH__OP_READ && q->deadline > 0 && q->done != NULL)
        (void)leash__timer_at(&q->grace, q->deadline, 1);
    return q->done ? &q->base : &leash__req_posted;
}

static int quorum_cancel(leash__req *req) {
    qreq *q = (qreq *)req;
    /* A grant the raise was for: answered, so written. */
    int written = leash__copies_withdraw(&q->copies) | q->raising;
    unsigned s;

    /* A copy that answered already is written too: a server that granted
     * keeps its key for a lease unless the owner gives it back (the
     * decision that would have done so never comes now). */
    if (q->op->cls == LEASH__OP_GRANT)
        for (s = 0; s < q->qu->n && !written; s++)
            written = q->answered[s] && !wrote_nothing(q, s);

    q->done = NULL;
    req_free(q);
    return written;
}

static void quorum_orphan(leash__req *req) {
    qreq *q = (qreq *)req;

    /* Its copies go on (a teardown writes them too); nobody hears the
     * answers. */
    q->done = NULL;
    leash__copies_background(&q->copies);
}

static unsigned quorum_batch_key(const leash__route *r, unsigned slot) {
    (void)r, (void)slot;
    return 0;
}

/* ---- channels ---- */

static int quorum_want(leash__route *r, const char *chan, size_t len, unsigned slot, int on) {
    quorum *qu = (quorum *)r;
    qchan *ch = (qchan *)leash__strmap_find(&qu->chans, chan, len);
    unsigned s;
    int rc = LEASH_OK;

    (void)slot;
    if (!on) {
        if (ch == NULL)
            return LEASH_OK;
        for (s = 0; s < qu->n; s++)
            (void)leash__node_want(&qu->nodes[s].node, chan, len, 0);
        leash__strmap_remove(&qu->chans, &ch->e);
        free(ch);
        return LEASH_OK;
    }
    if (ch == NULL) {
        ch = LEASH__STRMAP_OWNER_NEW(qchan, e, chan, len);
        if (ch == NULL)
            return LEASH_ENOMEM;
        if (leash__strmap_insert(&qu->chans, &ch->e) != 0) {
            free(ch);
            return LEASH_ENOMEM;
        }
    }
    for (s = 0; s < qu->n; s++)
        if (leash__node_want(&qu->nodes[s].node, chan, len, 1) != LEASH_OK)
            rc = LEASH_ENOMEM;
    if (rc != LEASH_OK)
        (void)quorum_want(r, chan, len, slot, 0);
    return rc;
}

static qnode *qnode_of(leash__node *n) {
    return LEASH__CONTAINER(n, qnode, node);
}

static void node_confirmed(void *owner, leash__node *n, const char *chan, size_t len) {
    quorum *qu = owner;
    qchan *ch = (qchan *)leash__strmap_find(&qu->chans, chan, len);

    if (ch == NULL)
        return;
    ch->confirmed |= (uint64_t)1 << qnode_of(n)->index;
    if (!ch->covered && (unsigned)__builtin_popcountll(ch->confirmed) >= qu->majority) {
        ch->covered = 1;
        qu->base.hooks->confirmed(qu->base.owner, chan, len);
    }
}

static void node_gone(void *owner, leash__node *n, const char *chan, size_t len) {
    quorum *qu = owner;
    qchan *ch = (qchan *)leash__strmap_find(&qu->chans, chan, len);

    if (ch == NULL)
        return;
    ch->confirmed &= ~((uint64_t)1 << qnode_of(n)->index);
    if (ch->covered && (unsigned)__builtin_popcountll(ch->confirmed) < qu->majority) {
        ch->covered = 0;
        qu->base.hooks->gone(qu->base.owner, chan, len);
    }
}

/* Independent servers are no cluster: a MOVED here is a misconfiguration;
 * the channel stays wanted and is asked for again after a reconnect. */
static void node_moved(void *owner, leash__node *n, const char *chan, size_t len) {
    quorum *qu = owner;
    (void)n, (void)chan, (void)len;
    leash__log(log_of(qu), LEASH_LOG_WARN,
               "a Redlock server refused a subscription with MOVED: is it part of a cluster?");
}

static void node_message(void *owner, leash__node *n, const char *chan, size_t len, const char *msg,
                         size_t msg_len) {
    quorum *qu = owner;
    qchan *ch = (qchan *)leash__strmap_find(&qu->chans, chan, len);
    int64_t now = leash__now_ms();

    leash__msg m;

    (void)n;
    /* Only releases repeat: every server of the holder's majority announces
     * the same one (the token says which). A renewal's announcement is news
     * each time, whichever server says it; so is a release that names no
     * token (Redisson's "0": two of them may be two releases). */
    qu->base.dialect->message(msg, msg_len, &m);
    if (ch != NULL && m.kind == LEASH__MSG_RELEASED && m.token_len > 0 && msg_len <= MSG_MAX) {
        if (msg_len == ch->last_len && now - ch->last_at < DEDUP_MS &&
            memcmp(msg, ch->last, msg_len) == 0)
            return; /* the same release (or renewal) from another server */
        memcpy(ch->last, msg, msg_len);
        ch->last_len = msg_len;
        ch->last_at = now;
    }
    qu->base.hooks->message(qu->base.owner, chan, len, msg, msg_len);
}

/* A server refused a subscription: every waiter polls (the top of this
 * file says why the other servers' subscriptions are not enough). */
static void node_refused(void *owner, leash__node *n, const char *why) {
    quorum *qu = owner;

    leash__node_say_refused(n, why, "waiters poll instead");
    leash__route_polls(&qu->base);
}

static const leash__node_hooks node_hooks = {node_confirmed, node_gone, node_moved, node_message,
                                             node_refused};

/* ---- life ---- */

static int quorum_connected(const leash__route *r) {
    const quorum *qu = (const quorum *)r;
    unsigned s, ready = 0;

    for (s = 0; s < qu->n; s++)
        ready += leash__conn_ready(&qu->nodes[s].node.cmd) != 0;
    return ready >= qu->majority;
}

static leash__node *quorum_node(leash__route *r, unsigned slot) {
    (void)slot;
    return &((quorum *)r)->nodes[0].node;
}

static int quorum_prepare(leash__route *r) {
    quorum *qu = (quorum *)r;
    unsigned s;

    for (s = 0; s < qu->n; s++)
        if (leash__node_prepare(&qu->nodes[s].node) != LEASH_OK)
            return LEASH_ENOMEM;
    return LEASH_OK;
}

static void quorum_unprepare(leash__route *r) {
    quorum *qu = (quorum *)r;
    unsigned s;

    for (s = 0; s < qu->n; s++)
        leash__node_unprepare(&qu->nodes[s].node);
}

static void quorum_start(leash__route *r) {
    quorum *qu = (quorum *)r;
    unsigned s;

    for (s = 0; s < qu->n; s++)
        leash__node_start(&qu->nodes[s].node);
}

static void quorum_teardown(leash__route *r) {
    quorum *qu = (quorum *)r;
    unsigned s;

    for (s = 0; s < qu->n; s++)
        leash__node_teardown(&qu->nodes[s].node);
}

static void quorum_destroy(leash__route *r) {
    quorum *qu = (quorum *)r;
    leash__strmap_entry *e, *next;
    unsigned s;

    for (e = leash__strmap_next(&qu->chans, NULL); e != NULL; e = next) {
        next = leash__strmap_next(&qu->chans, e);
        free(e);
    }
    leash__strmap_free(&qu->chans);
    for (s = 0; s < qu->n; s++)
        leash__node_destroy(&qu->nodes[s].node);
    free(qu->nodes);
    free(qu->conns);
    free(qu);
}

static const leash__route_ops quorum_ops = {
    .send = quorum_send,
    .cancel = quorum_cancel,
    .orphan = quorum_orphan,
    .batch_key = quorum_batch_key,
    .want = quorum_want,
    .connected = quorum_connected,
    .node = quorum_node,
    .prepare = quorum_prepare,
    .unprepare = quorum_unprepare,
    .start = quorum_start,
    .teardown = quorum_teardown,
    .destroy = quorum_destroy,
};

leash__route *leash__route_quorum_new(leash__env *env, const leash__dialect *d,
                                      const leash__route_cfg *cfg) {
    quorum *qu = calloc(1, sizeof(*qu));
    unsigned s;

    if (qu == NULL || cfg->nseeds < 1 || cfg->nseeds > 64)
        goto fail;
    qu->nodes = calloc((size_t)cfg->nseeds, sizeof(*qu->nodes));
    qu->conns = calloc((size_t)cfg->nseeds, sizeof(*qu->conns));
    if (qu->nodes == NULL || qu->conns == NULL)
        goto fail;
    qu->base.ops = &quorum_ops;
    qu->base.env = env;
    qu->base.dialect = d;
    qu->base.cfg = cfg;
    qu->base.fenced = 1;
    leash__route_init_sharded(&qu->base, 0);
    qu->base.fresh_tokens = 1;
    qu->base.wake_jitter_ms = SPLIT_MAX_MS;
    qu->n = (unsigned)cfg->nseeds;
    qu->majority = qu->n / 2 + 1;
    for (s = 0; s < qu->n; s++) {
        qnode *qn = &qu->nodes[s];
        qn->index = s;
        qn->cfg = *cfg->conn;
        qn->cfg.host = cfg->seeds[s].host;
        qn->cfg.port = cfg->seeds[s].port;
        qn->cfg.unix_path = cfg->seeds[s].unix_path;
        leash__node_init(&qn->node, env, &qn->cfg, &qu->base.sharded, &node_hooks, qu);
        qu->conns[s] = &qn->node.cmd;
    }
    return &qu->base;
fail:
    if (qu != NULL) {
        free(qu->nodes);
        free(qu->conns);
    }
    free(qu);
    return NULL;
}
