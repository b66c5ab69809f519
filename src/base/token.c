/* SPDX-License-Identifier: MIT */
#include "base/token.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <sys/random.h>

/*
 * Randomness comes from the kernel (getrandom) in blocks of RANDOM_BLOCK
 * bytes, one block per thread, so that a token does not cost a system
 * call (one per acquire was a tenth of a cycle's CPU). A block never
 * outlives a fork: a child must not hand out the tokens its parent will
 * (prefork servers fork after making clients in principle, not in
 * practice): a fork handler moves the generation on, and a thread's block
 * of an older generation is thrown away.
 */
#define RANDOM_BLOCK 512

static atomic_uint fork_generation = 1;
static pthread_once_t at_fork_once = PTHREAD_ONCE_INIT;

static void after_fork_in_child(void) {
    atomic_fetch_add(&fork_generation, 1);
}

static void watch_forks(void) {
    (void)pthread_atfork(NULL, NULL, after_fork_in_child);
}

static _Thread_local struct {
    unsigned char bytes[RANDOM_BLOCK];
    size_t used;
    unsigned generation; /* 0: never filled */
} block;

static int fill_random(unsigned char *buf, size_t len) {
    size_t got = 0;
    while (got < len) {
        ssize_t n = getrandom(buf + got, len - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        got += (size_t)n;
    }
    return 0;
}

/* len (at most RANDOM_BLOCK) random bytes into out. 0, or -1. */
static int random_bytes(unsigned char *out, size_t len) {
    unsigned gen;

    (void)pthread_once(&at_fork_once, watch_forks);
    gen = atomic_load(&fork_generation);
    if (block.generation != gen || block.used + len > RANDOM_BLOCK) {
        if (fill_random(block.bytes, RANDOM_BLOCK) != 0)
            return -1;
        block.generation = gen;
        block.used = 0;
    }
    memcpy(out, block.bytes + block.used, len);
    /* Handed out: not kept where a later read of the block could see it. */
    memset(block.bytes + block.used, 0, len);
    block.used += len;
    return 0;
}

int leash__token_new(char out[LEASH__TOKEN_LEN + 1]) {
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[LEASH__TOKEN_LEN / 2];
    size_t i;

    if (random_bytes(raw, sizeof(raw)) != 0)
        return -1;
    for (i = 0; i < sizeof(raw); i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    out[LEASH__TOKEN_LEN] = '\0';
    return 0;
}

uint64_t leash__random_below(uint64_t n) {
    uint64_t x = 0;
    if (random_bytes((unsigned char *)&x, sizeof(x)) != 0)
        x = (uint64_t)(uintptr_t)&x; /* jitter only: any value will do */
    return x % n;
}
