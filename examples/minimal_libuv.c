/* SPDX-License-Identifier: MIT */
/* minimal_libuv [REDIS_URL]: minimal.c on a libuv loop: take the lock "report",
 * do a one-second job, give the lock back. */
#define _POSIX_C_SOURCE 200809L /* <uv.h> needs POSIX types */
#include <inttypes.h>
#include <leash/adapters/libuv.h> /* brings <uv.h> and <leash/leash.h> */
#include <leash/url.h>
#include <signal.h>
#include <stdio.h>

static uv_timer_t job; /* the pretend work: a timer that fires once, after 1 s */
static int exit_code = 1;

static void on_released(leash_lock *lock, int status, void *arg) {
    (void)arg;
    printf("job done, lock released: %s\n", leash_strerror(status));
    exit_code = status == LEASH_OK ? 0 : 1;
    leash_client_free(leash_lock_client(lock)); /* its handles close: uv_run returns */
}

static void on_job_done(uv_timer_t *timer) {
    leash_release(timer->data, on_released, NULL);
}

/* The hold can no longer be trusted (Redis gone, or we stalled): stop working now. */
static void on_lost(leash_lock *lock, int reason, void *arg) {
    (void)arg;
    printf("lost the lock (%s): job stopped\n", leash_lost_reason_name(reason));
    uv_timer_stop(&job);
    leash_client_free(leash_lock_client(lock));
}

static void on_acquired(leash_lock *lock, int status, void *arg) {
    (void)arg;
    if (status != LEASH_OK) { /* LEASH_ETIMEDOUT after 5 s, LEASH_ECONN, ... */
        printf("no lock: %s\n", leash_strerror(status));
        leash_client_free(leash_lock_client(lock));
        return;
    }
    printf("got the lock, fence %" PRIu64 "\n", leash_fence(lock)); /* pass it to your storage */
    job.data = lock;
    uv_timer_start(&job, on_job_done, 1000, 0); /* meanwhile the watchdog renews the lease */
}

int main(int argc, char **argv) {
    uv_loop_t *loop = uv_default_loop();
    leash_options opts;
    leash_client *c;
    leash_lock *lock;
    leash_url url; /* redis://[[user]:password@]host[:port][/db] or unix:///path */
    char err[LEASH_URL_ERR_MAX];
    if (leash_url_parse(argc > 1 ? argv[1] : "redis://127.0.0.1", &url, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err); /* what is wrong, never the password */
        return 2;
    }
    leash_options_init(&opts);    /* a default for every field: 30 s lease, ... */
    leash_url_apply(&url, &opts); /* host, port, db, ...; leash_client_new copies them */
    signal(SIGPIPE, SIG_IGN);     /* a dropped connection is an error, not a signal */
    if (leash_client_new(&c, &opts) != LEASH_OK || leash_libuv_attach(loop, c) != LEASH_OK)
        return 1;
    lock = leash_lock_new(c, "report");
    leash_on_lost(lock, on_lost, NULL);
    uv_timer_init(loop, &job);
    if (leash_acquire(lock, 5000, on_acquired, NULL) != LEASH_OK) /* wait up to 5 s */
        return 1;
    uv_run(loop, UV_RUN_DEFAULT); /* returns once the client is freed and its handles closed */
    uv_close((uv_handle_t *)&job, NULL);
    uv_run(loop, UV_RUN_DEFAULT); /* finishes that close */
    return uv_loop_close(loop) == 0 ? exit_code : 1;
}
