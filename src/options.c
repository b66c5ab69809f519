/* SPDX-License-Identifier: MIT */
#include "options.h"

#include "hold/hold.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* leash_options as the 0.2 header lays it out (up to its last field,
 * wait_timeout_ms): the smallest struct_size leash_client_new takes. */
#define OPTIONS_SIZE_0_2 \
    (offsetof(leash_options, wait_timeout_ms) + sizeof(((leash_options *)0)->wait_timeout_ms))
/* The end of each field added after 0.2: a struct_size may end at one,
 * never inside one (a binding's packed struct ends before the padding). */
#define OPTIONS_SIZE_DIALECT \
    (offsetof(leash_options, dialect) + sizeof(((leash_options *)0)->dialect))
/* The end of the last field: a field added after it must move this, get
 * a size of its own above (and default to zero, see "Structs that grow"
 * in leash.h). */
#define OPTIONS_SIZE_TLS_VERIFY \
    (offsetof(leash_options, tls_verify) + sizeof(((leash_options *)0)->tls_verify))
#define OPTIONS_SIZE_DNS_SERVERS \
    (offsetof(leash_options, dns_servers) + sizeof(((leash_options *)0)->dns_servers))
#define OPTIONS_SIZE_SENTINEL \
    (offsetof(leash_options, sentinel_password) + sizeof(((leash_options *)0)->sentinel_password))
#define OPTIONS_SIZE_KEY_PASSWORD \
    (offsetof(leash_options, tls_key_password) + sizeof(((leash_options *)0)->tls_key_password))
#define OPTIONS_SIZE_LAST OPTIONS_SIZE_KEY_PASSWORD
_Static_assert(sizeof(leash_options) - OPTIONS_SIZE_LAST < _Alignof(leash_options),
               "leash_options grew: keep OPTIONS_SIZE_LAST at the end of its last field");

static void defaults(leash_options *o) {
    memset(o, 0, sizeof(*o));
    o->struct_size = sizeof(*o);
    o->host = "127.0.0.1";
    o->port = 6379;
    o->key_prefix = "leash:";
    o->lease_ms = 30000;
    o->renew_interval_ms = 0; /* lease_ms / 3 */
    o->max_hold_ms = 0;
    o->connect_timeout_ms = 2000;
    o->command_timeout_ms = 2000;
    o->reconnect_min_ms = 50;
    o->reconnect_max_ms = 2000;
    o->log_level = LEASH_LOG_WARN;
    o->sub_linger_ms = 1000;
    o->topology = LEASH_TOPOLOGY_SINGLE;
    o->pubsub = LEASH_PUBSUB_AUTO;
    o->wait_timeout_ms = 100;
    o->tls_verify = 1;
    /* A field added later defaults to zero (see "Structs that grow" in
     * leash.h): a program that does not know it leaves it zero. */
}

void leash_options_init_sized(leash_options *o, size_t struct_size) {
    leash_options d;

    if (o == NULL || struct_size < sizeof(o->struct_size))
        return;
    defaults(&d);
    memset(o, 0, struct_size);
    memcpy(o, &d, struct_size < sizeof(d) ? struct_size : sizeof(d));
    o->struct_size = struct_size;
}

/* The function form is what bindings call (bindgen, cgo and cffi cannot
 * call a macro), and they lay out this version's struct: filling only the
 * 0.2 layout would leave every later field (tls included) ignored, silently.
 * A struct grows only with a new minor version, and so a new soname
 * (leash.h, "Structs that grow"): no program built for a smaller layout
 * loads this library. */
void(leash_options_init)(leash_options *o) {
    leash_options_init_sized(o, sizeof(leash_options));
}

/* Whether a struct_size ends at 0.2's last field or at one added since
 * (each group of fields added together counts as one). */
static int size_ends_a_field(size_t n) {
    return n <= OPTIONS_SIZE_0_2 || n == OPTIONS_SIZE_DIALECT || n == OPTIONS_SIZE_TLS_VERIFY ||
           n == OPTIONS_SIZE_DNS_SERVERS || n == OPTIONS_SIZE_SENTINEL || n >= OPTIONS_SIZE_LAST;
}

/* The caller's options as this version lays them out: fields the caller's
 * header did not have take their defaults; fields this version does not
 * know must be zero, also one in what is tail padding here (a newer
 * header's int after the last field lands there). o->struct_size is at
 * least OPTIONS_SIZE_0_2. */
