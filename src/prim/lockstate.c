/* SPDX-License-Identifier: MIT */
/*
 * leash_lock_state: a lock's state read back from Redis (leash.h). One
 * read (dialect/state.c: the command and the reader the leash tool uses
 * too) goes through the route like any command, to where the key is; the
 * answer, one per server (Redlock: every server's), becomes one
 * leash_state here: a single server's as it is, a quorum's as a majority
 * sees it (leash.h says what that is for each field).
 *
 * A read belongs to no handle: it keeps its own copy of the names and
 * lives until its callback, so freeing a handle or the client inside (or
 * before) it needs no care. The route completes it exactly once, never
 * inside the call; at the client's free, with LEASH_ECANCELED.
 *
 * A read ends by its deadline, command_timeout_ms after it was asked
 * (leash.h): a connection that answers, but too slowly (bytes that
 * trickle in, a queue of answers ahead of it), never goes silent long
 * enough to be broken, so the read's own timer ends it with LEASH_ECONN
 * and cancels what is on the wire. A quorum decides at that deadline
 * itself, from the servers that answered by then (route/quorum.c), so no
 * timer of its own here.
 */
#include <stdlib.h>
#include <string.h>

#include "prim/lockstate.h"

#include "base/clock.h"
#include "prim/lock.h"

typedef struct state_req {
    leash__core *core;
    leash__names names;
    leash_state_cb *cb;
    void *arg;
    char *name;
    leash__req *req;    /* the route's, until it completes or is cancelled */
    leash__timer timer; /* the read's deadline (not for a quorum) */
    int64_t deadline;
    int64_t turn_at; /* leash__deadline_ends's */
} state_req;

_Static_assert((int)LEASH_STATE_FREE == (int)LEASH__STATE_NONE &&
                   (int)LEASH_STATE_NOT_A_LOCK == (int)LEASH__STATE_OTHER &&
                   (int)LEASH_STATE_MUTEX == (int)LEASH__STATE_MUTEX &&
                   (int)LEASH_STATE_FAIR == (int)LEASH__STATE_FAIR &&
                   (int)LEASH_STATE_RW == (int)LEASH__STATE_RW &&
                   (int)LEASH_STATE_SEMAPHORE == (int)LEASH__STATE_SEMAPHORE &&
                   (int)LEASH_STATE_FAMILY == (int)LEASH__STATE_FAMILY &&
                   (int)LEASH_STATE_REDISSON == (int)LEASH__STATE_REDISSON &&
                   (int)LEASH_STATE_REDISSON_RW == (int)LEASH__STATE_REDISSON_RW,
               "enum leash_state_kind follows enum leash__state_kind");

/* The public entries of v[0..n) into out (owner points into v). */
static void entries(const leash__state_entry *v, size_t n, leash_state_entry *out) {
    size_t i;

    for (i = 0; i < n; i++) {
        out[i].owner = v[i].token;
        out[i].mode = v[i].mode;
        out[i].count = v[i].count;
        out[i].fence = v[i].fence;
        out[i].ttl_ms = v[i].ttl_ms;
    }
}

/* Fills what one server's state s says into st (holders and waiters
 * excepted): the fields that follow from the holders. */
static void summary(const leash__state *s, leash_state *st) {
    size_t i;

    st->kind = s->kind;
    st->fence = st->fence_max = s->fence;
    st->server_ms = s->server_ms;
    st->subscribers =
        s->kind == LEASH__STATE_MUTEX || s->kind == LEASH__STATE_REDISSON ? s->subscribers : -1;
    st->held = s->nholders > 0;
    st->ttl_ms = -1;
    for (i = 0; i < s->nholders; i++) {
        int64_t c = s->holders[i].count;
        st->holds = c > 0 && st->holds > INT64_MAX - c ? INT64_MAX : st->holds + c;
        if (s->kind >= LEASH__STATE_FAIR && s->kind <= LEASH__STATE_FAMILY &&
            s->holders[i].ttl_ms > st->ttl_ms)
            st->ttl_ms = s->holders[i].ttl_ms;
    }
    if (st->held &&
        (st->ttl_ms < 0 || s->kind < LEASH__STATE_FAIR || s->kind > LEASH__STATE_FAMILY))
        st->ttl_ms = s->ttl_ms;
    if (s->kind == LEASH__STATE_SEMAPHORE) {
        st->permits = s->permits;
        st->permits_used = (int64_t)s->nholders;
        st->permits_free = s->permits > st->permits_used ? s->permits - st->permits_used : 0;
    }
}

