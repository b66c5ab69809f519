/* SPDX-License-Identifier: MIT */
/*
 * A leash client against the fake Redis, with one programmable misbehaviour:
 * the shared set-up of test_hostile.c and test_hiredis_asserts.c.
 */
#ifndef LEASH_TESTS_FAULTS_HOSTILE_H
#define LEASH_TESTS_FAULTS_HOSTILE_H

#include <stddef.h>

#include "fake_redis.h"
#include "fixture.h"

enum {
    HOSTILE_REPLY,      /* send `reply` instead of the real answer */
    HOSTILE_SILENT,     /* send `reply` (may be empty), then nothing on that connection */
    HOSTILE_CLOSE,      /* send `reply` (may be empty), then close */
    HOSTILE_AND_REPLY_2 /* the real answer is `reply`, then `reply2` follows */
};

typedef struct hostile {
    int script;        /* FR_ACQUIRE, FR_RELEASE, FR_RENEW, or FR_NOT_A_SCRIPT with cmd */
    const char *cmd;   /* a command name, when script is FR_NOT_A_SCRIPT */
    const char *reply; /* raw bytes */
    size_t reply_len;  /* 0: strlen(reply) */
    const char *reply2;
    int action;
    int times; /* how many commands to hit; -1 = all, 0 = none (behave) */
    int hits;
} hostile;

typedef struct hworld {
    struct ev_loop *loop;
    fake_redis *f;
    struct tls_front *front; /* with hw_tls */
    leash_client *c;
    hostile h;
} hworld;

/* The client's command timeout (300 ms unless a test changes it first). */
extern int64_t hw_command_timeout_ms;
/* 1: the client reaches the fake through a TLS front (tls_front.h), so
 * that every hostile reply arrives over TLS (test_hostile_tls). */
extern int hw_tls;
void hw_up(hworld *w, int64_t lease_ms);
void hw_down(hworld *w);
/* Misbehave on the next `times` commands that match. */
void hw_set(hworld *w, int script, const char *cmd, int action, const char *reply, int times);
void hw_behave(hworld *w);
/* The client's subscriber connection on the fake (NULL if none). */
fr_conn *hw_sub_conn(hworld *w);
fr_conn *hw_cmd_conn(hworld *w);

#endif