static int widen(const leash__logger *lg, leash_options *out, const leash_options *o) {
    const unsigned char *bytes = (const unsigned char *)o;
    size_t n = o->struct_size;

    for (size_t i = OPTIONS_SIZE_LAST; i < n; i++) {
        if (bytes[i] != 0) {
            leash__log(lg, LEASH_LOG_ERROR,
                       "leash_client_new: an option this library (%s) does not know is set "
                       "(byte %zu of %zu)",
                       leash_version(), i, n);
            return LEASH_EINVAL;
        }
    }
    defaults(out);
    memcpy(out, o, n < sizeof(*out) ? n : sizeof(*out));
    out->struct_size = sizeof(*out);
    return LEASH_OK;
}

/* A duration option: min..LEASH_DURATION_MAX_MS. */
static int check_duration(const leash__logger *lg, const char *name, int64_t v, int64_t min) {
    if (v < min || v > LEASH_DURATION_MAX_MS) {
        leash__log(lg, LEASH_LOG_ERROR,
                   "leash_client_new: %s must be %lld..LEASH_DURATION_MAX_MS (got %lld)", name,
                   (long long)min, (long long)v);
        return LEASH_EINVAL;
    }
    return LEASH_OK;
}

/* "host:port", "[v6]:port" or "/unix/path" into *out (strings point into
 * buf, which holds a copy). 0, or -1 when it is none of them. */
static int parse_node(const char *node, char *buf, size_t cap, leash__sock_addr *out) {
    char *colon, *host, *end;
    long port;
    size_t len = strlen(node);

    if (len == 0 || len >= cap)
        return -1;
    memcpy(buf, node, len + 1);
    memset(out, 0, sizeof(*out));
    if (buf[0] == '/') {
        if (len >= 108)
            return -1;
        out->unix_path = buf;
        return 0;
    }
    colon = strrchr(buf, ':');
    if (colon == NULL || colon == buf)
        return -1;
    *colon = '\0';
    host = buf;
    if (host[0] == '[') {
        size_t hl = strlen(host);
        if (hl < 3 || host[hl - 1] != ']')
            return -1;
        host[hl - 1] = '\0';
        host++;
    } else if (strchr(host, ':') != NULL) {
        return -1; /* an IPv6 address needs its brackets */
    }
    port = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || port < 1 || port > 65535 || host[0] == '\0')
        return -1;
    out->host = host;
    out->port = (int)port;
    return 0;
}

/* An optional string option: NULL, or 1..max bytes. */
static int check_length(const leash__logger *lg, const char *name, const char *v, size_t max) {
    if (v != NULL && (v[0] == '\0' || strlen(v) > max)) {
        leash__log(lg, LEASH_LOG_ERROR, "leash_client_new: %s must be NULL or 1..%zu bytes", name,
                   max);
        return LEASH_EINVAL;
    }
    return LEASH_OK;
}

/* Sentinel: a master's name, sentinels at "host:port" (they answer with
 * the master's address, and are asked by address too), credentials that
 * go together. */
static int validate_sentinel(const leash__logger *lg, const leash_options *o) {
    int i;

    if (o->sentinel_master == NULL || o->sentinel_master[0] == '\0') {
        leash__log(lg, LEASH_LOG_ERROR,
                   "leash_client_new: Sentinel needs sentinel_master, the name of the master "
                   "the sentinels watch");
        return LEASH_EINVAL;
    }
    if (check_length(lg, "sentinel_master", o->sentinel_master, LEASH_SENTINEL_MASTER_MAX) != 0 ||
        check_length(lg, "sentinel_username", o->sentinel_username, LEASH_NODE_MAX) != 0 ||
        check_length(lg, "sentinel_password", o->sentinel_password, LEASH_NODE_MAX) != 0)
        return LEASH_EINVAL;
    if (o->sentinel_username != NULL && o->sentinel_password == NULL) {
        leash__log(lg, LEASH_LOG_ERROR,
                   "leash_client_new: sentinel_username given without a sentinel_password");
        return LEASH_EINVAL;
    }
    for (i = 0; i < o->nodes_count; i++) {
        if (o->nodes[i][0] == '/') {
            leash__log(lg, LEASH_LOG_ERROR,
                       "leash_client_new: nodes[%d]: sentinels are \"host:port\", not unix "
                       "sockets",
                       i);
            return LEASH_EINVAL;
        }
    }
    return LEASH_OK;
}

