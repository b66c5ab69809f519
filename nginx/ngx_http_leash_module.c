/* SPDX-License-Identifier: MIT */
/*
 * ngx_http_leash_module — fleet-wide locks and concurrency limits for
 * nginx requests (DESIGN section 13, docs/nginx.md).
 *
 * One leash client per worker process, made in init_process and freed in
 * exit_process. A location with leash_lock, leash_fair_lock or
 * leash_semaphore takes one handle per main request once the access checks
 * passed (in the precontent phase): the request waits suspended (its
 * phases stop, the worker goes on), goes on at the grant, and its pool
 * cleanup frees the handle, which releases the hold or cancels the wait: a
 * lock never outlives its request. The lock covers the backend's work, not
 * the client's connection: where the request ends while an upstream that
 * nginx stopped may still work at the backend (the client hung up, a
 * timeout, proxy_next_upstream), the hold is abandoned, not released: its
 * key runs out its lease. A worker that exits with requests still running
 * (TERM) decides each of their holds as their end would.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <leash/leash.h>
#include <leash/url.h>

#include "ngx_leash_loop.h"
#include "prometheus.h"

/* The longest leash_wait and leash_lease: a request that waits longer than
 * an hour has no client left, and a lease is what a crashed worker's lock
 * stays taken. */
#define NGX_LEASH_WAIT_MAX_MS ((ngx_msec_t)3600000)
#define NGX_LEASH_LEASE_MIN_MS ((ngx_msec_t)100)
#define NGX_LEASH_LEASE_MAX_MS ((ngx_msec_t)3600000)
/* A waiting request's own timer runs this much past leash_wait: leash
 * answers first (a late answer comes at most command_timeout_ms after the
 * wait), so it only fires if something is broken. Being an nginx timer that
 * is not cancelable, it also keeps a worker that shuts down alive for the
 * requests that still wait. */
#define NGX_LEASH_GUARD_MS ((ngx_msec_t)5000)

enum {
    NGX_LEASH_NONE = 0,
    NGX_LEASH_MUTEX,
    NGX_LEASH_FAIR,
    NGX_LEASH_SEMAPHORE
};

enum {
    NGX_LEASH_FAIL_CLOSED = 0,
    NGX_LEASH_FAIL_OPEN
};

typedef struct {
    int topology; /* LEASH_TOPOLOGY_*, or -1 when nothing was configured */
    const char *topology_directive;
    leash_url *url;                   /* leash_redis */
    ngx_array_t *nodes;               /* leash_cluster, leash_redlock, leash_sentinel: char * */
    leash_sentinel_url *sentinel_url; /* leash_redis redis+sentinel://... */
    char *sentinel_master;            /* leash_sentinel */
    /* leash_sentinel_user, leash_sentinel_password: the sentinels' own
     * credentials, over what a redis+sentinel:// URL says */
    ngx_str_t sentinel_user, sentinel_password;
    ngx_msec_t lease; /* leash_lease */
    /* leash_tls (NGX_CONF_UNSET: as the URL says), leash_tls_verify */
    ngx_flag_t tls, tls_verify;
    /* leash_tls_ca, _cert, _key (full paths, NUL-terminated), _name */
    ngx_str_t tls_ca, tls_cert, tls_key, tls_name;
    ngx_str_t tls_key_password; /* leash_tls_key_password: of an encrypted _key */
    /* leash_pubsub (NGX_CONF_UNSET: as the URL says, else on): off makes
     * the waiters poll (docs/how-it-works.md "Waiting without pub/sub") */
    ngx_flag_t pubsub;
} ngx_http_leash_main_conf_t;

typedef struct {
    ngx_uint_t kind;      /* NGX_LEASH_* */
    ngx_flag_t inherited; /* the lock is the parent block's */
    const char *directive;
    ngx_http_complex_value_t *key;
    ngx_int_t permits;
    ngx_msec_t wait;
    ngx_uint_t busy_status;
    ngx_uint_t fail;
} ngx_http_leash_loc_conf_t;

typedef enum {
    NGX_LEASH_WAITING = 1,
    NGX_LEASH_DECIDED /* rc says how the phase goes on */
} ngx_http_leash_state_e;

typedef struct {
    ngx_http_request_t *r; /* the main request */
    leash_lock *lock;      /* NULL once freed */
    ngx_http_leash_state_e state;
    ngx_int_t rc;
    const char *status; /* $leash_status */
    uint64_t fence;
    ngx_msec_t started;
    ngx_msec_t wait_ms;
    ngx_str_t key;
    ngx_uint_t kind; /* NGX_LEASH_*, and permits: the lock taken */
    ngx_int_t permits;
    /* The main request's last buffer went through the filters, with no
     * filter below taking it back (slice): its upstream's answer came
     * whole. */
    unsigned complete : 1;
    /* The hold was lost: from here on the request reaches no backend, in
     * this location or any it is redirected to. */
    unsigned lost : 1;
    /* Subrequests that ran while the lock was held (mirror, SSI): they may
     * outlive the answer, so the lock stays until the request's pool goes,
     * and a lost lock stops their upstreams too. */
    ngx_array_t *subs; /* ngx_http_request_t * */
    unsigned shared : 1;
    /* The answer was complete and the lock released before the request's
     * end: a subrequest that comes after it is refused. */
    unsigned answered : 1;
    /* In ngx_http_leash_live, from its handle's making to its cleanup. */
    unsigned in_live : 1;
    ngx_queue_t live;
} ngx_http_leash_ctx_t;