static int by_value(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The k-th largest (1 first) of v[0..n), or -1 when n < k. */
static int64_t kth_largest(int64_t *v, size_t n, size_t k) {
    if (n < k || k == 0)
        return -1;
    qsort(v, n, sizeof(*v), by_value);
    return v[n - k];
}

/* Whether states a and b (NULL: no answer) have the same holders, by
 * owner and mode, in the same order (one key's fields come back in the
 * same order from servers that wrote them alike). */
static int same_holders(const leash__state *a, const leash__state *b) {
    size_t i;

    if (a == NULL || b == NULL || a->nholders != b->nholders || a->nholders == 0)
        return 0;
    for (i = 0; i < a->nholders; i++)
        if (strcmp(a->holders[i].token, b->holders[i].token) != 0 ||
            a->holders[i].mode != b->holders[i].mode)
            return 0;
    return 1;
}

/* The majority's view of n servers' states (NULL: no answer), leash.h.
 * *shown: the state whose holders and waiters st shows. */
static void majority(leash__state *const *s, size_t n, leash_state *st,
                     const leash__state **shown) {
    size_t m = n / 2 + 1, i, j, k, best = 0, answered = 0;
    const leash__state *owner = NULL;
    int64_t v[LEASH_NODES_MAX], subs[LEASH_NODES_MAX];
    uint64_t fences[LEASH_NODES_MAX], maxfence = 0, t;

    *shown = NULL;
    for (i = 0; i < n; i++) {
        size_t agree = 0;
        if (s[i] == NULL)
            continue;
        subs[answered++] = s[i]->subscribers;
        if (s[i]->fence > maxfence)
            maxfence = s[i]->fence;
        for (j = 0; j < n; j++)
            agree += same_holders(s[i], s[j]);
        if (agree > best) {
            best = agree;
            owner = s[i];
        }
    }
    if (best >= m)
        *shown = owner;
    for (i = 0; i < n && *shown == NULL; i++)
        if (s[i] != NULL && s[i]->kind > LEASH__STATE_OTHER)
            *shown = s[i];
    for (i = 0; i < n && *shown == NULL; i++)
        if (s[i] != NULL)
            *shown = s[i];
    summary(*shown, st);
    st->servers = (int)n;
    st->agree = (int)best;
    st->subscribers = st->subscribers >= 0 ? kth_largest(subs, answered, m) : -1;
    if (best < m) { /* a minority's leftovers hold nothing */
        st->held = 0;
        st->holds = 0;
        st->ttl_ms = -1;
        st->fence = st->fence_max = maxfence;
        return;
    }
    for (i = 0, k = 0; i < n; i++)
        if (same_holders(s[i], owner)) {
            v[k] = s[i]->ttl_ms;
            fences[k++] = s[i]->holders[0].fence;
        }
    st->ttl_ms = kth_largest(v, k, m);
    for (i = 1; i < k; i++)
        for (j = i; j > 0 && fences[j - 1] > fences[j]; j--)
            t = fences[j], fences[j] = fences[j - 1], fences[j - 1] = t;
    st->fence = fences[m - 1];
    st->fence_max = fences[k - 1];
}

static void req_free(state_req *q) {
    leash__timer_clear(&q->timer);
    leash__names_clear(&q->names);
    free(q->name);
    free(q);
}

/* The route's answers: one, or one per Redlock server. */
static void on_state(void *arg, const leash__answer *a, size_t n, int quorum) {
    state_req *q = arg;
    leash__state *s[LEASH_NODES_MAX];
    const leash__state *shown = NULL;
    leash_state st;
    leash_state_entry *mem = NULL;
    size_t i, up = 0;
    int status = LEASH_ECONN;

    memset(&st, 0, sizeof(st));
    for (i = 0; i < n && i < LEASH_NODES_MAX; i++) {
        s[i] = a[i].status == LEASH_OK ? a[i].state : NULL;
        up += s[i] != NULL;
        if (a[i].status != LEASH_OK && (status == LEASH_ECONN || a[i].status == LEASH_ECANCELED))
            status = a[i].status;
    }
    if (n > LEASH_NODES_MAX)
        n = LEASH_NODES_MAX;
    if (up >= n / 2 + 1) {
        if (quorum) {
            majority(s, n, &st, &shown);
        } else {
            shown = s[0];
            summary(shown, &st);
            st.servers = 1;
            st.agree = st.held;
        }
        mem = malloc((shown->nholders + shown->nwaiters + 1) * sizeof(*mem));
        status = mem != NULL ? LEASH_OK : LEASH_ENOMEM;
    }
    if (status == LEASH_OK) {
        st.name = q->name;
        if (st.held) {
            entries(shown->holders, shown->nholders, mem);
            st.holders = mem;
            st.nholders = shown->nholders;
            if (quorum && shown->nholders == 1) { /* the majority's (leash.h) */
                mem[0].fence = st.fence;
                mem[0].ttl_ms = st.ttl_ms;
            }
        }
        entries(shown->waiters, shown->nwaiters, mem + st.nholders);
        st.waiters = mem + st.nholders;
        st.nwaiters = shown->nwaiters;
    }
    q->cb(status == LEASH_OK ? &st : NULL, status, q->arg);
    free(mem);
    for (i = 0; i < n; i++)
        leash__state_free(a[i].state);
    req_free(q);
}

static void on_state_one(void *arg, const leash__answer *a, size_t n) {
    state_req *q = arg;
    on_state(arg, a, n, q->core->route->fenced || n > 1);
}

/* The deadline passed with no answer: what is on the wire finishes
 * unheard. */
static void on_deadline(void *arg) {
    state_req *q = arg;

    if (!leash__timer_deadline_ends(&q->timer, q->deadline, &q->turn_at, leash__now_ms()))
        return;
    leash__req_cancel(q->req);
    q->req = NULL;
    q->cb(NULL, LEASH_ECONN, q->arg);
    req_free(q);
}

int leash__state_request(leash__core *core, const char *name, leash_state_cb *cb, void *arg) {
    state_req *q;
    leash__send snd;
    int64_t deadline;
    size_t len;
    int rc;

    if (name == NULL || cb == NULL) {
        leash__log(&core->env.log, LEASH_LOG_ERROR, "leash_lock_state: %s is NULL",
                   name == NULL ? "the name" : "the callback");
        return LEASH_EINVAL;
    }
    if (core->env.freeing || core->closing) {
        leash__log(&core->env.log, LEASH_LOG_ERROR,
                   "leash_lock_state: the client is closing or being freed");
        return LEASH_ESTATE;
    }
    if (!core->env.attached) {
        leash__log(&core->env.log, LEASH_LOG_ERROR,
                   "leash_lock_state: the client is not attached to a loop");
        return LEASH_ELOOP;
    }
    len = strlen(name);
    if ((q = calloc(1, sizeof(*q))) == NULL || (q->name = malloc(len + 1)) == NULL) {
        free(q);
        return LEASH_ENOMEM;
    }
    memcpy(q->name, name, len + 1);
    rc = core->dialect->names(&q->names, &core->env.log, core->cfg->key_prefix, name,
                              core->cfg->conn->db);
    if (rc != LEASH_OK) {
        free(q->name);
        free(q);
        return rc;
    }
    q->core = core;
    q->cb = cb;
    q->arg = arg;
    leash__timer_init(&q->timer, &core->env, on_deadline, q);
    q->deadline = deadline = leash__now_ms() + core->cfg->conn->command_timeout_ms;
    if (!core->route->fenced && leash__timer_create(&q->timer) != LEASH_OK) {
        req_free(q);
        return LEASH_ENOMEM;
    }
    memset(&snd, 0, sizeof(snd));
    snd.slot = q->names.slot;
    snd.op = &leash__op_state;
    snd.nanswers = 1;
    snd.names = &q->names;
    snd.what = q->name;
    snd.done = on_state_one;
    snd.arg = q;
    snd.cmd = leash__state_cmd(&q->names, 1, deadline);
    if (snd.cmd == NULL || (q->req = leash__route_send(core->route, &snd)) == NULL) {
        req_free(q); /* the route freed the command */
        return LEASH_ENOMEM;
    }
    if (!core->route->fenced)
        (void)leash__timer_at(&q->timer, deadline, 1); /* made above: cannot fail */
    return LEASH_OK;
}

int leash_lock_state(leash_lock *l, leash_state_cb *cb, void *arg) {
    if (l == NULL || l->magic != LEASH__LOCK_MAGIC || l->freed)
        return LEASH_EINVAL;
    return leash__state_request(l->core, leash_lock_name(l), cb, arg);
}
