/* SPDX-License-Identifier: MIT */
/*
 * The client: the composition root, the one file that sees every layer.
 * It turns the options into a route (where commands go: one server
 * today), a dialect (leash's own layout or Redisson's), the wait queues,
 * the watchdog and the run-later queue, and makes the lock handles of each
 * kind.
 *
 * Re-entrancy: the environment's enter/leave brackets every entry from the
 * loop and every public call that may run callbacks; handles freed inside
 * go to the graveyard, and a client freed inside is only marked: settle()
 * frees them when the outermost leave returns.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <leash/leash.h>
#include <leash/loop.h>

#include "dialect/dialect.h"
#include "options.h"
#include "prim/core.h"
#include "prim/family.h"
#include "prim/lock.h"
#include "prim/lockstate.h"
#include "prim/multi.h"
#include "route/route.h"
#include "wire/resolve.h"

struct leash_client {
    uint32_t magic;
    leash__core core;
    leash__config cfg; /* built in place, then read-only: each layer reads its part */
    leash_stats stats;
    void *data;
    leash_close_cb *close_cb;
    void *close_arg;
    leash__timer close_timer;
};

static leash_client *client_of(leash__env *env) {
    return LEASH__CONTAINER(env, leash_client, core.env);
}

static void destroy(leash_client *c) {
    leash__core *core = &c->core;

    while (!leash__list_empty(&core->graveyard))
        leash__lock_destroy(
            LEASH__CONTAINER(LEASH__LIST_FIRST(&core->graveyard), leash_lock, link));
    leash__waitqs_clear(&core->waitqs);
    core->route->ops->destroy(core->route);
    /* Its sockets' watchers go before the loop's cleanup. */
    leash__resolver_free(core->env.resolver);
    if (core->env.attached) {
        leash__timer_clear(&core->later.timer);
        leash__timer_clear(&c->close_timer);
        leash__watchdog_clear(&core->dog);
        core->env.loop.cleanup(core->env.loop.data);
    }
    leash__config_clear(&c->cfg);
    c->magic = 0;
    free(c);
}

/* The outermost leave: what was freed inside goes now. */
static void settle(leash__env *env) {
    leash_client *c = client_of(env);

    if (env->freeing) {
        destroy(c);
        return;
    }
    while (!leash__list_empty(&c->core.graveyard))
        leash__lock_destroy(
            LEASH__CONTAINER(LEASH__LIST_FIRST(&c->core.graveyard), leash_lock, link));
}

static void close_finish(void *arg);

int leash_client_new(leash_client **out, const leash_options *opts) {
    leash_client *c;
    leash__core *core;
    int rc;

    if (out == NULL || opts == NULL)
        return LEASH_EINVAL;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return LEASH_ENOMEM;
    if ((rc = leash__config_init(&c->cfg, opts)) != LEASH_OK) {
        free(c);
        return rc;
    }
    leash__dialects_init();
    core = &c->core;
    core->env.log = c->cfg.log;
    if ((rc = leash__resolver_new(&core->env.resolver, &core->env, c->cfg.dns_servers,
                                  c->cfg.conn.connect_timeout_ms)) != LEASH_OK) {
        leash__config_clear(&c->cfg);
        free(c);
        return rc;
    }
    core->env.stats = &c->stats;
    core->env.settle = settle;
    core->client = c;
    core->dialect = c->cfg.dialect;
    core->cfg = &c->cfg.prim;
    leash__list_init(&core->locks);
    leash__list_init(&core->graveyard);

    switch (c->cfg.topology) {
    case LEASH_TOPOLOGY_CLUSTER:
        core->route = leash__route_cluster_new(&core->env, core->dialect, &c->cfg.route);
        break;
    case LEASH_TOPOLOGY_REDLOCK:
        core->route = leash__route_quorum_new(&core->env, core->dialect, &c->cfg.route);
        break;
    case LEASH_TOPOLOGY_SENTINEL:
        core->route = leash__route_sentinel_new(&core->env, core->dialect, &c->cfg.route);
        break;
    default:
        core->route = leash__route_single_new(&core->env, core->dialect, &c->cfg.route);
        break;
    }
    if (core->route == NULL) {
        leash__resolver_free(core->env.resolver);
        leash__config_clear(&c->cfg);
        free(c);
        return LEASH_ENOMEM;
    }
    leash__laterq_init(&core->later, &core->env);
    leash__waitqs_init(&core->waitqs, &core->env, core->route, c->cfg.sub_linger_ms);
    leash__watchdog_init(&core->dog, &core->env, core->route);
    leash__timer_init(&c->close_timer, &core->env, close_finish, c);
    c->magic = LEASH__CLIENT_MAGIC;
    *out = c;
    return LEASH_OK;
}

