/* SPDX-License-Identifier: MIT */
/*
 * ngx_leash_loop.h — a leash client on nginx's own event loop.
 *
 * leash's fd watchers become ngx_connection_t read/write events and its
 * timers ngx_event_t timers of the calling worker. Call it from a worker
 * (init_process), never from the master: the events belong to the
 * process's cycle. leash_client_free() gives everything back.
 */
#ifndef NGX_LEASH_LOOP_H
#define NGX_LEASH_LOOP_H

#include <ngx_config.h>
#include <ngx_core.h>

#include <leash/leash.h>

/* Binds c to this worker's event loop and starts connecting. Returns
 * LEASH_OK, or a leash status (leash_client_attach_loop()'s errors). */
int ngx_leash_loop_attach(leash_client *c, ngx_log_t *log);

#endif
