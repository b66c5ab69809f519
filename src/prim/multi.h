/* SPDX-License-Identifier: MIT */
/*
 * The multi-lock (prim/multi.c): several mutexes held as one handle. Its
 * part of leash_lock is l->multi; its leash__prim answers the queries a
 * single hold cannot (valid_ms, renewals, member_fence).
 */
#ifndef LEASH_PRIM_MULTI_H
#define LEASH_PRIM_MULTI_H

#include <stdint.h>

#include "prim/lock.h"

/* The kind of a multi-lock handle. */
extern const leash__prim leash__multi_prim;

/* A multi-lock of names[0..n) (1..LEASH_MULTI_MAX distinct names) for
 * leash_multi_lock_new; NULL (logged) on bad names or no memory. */
leash_lock *leash__multi_make(leash__core *core, const char *const *names, int n);

#endif