/* Every timer of the client and of the handles made before it was attached. */
static int create_timers(leash_client *c) {
    leash__core *core = &c->core;
    leash__list *n;

    if (leash__timer_create(&core->later.timer) != LEASH_OK ||
        leash__timer_create(&c->close_timer) != LEASH_OK ||
        leash__watchdog_prepare(&core->dog) != LEASH_OK ||
        leash__resolver_prepare(core->env.resolver) != LEASH_OK ||
        core->route->ops->prepare(core->route) != LEASH_OK)
        return LEASH_ENOMEM;
    for (n = core->locks.next; n != &core->locks; n = n->next)
        if (leash__lock_prepare(LEASH__CONTAINER(n, leash_lock, link)) != LEASH_OK)
            return LEASH_ENOMEM;
    return LEASH_OK;
}

static void clear_timers(leash_client *c) {
    leash__core *core = &c->core;
    leash__list *n;

    leash__timer_clear(&core->later.timer);
    leash__timer_clear(&c->close_timer);
    leash__watchdog_clear(&core->dog);
    leash__resolver_unprepare(core->env.resolver);
    core->route->ops->unprepare(core->route);
    for (n = core->locks.next; n != &core->locks; n = n->next)
        leash__timer_clear(&LEASH__CONTAINER(n, leash_lock, link)->timer);
}

/* leash_loop as the 0.2 header lays it out (up to io_free): the smallest
 * an adapter has. */
#define LOOP_SIZE_0_2 (offsetof(leash_loop, io_free) + sizeof(((leash_loop *)0)->io_free))
_Static_assert(sizeof(leash_loop) == LOOP_SIZE_0_2,
               "leash_loop grew: keep LOOP_SIZE_0_2 at the end of the 0.2 hooks");

/* Whether the adapter's struct is one this version can read: made by
 * leash_loop_init, and every hook past the ones known here NULL. */
static int loop_size_known(const leash_loop *loop) {
    const unsigned char *bytes = (const unsigned char *)loop;

    if (loop->struct_size < LOOP_SIZE_0_2 || loop->struct_size > LEASH__STRUCT_SIZE_MAX)
        return 0;
    for (size_t i = sizeof(*loop); i < loop->struct_size; i++)
        if (bytes[i] != 0)
            return 0;
    return 1;
}

int leash_client_attach_loop(leash_client *c, const leash_loop *loop) {
    leash__core *core;

    if (c == NULL || c->magic != LEASH__CLIENT_MAGIC)
        return LEASH_EINVAL; /* no client: nowhere to log */
    core = &c->core;
    if (loop != NULL && !loop_size_known(loop)) {
        leash__log(&core->env.log, LEASH_LOG_ERROR,
                   "leash_client_attach_loop: the hooks were not made by leash_loop_init, "
                   "or set one this library (%s) does not know",
                   leash_version());
        return LEASH_EINVAL;
    }
    if (loop == NULL || loop->timer_new == NULL || loop->timer_start == NULL ||
        loop->timer_stop == NULL || loop->timer_free == NULL || loop->cleanup == NULL ||
        loop->io_new == NULL || loop->io_set == NULL || loop->io_free == NULL) {
        leash__log(&core->env.log, LEASH_LOG_ERROR,
                   "leash_client_attach_loop: the adapter leaves a hook NULL "
                   "(timer_new/start/stop/free, cleanup and io_new/set/free are all required)");
        return LEASH_EINVAL;
    }
    if (core->env.freeing || core->env.attached || core->closing) {
        leash__log(&core->env.log, LEASH_LOG_ERROR,
                   "leash_client_attach_loop: the client is already attached");
        return LEASH_ESTATE;
    }
    memset(&core->env.loop, 0, sizeof(core->env.loop));
    memcpy(&core->env.loop, loop,
           loop->struct_size < sizeof(*loop) ? loop->struct_size : sizeof(*loop));
    core->env.loop.struct_size = sizeof(core->env.loop);
    /* Every timer exists before anything runs: arming one later never
     * allocates, so no event can be lost for want of a timer. */
    if (create_timers(c) != LEASH_OK) {
        clear_timers(c);
        memset(&core->env.loop, 0, sizeof(core->env.loop));
        leash__log(&core->env.log, LEASH_LOG_ERROR, "leash_client_attach_loop: out of memory");
        return LEASH_ENOMEM;
    }
    core->env.attached = 1;
    core->route->ops->start(core->route);
    return LEASH_OK;
}

