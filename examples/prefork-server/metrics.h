/*
 * This worker's leash_stats as Prometheus text: prefork-server's
 * GET /metrics, and nginx's leash_metrics (nginx/config compiles metrics.c
 * into the module). Needs nothing but leash.h.
 */
#ifndef PREFORK_METRICS_H
#define PREFORK_METRICS_H

#include <stddef.h>

#include <leash/leash.h>

/* Writes st as Prometheus text (every sample labelled with pid) into buf:
 * the length, which is >= size when it did not fit. */
size_t metrics_write(char *buf, size_t size, const leash_stats *st, int pid);

#endif
