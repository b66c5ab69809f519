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

/* LLONG_MIN until the environment was read. */
static atomic_llong shift_ns_read = LLONG_MIN;
/* Monotonic ns of the shift file's last read. */
static atomic_llong file_read_at;

/* The number in the shift file in ns, into *ns; 0, or -1 when it has none
 * (no file yet). Only system calls: nothing allocates. */
static int shift_from_file(const char *path, long long *ns) {
    char buf[32];
    long long v = 0;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC), neg = 0;
    long n, i = 0;

    if (fd < 0)
        return -1;
    n = (long)syscall(SYS_read, fd, buf, sizeof(buf) - 1);
    syscall(SYS_close, fd);
    if (n <= 0)
        return -1;
    if (buf[0] == '-')
        neg = 1, i = 1;
    if (i >= n || buf[i] < '0' || buf[i] > '9')
        return -1;
    for (; i < n && buf[i] >= '0' && buf[i] <= '9'; i++)
        v = v * 10 + (buf[i] - '0');
    *ns = (neg ? -v : v) * 1000000LL;
    return 0;
}

/* The shift in nanoseconds. The environment is read once; a thread that
 * races the first read reads the same value. The file, if any, again
 * after STEP_READ_MS. */
static long long shift_ns(void) {
    long long ns = atomic_load_explicit(&shift_ns_read, memory_order_relaxed);
    const char *path = getenv("LEASH_TEST_CLOCK_SHIFT_FILE");
    struct timespec mono;

    if (ns == LLONG_MIN) {
        const char *ms = getenv("LEASH_TEST_CLOCK_SHIFT_MS");

        ns = ms ? strtoll(ms, NULL, 10) * 1000000LL : 0;
        atomic_store_explicit(&shift_ns_read, ns, memory_order_relaxed);
    }
    if (path != NULL && syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &mono) == 0) {
        long long now = (long long)mono.tv_sec * 1000000000LL + mono.tv_nsec, v;
        if (now - atomic_load_explicit(&file_read_at, memory_order_relaxed) >=
            STEP_READ_MS * 1000000LL) {
            atomic_store_explicit(&file_read_at, now, memory_order_relaxed);
            if (shift_from_file(path, &v) == 0) {
                ns = v;
                atomic_store_explicit(&shift_ns_read, ns, memory_order_relaxed);
            }
        }
    }
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
