/* SPDX-License-Identifier: MIT */
/*
 * A wall clock that runs ahead of the machine's or behind it, for a
 * redis-server of the tests (redis_server.h: test_redis_config's
 * clock_shift_ms). The server runs with this library in LD_PRELOAD and
 * LEASH_TEST_CLOCK_SHIFT_MS=<ms> in its environment; every way Redis reads
 * the wall clock (gettimeofday, time, clock_gettime of CLOCK_REALTIME and
 * CLOCK_REALTIME_COARSE) then answers that many milliseconds later or
 * earlier. TIME, the clock of scripts and key expiry all read these, so
 * they agree with each other as on a host whose clock is off; the
 * monotonic clocks (timers, durations) are left alone.
 *
 * A step: with LEASH_TEST_CLOCK_SHIFT_FILE=<path> too, the shift is the
 * number in that file (ms) when it has one, read again at most every
 * STEP_READ_MS of the monotonic clock: writing another number there steps
 * the server's clock (test_redis_step_clock), as ntpdate or an operator's
 * `date -s` would.
 *
 * A drift: "<ms> <ppm> <since> <until>" in that file (since and until in
 * CLOCK_MONOTONIC ns, which every process of the machine shares) makes
 * the shift <ms> at since, growing by <ppm> millionths of the monotonic
 * time that passes (negative: shrinking) until `until`, and staying where
 * it got to after it (test_redis_drift_clock): a clock running fast or
 * slow for a while, with no step when the drift ends.
 *
 * Why not Debian's faketime (libfaketime): Debian's redis-server is linked
 * with jemalloc, and under libfaketime it hangs before it answers a first
 * PING (libfaketime looks up the real clock_gettime with dlsym, which
 * allocates; jemalloc's start reads the clock, which re-enters
 * libfaketime). This library reads the clock with the system call itself
 * and allocates nothing.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* syscall */
#endif

#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* The shift file is read again at most this often. */
#define STEP_READ_MS 10

/* The shift as the environment or the file last said: ns at drift_since,
 * then drift_ppm millionths of the monotonic time from drift_since to
 * drift_until (a step: ppm 0). LLONG_MIN until the environment was read. */
static atomic_llong base_ns = LLONG_MIN;
static atomic_llong drift_ppm;
static atomic_llong drift_since;
static atomic_llong drift_until;
/* Monotonic ns of the shift file's last read. */
static atomic_llong file_read_at;

/* The next integer of buf[*at..n) (after blanks) into *v; 0, or -1. */
static int next_number(const char *buf, long n, long *at, long long *v) {
    long i = *at;
    int neg = 0;

    while (i < n && (buf[i] == ' ' || buf[i] == '\n'))
        i++;
    if (i < n && buf[i] == '-')
        neg = 1, i++;
    if (i >= n || buf[i] < '0' || buf[i] > '9')
        return -1;
    for (*v = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++)
        *v = *v * 10 + (buf[i] - '0');
    if (neg)
        *v = -*v;
    *at = i;
    return 0;
}

/* The shift file's step ("<ms>") or drift ("<ms> <ppm> <since> <until>")
 * into the atomics; 0, or -1 when it has neither (no file yet). Only
 * system calls: nothing allocates. */
static int read_shift_file(const char *path) {
    char buf[128];
    long long ms, ppm = 0, since = 0, until = 0;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    long n, at = 0;

    if (fd < 0)
        return -1;
    n = (long)syscall(SYS_read, fd, buf, sizeof(buf) - 1);
    syscall(SYS_close, fd);
    if (n <= 0 || next_number(buf, n, &at, &ms) != 0)
        return -1;
    if (next_number(buf, n, &at, &ppm) == 0 &&
        (next_number(buf, n, &at, &since) != 0 || next_number(buf, n, &at, &until) != 0))
        return -1;
    atomic_store_explicit(&drift_ppm, ppm, memory_order_relaxed);
    atomic_store_explicit(&drift_since, since, memory_order_relaxed);
    atomic_store_explicit(&drift_until, until, memory_order_relaxed);
    atomic_store_explicit(&base_ns, ms * 1000000LL, memory_order_relaxed);
    return 0;
}

/* The shift in nanoseconds. The environment is read once; a thread that
 * races the first read reads the same value. The file, if any, again
 * after STEP_READ_MS. */
static long long shift_ns(void) {
    const char *path = getenv("LEASH_TEST_CLOCK_SHIFT_FILE");
    long long ns, ppm, since, until, now;
    struct timespec mono;

    if (atomic_load_explicit(&base_ns, memory_order_relaxed) == LLONG_MIN) {
        const char *ms = getenv("LEASH_TEST_CLOCK_SHIFT_MS");

        atomic_store_explicit(&base_ns, ms ? strtoll(ms, NULL, 10) * 1000000LL : 0,
                              memory_order_relaxed);
    }
    if (path == NULL || syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &mono) != 0)
        return atomic_load_explicit(&base_ns, memory_order_relaxed);
    now = (long long)mono.tv_sec * 1000000000LL + mono.tv_nsec;
    if (now - atomic_load_explicit(&file_read_at, memory_order_relaxed) >=
        STEP_READ_MS * 1000000LL) {
        atomic_store_explicit(&file_read_at, now, memory_order_relaxed);
        read_shift_file(path);
    }
    ns = atomic_load_explicit(&base_ns, memory_order_relaxed);
    ppm = atomic_load_explicit(&drift_ppm, memory_order_relaxed);
    since = atomic_load_explicit(&drift_since, memory_order_relaxed);
    until = atomic_load_explicit(&drift_until, memory_order_relaxed);
    if (ppm != 0 && now > since)
        ns += ((now < until ? now : until) - since) / 1000 * ppm / 1000;
    return ns;
}

/* The machine's clock id with the shift added. */
static int shifted_now(clockid_t id, struct timespec *ts) {
    long long ns;

    if (syscall(SYS_clock_gettime, id, ts) != 0)
        return -1;
    ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + shift_ns();
    ts->tv_sec = (time_t)(ns / 1000000000LL);
    ts->tv_nsec = (long)(ns % 1000000000LL);
    if (ts->tv_nsec < 0) {
        ts->tv_nsec += 1000000000L;
        ts->tv_sec--;
    }
    return 0;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    if (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)
        return shifted_now(id, ts);
    return syscall(SYS_clock_gettime, id, ts) == 0 ? 0 : -1;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    struct timespec ts;

    if (tz) /* obsolete: glibc zeroes it */
        memset(tz, 0, sizeof(struct timezone));
    if (shifted_now(CLOCK_REALTIME, &ts) != 0)
        return -1;
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *out) {
    struct timespec ts;

    if (shifted_now(CLOCK_REALTIME, &ts) != 0)
        return (time_t)-1;
    if (out)
        *out = ts.tv_sec;
    return ts.tv_sec;
}
