/* SPDX-License-Identifier: MIT */
/*
 * leash-bench-floor: the lock handoff with bare hiredis and no leash, the
 * floor that leash-bench-handoff's figures stand on.
 *
 * On one libev loop, three hiredis connections to the same redis-server: a
 * releaser runs a script that deletes the lock key and publishes on a
 * channel; a subscriber to that channel answers each message by having a
 * third connection run a script that takes the key (SET NX PX). A sample is
 * the time from the releaser's reply to the taker's reply, the same span
 * as leash-bench-handoff's release callback -> next acquire callback, with
 * the least work a handoff by pub/sub can do. Both scripts are loaded once
 * and called by EVALSHA, as leash calls its own. Rounds are --hold ms
 * apart, as the handoffs are, because a CPU that has idled answers slower
 * than a busy one.
 *
 * Reference, same server and CPUs: one round trip (redis-benchmark -c 1
 * -P 1 PING), so that this floor and leash's handoff can be compared in
 * round trips across programs.
 *
 * Output: one markdown table and notes; with --samples DIR, the sorted
 * samples in DIR/handoff-floor.txt for scripts/bench's plot. Exit 0 when
 * the floor ran.
 */
#define _GNU_SOURCE

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>
#include <hiredis/adapters/libev.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "common.h"
#include "redis_server.h"

#define MAX_ROUNDS 100000
#define FLOOR_KEY "bench:floor"
#define FLOOR_CHANNEL "bench:floor:released"

static const char release_lua[] = "redis.call('del', KEYS[1])\n"
                                  "redis.call('publish', KEYS[2], 'x')\n"
                                  "return 0\n";
static const char take_lua[] = "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', 30000) then\n"
                               "  return 1\n"
                               "end\n"
                               "return 0\n";

typedef struct floor_run {
    struct ev_loop *loop;
    redisAsyncContext *rel, *take, *sub;
    char release_sha[41], take_sha[41];
    ev_timer pause, guard;
    int hold_ms, rounds, done, failed;
    int64_t t_rel;
    int64_t *lat;
} floor_run;

static void floor_pause(floor_run *fr) {
    ev_now_update(fr->loop);
    ev_timer_set(&fr->pause, (double)fr->hold_ms / 1000., 0.);
    ev_timer_start(fr->loop, &fr->pause);
}

static void floor_fail(floor_run *fr) {
    fr->failed = 1;
    ev_break(fr->loop, EVBREAK_ALL);
}

static void on_taken(redisAsyncContext *ac, void *reply, void *arg) {
    floor_run *fr = arg;
    redisReply *r = reply;

    (void)ac;
    if (r == NULL || r->type != REDIS_REPLY_INTEGER || r->integer != 1) {
        floor_fail(fr);
        return;
    }
    fr->lat[fr->done++] = bench_now_ns() - fr->t_rel;
    if (fr->done == fr->rounds)
        ev_break(fr->loop, EVBREAK_ALL);
    else
        floor_pause(fr);
}

static void on_released(redisAsyncContext *ac, void *reply, void *arg) {
    floor_run *fr = arg;

    (void)ac;
    if (reply == NULL) {
        floor_fail(fr);
        return;
    }
    fr->t_rel = bench_now_ns();
}

static void on_message(redisAsyncContext *ac, void *reply, void *arg) {
    floor_run *fr = arg;
    redisReply *r = reply;

    (void)ac;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != REDIS_REPLY_STRING)
        return;
    if (strcmp(r->element[0]->str, "subscribe") == 0) {
        floor_pause(fr); /* subscribed: the first round starts */
    } else if (strcmp(r->element[0]->str, "message") == 0) {
        if (redisAsyncCommand(fr->take, on_taken, fr, "EVALSHA %s 1 %s %s", fr->take_sha, FLOOR_KEY,
                              "5eed0123456789abcdef0123456789ab") != REDIS_OK)
            floor_fail(fr);
    }
}