/* A Sentinel option set with another topology is a mistake. */
static int validate_not_sentinel(const leash__logger *lg, const leash_options *o) {
    if (o->topology != LEASH_TOPOLOGY_SENTINEL &&
        (o->sentinel_master != NULL || o->sentinel_username != NULL ||
         o->sentinel_password != NULL)) {
        leash__log(lg, LEASH_LOG_ERROR,
                   "leash_client_new: sentinel_master, sentinel_username and sentinel_password "
                   "are for topology LEASH_TOPOLOGY_SENTINEL");
        return LEASH_EINVAL;
    }
    return LEASH_OK;
}

static int validate_topology(const leash__logger *lg, const leash_options *o) {
    char buf[LEASH_NODE_MAX + 1];
    leash__sock_addr addr;
    int i;

    switch (o->topology) {
    case LEASH_TOPOLOGY_SINGLE:
        if (o->nodes_count != 0 || o->nodes != NULL) {
            leash__log(lg, LEASH_LOG_ERROR,
                       "leash_client_new: nodes are for a cluster: one server takes host and port "
                       "(or unix_path)");
            return LEASH_EINVAL;
        }
        break;
    case LEASH_TOPOLOGY_CLUSTER:
    case LEASH_TOPOLOGY_REDLOCK:
    case LEASH_TOPOLOGY_SENTINEL:
        if (o->nodes == NULL || o->nodes_count < 1 || o->nodes_count > LEASH_NODES_MAX) {
            leash__log(lg, LEASH_LOG_ERROR,
                       "leash_client_new: %s needs 1..%d nodes (nodes, nodes_count)",
                       o->topology == LEASH_TOPOLOGY_CLUSTER   ? "a cluster"
                       : o->topology == LEASH_TOPOLOGY_REDLOCK ? "Redlock"
                                                               : "Sentinel",
                       LEASH_NODES_MAX);
            return LEASH_EINVAL;
        }
        for (i = 0; i < o->nodes_count; i++) {
            if (o->nodes[i] == NULL || parse_node(o->nodes[i], buf, sizeof(buf), &addr) != 0) {
                leash__log(lg, LEASH_LOG_ERROR,
                           "leash_client_new: nodes[%d] is not \"host:port\", \"[v6]:port\" or "
                           "a unix socket path (at most %d bytes)",
                           i, LEASH_NODE_MAX);
                return LEASH_EINVAL;
            }
        }
        if (o->topology == LEASH_TOPOLOGY_SENTINEL && validate_sentinel(lg, o) != LEASH_OK)
            return LEASH_EINVAL;
        if (o->topology == LEASH_TOPOLOGY_CLUSTER && o->db != 0) {
            leash__log(lg, LEASH_LOG_ERROR, "leash_client_new: a cluster has only db 0 (got %d)",
                       o->db);
            return LEASH_EINVAL;
        }
        break;
    default:
        leash__log(lg, LEASH_LOG_ERROR, "leash_client_new: topology %d is unknown", o->topology);
        return LEASH_EINVAL;
    }
    if (validate_not_sentinel(lg, o) != LEASH_OK)
        return LEASH_EINVAL;
    if (o->pubsub < LEASH_PUBSUB_AUTO || o->pubsub > LEASH_PUBSUB_OFF) {
        leash__log(lg, LEASH_LOG_ERROR, "leash_client_new: pubsub %d is unknown", o->pubsub);
        return LEASH_EINVAL;
    }
    if (o->wait_replicas < 0 || o->wait_replicas > LEASH_WAIT_REPLICAS_MAX) {
        leash__log(lg, LEASH_LOG_ERROR, "leash_client_new: wait_replicas must be 0..%d (got %d)",
                   LEASH_WAIT_REPLICAS_MAX, o->wait_replicas);
        return LEASH_EINVAL;
    }
    if (o->wait_replicas > 0 &&
        (o->wait_timeout_ms < 1 || o->wait_timeout_ms >= o->command_timeout_ms)) {
        leash__log(lg, LEASH_LOG_ERROR,
                   "leash_client_new: wait_timeout_ms must be 1..command_timeout_ms - 1 (got "
                   "%lld)",
                   (long long)o->wait_timeout_ms);
        return LEASH_EINVAL;
    }
    return LEASH_OK;
}

