/* SPDX-License-Identifier: MIT */
/* minimal [REDIS_URL]: take the lock "report", do a one-second job, give the lock back. */
#include <inttypes.h>
#include <leash/adapters/libev.h> /* brings <ev.h> and <leash/leash.h> */
#include <leash/url.h>
#include <signal.h>
#include <stdio.h>

static ev_timer job; /* the pretend work: a timer that fires once, after 1 s */
static int exit_code = 1;

static void on_released(leash_lock *lock, int status, void *arg) {
    (void)arg;
    printf("job done, lock released: %s\n", leash_strerror(status));
    exit_code = status == LEASH_OK ? 0 : 1;
    leash_client_free(leash_lock_client(lock)); /* fine in a callback; frees the lock too */
}

static void on_job_done(struct ev_loop *loop, ev_timer *w, int revents) {
    (void)loop, (void)revents;
    leash_release(w->data, on_released, NULL);
}

/* The hold can no longer be trusted (Redis gone, or we stalled): stop working now. */
static void on_lost(leash_lock *lock, int reason, void *arg) {
    (void)arg;
    printf("lost the lock (%s): job stopped\n", leash_lost_reason_name(reason));
    ev_timer_stop(EV_DEFAULT, &job);
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
    ev_timer_start(EV_DEFAULT, &job); /* meanwhile the watchdog renews the lease */
}

int main(int argc, char **argv) {
    leash_options opts;
    leash_client *c;
    leash_url url; /* redis://[[user]:password@]host[:port][/db] or unix:///path */
    char err[LEASH_URL_ERR_MAX];
    if (leash_url_parse(argc > 1 ? argv[1] : "redis://127.0.0.1", &url, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err); /* what is wrong, never the password */
        return 2;
    }
    leash_options_init(&opts);    /* a default for every field: 30 s lease, ... */
    leash_url_apply(&url, &opts); /* host, port, db, ...; leash_client_new copies them */
    signal(SIGPIPE, SIG_IGN);     /* a dropped connection is an error, not a signal */
    if (leash_client_new(&c, &opts) != LEASH_OK || leash_libev_attach(EV_DEFAULT, c) != LEASH_OK)
        return 1;
    leash_lock *lock = leash_lock_new(c, "report");
    leash_on_lost(lock, on_lost, NULL);
    ev_timer_init(&job, on_job_done, 1.0, 0.);
    if (leash_acquire(lock, 5000, on_acquired, NULL) != LEASH_OK) /* wait up to 5 s */
        return 1;
    ev_run(EV_DEFAULT, 0); /* returns once the client is freed */
    return exit_code;
}