static ngx_int_t ngx_http_leash_preconfiguration(ngx_conf_t *cf);
static ngx_int_t ngx_http_leash_postconfiguration(ngx_conf_t *cf);
static void *ngx_http_leash_create_main_conf(ngx_conf_t *cf);
static char *ngx_http_leash_init_main_conf(ngx_conf_t *cf, void *conf);
static void *ngx_http_leash_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_leash_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child);
static ngx_int_t ngx_http_leash_init_process(ngx_cycle_t *cycle);
static void ngx_http_leash_exit_process(ngx_cycle_t *cycle);
static char *ngx_http_leash_redis(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_leash_nodes(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_leash_sentinel(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_leash_lock(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_leash_msec_max(ngx_conf_t *cf, void *post, void *data);
static char *ngx_http_leash_metrics(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_leash_tls_file(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);

static ngx_conf_enum_t ngx_http_leash_fail_modes[] = {
    {ngx_string("closed"), NGX_LEASH_FAIL_CLOSED},
    {ngx_string("open"), NGX_LEASH_FAIL_OPEN},
    {ngx_null_string, 0},
};

static char *ngx_http_leash_busy_status_check(ngx_conf_t *cf, void *post, void *data);
static ngx_conf_post_t ngx_http_leash_busy_status_post = {ngx_http_leash_busy_status_check};

typedef struct {
    ngx_conf_post_handler_pt post_handler;
    ngx_msec_t min, max;
} ngx_http_leash_msec_bounds_t;

static ngx_http_leash_msec_bounds_t ngx_http_leash_wait_bounds = {ngx_http_leash_msec_max, 0,
                                                                  NGX_LEASH_WAIT_MAX_MS};
static ngx_http_leash_msec_bounds_t ngx_http_leash_lease_bounds = {
    ngx_http_leash_msec_max, NGX_LEASH_LEASE_MIN_MS, NGX_LEASH_LEASE_MAX_MS};

static ngx_command_t ngx_http_leash_commands[] = {
    {ngx_string("leash_redis"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1, ngx_http_leash_redis,
     NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL},
    {ngx_string("leash_cluster"), NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE, ngx_http_leash_nodes,
     NGX_HTTP_MAIN_CONF_OFFSET, LEASH_TOPOLOGY_CLUSTER, NULL},
    {ngx_string("leash_redlock"), NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE, ngx_http_leash_nodes,
     NGX_HTTP_MAIN_CONF_OFFSET, LEASH_TOPOLOGY_REDLOCK, NULL},
    {ngx_string("leash_sentinel"), NGX_HTTP_MAIN_CONF | NGX_CONF_2MORE, ngx_http_leash_sentinel,
     NGX_HTTP_MAIN_CONF_OFFSET, LEASH_TOPOLOGY_SENTINEL, NULL},
    {ngx_string("leash_sentinel_user"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1, ngx_conf_set_str_slot,
     NGX_HTTP_MAIN_CONF_OFFSET, offsetof(ngx_http_leash_main_conf_t, sentinel_user), NULL},
    {ngx_string("leash_sentinel_password"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
     ngx_conf_set_str_slot, NGX_HTTP_MAIN_CONF_OFFSET,
     offsetof(ngx_http_leash_main_conf_t, sentinel_password), NULL},
    {ngx_string("leash_lease"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1, ngx_conf_set_msec_slot,
     NGX_HTTP_MAIN_CONF_OFFSET, offsetof(ngx_http_leash_main_conf_t, lease),
     &ngx_http_leash_lease_bounds},
    {ngx_string("leash_tls"), NGX_HTTP_MAIN_CONF | NGX_CONF_FLAG, ngx_conf_set_flag_slot,
     NGX_HTTP_MAIN_CONF_OFFSET, offsetof(ngx_http_leash_main_conf_t, tls), NULL},
    {ngx_string("leash_tls_ca"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1, ngx_http_leash_tls_file,
     NGX_HTTP_MAIN_CONF_OFFSET, offsetof(ngx_http_leash_main_conf_t, tls_ca), NULL},
    {ngx_string("leash_tls_cert"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1, ngx_http_leash_tls_file,
     NGX_HTTP_MAIN_CONF_OFFSET, offsetof(ngx_http_leash_main_conf_t, tls_cert), NULL},
    {ngx_string("leash_tls_key"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1, ngx_http_leash_tls_file,
     NGX_HTTP_MAIN_CONF_OFFSET, offsetof(ngx_http_leash_main_conf_t, tls_key), NULL},
    {ngx_string("leash_tls_key_password"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
     ngx_conf_set_str_slot, NGX_HTTP_MAIN_CONF_OFFSET,
     offsetof(ngx_http_leash_main_conf_t, tls_key_password), NULL},
    {ngx_string("leash_tls_name"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1, ngx_conf_set_str_slot,
     NGX_HTTP_MAIN_CONF_OFFSET, offsetof(ngx_http_leash_main_conf_t, tls_name), NULL},
    {ngx_string("leash_tls_verify"), NGX_HTTP_MAIN_CONF | NGX_CONF_FLAG, ngx_conf_set_flag_slot,
     NGX_HTTP_MAIN_CONF_OFFSET, offsetof(ngx_http_leash_main_conf_t, tls_verify), NULL},
    {ngx_string("leash_pubsub"), NGX_HTTP_MAIN_CONF | NGX_CONF_FLAG, ngx_conf_set_flag_slot,
     NGX_HTTP_MAIN_CONF_OFFSET, offsetof(ngx_http_leash_main_conf_t, pubsub), NULL},
    {ngx_string("leash_lock"), NGX_HTTP_LOC_CONF | NGX_HTTP_LIF_CONF | NGX_CONF_TAKE1,
     ngx_http_leash_lock, NGX_HTTP_LOC_CONF_OFFSET, NGX_LEASH_MUTEX, NULL},
    {ngx_string("leash_fair_lock"), NGX_HTTP_LOC_CONF | NGX_HTTP_LIF_CONF | NGX_CONF_TAKE1,
     ngx_http_leash_lock, NGX_HTTP_LOC_CONF_OFFSET, NGX_LEASH_FAIR, NULL},
    {ngx_string("leash_semaphore"), NGX_HTTP_LOC_CONF | NGX_HTTP_LIF_CONF | NGX_CONF_TAKE2,
     ngx_http_leash_lock, NGX_HTTP_LOC_CONF_OFFSET, NGX_LEASH_SEMAPHORE, NULL},
    {ngx_string("leash_wait"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_HTTP_LIF_CONF |
         NGX_CONF_TAKE1,
     ngx_conf_set_msec_slot, NGX_HTTP_LOC_CONF_OFFSET, offsetof(ngx_http_leash_loc_conf_t, wait),
     &ngx_http_leash_wait_bounds},
    {ngx_string("leash_busy_status"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_HTTP_LIF_CONF |
         NGX_CONF_TAKE1,
     ngx_conf_set_num_slot, NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(ngx_http_leash_loc_conf_t, busy_status), &ngx_http_leash_busy_status_post},
    {ngx_string("leash_fail"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_HTTP_LIF_CONF |
         NGX_CONF_TAKE1,
     ngx_conf_set_enum_slot, NGX_HTTP_LOC_CONF_OFFSET, offsetof(ngx_http_leash_loc_conf_t, fail),
     &ngx_http_leash_fail_modes},
    {ngx_string("leash_metrics"), NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS, ngx_http_leash_metrics, 0, 0,
     NULL},
    ngx_null_command,
};

static ngx_http_module_t ngx_http_leash_module_ctx = {
    ngx_http_leash_preconfiguration,
    ngx_http_leash_postconfiguration,
    ngx_http_leash_create_main_conf,
    ngx_http_leash_init_main_conf,
    NULL,
    NULL,
    ngx_http_leash_create_loc_conf,
    ngx_http_leash_merge_loc_conf,
};

ngx_module_t ngx_http_leash_module = {
    NGX_MODULE_V1,
    &ngx_http_leash_module_ctx,
    ngx_http_leash_commands,
    NGX_HTTP_MODULE,
    NULL,
    NULL,
    ngx_http_leash_init_process,
    NULL,
    NULL,
    ngx_http_leash_exit_process,
    NULL,
    NGX_MODULE_V1_PADDING,
};

/* This worker's client; NULL in the master and where no Redis is set. */
static leash_client *ngx_http_leash_client;
/* The contexts of this worker's requests that have a lock handle (a hold
 * or a wait): a fast stop (TERM) exits without ending them, so their pool
 * cleanups never run; exit_process decides their holds instead. */
static ngx_queue_t ngx_http_leash_live;

/* ---- configuration ---- */

static char *ngx_http_leash_msec_max(ngx_conf_t *cf, void *post, void *data) {
    ngx_http_leash_msec_bounds_t *b = post;
    ngx_msec_t *v = data;

    if (*v < b->min || *v > b->max) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "must be %Mms..%Mms", b->min, b->max);
        return NGX_CONF_ERROR;
    }
    return NGX_CONF_OK;
}

/* 400..599, less the codes with which nginx closes the connection instead
 * of answering (408, 444, 499): a busy request gets an answer. */
static char *ngx_http_leash_busy_status_check(ngx_conf_t *cf, void *post, void *data) {
    ngx_uint_t *status = data;

    if (*status < 400 || *status > 599) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "must be 400..599");
        return NGX_CONF_ERROR;
    }
    if (*status == NGX_HTTP_REQUEST_TIME_OUT || *status == NGX_HTTP_CLOSE ||
        *status == NGX_HTTP_CLIENT_CLOSED_REQUEST) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "%ui closes the connection without an answer: use another status",
                           *status);
        return NGX_CONF_ERROR;
    }
    return NGX_CONF_OK;
}

/* leash_tls_ca, _cert, _key: a path relative to nginx's prefix, as
 * ssl_certificate's, that the master can read now (the workers read it
 * when they start: it must be readable by nginx's worker user too). */
static char *ngx_http_leash_tls_file(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    ngx_str_t *path = (ngx_str_t *)((char *)conf + cmd->offset);
    ngx_str_t *value = cf->args->elts;

    if (path->data != NULL)
        return "is duplicate";
    *path = value[1];
    if (path->len == 0 || ngx_conf_full_name(cf->cycle, path, 1) != NGX_OK)
        return NGX_CONF_ERROR;
    if (path->len > LEASH_PATH_MAX) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%V\": the path is over %d bytes", &cmd->name,
                           LEASH_PATH_MAX);
        return NGX_CONF_ERROR;
    }
    if (access((const char *)path->data, R_OK) != 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno, "\"%V\": cannot read \"%V\"", &cmd->name,
                           path);
        return NGX_CONF_ERROR;
    }
    return NGX_CONF_OK;
}

static char *ngx_http_leash_topology(ngx_conf_t *cf, ngx_http_leash_main_conf_t *mcf,
                                     int topology) {
    ngx_str_t *name = &((ngx_str_t *)cf->args->elts)[0];

    if (mcf->topology != -1) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"%V\": Redis is already set by \"%s\" (one topology per http block)",
                           name, mcf->topology_directive);
        return NGX_CONF_ERROR;
    }
    mcf->topology = topology;
    mcf->topology_directive = topology == LEASH_TOPOLOGY_SINGLE    ? "leash_redis"
                              : topology == LEASH_TOPOLOGY_CLUSTER ? "leash_cluster"
                              : topology == LEASH_TOPOLOGY_REDLOCK ? "leash_redlock"
                                                                   : "leash_sentinel";
    return NGX_CONF_OK;
}

static char *ngx_http_leash_redis(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    ngx_http_leash_main_conf_t *mcf = conf;
    ngx_str_t *value = cf->args->elts;
    char err[LEASH_URL_ERR_MAX];
    char *text;

    if (ngx_http_leash_topology(cf, mcf, LEASH_TOPOLOGY_SINGLE) != NGX_CONF_OK)
        return NGX_CONF_ERROR;
    mcf->url = ngx_pcalloc(cf->pool, sizeof(leash_url));
    text = ngx_pnalloc(cf->pool, value[1].len + 1);
    if (mcf->url == NULL || text == NULL)
        return NGX_CONF_ERROR;
    ngx_memcpy(text, value[1].data, value[1].len);
    text[value[1].len] = '\0';
    if (leash_url_is_sentinel(text)) {
        /* Redis Sentinel as a URL: the sentinels, the master's name. */
        mcf->url = NULL;
        mcf->sentinel_url = ngx_pcalloc(cf->pool, sizeof(leash_sentinel_url));
        if (mcf->sentinel_url == NULL)
            return NGX_CONF_ERROR;
        if (leash_sentinel_url_parse(text, mcf->sentinel_url, err, sizeof(err)) != LEASH_OK) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"leash_redis\": %s", err);
            return NGX_CONF_ERROR;
        }
        mcf->topology = LEASH_TOPOLOGY_SENTINEL;
        return NGX_CONF_OK;
    }
    if (leash_url_parse(text, mcf->url, err, sizeof(err)) != LEASH_OK) {
        /* err never holds the user or the password; the URL may. */
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"leash_redis\": %s", err);
        return NGX_CONF_ERROR;
    }
    return NGX_CONF_OK;
}

/* The servers of a directive, its arguments from first on. */
static char *ngx_http_leash_node_list(ngx_conf_t *cf, ngx_command_t *cmd,
                                      ngx_http_leash_main_conf_t *mcf, ngx_uint_t first) {
    ngx_str_t *value = cf->args->elts;
    ngx_uint_t i;

    if (cf->args->nelts - first > LEASH_NODES_MAX) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%V\": at most %d servers", &cmd->name,
                           LEASH_NODES_MAX);
        return NGX_CONF_ERROR;
    }
    mcf->nodes = ngx_array_create(cf->pool, cf->args->nelts - first, sizeof(char *));
    if (mcf->nodes == NULL)
        return NGX_CONF_ERROR;
    for (i = first; i < cf->args->nelts; i++) {
        char **node = ngx_array_push(mcf->nodes);
        if (node == NULL)
            return NGX_CONF_ERROR;
        if (value[i].len == 0 || value[i].len > LEASH_NODE_MAX) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"%V\": \"%V\" is not host:port, [v6]:port or a socket path "
                               "of at most %d bytes",
                               &cmd->name, &value[i], LEASH_NODE_MAX);
            return NGX_CONF_ERROR;
        }
        *node = ngx_pnalloc(cf->pool, value[i].len + 1);
        if (*node == NULL)
            return NGX_CONF_ERROR;
        ngx_memcpy(*node, value[i].data, value[i].len);
        (*node)[value[i].len] = '\0';
    }
    return NGX_CONF_OK;
}

