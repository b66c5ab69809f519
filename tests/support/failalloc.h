/* SPDX-License-Identifier: MIT */
/*
 * A failing allocator for tests: makes the n-th allocation of the code
 * under test return NULL, and counts what it leaves allocated.
 *
 * How it hooks in: the test program is linked with
 *
 *     -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=free
 *
 * (tests/CMakeLists.txt: link the target with leash_test_failalloc, which
 * adds failalloc.c and these options). GNU ld then sends every call to
 * those functions made by the objects of the program, leash's static
 * library included, to the __wrap_ functions of failalloc.c. Shared
 * libraries (hiredis, libc) are not relinked, so their own allocations are
 * neither counted nor failed: an allocation failure is injected into
 * leash's code, not into hiredis's (which aborts on OOM in 0.14 anyway).
 * tests/support/sim.c allocates through __real_malloc and friends, so the
 * harness never counts as the code under test.
 *
 * Counted as one allocation each: malloc, calloc, realloc (also one that
 * grows or shrinks a block: it can fail too) and strdup (which allocates
 * through the counted malloc). Not wrapped: strndup, asprintf,
 * posix_memalign, reallocarray; leash uses none of them today.
 *
 * One thread only: the counters are plain globals.
 */
#ifndef LEASH_TESTS_FAILALLOC_H
#define LEASH_TESTS_FAILALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* From now on, the n-th allocation (1-based, counted from this call)
 * returns NULL, once; the ones after it succeed again. Resets the count
 * and the failed flag. n <= 0 arms nothing (same as failalloc_disarm). */
void failalloc_arm(long n);

/* No allocation fails any more (a pending armed failure is forgotten).
 * The count keeps running. */
void failalloc_disarm(void);

/* Allocations (successful or not) since the last failalloc_arm(), or since
 * the program started. */
long failalloc_count(void);

/* 1 once the armed failure has happened, 0 before (and after a new arm). */
int failalloc_failed(void);

/* Starts a new leak window: failalloc_outstanding() counts from here. */
void failalloc_reset(void);

/* Blocks allocated through the wrappers since the last failalloc_reset()
 * (or the start) and not freed yet. Blocks are tracked by address: freeing
 * a block made before the reset, or one that hiredis allocated, does not
 * make this go down; a realloc keeps its block's window. For leak checks
 * in builds without AddressSanitizer: after leash_client_free(), 0 means
 * leash gave back everything it took since the reset. */
long failalloc_outstanding(void);

#ifdef __cplusplus
}
#endif

#endif