static void on_pause(struct ev_loop *loop, ev_timer *w, int revents) {
    floor_run *fr = (floor_run *)((char *)w - offsetof(floor_run, pause));

    (void)loop;
    (void)revents;
    if (redisAsyncCommand(fr->rel, on_released, fr, "EVALSHA %s 2 %s %s", fr->release_sha,
                          FLOOR_KEY, FLOOR_CHANNEL) != REDIS_OK)
        floor_fail(fr);
}

static void on_guard(struct ev_loop *loop, ev_timer *w, int revents) {
    (void)loop;
    (void)revents;
    floor_fail((floor_run *)((char *)w - offsetof(floor_run, guard)));
}

static redisAsyncContext *floor_connect(floor_run *fr, int port) {
    redisAsyncContext *ac = redisAsyncConnect("127.0.0.1", port);

    if (ac == NULL)
        return NULL;
    if (ac->err || redisLibevAttach(fr->loop, ac) != REDIS_OK) {
        redisAsyncFree(ac);
        return NULL;
    }
    return ac;
}

static int load(redisContext *admin, const char *src, char sha[41]) {
    redisReply *r = redisCommand(admin, "SCRIPT LOAD %s", src);
    int ok = r != NULL && r->type == REDIS_REPLY_STRING && r->len == 40;

    if (ok)
        memcpy(sha, r->str, 41);
    if (r != NULL)
        freeReplyObject(r);
    return ok ? 0 : -1;
}

/* Runs the rounds; fr->lat gets the sorted samples. 0 or -1. */
static int measure_floor(int port, redisContext *admin, floor_run *fr) {
    int rc = -1;

    if (load(admin, release_lua, fr->release_sha) != 0 || load(admin, take_lua, fr->take_sha) != 0)
        return -1;
    if ((fr->loop = ev_loop_new(EVFLAG_AUTO)) == NULL)
        return -1;
    ev_timer_init(&fr->pause, on_pause, 0., 0.);
    ev_timer_init(&fr->guard, on_guard,
                  10. + (double)fr->rounds * (double)(fr->hold_ms + 5) / 1000., 0.);
    ev_timer_start(fr->loop, &fr->guard);
    fr->rel = floor_connect(fr, port);
    fr->take = floor_connect(fr, port);
    fr->sub = floor_connect(fr, port);
    if (fr->rel && fr->take && fr->sub &&
        redisAsyncCommand(fr->sub, on_message, fr, "SUBSCRIBE %s", FLOOR_CHANNEL) == REDIS_OK)
        ev_run(fr->loop, 0);
    else
        fr->failed = 1;
    ev_timer_stop(fr->loop, &fr->pause);
    ev_timer_stop(fr->loop, &fr->guard);
    if (!fr->failed && fr->done == fr->rounds) {
        qsort(fr->lat, (size_t)fr->rounds, sizeof(fr->lat[0]), bench_cmp_i64);
        rc = 0;
    }
    /* The callbacks see NULL replies from here on. */
    if (fr->rel)
        redisAsyncFree(fr->rel);
    if (fr->take)
        redisAsyncFree(fr->take);
    if (fr->sub)
        redisAsyncFree(fr->sub);
    ev_loop_destroy(fr->loop);
    return rc;
}