static int client_usable(const leash_client *c) {
    return c != NULL && c->magic == LEASH__CLIENT_MAGIC && !c->core.env.freeing && !c->core.closing;
}

leash_lock *leash_lock_new(leash_client *c, const char *name) {
    if (!client_usable(c))
        return NULL;
    return leash__lock_make(&c->core, &leash__mutex, name);
}

int leash_client_lock_state(leash_client *c, const char *name, leash_state_cb *cb, void *arg) {
    if (c == NULL || c->magic != LEASH__CLIENT_MAGIC)
        return LEASH_EINVAL;
    return leash__state_request(&c->core, name, cb, arg);
}

leash_lock *leash_multi_lock_new(leash_client *c, const char *const *names, int n) {
    if (!client_usable(c))
        return NULL;
    return leash__multi_make(&c->core, names, n);
}

/* A handle of the lock family: see leash.h for why not on Redlock. */
static leash_lock *family_new(leash_client *c, const char *who, const char *name,
                              const leash__family_kind *kind, int permits) {
    leash__core *core;

    if (!client_usable(c))
        return NULL;
    core = &c->core;
    if (!core->route->orders_queues) {
        leash__log(&core->env.log, LEASH_LOG_ERROR,
                   "%s: not on a quorum of servers such as LEASH_TOPOLOGY_REDLOCK (a queue "
                   "needs one server to order it)",
                   who);
        return NULL;
    }
    if (core->dialect->family_names == NULL) {
        leash__log(&core->env.log, LEASH_LOG_ERROR,
                   "%s: not with the %s dialect (it has no layout for the lock family)", who,
                   core->dialect->name);
        return NULL;
    }
    if (core->client_id[0] == '\0' && leash__token_new(core->client_id) != 0) {
        leash__log(&core->env.log, LEASH_LOG_ERROR, "%s: no randomness for the client's id", who);
        return NULL;
    }
    return leash__family_new(core, kind, name, permits);
}

leash_lock *leash_fair_lock_new(leash_client *c, const char *name) {
    return family_new(c, "leash_fair_lock_new", name, &leash__fair_lock, 1);
}

leash_lock *leash_read_lock_new(leash_client *c, const char *name) {
    return family_new(c, "leash_read_lock_new", name, &leash__read_lock, 0);
}

leash_lock *leash_write_lock_new(leash_client *c, const char *name) {
    return family_new(c, "leash_write_lock_new", name, &leash__write_lock, 0);
}

leash_lock *leash_semaphore_new(leash_client *c, const char *name, int permits) {
    if (client_usable(c) && (permits < 1 || permits > LEASH_PERMITS_MAX)) {
        leash__log(&c->core.env.log, LEASH_LOG_ERROR,
                   "leash_semaphore_new: permits must be 1..LEASH_PERMITS_MAX (got %d)", permits);
        return NULL;
    }
    return family_new(c, "leash_semaphore_new", name, &leash__semaphore, permits);
}

/* ---- graceful close ---- */

void leash__core_close_wait(leash__core *core) {
    core->close_pending++;
}

void leash__core_close_step(leash__core *core, int status) {
    leash_client *c = client_of(&core->env);

    if (!core->closing || core->env.freeing)
        return;
    if (status != LEASH_OK && status != LEASH_ENOTHELD)
        core->close_status = LEASH_ECONN;
    if (--core->close_pending == 0)
        leash__timer_at(&c->close_timer, 0, 1);
}

