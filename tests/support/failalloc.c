/* SPDX-License-Identifier: MIT */
/*
 * The --wrap= allocator of failalloc.h. Needs the program to be linked
 * with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,
 * --wrap=free: without it, the __real_ names below do not resolve.
 */
#include "failalloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The names are fixed by GNU ld's --wrap (hence the reserved __ prefix). */
void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void __real_free(void *p);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
char *__wrap_strdup(const char *s);
void __wrap_free(void *p);

static long count;               /* allocations since the last arm */
static long fail_at;             /* 0: nothing armed */
static int failed;               /* the armed failure happened */
static unsigned long window = 1; /* the leak window new blocks belong to */
static long outstanding;         /* live blocks of the current window */

void failalloc_arm(long n) {
    count = 0;
    failed = 0;
    fail_at = n > 0 ? n : 0;
}

void failalloc_disarm(void) {
    fail_at = 0;
}

long failalloc_count(void) {
    return count;
}

int failalloc_failed(void) {
    return failed;
}

void failalloc_reset(void) {
    window++;
    outstanding = 0;
}

long failalloc_outstanding(void) {
    return outstanding;
}

static int next_fails(void) {
    count++;
    if (fail_at != 0 && count == fail_at) {
        fail_at = 0;
        failed = 1;
        return 1;
    }
    return 0;
}

/*
 * Live blocks, by address, with the window each was made in: an open
 * addressing table with linear probing. By address rather than in a header
 * before each block, because leash may free what someone else allocated
 * (and the reverse) without that being a leak of its own.
 */
typedef struct slot {
    void *p;
    unsigned long window;
} slot;

static slot *table;
static size_t cap, used; /* cap is 0 or a power of two */

static size_t slot_of(const void *p) {
    uint64_t h = (uint64_t)(uintptr_t)p * UINT64_C(0x9E3779B97F4A7C15);
    return (size_t)(h >> 32) & (cap - 1);
}

static void grow(void) {
    slot *old = table;
    size_t old_cap = cap, i;

    cap = cap ? cap * 2 : 1024;
    table = __real_calloc(cap, sizeof(*table));
    if (table == NULL)
        abort(); /* the test's own bookkeeping: nothing sensible to do */
    for (i = 0; i < old_cap; i++) {
        if (old[i].p != NULL) {
            size_t j = slot_of(old[i].p);
            while (table[j].p != NULL)
                j = (j + 1) & (cap - 1);
            table[j] = old[i];
        }
    }
    __real_free(old);
}

static void track(void *p, unsigned long w) {
    size_t j;

    if (2 * (used + 1) > cap)
        grow();
    j = slot_of(p);
    while (table[j].p != NULL)
        j = (j + 1) & (cap - 1);
    table[j].p = p;
    table[j].window = w;
    used++;
    if (w == window)
        outstanding++;
}

/* Forgets p; returns its window, or 0 if it was not tracked. */
static unsigned long untrack(void *p) {
    size_t i, j, k;
    unsigned long w;

    if (cap == 0)
        return 0;
    for (i = slot_of(p); table[i].p != p; i = (i + 1) & (cap - 1))
        if (table[i].p == NULL)
            return 0;
    w = table[i].window;
    if (w == window)
        outstanding--;
    used--;
    /* Backward shift: move up every later entry of the run whose home
     * slot does not lie between the hole and itself. */
    for (j = (i + 1) & (cap - 1); table[j].p != NULL; j = (j + 1) & (cap - 1)) {
        k = slot_of(table[j].p);
        if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
            table[i] = table[j];
            i = j;
        }
    }
    table[i].p = NULL;
    return w;
}

void *__wrap_malloc(size_t size) {
    void *p;

    if (next_fails())
        return NULL;
    p = __real_malloc(size);
    if (p != NULL)
        track(p, window);
    return p;
}

void *__wrap_calloc(size_t n, size_t size) {
    void *p;

    if (next_fails())
        return NULL;
    p = __real_calloc(n, size);
    if (p != NULL)
        track(p, window);
    return p;
}

void *__wrap_realloc(void *p, size_t size) {
    unsigned long w;
    void *q;

    if (p == NULL)
        return __wrap_malloc(size);
    if (next_fails())
        return NULL; /* p stays valid, as with a real failure */
    q = __real_realloc(p, size);
    if (q == NULL && size != 0)
        return NULL;
    w = untrack(p); /* moved, or freed by realloc(p, 0) */
    if (q != NULL && w != 0)
        track(q, w);
    return q;
}

char *__wrap_strdup(const char *s) {
    size_t len = strlen(s) + 1;
    char *d = __wrap_malloc(len);

    if (d != NULL)
        memcpy(d, s, len);
    return d;
}

void __wrap_free(void *p) {
    if (p == NULL)
        return;
    untrack(p);
    __real_free(p);
}