static char *ngx_http_leash_nodes(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    if (ngx_http_leash_topology(cf, conf, (int)cmd->offset) != NGX_CONF_OK)
        return NGX_CONF_ERROR;
    return ngx_http_leash_node_list(cf, cmd, conf, 1);
}

/* leash_sentinel MASTER host:port...: the master's name comes first, and
 * is never an address (a forgotten name would make the first sentinel's
 * address the name, and every lookup fail at run time). */
static char *ngx_http_leash_sentinel(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    ngx_http_leash_main_conf_t *mcf = conf;
    ngx_str_t *value = cf->args->elts;
    u_char *colon;

    if (ngx_http_leash_topology(cf, mcf, LEASH_TOPOLOGY_SENTINEL) != NGX_CONF_OK)
        return NGX_CONF_ERROR;
    colon = ngx_strlchr(value[1].data, value[1].data + value[1].len, ':');
    if (value[1].len == 0 || value[1].len > LEASH_SENTINEL_MASTER_MAX ||
        (colon != NULL && ngx_atoi(colon + 1, value[1].data + value[1].len - colon - 1) > 0)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"leash_sentinel\": the master's name comes first (1..%d bytes), "
                           "then the sentinels: leash_sentinel mymaster host:port ...; not \"%V\"",
                           LEASH_SENTINEL_MASTER_MAX, &value[1]);
        return NGX_CONF_ERROR;
    }
    mcf->sentinel_master = ngx_pnalloc(cf->pool, value[1].len + 1);
    if (mcf->sentinel_master == NULL)
        return NGX_CONF_ERROR;
    ngx_memcpy(mcf->sentinel_master, value[1].data, value[1].len);
    mcf->sentinel_master[value[1].len] = '\0';
    return ngx_http_leash_node_list(cf, cmd, mcf, 2);
}

static char *ngx_http_leash_lock(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    ngx_http_leash_loc_conf_t *lcf = conf;
    ngx_str_t *value = cf->args->elts;
    ngx_http_compile_complex_value_t ccv;

    if (lcf->kind != NGX_LEASH_NONE) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"%V\": this location already has \"%s\" (one lock per location)",
                           &cmd->name, lcf->directive);
        return NGX_CONF_ERROR;
    }
    lcf->key = ngx_palloc(cf->pool, sizeof(ngx_http_complex_value_t));
    if (lcf->key == NULL)
        return NGX_CONF_ERROR;
    ngx_memzero(&ccv, sizeof(ccv));
    ccv.cf = cf;
    ccv.value = &value[1];
    ccv.complex_value = lcf->key;
    if (ngx_http_compile_complex_value(&ccv) != NGX_OK)
        return NGX_CONF_ERROR;
    if (value[1].len == 0 || value[1].len > LEASH_NAME_MAX) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%V\": the key must be 1..%d bytes", &cmd->name,
                           LEASH_NAME_MAX);
        return NGX_CONF_ERROR;
    }
    if (cmd->offset == NGX_LEASH_SEMAPHORE) {
        lcf->permits = ngx_atoi(value[2].data, value[2].len);
        if (lcf->permits < 1 || lcf->permits > LEASH_PERMITS_MAX) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"leash_semaphore\": permits must be 1..%d, not \"%V\"",
                               LEASH_PERMITS_MAX, &value[2]);
            return NGX_CONF_ERROR;
        }
    }
    lcf->kind = cmd->offset;
    lcf->directive = (const char *)cmd->name.data; /* a literal: NUL-terminated */
    return NGX_CONF_OK;
}