/* The close is done once no release it waits for is left and the
 * completions already decided went out. The free delivers what is still
 * owed (ECANCELED to the acquires the close ended). */
static void close_finish(void *arg) {
    leash_client *c = arg;
    leash_close_cb *cb = c->close_cb;
    void *cb_arg = c->close_arg;
    int status = c->core.close_status;

    if (c->core.close_pending > 0)
        return;
    if (!leash__later_idle(&c->core.later)) {
        leash__timer_at(&c->close_timer, 0, 1);
        return;
    }
    c->close_cb = NULL;
    leash_client_free(c);
    if (cb != NULL)
        cb(status, cb_arg);
}

int leash_client_close(leash_client *c, leash_close_cb *cb, void *arg) {
    leash__core *core;
    leash__list *n;

    if (c == NULL || c->magic != LEASH__CLIENT_MAGIC)
        return LEASH_EINVAL;
    core = &c->core;
    if (core->env.freeing || core->closing) {
        leash__log(&core->env.log, LEASH_LOG_ERROR, "leash_client_close: already closing or freed");
        return LEASH_ESTATE;
    }
    if (!core->env.attached) {
        leash__log(&core->env.log, LEASH_LOG_ERROR,
                   "leash_client_close: the client is not attached to a loop (free it instead)");
        return LEASH_ELOOP;
    }
    leash__env_enter(&core->env);
    core->closing = 1;
    core->close_status = LEASH_OK;
    c->close_cb = cb;
    c->close_arg = arg;
    for (n = core->locks.next; n != &core->locks; n = n->next)
        leash__lock_close(LEASH__CONTAINER(n, leash_lock, link));
    /* Finishes from the loop, also when nothing was held. */
    leash__timer_at(&c->close_timer, 0, 1);
    leash__env_leave(&core->env);
    return LEASH_OK;
}

/* ---- teardown ---- */

void leash_client_free(leash_client *c) {
    leash__core *core;

    if (c == NULL || c->magic != LEASH__CLIENT_MAGIC || c->core.env.freeing)
        return;
    core = &c->core;
    leash__env_enter(&core->env);
    core->env.freeing = 1;
    /* Completions already decided are delivered as decided. */
    leash__later_run_all(&core->later);
    while (!leash__list_empty(&core->locks))
        leash__lock_teardown(LEASH__CONTAINER(LEASH__LIST_FIRST(&core->locks), leash_lock, link));
    if (core->env.attached) {
        leash__watchdog_clear(&core->dog);
        core->route->ops->teardown(core->route);
    }
    if (c->close_cb != NULL) {
        leash_close_cb *cb = c->close_cb;
        c->close_cb = NULL;
        cb(LEASH_ECANCELED, c->close_arg);
    }
    leash__env_leave(&core->env);
}

/* ---- accessors ---- */

leash__core *leash__client_core(leash_client *c) {
    return &c->core;
}

void leash_client_set_data(leash_client *c, void *data) {
    if (c != NULL)
        c->data = data;
}

void *leash_client_get_data(const leash_client *c) {
    return c ? c->data : NULL;
}

int leash_client_connected(const leash_client *c) {
    return c != NULL && c->magic == LEASH__CLIENT_MAGIC && leash__route_connected(c->core.route);
}

/* leash_stats as the 0.2 header lays it out: its fields never move. */
#define STATS_SIZE_0_2 (9 * sizeof(uint64_t))
_Static_assert(offsetof(leash_stats, losts) + sizeof(uint64_t) == STATS_SIZE_0_2,
               "leash_stats: the 0.2 fields moved; new ones go at the end");

void leash_client_stats_sized(const leash_client *c, leash_stats *out, size_t size) {
    if (out == NULL)
        return;
    memset(out, 0, size);
    if (c != NULL)
        memcpy(out, &c->stats, size < sizeof(c->stats) ? size : sizeof(c->stats));
}

/* This version's layout, as leash_options_init (the function) fills it:
 * bindings call this one. */
void(leash_client_stats)(const leash_client *c, leash_stats *out) {
    leash_client_stats_sized(c, out, sizeof(leash_stats));
}
