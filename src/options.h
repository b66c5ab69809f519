/* The client's settings: the user's leash_options, checked and copied. */
#ifndef LEASH_OPTIONS_H
#define LEASH_OPTIONS_H

#include <leash/leash.h>

#include "base/log.h"

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
    leash__logger log;
} leash__config;

/* Checks every option (logging the first bad one) and copies it into *cfg.
 * LEASH_OK, LEASH_EINVAL or LEASH_ENOMEM; *cfg is untouched on failure. */
int leash__config_from_options(leash__config *cfg, const leash_options *o);
void leash__config_clear(leash__config *cfg);

#endif
