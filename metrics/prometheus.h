/* SPDX-License-Identifier: MIT */
/*
 * A process's leash_stats as Prometheus text, for the programs of this
 * tree that serve metrics: nginx's leash_metrics (nginx/config compiles
 * prometheus.c into the module) and examples/prefork-server's
 * GET /metrics. Not part of the library: a program compiles prometheus.c
 * itself. Needs nothing but leash.h.
 */
#ifndef LEASH_METRICS_PROMETHEUS_H
#define LEASH_METRICS_PROMETHEUS_H

#include <stddef.h>

#include <leash/leash.h>

/* Writes st as Prometheus text (every sample labelled with pid) into buf:
 * the length, which is >= size when it did not fit. */
size_t prometheus_write(char *buf, size_t size, const leash_stats *st, int pid);

#endif