/* TLS and name resolution (docs/tls-and-names.md "TLS"). */
static int validate_reach(const leash__logger *lg, const leash_options *o) {
    int rc;

    if (o->tls != 0 && o->tls != 1) {
        leash__log(lg, LEASH_LOG_ERROR, "leash_client_new: tls must be 0 or 1 (got %d)", o->tls);
        return LEASH_EINVAL;
    }
    if (o->tls_verify != 0 && o->tls_verify != 1) {
        leash__log(lg, LEASH_LOG_ERROR, "leash_client_new: tls_verify must be 0 or 1 (got %d)",
                   o->tls_verify);
        return LEASH_EINVAL;
    }
    if ((rc = check_length(lg, "tls_ca_file", o->tls_ca_file, LEASH_PATH_MAX)) != 0 ||
        (rc = check_length(lg, "tls_ca_dir", o->tls_ca_dir, LEASH_PATH_MAX)) != 0 ||
        (rc = check_length(lg, "tls_cert_file", o->tls_cert_file, LEASH_PATH_MAX)) != 0 ||
        (rc = check_length(lg, "tls_key_file", o->tls_key_file, LEASH_PATH_MAX)) != 0 ||
        (rc = check_length(lg, "tls_server_name", o->tls_server_name, 255)) != 0 ||
        (rc = check_length(lg, "tls_key_password", o->tls_key_password, LEASH_KEY_PASSWORD_MAX)) !=
            0 ||
        (rc = check_length(lg, "dns_servers", o->dns_servers, LEASH_DNS_SERVERS_MAX)) != 0)
        return rc;
    if ((o->tls_cert_file == NULL) != (o->tls_key_file == NULL)) {
        leash__log(lg, LEASH_LOG_ERROR,
                   "leash_client_new: tls_cert_file and tls_key_file go together");
        return LEASH_EINVAL;
    }
    return LEASH_OK;
}

static int validate(const leash__logger *lg, const leash_options *o) {
    int rc;

    if (o->unix_path == NULL || o->unix_path[0] == '\0') {
        if (o->host == NULL || o->host[0] == '\0') {
            leash__log(lg, LEASH_LOG_ERROR, "leash_client_new: neither host nor unix_path is set");
            return LEASH_EINVAL;
        }
        if (o->port < 1 || o->port > 65535) {
            leash__log(lg, LEASH_LOG_ERROR, "leash_client_new: port %d is out of range 1..65535",
                       o->port);
            return LEASH_EINVAL;
        }
    } else if (strlen(o->unix_path) >= 108) {
        leash__log(lg, LEASH_LOG_ERROR, "leash_client_new: unix_path is longer than 107 bytes");
        return LEASH_EINVAL;
    }
    if (o->username != NULL && o->password == NULL) {
        leash__log(lg, LEASH_LOG_ERROR, "leash_client_new: username given without a password");
        return LEASH_EINVAL;
    }
    if (o->db < 0) {
        leash__log(lg, LEASH_LOG_ERROR, "leash_client_new: db must be >= 0 (got %d)", o->db);
        return LEASH_EINVAL;
    }
    if (o->key_prefix == NULL || strlen(o->key_prefix) > LEASH_PREFIX_MAX) {
        leash__log(lg, LEASH_LOG_ERROR, "leash_client_new: key_prefix must be 0..%d bytes",
                   LEASH_PREFIX_MAX);
        return LEASH_EINVAL;
    }
    if ((rc = leash__hold_check_lease(lg, o->lease_ms, o->renew_interval_ms, "leash_client_new")) !=
        0)
        return rc;
    if ((rc = check_duration(lg, "max_hold_ms", o->max_hold_ms, 0)) != 0 ||
        (rc = check_duration(lg, "connect_timeout_ms", o->connect_timeout_ms, 1)) != 0 ||
        (rc = check_duration(lg, "command_timeout_ms", o->command_timeout_ms, 1)) != 0 ||
        (rc = check_duration(lg, "reconnect_min_ms", o->reconnect_min_ms, 1)) != 0 ||
        (rc = check_duration(lg, "reconnect_max_ms", o->reconnect_max_ms, 1)) != 0 ||
        (rc = check_duration(lg, "sub_linger_ms", o->sub_linger_ms, 0)) != 0)
        return rc;
    if (o->reconnect_max_ms < o->reconnect_min_ms) {
        leash__log(lg, LEASH_LOG_ERROR,
                   "leash_client_new: reconnect_max_ms (%lld) is below reconnect_min_ms (%lld)",
                   (long long)o->reconnect_max_ms, (long long)o->reconnect_min_ms);
        return LEASH_EINVAL;
    }
    if ((rc = validate_topology(lg, o)) != LEASH_OK)
        return rc;
    if (o->dialect != LEASH_DIALECT_LEASH && o->dialect != LEASH_DIALECT_REDISSON) {
        leash__log(lg, LEASH_LOG_ERROR,
                   "leash_client_new: dialect %d is neither LEASH_DIALECT_LEASH nor "
                   "LEASH_DIALECT_REDISSON",
                   o->dialect);
        return LEASH_EINVAL;
    }
    /* Redisson subscribes with SSUBSCRIBE in a cluster only: its waiters
     * would never hear a SPUBLISH anywhere else. */
    if (o->dialect == LEASH_DIALECT_REDISSON && o->pubsub == LEASH_PUBSUB_SHARDED &&
        o->topology != LEASH_TOPOLOGY_CLUSTER) {
        leash__log(lg, LEASH_LOG_ERROR,
                   "leash_client_new: the redisson dialect uses sharded pub/sub in a cluster "
                   "only, as Redisson does");
        return LEASH_EINVAL;
    }
    if ((rc = validate_reach(lg, o)) != LEASH_OK)
        return rc;
    if (o->log_level < LEASH_LOG_ERROR || o->log_level > LEASH_LOG_DEBUG) {
        leash__log(lg, LEASH_LOG_ERROR, "leash_client_new: log_level %d is out of range",
                   o->log_level);
        return LEASH_EINVAL;
    }
    return LEASH_OK;
}