static void *ngx_http_leash_create_main_conf(ngx_conf_t *cf) {
    ngx_http_leash_main_conf_t *mcf = ngx_pcalloc(cf->pool, sizeof(*mcf));

    if (mcf == NULL)
        return NULL;
    mcf->topology = -1;
    mcf->lease = NGX_CONF_UNSET_MSEC;
    mcf->tls = NGX_CONF_UNSET;
    mcf->tls_verify = NGX_CONF_UNSET;
    mcf->pubsub = NGX_CONF_UNSET;
    return mcf;
}

/* The worker's client options from the http block's directives (strings
 * point into mcf, which outlives the client's creation). */
static void ngx_http_leash_options(const ngx_http_leash_main_conf_t *mcf, leash_options *opts) {
    leash_options_init(opts);
    opts->lease_ms = (int64_t)mcf->lease;
    opts->topology = mcf->topology;
    if (mcf->url != NULL) {
        leash_url_apply(mcf->url, opts);
    } else if (mcf->sentinel_url != NULL) {
        leash_sentinel_url_apply(mcf->sentinel_url, opts);
    } else {
        opts->nodes = (const char *const *)mcf->nodes->elts;
        opts->nodes_count = (int)mcf->nodes->nelts;
        opts->sentinel_master = mcf->sentinel_master;
    }
    /* ngx_conf_set_str_slot's strings end in NUL (they are the parsed
     * configuration's); the library refuses them on another topology. */
    if (mcf->sentinel_user.data != NULL)
        opts->sentinel_username = (const char *)mcf->sentinel_user.data;
    if (mcf->sentinel_password.data != NULL)
        opts->sentinel_password = (const char *)mcf->sentinel_password.data;
    /* The directives over what a rediss:// URL says. */
    if (mcf->tls != NGX_CONF_UNSET)
        opts->tls = mcf->tls ? 1 : 0;
    if (mcf->tls_verify != NGX_CONF_UNSET)
        opts->tls_verify = mcf->tls_verify ? 1 : 0;
    /* on: pub/sub as the library chooses it (and a refused subscription
     * still makes the waiters poll). */
    if (mcf->pubsub == 0)
        opts->pubsub = LEASH_PUBSUB_OFF;
    else if (mcf->pubsub == 1 && opts->pubsub == LEASH_PUBSUB_OFF)
        opts->pubsub = LEASH_PUBSUB_AUTO;
    if (mcf->tls_ca.data != NULL)
        opts->tls_ca_file = (const char *)mcf->tls_ca.data;
    if (mcf->tls_cert.data != NULL)
        opts->tls_cert_file = (const char *)mcf->tls_cert.data;
    if (mcf->tls_key.data != NULL)
        opts->tls_key_file = (const char *)mcf->tls_key.data;
    if (mcf->tls_key_password.data != NULL)
        opts->tls_key_password = (const char *)mcf->tls_key_password.data;
    if (mcf->tls_name.data != NULL)
        opts->tls_server_name = (const char *)mcf->tls_name.data;
}

/* Keeps the first line the library logs, for nginx -t to show. */
static void ngx_http_leash_keep_log(int level, const char *msg, void *arg) {
    char *kept = arg;

    if (kept[0] == '\0')
        ngx_cpystrn((u_char *)kept, (u_char *)msg, NGX_MAX_ERROR_STR);
}

/* Everything leash_client_new would refuse in a worker is refused here, by
 * nginx -t and by a reload, with the library's own reason: a worker must
 * never find out that its configuration cannot work. The client made here
 * is never attached to a loop, so it connects nowhere. */
static char *ngx_http_leash_check_client(ngx_conf_t *cf, const ngx_http_leash_main_conf_t *mcf) {
    char kept[NGX_MAX_ERROR_STR + 1];
    leash_options opts;
    leash_client *c;
    int rc;

    kept[0] = '\0';
    ngx_http_leash_options(mcf, &opts);
    opts.log_cb = ngx_http_leash_keep_log;
    opts.log_arg = kept;
    opts.log_level = LEASH_LOG_ERROR;
    rc = leash_client_new(&c, &opts);
    if (rc != LEASH_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%s\": %s", mcf->topology_directive,
                           kept[0] != '\0' ? kept : leash_strerror(rc));
        return NGX_CONF_ERROR;
    }
    leash_client_free(c);
    return NGX_CONF_OK;
}

static char *ngx_http_leash_init_main_conf(ngx_conf_t *cf, void *conf) {
    ngx_http_leash_main_conf_t *mcf = conf;

    ngx_conf_init_msec_value(mcf->lease, 30000);
    if ((mcf->sentinel_user.data != NULL || mcf->sentinel_password.data != NULL) &&
        mcf->topology != LEASH_TOPOLOGY_SENTINEL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"%s\" goes with Redis Sentinel: leash_sentinel, or leash_redis "
                           "redis+sentinel://...",
                           mcf->sentinel_password.data != NULL ? "leash_sentinel_password"
                                                               : "leash_sentinel_user");
        return NGX_CONF_ERROR;
    }
    if (mcf->topology == -1)
        return NGX_CONF_OK;
    return ngx_http_leash_check_client(cf, mcf);
}

static void *ngx_http_leash_create_loc_conf(ngx_conf_t *cf) {
    ngx_http_leash_loc_conf_t *lcf = ngx_pcalloc(cf->pool, sizeof(*lcf));

    if (lcf == NULL)
        return NULL;
    lcf->wait = NGX_CONF_UNSET_MSEC;
    lcf->busy_status = NGX_CONF_UNSET_UINT;
    lcf->fail = NGX_CONF_UNSET_UINT;
    return lcf;
}

static char *ngx_http_leash_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child) {
    ngx_http_leash_loc_conf_t *prev = parent;
    ngx_http_leash_loc_conf_t *conf = child;
    ngx_http_leash_main_conf_t *mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_leash_module);

    /* The lock inherits into if, limit_except and nested locations, as
     * limit_req does: a block without a lock of its own has its parent's
     * (a request that lands there must not skip it). */
    if (conf->kind == NGX_LEASH_NONE && prev->kind != NGX_LEASH_NONE) {
        conf->inherited = 1;
        conf->kind = prev->kind;
        conf->directive = prev->directive;
        conf->key = prev->key;
        conf->permits = prev->permits;
    }
    ngx_conf_merge_msec_value(conf->wait, prev->wait, 10000);
    ngx_conf_merge_uint_value(conf->busy_status, prev->busy_status, NGX_HTTP_SERVICE_UNAVAILABLE);
    ngx_conf_merge_uint_value(conf->fail, prev->fail, NGX_LEASH_FAIL_CLOSED);
    if (conf->kind != NGX_LEASH_NONE && mcf->topology == -1) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"%s\" needs a Redis: set leash_redis, leash_cluster, "
                           "leash_redlock or leash_sentinel in the http block",
                           conf->directive);
        return NGX_CONF_ERROR;
    }
    if (conf->kind != NGX_LEASH_NONE && conf->kind != NGX_LEASH_MUTEX &&
        mcf->topology == LEASH_TOPOLOGY_REDLOCK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"%s\" does not work with leash_redlock (a queue needs one server "
                           "that orders it): use leash_lock",
                           conf->directive);
        return NGX_CONF_ERROR;
    }
    return NGX_CONF_OK;
}

/* ---- worker life ---- */