static void usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s [options]\n"
            "  -n, --rounds N    handoffs (default 500)\n"
            "      --hold MS     time between rounds (default 5, as leash-bench-handoff's hold)\n"
            "      --samples DIR write the sorted samples to DIR/handoff-floor.txt\n"
            "      --no-pin      do not pin redis-server and the benchmark to CPUs\n",
            argv0);
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {
        {"rounds", required_argument, NULL, 'n'},  {"hold", required_argument, NULL, 'h'},
        {"samples", required_argument, NULL, 's'}, {"no-pin", no_argument, NULL, 'p'},
        {"help", no_argument, NULL, '?'},          {NULL, 0, NULL, 0}};
    int pin = 1, opt, ok = 0, have_rtt;
    const char *samples_dir = NULL;
    floor_run fr;
    bench_rb rtt;
    bench_steal steal;
    bench_cpus cpus;
    redisContext *admin;
    test_redis r;

    memset(&fr, 0, sizeof fr);
    fr.rounds = 500;
    fr.hold_ms = 5;
    while ((opt = getopt_long(argc, argv, "n:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'n':
            fr.rounds = atoi(optarg);
            break;
        case 'h':
            fr.hold_ms = atoi(optarg);
            break;
        case 's':
            samples_dir = optarg;
            break;
        case 'p':
            pin = 0;
            break;
        default:
            usage(argv[0]);
            return 2;
        }
    }
    if (fr.rounds < 10 || fr.rounds > MAX_ROUNDS || fr.hold_ms < 0 || fr.hold_ms > 10000) {
        usage(argv[0]);
        return 2;
    }
    if ((fr.lat = calloc((size_t)fr.rounds, sizeof(*fr.lat))) == NULL)
        return 1;
    signal(SIGPIPE, SIG_IGN);
    if (bench_start_server(&r, NULL, pin, &cpus) != 0) {
        fprintf(stderr, "floor: could not start redis-server\n");
        free(fr.lat);
        return 1;
    }
    have_rtt = bench_ping_rtt(r.port, &rtt) == 0;
    fprintf(stderr, "floor: %d rounds %d ms apart...\n", fr.rounds, fr.hold_ms);
    bench_steal_begin(&cpus, &steal);
    if ((admin = bench_connect(r.port)) != NULL) {
        ok = measure_floor(r.port, admin, &fr) == 0;
        redisFree(admin);
    }
    bench_steal_end(&cpus, &steal);
    test_redis_stop(&r);
    if (ok && samples_dir != NULL)
        bench_write_samples("floor", samples_dir, "floor", "floor: bare hiredis, one loop", fr.lat,
                            fr.rounds);

    printf("### Handoff floor: bare hiredis (leash-bench-floor)\n\n");
    printf("| handoff | rounds | p50 µs | p99 µs | max µs | p50 in round trips |\n");
    printf("|---|---:|---:|---:|---:|---:|\n");
    if (ok) {
        double p50 = (double)bench_pct(fr.lat, fr.rounds, 0.50) / 1e3;
        printf("| bare hiredis, one loop, rounds %d ms apart | %d | **%.0f** | **%.0f** | %.0f | ",
               fr.hold_ms, fr.rounds, p50, (double)bench_pct(fr.lat, fr.rounds, 0.99) / 1e3,
               (double)fr.lat[fr.rounds - 1] / 1e3);
        if (have_rtt && rtt.p50_us > 0.)
            printf("%.1f |\n", p50 / rtt.p50_us);
        else
            printf("n/a |\n");
    } else {
        printf("| bare hiredis, one loop | failed | | | | |\n");
    }
    if (have_rtt)
        printf("| reference: one round trip (redis-benchmark -c 1 -P 1 PING) | 20000 | %.0f | %.0f "
               "| %.0f | 1.0 |\n",
               rtt.p50_us, rtt.p99_us, rtt.max_us);
    printf("\nThe least a handoff by pub/sub costs, without leash: a releaser's script deletes "
           "the key and publishes; the subscriber's message makes a third connection run a "
           "script that takes the key (SET NX PX); both by EVALSHA, all on one libev loop. "
           "Sample: the releaser's reply -> the taker's reply, the span of "
           "leash-bench-handoff's release callback -> next acquire callback. Compare its p50 "
           "in round trips with the handoff's: both programs measure the round trip on their "
           "own server.\n");
    printf("- %.2f s", (double)steal.wall_ns / 1e9);
    if (ok)
        printf("; min %.0f µs", (double)fr.lat[0] / 1e3);
    bench_print_steal(&steal);
    printf("\n\n");
    bench_print_cpus(&cpus);
    free(fr.lat);
    return ok ? 0 : 1;
}