/* The bytes a string option's copy takes: 0 for NULL or "" (unset). */
static size_t text_size(const char *s) {
    return s == NULL || s[0] == '\0' ? 0 : strlen(s) + 1;
}

/* A string option, and where the part that reads it keeps its copy. */
typedef struct text_option {
    const char *from;
    const char **to;
} text_option;

/* The string options and the nodes' text into cfg->text (one allocation),
 * the nodes parsed into cfg->seeds over their copies; the TLS files into
 * *tls, for the context made from them. 0, or -1 without memory. */
static int copy_text(leash__config *cfg, leash__tls_cfg *tls, const leash_options *o) {
    const text_option list[] = {
        {o->host, &cfg->conn.host},
        {o->unix_path, &cfg->conn.unix_path},
        {o->username, &cfg->conn.username},
        {o->password, &cfg->conn.password},
        {o->tls_server_name, &cfg->conn.tls_server_name},
        {o->tls_ca_file, &tls->ca_file},
        {o->tls_ca_dir, &tls->ca_dir},
        {o->tls_cert_file, &tls->cert_file},
        {o->tls_key_file, &tls->key_file},
        {o->dns_servers, &cfg->dns_servers},
        {o->sentinel_master, &cfg->route.sentinel_master},
        {o->sentinel_username, &cfg->route.sentinel_username},
        {o->sentinel_password, &cfg->route.sentinel_password},
        {o->key_prefix, &cfg->prim.key_prefix},
    };
    size_t n = sizeof(list) / sizeof(list[0]), size = 0, i;
    char *at;

    for (i = 0; i < n; i++)
        size += text_size(list[i].from);
    for (i = 0; i < (size_t)o->nodes_count; i++)
        size += strlen(o->nodes[i]) + 1;
    cfg->text = malloc(size > 0 ? size : 1);
    if (cfg->text == NULL)
        return -1;
    cfg->text_size = size;
    at = cfg->text;
    for (i = 0; i < n; i++) {
        size_t len = text_size(list[i].from);
        *list[i].to = len > 0 ? memcpy(at, list[i].from, len) : NULL;
        at += len;
    }
    if (o->nodes_count == 0)
        return 0;
    cfg->seeds = calloc((size_t)o->nodes_count, sizeof(*cfg->seeds));
    if (cfg->seeds == NULL)
        return -1;
    for (i = 0; i < (size_t)o->nodes_count; i++) {
        size_t len = strlen(o->nodes[i]) + 1;
        (void)parse_node(o->nodes[i], at, len, &cfg->seeds[i]); /* validated */
        at += len;
    }
    return 0;
}