static void ngx_http_leash_log(int level, const char *msg, void *arg) {
    ngx_uint_t lv = level == LEASH_LOG_ERROR  ? NGX_LOG_ERR
                    : level == LEASH_LOG_WARN ? NGX_LOG_WARN
                    : level == LEASH_LOG_INFO ? NGX_LOG_INFO
                                              : NGX_LOG_DEBUG;

    ngx_log_error(lv, ngx_cycle->log, 0, "leash: %s", msg);
}

static ngx_int_t ngx_http_leash_init_process(ngx_cycle_t *cycle) {
    ngx_http_leash_main_conf_t *mcf;
    leash_options opts;
    leash_client *c;
    int rc;

    ngx_queue_init(&ngx_http_leash_live);
    /* Workers only: the cache manager and loader run init_process too. */
    if (ngx_process != NGX_PROCESS_WORKER && ngx_process != NGX_PROCESS_SINGLE)
        return NGX_OK;
    mcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_leash_module);
    if (mcf == NULL || mcf->topology == -1)
        return NGX_OK;
    ngx_http_leash_options(mcf, &opts);
    opts.log_cb = ngx_http_leash_log;
    /* A worker that exits here is not respawned, and takes every location
     * with it, locked or not: without a client it serves, and its locked
     * locations answer by leash_fail. */
    rc = leash_client_new(&c, &opts);
    if (rc != LEASH_OK) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "leash: no client: %s (locked locations answer by leash_fail)",
                      leash_strerror(rc));
        return NGX_OK;
    }
    rc = ngx_leash_loop_attach(c, cycle->log);
    if (rc != LEASH_OK) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "leash: cannot attach to the loop: %s (locked locations answer by "
                      "leash_fail)",
                      leash_strerror(rc));
        leash_client_free(c);
        return NGX_OK;
    }
    ngx_http_leash_client = c;
    return NGX_OK;
}

static void ngx_http_leash_end(ngx_http_leash_ctx_t *ctx, const char *why);

static void ngx_http_leash_exit_process(ngx_cycle_t *cycle) {
    leash_client *c = ngx_http_leash_client;
    ngx_http_leash_ctx_t *ctx;

    /* A graceful stop (QUIT, a reload) comes here once every request
     * ended; a fast stop (TERM: nginx -s stop, systemd) while requests still
     * run, their upstreams open: a backend that does not notice the closed
     * connection works on. Each hold goes as its request's end would let it
     * go: released when the backend's work is over, else abandoned to run
     * out its lease. A wait is cancelled; its callback sees no lock and
     * leaves the request alone. */
    if (c != NULL) {
        while (!ngx_queue_empty(&ngx_http_leash_live)) {
            ctx = ngx_queue_data(ngx_queue_head(&ngx_http_leash_live), ngx_http_leash_ctx_t, live);
            ngx_http_leash_end(ctx, "the worker exits before its upstream ended");
        }
    }
    /* What is left to release goes on the way out (best effort; a release
     * that cannot be sent expires with its lease). */
    ngx_http_leash_client = NULL;
    leash_client_free(c);
}

/* ---- request life ---- */

static int ngx_http_leash_work_over(ngx_http_leash_ctx_t *ctx);

/* The end of the request's lock handle, at the request's end or the
 * worker's (exit_process), whichever comes first: the second finds nothing
 * to do. why: the log line's reason when the hold is abandoned. */
static void ngx_http_leash_end(ngx_http_leash_ctx_t *ctx, const char *why) {
    leash_lock *l = ctx->lock;

    ctx->lock = NULL;
    if (ctx->in_live) {
        ctx->in_live = 0;
        ngx_queue_remove(&ctx->live);
    }
    if (l != NULL && ctx->state == NGX_LEASH_DECIDED && leash_held(l) &&
        !ngx_http_leash_work_over(ctx)) {
        /* An upstream nginx stopped, or one still running as the worker
         * exits, may still work at the backend: deleting the key would let
         * the next request in beside it. */
        ngx_log_error(NGX_LOG_WARN, ctx->r->connection->log, 0,
                      "leash: the backend may still work on \"%V\" (%s): the lock \"%V\" runs "
                      "out its lease",
                      &ctx->r->uri, why, &ctx->key);
        leash_lock_abandon(l);
        return;
    }
    /* Frees the handle: releases a hold, cancels a wait (its callback then
     * fires inside this call and sees lock NULL). */
    leash_lock_free(l);
}

static void ngx_http_leash_cleanup(void *data) {
    ngx_http_leash_end(data, "the upstream was stopped before its answer ended");
}

/* The main request's context; after an internal redirect (which clears
 * r->ctx) it is found again through the pool cleanup that owns it. */
static ngx_http_leash_ctx_t *ngx_http_leash_get_ctx(ngx_http_request_t *r) {
    ngx_http_request_t *mr = r->main;
    ngx_http_leash_ctx_t *ctx = ngx_http_get_module_ctx(mr, ngx_http_leash_module);
    ngx_pool_cleanup_t *cln;

    /* An internal redirect clears r->ctx, and so does a filter that
     * finalizes the request (412 from not_modified, image_filter). */
    if (ctx != NULL)
        return ctx;
    for (cln = mr->pool->cleanup; cln != NULL; cln = cln->next) {
        if (cln->handler == ngx_http_leash_cleanup) {
            ctx = cln->data;
            ngx_http_set_ctx(mr, ctx, ngx_http_leash_module);
            return ctx;
        }
    }
    return NULL;
}

/* How the phase goes on when the lock could not be asked for (Redis
 * unreachable, no memory): leash_fail. */
static ngx_int_t ngx_http_leash_failed(const ngx_http_leash_loc_conf_t *lcf) {
    return lcf->fail == NGX_LEASH_FAIL_OPEN ? NGX_DECLINED : (ngx_int_t)lcf->busy_status;
}

/* Whether an acquire's error says Redis cannot be used now (leash_fail
 * decides), rather than that this lock is wrong: two permit counts on one
 * name (EINVAL), a name that is another kind's (a WRONGTYPE error,
 * EREDIS), an answer leash does not understand. A wrong lock fails closed
 * whatever leash_fail says: opening would let every request through. */
static int ngx_http_leash_unreachable(int status) {
    switch (status) {
    case LEASH_ECONN:
    case LEASH_EAUTH:
    case LEASH_ETLS:
    case LEASH_EREPLICAS:
    case LEASH_ENOMEM:
    case LEASH_ECANCELED: /* the worker exits (leash_client_free) */
        return 1;
    default:
        return 0;
    }
}

/* Whether the backend's work for r's upstream is known to be over: no
 * upstream ran, or it ended with the backend's whole answer (or the
 * backend's close). Not when nginx gave up on a peer by a timeout (504,
 * also one proxy_next_upstream left behind) or stopped the upstream before
 * the answer ended (the client hung up, a lost lock, a header-only answer
 * of a body the backend still sends): a backend that does not notice a
 * closed connection goes on. */
static int ngx_http_leash_upstream_over(ngx_http_request_t *r, int complete) {
    ngx_http_upstream_t *u = r->upstream;
    ngx_http_upstream_state_t *st;
    ngx_uint_t i, status;

    if (r->upstream_states != NULL) {
        st = r->upstream_states->elts;
        for (i = 0; i < r->upstream_states->nelts; i++) {
            if (st[i].status == NGX_HTTP_GATEWAY_TIME_OUT)
                return 0;
        }
    }
    if (u == NULL)
        return 1;
    if (u->cleanup != NULL)
        return 0; /* still running */
    if (complete || !u->request_sent)
        return 1;
    if (u->buffering && u->pipe != NULL && (u->pipe->upstream_done || u->pipe->upstream_eof))
        return 1;
    if (!u->buffering && u->length == 0)
        return 1;
    /* A header-only answer that fills no cache (a mirror's, a HEAD's)
     * closes the upstream once the backend's header came, reading no body:
     * the header counts as the end of the backend's work (a backend
     * answers once its work is done; one that streams a body it still
     * works on is not covered past its header: docs/nginx.md). */
    if (r->header_only && !u->cacheable && !u->store && u->headers_in.status_n != 0)
        return 1;
    /* The backend's whole answer was its header: a redirect nginx follows
     * (X-Accel-Redirect), an answer without a body (204, 304). */
    status = u->headers_in.status_n;
    if (u->headers_in.x_accel_redirect != NULL || status == NGX_HTTP_NO_CONTENT ||
        status == NGX_HTTP_NOT_MODIFIED)
        return 1;
    return 0;
}

