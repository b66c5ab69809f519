/* The client's settings: the user's leash_options, checked and copied. */
#ifndef LEASH_OPTIONS_H
#define LEASH_OPTIONS_H

#include <leash/leash.h>

#include "base/log.h"
#include "wire/sock.h"

/* The largest struct_size taken (leash_options, leash_loop): a bigger one
 * is garbage, not a struct of a later version. */
#define LEASH__STRUCT_SIZE_MAX 4096

typedef struct leash__config {
    char *host;
    int port;
    char *unix_path;
    char *username;
    char *password;
    int db;
    char *key_prefix;
    int64_t lease_ms;
    int64_t renew_interval_ms;
    int64_t max_hold_ms;
    int64_t connect_timeout_ms;
    int64_t command_timeout_ms;
    int64_t reconnect_min_ms;
    int64_t reconnect_max_ms;
    int64_t sub_linger_ms;
    int topology;
    int pubsub;  /* enum leash_pubsub, as asked */
    int sharded; /* SSUBSCRIBE/SPUBLISH (a server before 7.0 may turn AUTO's off) */
    int wait_replicas;
    int64_t wait_timeout_ms;
    int dialect; /* enum leash_dialect */
    int tls;
    char *tls_ca_file, *tls_ca_dir, *tls_cert_file, *tls_key_file, *tls_server_name;
    int tls_verify;
    char *dns_servers;     /* NULL: the system's resolvers */
    char *sentinel_master; /* LEASH_TOPOLOGY_SENTINEL: the master's name */
    char *sentinel_username, *sentinel_password;
    leash__sock_addr *nodes; /* nnodes, pointing into node_text */
    char **node_text;
    int nnodes;
    leash__logger log;
} leash__config;

/* Checks every option (logging the first bad one) and copies it into *cfg.
 * LEASH_OK, LEASH_EINVAL or LEASH_ENOMEM; *cfg is untouched on failure. */
int leash__config_from_options(leash__config *cfg, const leash_options *o);
void leash__config_clear(leash__config *cfg);

#endif
