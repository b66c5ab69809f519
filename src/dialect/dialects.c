/* SPDX-License-Identifier: MIT */
/*
 * The dialects of leash, made ready once per process: every dialect's
 * script SHA1s, before any client exists. This file uses each dialect
 * (leash.c with family.c and multi.c, redisson.c) and what they share
 * (common.c);
 * none of them uses it (scripts/check-layers), so a new dialect adds its
 * scripts' init here and nowhere else.
 */
#include "dialect/dialect.h"

#include <pthread.h>

#include "dialect/family.h"
#include "dialect/multi.h"

/* What leash__dialects_init does once. */
static void make_scripts(void) {
    leash__leash_scripts_init();
    leash__common_scripts_init();
    leash__family_scripts_init();
    leash__redisson_scripts_init();
    leash__state_scripts_init();
    leash__multi_scripts_init();
}

/* Once per process, whichever thread makes the first client; a thread
 * that comes while another makes them sleeps in pthread_once until they
 * are made (base/token.c uses pthread_once too) rather than spinning. */
void leash__dialects_init(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    (void)pthread_once(&once, make_scripts);
}