/* The main request's upstream and those of its subrequests (mirror, slice,
 * SSI, a cache's background update) all ended with the backend's work. */
static int ngx_http_leash_work_over(ngx_http_leash_ctx_t *ctx) {
    ngx_http_request_t **sr;
    ngx_uint_t i;

    if (!ngx_http_leash_upstream_over(ctx->r, ctx->complete))
        return 0;
    if (ctx->subs == NULL)
        return 1;
    sr = ctx->subs->elts;
    for (i = 0; i < ctx->subs->nelts; i++) {
        if (!ngx_http_leash_upstream_over(sr[i], 0))
            return 0;
    }
    return 1;
}

/* A subrequest that runs while the main request holds the lock. */
static void ngx_http_leash_add_sub(ngx_http_leash_ctx_t *ctx, ngx_http_request_t *sr) {
    ngx_http_request_t **slot;

    ctx->shared = 1;
    if (ctx->subs == NULL)
        ctx->subs = ngx_array_create(ctx->r->pool, 2, sizeof(ngx_http_request_t *));
    slot = ctx->subs != NULL ? ngx_array_push(ctx->subs) : NULL;
    if (slot == NULL) {
        ngx_log_error(NGX_LOG_ERR, sr->connection->log, 0,
                      "leash: out of memory: a lost lock will not stop \"%V\"", &sr->uri);
        return;
    }
    *slot = sr;
}

/* Stops the upstream of every background subrequest (mirror) that still
 * runs under the lost lock: it would go on after the request's answer.
 * Ending its upstream ends it (its reference on the main request goes, as
 * at its normal end). The caller holds a reference of its own, so the
 * main request stays. Subrequests live in the main request's pool: each
 * pointer is valid; an upstream that finished has no cleanup left. 1 when
 * a subrequest that is part of the answer (SSI) still runs an upstream:
 * only terminating the request stops that one. */
static int ngx_http_leash_stop_subs(ngx_http_leash_ctx_t *ctx) {
    ngx_http_request_t **sr;
    ngx_uint_t i;
    int inline_running = 0;

    if (ctx->subs == NULL)
        return 0;
    sr = ctx->subs->elts;
    for (i = 0; i < ctx->subs->nelts; i++) {
        if (sr[i]->upstream == NULL || sr[i]->upstream->cleanup == NULL)
            continue;
        if (sr[i]->background)
            (*sr[i]->upstream->cleanup)(sr[i]);
        else
            inline_running = 1;
    }
    return inline_running;
}

static void ngx_http_leash_lost(leash_lock *l, int reason, void *arg) {
    ngx_http_leash_ctx_t *ctx = arg;
    ngx_http_request_t *r = ctx->r;
    ngx_connection_t *c = r->connection;

    ngx_log_error(NGX_LOG_ERR, c->log, 0,
                  "leash: lost the lock \"%V\" mid-request (%s): the request ends", &ctx->key,
                  leash_lost_reason_name(reason));
    ctx->status = "lost";
    ctx->fence = 0;
    ctx->lost = 1;
    ctx->rc = NGX_HTTP_INTERNAL_SERVER_ERROR;
    /* The backend must not see a second writer: end the request now, its
     * upstream and its subrequests' included. The reference taken here is the one the upstream's
     * end (or the terminate below) drops, or the request would be freed
     * under the code that ends it. This is no event of the request's
     * connection: run the posted requests here. */
    r->main->count++;
    if (!ngx_http_leash_stop_subs(ctx) && !r->header_sent && c->sent == 0 && r->upstream != NULL &&
        r->upstream->cleanup != NULL) {
        /* Nothing was sent: stop the upstream (closes its connection and
         * finalizes with NGX_DONE, which drops that reference), then the
         * request answers 500 as when its upstream fails. */
        (*r->upstream->cleanup)(r);
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
    } else {
        /* Part of the answer went out (or no upstream runs, and whatever
         * does owns the request): NGX_ERROR terminates, running every
         * cleanup (the upstream's among them), then closes. */
        ngx_http_finalize_request(r, NGX_ERROR);
    }
    ngx_http_run_posted_requests(c);
}

static void ngx_http_leash_decided(leash_lock *l, int status, void *arg) {
    ngx_http_leash_ctx_t *ctx = arg;
    ngx_http_request_t *r = ctx->r;
    ngx_http_leash_loc_conf_t *lcf;
    ngx_connection_t *c;

    if (ctx->lock == NULL)
        return; /* cancelled by the request's end */
    lcf = ngx_http_get_module_loc_conf(r, ngx_http_leash_module);
    ctx->wait_ms = ngx_current_msec - ctx->started;
    ctx->state = NGX_LEASH_DECIDED;
    switch (status) {
    case LEASH_OK:
        ctx->status = "granted";
        ctx->fence = leash_fence(l);
        ctx->rc = NGX_DECLINED;
        leash_on_lost(l, ngx_http_leash_lost, ctx);
        break;
    case LEASH_EBUSY:
        ctx->status = "busy";
        ctx->rc = (ngx_int_t)lcf->busy_status;
        break;
    case LEASH_ETIMEDOUT:
        ctx->status = "timeout";
        ctx->rc = (ngx_int_t)lcf->busy_status;
        break;
    default:
        if (!ngx_http_leash_unreachable(status)) {
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "leash: no lock \"%V\": %s (a lock misconfigured: 500, whatever "
                          "leash_fail says)",
                          &ctx->key, leash_strerror(status));
            ctx->status = "error";
            ctx->rc = NGX_HTTP_INTERNAL_SERVER_ERROR;
            break;
        }
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "leash: no lock \"%V\": %s%s", &ctx->key,
                      leash_strerror(status),
                      lcf->fail == NGX_LEASH_FAIL_OPEN ? " (leash_fail open: going on)" : "");
        ctx->status = "error";
        ctx->rc = ngx_http_leash_failed(lcf);
        break;
    }
    if (ctx->rc != NGX_DECLINED) {
        ctx->lock = NULL;
        leash_lock_free(l);
    }
    c = r->connection;
    if (c->write->timer_set)
        ngx_del_timer(c->write);
    r->read_event_handler = ngx_http_block_reading;
    r->write_event_handler = ngx_http_core_run_phases;
    ngx_http_core_run_phases(r);
    ngx_http_run_posted_requests(c);
}

/* The waiting request's own timer (NGX_LEASH_GUARD_MS): the answer never
 * came. Other write events while waiting mean nothing. */