void leash__config_clear(leash__config *cfg) {
    leash__tls_free(cfg->conn.tls);
    if (cfg->text != NULL) {
        memset(cfg->text, 0, cfg->text_size); /* the passwords */
        free(cfg->text);
    }
    free(cfg->seeds);
    memset(cfg, 0, sizeof(*cfg));
}

int leash__config_init(leash__config *cfg, const leash_options *given) {
    leash_options opts, *o = &opts;
    leash__tls_cfg tls = {0};
    int rc;

    memset(cfg, 0, sizeof(*cfg));
    /* Without a struct_size from leash_options_init, not even the log
     * callback can be trusted: refuse silently. */
    if (given->struct_size < OPTIONS_SIZE_0_2 || given->struct_size > LEASH__STRUCT_SIZE_MAX ||
        !size_ends_a_field(given->struct_size))
        return LEASH_EINVAL; /* it ends inside a field added after 0.2 */
    cfg->log.cb = given->log_cb;
    cfg->log.arg = given->log_arg;
    cfg->log.level = given->log_level < LEASH_LOG_ERROR ? LEASH_LOG_ERROR : given->log_level;
    if ((rc = widen(&cfg->log, o, given)) != LEASH_OK ||
        (rc = validate(&cfg->log, o)) != LEASH_OK) {
        memset(cfg, 0, sizeof(*cfg));
        return rc;
    }
    if (copy_text(cfg, &tls, o) != 0) {
        leash__config_clear(cfg);
        return LEASH_ENOMEM;
    }
    if (cfg->prim.key_prefix == NULL)
        cfg->prim.key_prefix = ""; /* "" is a prefix too */
    cfg->topology = o->topology;
    cfg->dialect =
        o->dialect == LEASH_DIALECT_REDISSON ? &leash__dialect_redisson : &leash__dialect_leash;

    /* wire */
    cfg->conn.port = o->port;
    cfg->conn.db = o->db;
    cfg->conn.connect_timeout_ms = o->connect_timeout_ms;
    cfg->conn.command_timeout_ms = o->command_timeout_ms;
    cfg->conn.clock_check_ms = o->lease_ms;
    cfg->conn.reconnect_min_ms = o->reconnect_min_ms;
    cfg->conn.reconnect_max_ms = o->reconnect_max_ms;
    cfg->conn.scripts = cfg->dialect->scripts;
    cfg->conn.nscripts = cfg->dialect->nscripts;
    cfg->conn.pubsub = o->pubsub;
    if (o->pubsub == LEASH_PUBSUB_SHARDED) {
        cfg->conn.min_version = LEASH__VERSION(7, 0, 0);
        cfg->conn.min_version_for = "sharded pub/sub (LEASH_PUBSUB_SHARDED)";
    }
    tls.verify = o->tls_verify;
    /* Read with the key, in leash__tls_new below: not copied, not kept. */
    tls.key_password = o->tls_key_password;
    /* route */
    cfg->route.conn = &cfg->conn;
    cfg->route.seeds = cfg->seeds;
    cfg->route.nseeds = o->nodes_count;
    cfg->route.wait_replicas = o->wait_replicas;
    cfg->route.wait_timeout_ms = o->wait_timeout_ms;
    /* hold */
    cfg->sub_linger_ms = o->sub_linger_ms;
    /* prim */
    cfg->prim.conn = &cfg->conn;
    cfg->prim.route = &cfg->route;
    cfg->prim.lease_ms = o->lease_ms;
    cfg->prim.renew_ms = o->renew_interval_ms > 0 ? o->renew_interval_ms : o->lease_ms / 3;
    if (cfg->prim.renew_ms <= 0)
        cfg->prim.renew_ms = 1;
    cfg->prim.max_hold_ms = o->max_hold_ms;

    /* The context every TLS connection shares: its files are read now. */
    if (o->tls && (rc = leash__tls_new(&cfg->conn.tls, &tls, &cfg->log)) != LEASH_OK) {
        leash__config_clear(cfg);
        return rc;
    }
    return LEASH_OK;
}
