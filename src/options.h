/* SPDX-License-Identifier: MIT */
/*
 * The client's configuration: the user's leash_options, checked once and
 * laid out as the parts the layers read. Each option is written once, into
 * the part of the lowest layer that reads it (leash__config_init), and read
 * there by that layer and the ones above it (through the part's pointers to
 * the parts below): no layer copies another's field. Built once, then
 * read-only: the layers get const pointers to their parts.
 *
 * A new option: its field in leash.h, its default and its check (options.c),
 * a field in the part of the layer that reads it, and the line in
 * leash__config_init that writes it there.
 */
#ifndef LEASH_OPTIONS_H
#define LEASH_OPTIONS_H

#include <leash/leash.h>

#include "base/log.h"
#include "dialect/dialect.h"
#include "prim/core.h"
#include "route/route.h"
#include "wire/conn.h"
#include "wire/sock.h"

/* The largest struct_size taken (leash_options, leash_loop): a bigger one
 * is garbage, not a struct of a later version. */
#define LEASH__STRUCT_SIZE_MAX 4096

typedef struct leash__config {
    /* The parts, lowest layer first. */
    leash__conn_cfg conn;    /* wire: every connection's (a route copies it per server) */
    const char *dns_servers; /* wire: the resolver's; NULL: the system's */
    leash__route_cfg route;  /* route: .conn is &conn */
    int64_t sub_linger_ms;   /* hold: the wait queues' */
    leash__prim_cfg prim;    /* prim: .conn and .route point to the parts below */
    /* The top's: what the client is made of. */
    int topology; /* which route (enum leash_topology) */
    const leash__dialect *dialect;
    leash__logger log;
    /* What the parts point into: every string option's copy in one
     * allocation (wiped when freed: it holds the passwords), the nodes'
     * addresses, and the TLS context (conn.tls) made from the tls options. */
    char *text;
    size_t text_size;
    leash__sock_addr *seeds;
} leash__config;

/* Checks every option (logging the first bad one) and builds *cfg from
 * them, in place: the parts point into each other, so *cfg must not be
 * copied. LEASH_OK, LEASH_EINVAL, LEASH_ETLS (a TLS file cannot be used,
 * logged) or LEASH_ENOMEM; on failure *cfg is left zeroed. */
int leash__config_init(leash__config *cfg, const leash_options *o);
void leash__config_clear(leash__config *cfg);

#endif