static void ngx_http_leash_guard(ngx_http_request_t *r) {
    ngx_http_leash_ctx_t *ctx = ngx_http_leash_get_ctx(r);
    ngx_http_leash_loc_conf_t *lcf = ngx_http_get_module_loc_conf(r, ngx_http_leash_module);
    ngx_connection_t *c = r->connection;
    leash_lock *l;

    if (!c->write->timedout || ctx == NULL || ctx->state != NGX_LEASH_WAITING) {
        /* A level-triggered event method would report a writable socket
         * again and again. */
        if (ngx_handle_write_event(c->write, 0) != NGX_OK)
            ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }
    c->write->timedout = 0;
    ngx_log_error(NGX_LOG_ERR, c->log, 0, "leash: no answer for the lock \"%V\" in %Mms", &ctx->key,
                  ngx_current_msec - ctx->started);
    l = ctx->lock;
    ctx->lock = NULL; /* its callback fires ECANCELED inside the free: ignored */
    leash_lock_free(l);
    ctx->state = NGX_LEASH_DECIDED;
    ctx->status = "error";
    ctx->wait_ms = ngx_current_msec - ctx->started;
    ctx->rc = ngx_http_leash_failed(lcf);
    r->read_event_handler = ngx_http_block_reading;
    r->write_event_handler = ngx_http_core_run_phases;
    ngx_http_core_run_phases(r);
}

/* Writes the key of this request into ctx->key, NUL-terminated. */
static ngx_int_t ngx_http_leash_key(ngx_http_request_t *r, ngx_http_leash_loc_conf_t *lcf,
                                    ngx_str_t *key) {
    ngx_str_t v;

    if (ngx_http_complex_value(r, lcf->key, &v) != NGX_OK)
        return NGX_ERROR;
    if (v.len == 0 || v.len > LEASH_NAME_MAX) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "leash: the key \"%V\" of \"%s\" is %uz bytes, not 1..%d", &v, lcf->directive,
                      v.len, LEASH_NAME_MAX);
        return NGX_ERROR;
    }
    key->data = ngx_pnalloc(r->pool, v.len + 1);
    if (key->data == NULL)
        return NGX_ERROR;
    ngx_memcpy(key->data, v.data, v.len);
    key->data[v.len] = '\0';
    key->len = v.len;
    return NGX_OK;
}

/* Whether lcf's lock, for r, is the one the request asked for: the same
 * kind, key (and permits). */
static int ngx_http_leash_same_lock(ngx_http_request_t *r, ngx_http_leash_loc_conf_t *lcf,
                                    ngx_http_leash_ctx_t *ctx) {
    ngx_str_t key;

    if (lcf->kind != ctx->kind || lcf->permits != ctx->permits)
        return 0;
    if (ngx_http_leash_key(r, lcf, &key) != NGX_OK)
        return 0;
    return key.len == ctx->key.len && ngx_memcmp(key.data, ctx->key.data, key.len) == 0;
}

static ngx_int_t ngx_http_leash_handler(ngx_http_request_t *r) {
    ngx_http_leash_loc_conf_t *lcf = ngx_http_get_module_loc_conf(r, ngx_http_leash_module);
    ngx_http_leash_ctx_t *ctx;
    ngx_pool_cleanup_t *cln;
    const char *name;
    int rc;

    ctx = ngx_http_leash_get_ctx(r);
    if (ctx != NULL && ctx->lost) {
        /* error_page, try_files or X-Accel-Redirect after a lost lock:
         * whatever would run here next, no backend sees this request
         * again (a location of its own content handler, a lock: 500). */
        ngx_http_core_loc_conf_t *clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);
        if (lcf->kind == NGX_LEASH_NONE && clcf->handler == NULL)
            return NGX_DECLINED;
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "leash: \"%V\" refused: the request lost its lock \"%V\"", &r->uri,
                      &ctx->key);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (r != r->main && ctx != NULL && ctx->lock != NULL)
        ngx_http_leash_add_sub(ctx, r);
    if (lcf->kind == NGX_LEASH_NONE)
        return NGX_DECLINED;
    if (r != r->main) {
        /* A subrequest goes on under its main request's lock. It cannot
         * wait for one (the connection's events go to the request that may
         * write, not to it), and letting it through would break the lock:
         * without a lock of the main request it fails. */
        if (ctx != NULL) {
            if (ctx->answered)
                ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                              "leash: \"%s\" in a subrequest (\"%V\") after the main request "
                              "answered and released its lock: refused",
                              lcf->directive, &r->uri);
            return ctx->rc;
        }
        /* An access check's subrequest (auth_request) into a block that
         * only inherits the lock, e.g. a nested location: it runs before
         * the main request asks for the lock, and goes on without it, as
         * in a block with no lock at all. */
        if (lcf->inherited)
            return NGX_DECLINED;
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "leash: \"%s\" in a subrequest (\"%V\") whose main request holds no "
                      "lock: refused",
                      lcf->directive, &r->uri);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (ctx != NULL) {
        /* Woken while waiting (a stray write event), or back after the
         * decision, or an internal redirect of a request that asked. */
        if (ctx->state == NGX_LEASH_WAITING)
            return NGX_AGAIN;
        if (ctx->answered) {
            /* post_action: it runs after the answer, and the lock went
             * with the answer. Its status shows in the access log only. */
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "leash: \"%V\" refused: the request answered and released its lock "
                          "\"%V\" (post_action runs after the answer)",
                          &r->uri, &ctx->key);
            return ctx->rc;
        }
        if (ctx->rc == NGX_DECLINED && !ngx_http_leash_same_lock(r, lcf, ctx)) {
            /* An internal redirect (X-Accel-Redirect, error_page,
             * try_files) into a location with another lock: one request
             * takes one lock (a second, taken while holding the first,
             * could deadlock against a request that takes them the other
             * way round), and going on would skip this one. */
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "leash: \"%V\" refused: its lock is not \"%V\", the lock the request "
                          "holds (an internal redirect into a location with another lock)",
                          &r->uri, &ctx->key);
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        return ctx->rc;
    }
    cln = ngx_pool_cleanup_add(r->pool, sizeof(ngx_http_leash_ctx_t));
    if (cln == NULL)
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    ctx = cln->data;
    ngx_memzero(ctx, sizeof(*ctx));
    ctx->r = r;
    ctx->state = NGX_LEASH_DECIDED;
    ctx->rc = NGX_HTTP_INTERNAL_SERVER_ERROR;
    ctx->status = "error"; /* until decided otherwise */
    ctx->kind = lcf->kind;
    ctx->permits = lcf->permits;
    cln->handler = ngx_http_leash_cleanup;
    ngx_http_set_ctx(r, ctx, ngx_http_leash_module);
    if (ngx_http_leash_key(r, lcf, &ctx->key) != NGX_OK)
        return ctx->rc;

    name = (const char *)ctx->key.data;
    ctx->lock = lcf->kind == NGX_LEASH_MUTEX ? leash_lock_new(ngx_http_leash_client, name)
                : lcf->kind == NGX_LEASH_FAIR
                    ? leash_fair_lock_new(ngx_http_leash_client, name)
                    : leash_semaphore_new(ngx_http_leash_client, name, (int)lcf->permits);
    if (ctx->lock == NULL) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "leash: no lock handle for \"%V\"%s",
                      &ctx->key,
                      ngx_http_leash_client == NULL ? " (this process has no leash client)" : "");
        ctx->rc = ngx_http_leash_failed(lcf);
        return ctx->rc;
    }
    ngx_queue_insert_tail(&ngx_http_leash_live, &ctx->live);
    ctx->in_live = 1;
    ctx->started = ngx_current_msec;
    rc = leash_acquire(ctx->lock, (int64_t)lcf->wait, ngx_http_leash_decided, ctx);
    if (rc != LEASH_OK) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "leash: cannot acquire \"%V\": %s",
                      &ctx->key, leash_strerror(rc));
        leash_lock_free(ctx->lock);
        ctx->lock = NULL;
        ctx->rc = ngx_http_leash_failed(lcf);
        return ctx->rc;
    }
    /* The answer always comes from the loop, after this returned. Watching
     * the read event lets a client that hangs up end the request (and so
     * the wait) at once. */
    ctx->state = NGX_LEASH_WAITING;
    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = ngx_http_leash_guard;
    ngx_add_timer(r->connection->write, lcf->wait + NGX_LEASH_GUARD_MS);
    return NGX_AGAIN;
}

