/* SPDX-License-Identifier: MIT */
/*
 * leash_stats in the Prometheus text exposition format (version 0.0.4),
 * written by hand: a few `# HELP` / `# TYPE` lines and samples, for
 * nginx's leash_metrics and prefork-server's GET /metrics. Every sample
 * carries the worker's pid, since each worker is
 * its own process with its own client and a scraper sees them as separate
 * targets behind one port; sum by pid in the queries.
 *
 * Times: leash counts microseconds; Prometheus wants base units, so the
 * *_seconds samples divide by 1e6.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "prometheus.h"

typedef struct out {
    char *buf;
    size_t size, at;
    int pid;
} out;

static void put(out *o, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void put(out *o, const char *fmt, ...) {
    va_list ap;
    int n;

    if (o->at >= o->size)
        return; /* too long: the caller sees at >= size */
    va_start(ap, fmt);
    n = vsnprintf(o->buf + o->at, o->size - o->at, fmt, ap);
    va_end(ap);
    o->at = n < 0 ? o->size : o->at + (size_t)n;
}

static void head(out *o, const char *name, const char *type, const char *help) {
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A sample with no label but the pid, or with one more (label != NULL). */
static void sample(out *o, const char *name, const char *label, const char *value, uint64_t n) {
    if (label != NULL)
        put(o, "%s{pid=\"%d\",%s=\"%s\"} %" PRIu64 "\n", name, o->pid, label, value, n);
    else
        put(o, "%s{pid=\"%d\"} %" PRIu64 "\n", name, o->pid, n);
}

static void seconds(out *o, const char *name, uint64_t us) {
    put(o, "%s{pid=\"%d\"} %" PRIu64 ".%06" PRIu64 "\n", name, o->pid, us / 1000000, us % 1000000);
}

static void counter(out *o, const char *name, const char *help, uint64_t n) {
    head(o, name, "counter", help);
    sample(o, name, NULL, NULL, n);
}

static void gauge(out *o, const char *name, const char *help, uint64_t n) {
    head(o, name, "gauge", help);
    sample(o, name, NULL, NULL, n);
}

size_t prometheus_write(char *buf, size_t size, const leash_stats *st, int pid) {
    out o = {buf, size, 0, pid};

    head(&o, "leash_acquires_total", "counter",
         "Acquires that ended, by result (granted, busy, timeout, canceled, error).");
    sample(&o, "leash_acquires_total", "result", "granted", st->grants);
    sample(&o, "leash_acquires_total", "result", "busy", st->busy);
    sample(&o, "leash_acquires_total", "result", "timeout", st->timeouts);
    sample(&o, "leash_acquires_total", "result", "canceled", st->cancels);
    sample(&o, "leash_acquires_total", "result", "error", st->acquire_errors);
    counter(&o, "leash_acquire_calls_total", "leash_acquire calls accepted.", st->acquires);
    counter(&o, "leash_waits_total", "Acquires that slept until a release.", st->waits);
    head(&o, "leash_wait_seconds_total", "counter",
         "Time from the call to the end of the wait, of the acquires that waited.");
    seconds(&o, "leash_wait_seconds_total", st->wait_us_total);
    head(&o, "leash_wait_seconds_max", "gauge", "Longest wait so far.");
    seconds(&o, "leash_wait_seconds_max", st->wait_us_max);
    counter(&o, "leash_holds_total", "Holds that started.", st->holds);
    head(&o, "leash_hold_seconds_total", "counter", "Time held, of the holds that ended.");
    seconds(&o, "leash_hold_seconds_total", st->hold_us_total);
    head(&o, "leash_hold_seconds_max", "gauge", "Longest hold so far.");
    seconds(&o, "leash_hold_seconds_max", st->hold_us_max);
    head(&o, "leash_renewals_total", "counter", "Renewals of held locks, by result.");
    sample(&o, "leash_renewals_total", "result", "ok", st->renewals);
    sample(&o, "leash_renewals_total", "result", "failed", st->renewals_failed);
    head(&o, "leash_lost_total", "counter", "Holds lost, by reason (LEASH_LOST_*).");
    sample(&o, "leash_lost_total", "reason", "expired", st->lost_expired);
    sample(&o, "leash_lost_total", "reason", "unreachable", st->lost_unreachable);
    sample(&o, "leash_lost_total", "reason", "max_hold", st->lost_max_hold);
    sample(&o, "leash_lost_total", "reason", "fixed_lease", st->lost_fixed_lease);
    sample(&o, "leash_lost_total", "reason", "replicas", st->lost_replicas);
    head(&o, "leash_commands_total", "counter", "Requests sent to Redis, by kind.");
    sample(&o, "leash_commands_total", "kind", "acquire", st->acquire_commands);
    sample(&o, "leash_commands_total", "kind", "release", st->release_commands);
    sample(&o, "leash_commands_total", "kind", "renew", st->renew_commands);
    sample(&o, "leash_commands_total", "kind", "other", st->other_commands);
    counter(&o, "leash_reconnects_total", "Connections ready again after a break.", st->reconnects);
    counter(&o, "leash_disconnects_total", "Command connections that broke.", st->disconnects);
    counter(&o, "leash_subscriptions_total", "Channel subscriptions written.", st->subscriptions);
    gauge(&o, "leash_locks_held", "Lock handles that hold their lock now.", st->held_now);
    gauge(&o, "leash_acquires_waiting", "Acquires asleep until a release now.", st->waiting_now);
    counter(&o, "leash_evicting_servers_total",
            "Servers whose maxmemory-policy can evict a held lock (warned once each).",
            st->evicting_servers);
    return o.at;
}