/* ---- the end of the answer ---- */

static ngx_http_output_body_filter_pt ngx_http_leash_next_body_filter;

static ngx_http_output_header_filter_pt ngx_http_leash_next_header_filter;
static ngx_http_output_body_filter_pt ngx_http_leash_next_body_filter;

/* The main request's answer is complete (its last buffer, or a header-only
 * answer, went through the filters below): the work the lock guarded is
 * done, and the lock goes now rather than when the request's pool goes (a
 * client that sends a body nobody reads keeps the request for
 * lingering_time: any client could pin a key). Not while anything else
 * of the request may still work under it: a subrequest holds a reference
 * on the main request (mirror, slice, a cache's background update) or is
 * postponed (SSI, addition). Beside the connection's own reference, only
 * discarding a body may hold one. */
static void ngx_http_leash_answered(ngx_http_request_t *r) {
    ngx_http_leash_ctx_t *ctx = ngx_http_leash_get_ctx(r);
    leash_lock *l;

    if (ctx == NULL || ctx->lock == NULL || ctx->state != NGX_LEASH_DECIDED || ctx->shared)
        return;
    if (r->count > 1u + (r->discard_body ? 1u : 0u) || r->postponed != NULL)
        return;
    /* A header-only answer while the upstream still reads the body (into
     * the cache), or an answer after the backend of an earlier try timed
     * out: the request's end decides. */
    if (!ngx_http_leash_work_over(ctx))
        return;
    l = ctx->lock;
    ctx->lock = NULL;
    ctx->answered = 1;
    /* Nothing of this request may go on under it now. */
    ctx->rc = NGX_HTTP_INTERNAL_SERVER_ERROR;
    leash_lock_free(l);
}

static ngx_int_t ngx_http_leash_header_filter(ngx_http_request_t *r) {
    ngx_int_t rc = ngx_http_leash_next_header_filter(r);

    /* HEAD, 304 (set by a filter below): no last buffer follows. */
    if (r == r->main && r->header_only && rc != NGX_ERROR)
        ngx_http_leash_answered(r);
    return rc;
}

/* After the filters below ran: a slice or SSI subrequest they start for
 * this buffer exists by then. */
static ngx_int_t ngx_http_leash_body_filter(ngx_http_request_t *r, ngx_chain_t *in) {
    ngx_int_t rc;
    ngx_chain_t *cl;

    if (r != r->main)
        return ngx_http_leash_next_body_filter(r, in);
    for (cl = in; cl != NULL; cl = cl->next) {
        if (cl->buf->last_buf)
            break;
    }
    rc = ngx_http_leash_next_body_filter(r, in);
    /* A filter below may take the last buffer back: slice does, and starts
     * the next slice's subrequest only once a slow client took this one,
     * so the answer is not over. */
    if (cl != NULL && cl->buf->last_buf && rc != NGX_ERROR) {
        ngx_http_leash_ctx_t *ctx = ngx_http_leash_get_ctx(r);
        if (ctx != NULL)
            ctx->complete = 1;
        ngx_http_leash_answered(r);
    }
    return rc;
}

/* ---- leash_metrics ---- */

/* Room for every sample (about 4 KB with the longest numbers). */
#define NGX_LEASH_METRICS_MAX 16384

static ngx_int_t ngx_http_leash_metrics_handler(ngx_http_request_t *r) {
    leash_stats st;
    ngx_chain_t out;
    ngx_buf_t *b;
    ngx_int_t rc;
    size_t n;

    if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD)))
        return NGX_HTTP_NOT_ALLOWED;
    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK)
        return rc;
    b = ngx_create_temp_buf(r->pool, NGX_LEASH_METRICS_MAX);
    if (b == NULL)
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    /* This worker's client (zeros where none): each worker is its own
     * target, told apart by the pid label. */
    leash_client_stats(ngx_http_leash_client, &st);
    n = prometheus_write((char *)b->pos, NGX_LEASH_METRICS_MAX, &st, (int)ngx_pid);
    if (n >= NGX_LEASH_METRICS_MAX)
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    b->last = b->pos + n;
    b->last_buf = r == r->main ? 1 : 0;
    b->last_in_chain = 1;
    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = (off_t)n;
    ngx_str_set(&r->headers_out.content_type, "text/plain; version=0.0.4");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only)
        return rc;
    out.buf = b;
    out.next = NULL;
    return ngx_http_output_filter(r, &out);
}

static char *ngx_http_leash_metrics(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    ngx_http_core_loc_conf_t *clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);

    clcf->handler = ngx_http_leash_metrics_handler;
    return NGX_CONF_OK;
}

/* ---- variables ---- */

static ngx_int_t ngx_http_leash_variable(ngx_http_request_t *r, ngx_http_variable_value_t *v,
                                         uintptr_t data) {
    ngx_http_leash_ctx_t *ctx = ngx_http_leash_get_ctx(r);
    u_char *p;

    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;
    v->len = 0;
    v->data = (u_char *)"";
    if (ctx == NULL)
        return NGX_OK;
    switch (data) {
    case 0: /* $leash_status */
        if (ctx->state == NGX_LEASH_DECIDED) {
            v->data = (u_char *)ctx->status;
            v->len = ngx_strlen(ctx->status);
        }
        return NGX_OK;
    case 1: /* $leash_fence */
        if (ctx->fence == 0)
            return NGX_OK;
        p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
        if (p == NULL)
            return NGX_ERROR;
        v->data = p;
        v->len = ngx_sprintf(p, "%uL", (unsigned long long)ctx->fence) - p;
        return NGX_OK;
    default: /* $leash_wait_ms */
        if (ctx->state != NGX_LEASH_DECIDED)
            return NGX_OK;
        p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
        if (p == NULL)
            return NGX_ERROR;
        v->data = p;
        v->len = ngx_sprintf(p, "%M", ctx->wait_ms) - p;
        return NGX_OK;
    }
}

static ngx_http_variable_t ngx_http_leash_vars[] = {
    {ngx_string("leash_status"), NULL, ngx_http_leash_variable, 0, NGX_HTTP_VAR_NOCACHEABLE, 0},
    {ngx_string("leash_fence"), NULL, ngx_http_leash_variable, 1, NGX_HTTP_VAR_NOCACHEABLE, 0},
    {ngx_string("leash_wait_ms"), NULL, ngx_http_leash_variable, 2, NGX_HTTP_VAR_NOCACHEABLE, 0},
    ngx_http_null_variable,
};

static ngx_int_t ngx_http_leash_preconfiguration(ngx_conf_t *cf) {
    ngx_http_variable_t *var, *v;

    for (v = ngx_http_leash_vars; v->name.len; v++) {
        var = ngx_http_add_variable(cf, &v->name, v->flags);
        if (var == NULL)
            return NGX_ERROR;
        var->get_handler = v->get_handler;
        var->data = v->data;
    }
    return NGX_OK;
}

static ngx_int_t ngx_http_leash_postconfiguration(ngx_conf_t *cf) {
    ngx_http_core_main_conf_t *cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);
    ngx_http_handler_pt *h;

    /* Not the access phase: its handlers run last added first, so the lock
     * would come before allow/deny, auth_basic and auth_request (a refused
     * client would wait for it, or hold it), and "satisfy any" skips the
     * access handlers after the first that allows. Subrequests, which have
     * no access phase, come here too. This phase's own handlers (mirror,
     * try_files) run after this one. */
    h = ngx_array_push(&cmcf->phases[NGX_HTTP_PRECONTENT_PHASE].handlers);
    if (h == NULL)
        return NGX_ERROR;
    *h = ngx_http_leash_handler;
    ngx_http_leash_next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = ngx_http_leash_header_filter;
    ngx_http_leash_next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = ngx_http_leash_body_filter;
    return NGX_OK;
}
