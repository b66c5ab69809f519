/* SPDX-License-Identifier: MIT */
/*
 * Callbacks that act on what called them, on the simulated Redis of
 * support/sim.h: a lost callback that acquires again or frees its handle
 * while another callback of the handle is still owed, a callback that
 * frees the whole client while others are queued behind it, and the grant
 * an earlier copy of an attempt may have left behind. Every callback must
 * fire exactly once, nothing may leak (failalloc counts the blocks), and a
 * hold the caller was told it does not have must not live on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <leash/leash.h>

#include "check.h"
#include "failalloc.h"
#include "prim/core.h"
#include "prim/lock.h"
#include "sim_fixture.h"

static sim *S;
static leash_client *C;
static leash_lock *L;
static simfx_rec acq, acq2, rel, lost;
static int reacquire_rc;

/* Grants the oldest pending command, an acquire. */
static void grant(void) {
    simfx_grant(simfx_oldest(S, LS_ACQUIRE));
    sim_run(S);
}

static void up(int64_t lease_ms, int64_t command_timeout_ms) {
    leash_options o;

    failalloc_reset();
    S = sim_new();
    sim_options(S, &o);
    o.lease_ms = lease_ms;
    o.command_timeout_ms = command_timeout_ms;
    o.sub_linger_ms = 0;
    C = simfx_client(S, &o);
    sim_run(S);
    L = leash_lock_new(C, "x");
    CHECK(L != NULL);
    memset(&acq, 0, sizeof(acq));
    memset(&acq2, 0, sizeof(acq2));
    memset(&rel, 0, sizeof(rel));
    memset(&lost, 0, sizeof(lost));
    reacquire_rc = 1;
}

static void down(void) {
    sim_run(S);
    if (C != NULL)
        leash_client_free(C);
    CHECK_EQ_INT(sim_timers_alive(S), 0);
    sim_free(S);
    CHECK_MSG(failalloc_outstanding() == 0, "%ld blocks leaked", failalloc_outstanding());
}

/* A held handle with an extra (reentrant) hold on the wire. */
static void held_with_extra_pending(void) {
    CHECK_EQ_INT(leash_acquire(L, 0, simfx_on_acquired, &acq), LEASH_OK);
    sim_run(S);
    grant();
    CHECK_EQ_INT(acq.status, LEASH_OK);
    memset(&acq, 0, sizeof(acq));
    CHECK_EQ_INT(leash_acquire(L, 0, simfx_on_acquired, &acq), LEASH_OK);
    sim_run(S);
}

static void lost_acquires_again(leash_lock *l, int reason, void *arg) {
    simfx_on_lost(l, reason, arg);
    reacquire_rc = leash_acquire(l, 0, simfx_on_acquired, &acq2);
}

/* The extra hold's callback is owed until the lost callback returned: an
 * acquire from inside the lost callback is refused (it would take the
 * owed callback's place), and the owed one fires once, ECANCELED. */
TEST(a_lost_callback_cannot_acquire_while_an_extra_holds_callback_is_owed) {
    up(3000, 5000);
    leash_lock_set_fixed_lease(L, 3000); /* no renewals in the way */
    leash_on_lost(L, lost_acquires_again, &lost);
    held_with_extra_pending();
    sim_advance(S, 3000); /* the deadline: lost FIXED_LEASE */
    CHECK_EQ_INT(lost.calls, 1);
    CHECK_EQ_INT(lost.status, LEASH_LOST_FIXED_LEASE);
    CHECK_EQ_INT(reacquire_rc, LEASH_ESTATE);
    CHECK_EQ_INT(acq.calls, 1);
    CHECK_EQ_INT(acq.status, LEASH_ECANCELED);
    CHECK_EQ_INT(acq2.calls, 0);
    /* Once the lost callback returned, the handle takes a new acquire. */
    CHECK_EQ_INT(leash_acquire(L, 0, simfx_on_acquired, &acq2), LEASH_OK);
    down();
}

/* Without an extra hold, the lost callback may acquire again, and that
 * acquire's callback is its own (not an ECANCELED meant for another). */
TEST(a_lost_callback_may_acquire_again_and_gets_its_own_answer) {
    up(3000, 5000);
    leash_lock_set_fixed_lease(L, 3000);
    leash_on_lost(L, lost_acquires_again, &lost);
    CHECK_EQ_INT(leash_acquire(L, 0, simfx_on_acquired, &acq), LEASH_OK);
    sim_run(S);
    grant();
    sim_advance(S, 3000);
    CHECK_EQ_INT(lost.calls, 1);
    CHECK_EQ_INT(reacquire_rc, LEASH_OK);
    CHECK_EQ_INT(acq2.calls, 0);
    simfx_answer(S, LS_RELEASE, ":-1\r\n"); /* the lost hold's release goes first */
    CHECK(simfx_pending(S, LS_ACQUIRE) != NULL);
    grant();
    CHECK_EQ_INT(acq2.calls, 1);
    CHECK_EQ_INT(acq2.status, LEASH_OK);
    CHECK(leash_held(L));
    down();
}

static void lost_frees_handle(leash_lock *l, int reason, void *arg) {
    simfx_on_lost(l, reason, arg);
    leash_lock_free(l);
}

/* An extra hold finds the hold taken: lost; the lost callback frees the
 * handle: the extra hold's callback still fires, once, inside the free. */
TEST(an_extra_holds_callback_fires_when_the_lost_callback_frees_the_handle) {
    up(3000, 5000);
    leash_on_lost(L, lost_frees_handle, &lost);
    held_with_extra_pending();
    simfx_answer(S, LS_ACQUIRE, "*4\r\n:0\r\n:2000\r\n:0\r\n:%lld\r\n", simfx_server_ms());
    CHECK_EQ_INT(lost.calls, 1);
    CHECK_EQ_INT(lost.status, LEASH_LOST_EXPIRED);
    CHECK_EQ_INT(acq.calls, 1);
    CHECK_EQ_INT(acq.status, LEASH_ECANCELED);
    down();
}

/* Giving back one of two holds finds them gone: lost; the lost callback
 * frees the handle: the release's callback still fires, once. */
TEST(a_releases_callback_fires_when_the_lost_callback_frees_the_handle) {
    up(3000, 5000);
    leash_on_lost(L, lost_frees_handle, &lost);
    held_with_extra_pending();
    grant(); /* two holds */
    CHECK_EQ_INT(leash_hold_count(L), 2);
    CHECK_EQ_INT(leash_release(L, simfx_on_released, &rel), LEASH_OK);
    sim_run(S);
    simfx_answer(S, LS_RELEASE, ":-1\r\n"); /* not ours: gone */
    CHECK_EQ_INT(lost.calls, 1);
    CHECK_EQ_INT(rel.calls, 1);
    CHECK_EQ_INT(rel.status, LEASH_ECANCELED);
    down();
}

/* The same with a lost callback that does not free: the release's callback
 * comes after it, with the release's own answer. */
TEST(a_partial_release_that_finds_the_hold_gone_answers_after_the_lost_callback) {
    up(3000, 5000);
    leash_on_lost(L, lost_acquires_again, &lost);
    held_with_extra_pending();
    grant();
    CHECK_EQ_INT(leash_release(L, simfx_on_released, &rel), LEASH_OK);
    sim_run(S);
    simfx_answer(S, LS_RELEASE, ":-1\r\n");
    CHECK_EQ_INT(lost.calls, 1);
    CHECK_EQ_INT(reacquire_rc, LEASH_OK);
    CHECK_EQ_INT(rel.calls, 1);
    CHECK_EQ_INT(rel.status, LEASH_ENOTHELD);
    down();
}

static simfx_rec forced;
static int force_rc;

static void lost_forces(leash_lock *l, int reason, void *arg) {
    simfx_on_lost(l, reason, arg);
    force_rc = leash_force_release(l, simfx_on_released, &forced);
}

/* While a release's callback is owed (it comes after the lost callback),
 * the release slot is taken: a force release from the lost callback is
 * refused and cannot take the owed callback's answer. */
TEST(a_lost_callback_cannot_force_release_while_a_releases_callback_is_owed) {
    up(3000, 5000);
    leash_on_lost(L, lost_forces, &lost);
    memset(&forced, 0, sizeof(forced));
    force_rc = 1;
    held_with_extra_pending();
    grant();
    CHECK_EQ_INT(leash_release(L, NULL, NULL), LEASH_OK); /* nobody listens to this one */
    sim_run(S);
    simfx_answer(S, LS_RELEASE, ":-1\r\n");
    CHECK_EQ_INT(lost.calls, 1);
    CHECK_EQ_INT(force_rc, LEASH_ESTATE);
    CHECK_EQ_INT(forced.calls, 0);
    /* Afterwards the slot is free again. */
    CHECK_EQ_INT(leash_force_release(L, simfx_on_released, &forced), LEASH_OK);
    sim_run(S);
    simfx_answer(S, LS_FORCE, ":0\r\n");
    CHECK_EQ_INT(forced.calls, 1);
    CHECK_EQ_INT(forced.status, LEASH_ENOTHELD);
    down();
}

static void acquired_frees_client(leash_lock *l, int status, void *arg) {
    simfx_on_acquired(l, status, arg);
    leash_client_free(C);
    C = NULL;
}

/* leash_lock_free of a held handle runs its queued ECANCELED, whose
 * callback frees the client: the hold is released once, nothing leaks. */
TEST(a_callback_run_by_a_lock_free_may_free_the_client) {
    up(3000, 5000);
    CHECK_EQ_INT(leash_acquire(L, 0, simfx_on_acquired, &acq), LEASH_OK);
    sim_run(S);
    grant();
    CHECK_EQ_INT(leash_acquire(L, 0, acquired_frees_client, &acq2), LEASH_OK);
    sim_run(S);
    CHECK_EQ_INT(leash_cancel(L), LEASH_OK); /* ECANCELED, queued for the loop */
    leash_lock_free(L);                      /* ... delivered here */
    CHECK_EQ_INT(acq2.calls, 1);
    CHECK_EQ_INT(acq2.status, LEASH_ECANCELED);
    CHECK(C == NULL);
    sim_run(S);
    CHECK_EQ_INT(simfx_count_unanswered(S, LS_RELEASE, NULL), 1);
    down();
}

/* Two completions due in one turn of the loop; the first one's callback
 * frees the client: the second still fires, once. */
TEST(completions_queued_behind_a_callback_that_frees_the_client_still_fire) {
    leash_lock *b;

    up(3000, 5000);
    b = leash_lock_new(C, "y");
    CHECK_EQ_INT(leash_acquire(L, 5000, acquired_frees_client, &acq), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(b, 5000, simfx_on_acquired, &acq2), LEASH_OK);
    sim_run(S);
    CHECK_EQ_INT(leash_cancel(L), LEASH_OK);
    CHECK_EQ_INT(leash_cancel(b), LEASH_OK);
    sim_run(S);
    CHECK(C == NULL);
    CHECK_EQ_INT(acq.calls, 1);
    CHECK_EQ_INT(acq2.calls, 1);
    CHECK_EQ_INT(acq2.status, LEASH_ECANCELED);
    down();
}

/* Two commands expire in one tick while the connection is down; the first
 * one's callback frees the client: the other completes too, nothing leaks. */
TEST(commands_expiring_behind_a_callback_that_frees_the_client_are_settled) {
    leash_lock *f;

    up(3000, 200);
    f = leash_lock_new(C, "f");
    sim_set_auto(S, SIM_AUTO_TIME, 0); /* handshakes never finish */
    sim_close(sim_cmd_conn(S));
    sim_run(S);
    CHECK(!leash_client_connected(C));
    CHECK_EQ_INT(leash_acquire(L, 0, acquired_frees_client, &acq), LEASH_OK);
    CHECK_EQ_INT(leash_force_release(f, simfx_on_released, &rel), LEASH_OK);
    sim_advance(S, 250);
    CHECK(C == NULL);
    CHECK_EQ_INT(acq.calls, 1);
    CHECK_EQ_INT(acq.status, LEASH_ECONN);
    CHECK_EQ_INT(rel.calls, 1);
    CHECK_EQ_INT(rel.status, LEASH_ECANCELED);
    down();
}

/* A try-once attempt ran (its answer lost with the connection); its resend
 * comes back "too late": the acquire ends, and the grant the first copy
 * may have made is released. */
TEST(a_late_resend_that_ends_the_acquire_releases_an_earlier_copys_grant) {
    sim_cmd *cmd;
    char token[64];
    int releases;

    up(3000, 200);
    CHECK_EQ_INT(leash_acquire(L, 0, simfx_on_acquired, &acq), LEASH_OK);
    sim_run(S);
    cmd = simfx_pending(S, LS_ACQUIRE);
    CHECK(cmd != NULL);
    snprintf(token, sizeof(token), "%s", sim_cmd_arg(cmd, 4));
    sim_close(sim_cmd_conn(S)); /* copy 1 ran; its answer is lost */
    sim_run(S);
    cmd = sim_wait_cmd(S, SIM_ROLE_CMD, "EVALSHA"); /* copy 2, on the new connection */
    CHECK_STR_EQ(sim_cmd_arg(cmd, 4), token);
    simfx_answer(S, LS_ACQUIRE, "*4\r\n:0\r\n:-3\r\n:0\r\n:%lld\r\n", simfx_server_ms());
    CHECK_EQ_INT(acq.calls, 1);
    CHECK_EQ_INT(acq.status, LEASH_ECONN);
    sim_advance(S, 1000);
    releases = simfx_count_unanswered(S, LS_RELEASE, token);
    CHECK_MSG(releases > 0, "the grant copy 1 may have made is never released");
    down();
}

/* ---- the multi-lock's one script (prim/multi.c), resent ---- */

/* The multi-lock's one script for names[0..2) of one slot, pending on the
 * newest command connection (an EVALSHA of 2 keys), or NULL. */
static sim_cmd *multi_script(void) {
    sim_conn *c = sim_cmd_conn(S);
    int i;

    for (i = 0; c != NULL && i < sim_conn_pending(c); i++) {
        sim_cmd *cmd = sim_conn_cmd(c, i);
        if (simfx_script_of(cmd) == LS_MULTI_ACQUIRE && strcmp(cmd->argv[2], "2") == 0)
            return cmd;
    }
    return NULL;
}

/* A multi-lock over two names of one slot whose script ran (both keys
 * written with tokens t1, t2) and lost its answer with the connection:
 * returns the resend, which carries the same tokens. */
static leash_lock *multi_resent(int64_t wait_ms, char *t1, char *t2, size_t len) {
    static const char *const names[] = {"{a}x", "{a}y"};
    leash_lock *m = leash_multi_lock_new(C, names, 2);
    sim_cmd *cmd;

    CHECK(m != NULL);
    CHECK_EQ_INT(leash_acquire(m, wait_ms, simfx_on_acquired, &acq), LEASH_OK);
    sim_run(S);
    cmd = multi_script();
    CHECK(cmd != NULL);
    snprintf(t1, len, "%s", cmd->argv[5]);
    snprintf(t2, len, "%s", cmd->argv[6]);
    sim_close(sim_cmd_conn(S)); /* copy 1 ran: both keys are ours; its answer is lost */
    sim_run(S);
    sim_wait_cmd(S, SIM_ROLE_CMD, "EVALSHA");
    cmd = multi_script();
    CHECK(cmd != NULL);
    CHECK_STR_EQ(cmd->argv[5], t1);
    CHECK_STR_EQ(cmd->argv[6], t2);
    return m;
}

/* Copy 1's keys are released (the background releases carry its tokens). */
static void copy1_released(const char *t1, const char *t2) {
    sim_advance(S, 1000);
    CHECK_MSG(simfx_count_unanswered(S, LS_RELEASE, t1) > 0 &&
                  simfx_count_unanswered(S, LS_RELEASE, t2) > 0,
              "the keys the first copy wrote (tokens %s, %s) are never released", t1, t2);
}

/* The resend comes back "too late" to a try-once: the acquire ends, and
 * what the first copy wrote is released (it would stand a lease). */
TEST(a_late_resend_that_ends_a_multi_acquire_releases_the_first_copys_keys) {
    char t1[64], t2[64];
    leash_lock *m;

    up(3000, 200);
    m = multi_resent(0, t1, t2, sizeof(t1));
    sim_replyf(sim_cmd_conn(S), "*4\r\n:0\r\n:-3\r\n:0\r\n:%lld\r\n", simfx_server_ms());
    sim_run(S);
    CHECK_EQ_INT(acq.calls, 1);
    CHECK_EQ_INT(acq.status, LEASH_ECONN);
    copy1_released(t1, t2);
    leash_lock_free(m);
    down();
}

/* The resend comes back "too late" to an acquire that waits: it asks again
 * with the same tokens, so the first copy's keys are its own grant (with
 * new tokens they would make it busy: it would wait a lease for itself). */
TEST(a_late_resend_of_a_waiting_multi_acquire_asks_again_with_the_same_tokens) {
    char t1[64], t2[64];
    leash_lock *m;
    sim_cmd *cmd;

    up(3000, 200);
    m = multi_resent(5000, t1, t2, sizeof(t1));
    sim_replyf(sim_cmd_conn(S), "*4\r\n:0\r\n:-3\r\n:0\r\n:%lld\r\n", simfx_server_ms());
    sim_run(S);
    CHECK_EQ_INT(acq.calls, 0);
    cmd = multi_script();
    CHECK_MSG(cmd != NULL, "the acquire does not ask again");
    CHECK_MSG(strcmp(cmd->argv[5], t1) == 0 && strcmp(cmd->argv[6], t2) == 0,
              "it asks again with new tokens %s %s: the first copy's (%s %s) make it busy",
              cmd->argv[5], cmd->argv[6], t1, t2);
    sim_replyf(sim_cmd_conn(S), "*4\r\n:1\r\n:%lld\r\n:1\r\n:%lld\r\n", simfx_server_ms() * 1000,
               simfx_server_ms());
    sim_run(S);
    CHECK_EQ_INT(acq.calls, 1);
    CHECK_EQ_INT(acq.status, LEASH_OK);
    CHECK(leash_held(m));
    leash_lock_free(m);
    down();
}

/* The resend finds a key busy: someone took it after the first copy's key
 * went (a force release), or the first copy is still on its way. Either
 * may leave the first copy's keys standing: they are released. */
TEST(a_busy_resend_of_a_multi_acquire_releases_the_first_copys_keys) {
    char t1[64], t2[64];
    leash_lock *m;

    up(3000, 200);
    m = multi_resent(0, t1, t2, sizeof(t1));
    sim_replyf(sim_cmd_conn(S), "*5\r\n:0\r\n:2000\r\n:0\r\n:%lld\r\n:2\r\n", simfx_server_ms());
    sim_run(S);
    CHECK_EQ_INT(acq.calls, 1);
    CHECK_EQ_INT(acq.status, LEASH_EBUSY);
    copy1_released(t1, t2);
    leash_lock_free(m);
    down();
}

/* A multi-lock's release that a member refused (no memory) answers from
 * the loop; a free before that ends the release inside the free with
 * LEASH_ECANCELED, as every callback a free ends. */
TEST(a_free_ends_a_multi_release_a_member_refused_with_ecanceled) {
    static const char *const names[] = {"y"};
    leash_lock *m;
    int rc;

    up(3000, 200);
    m = leash_multi_lock_new(C, names, 1);
    CHECK(m != NULL);
    CHECK_EQ_INT(leash_acquire(m, 0, simfx_on_acquired, &acq), LEASH_OK);
    sim_run(S);
    grant();
    CHECK_EQ_INT(acq.status, LEASH_OK);
    failalloc_arm(2); /* the 1st: give()'s own; the 2nd: the member's release */
    rc = leash_release(m, simfx_on_released, &rel);
    failalloc_disarm();
    CHECK_EQ_INT(rc, LEASH_OK);
    CHECK(failalloc_failed());
    CHECK_EQ_INT(rel.calls, 0);
    leash_lock_free(m);
    CHECK_EQ_INT(rel.calls, 1);
    CHECK_MSG(rel.status == LEASH_ECANCELED, "the free ended the release with %d (%s)", rel.status,
              leash_strerror(rel.status));
    down();
}

/* The member handle of multi-lock m for `name`: its members are mutex
 * handles of the client's own, never shown to the user. */
static leash_lock *member_of(leash_lock *m, const char *name) {
    leash__list *it;

    for (it = m->core->locks.next; it != &m->core->locks; it = it->next) {
        leash_lock *x = LEASH__CONTAINER(it, leash_lock, link);
        if (x != m && x->multi == NULL && strcmp(x->name, name) == 0)
            return x;
    }
    return NULL;
}

/* A member whose hold ended just before the multi-lock's release reached
 * it (its handle holds nothing: the loss the multi-lock had not heard of
 * yet) refuses its leash_release with LEASH_ESTATE, a refusal of the call,
 * not an answer about the hold. The user's release gets what a mutex's
 * release of a hold that is gone gets: LEASH_ENOTHELD, from the loop. */
/* ERROR lines logged, with the first one's text. */
static int errors_logged;
static char first_error[256];
static void count_errors(int level, const char *msg, void *arg) {
    (void)arg;
    if (level == LEASH_LOG_ERROR && errors_logged++ == 0)
        snprintf(first_error, sizeof(first_error), "%s", msg);
}

TEST(a_multi_release_a_member_refuses_for_a_hold_gone_answers_enotheld) {
    static const char *const names[] = {"y"};
    leash__event e;
    leash_lost_cb *cb;
    leash_lock *m, *ml;

    up(3000, 200);
    /* The member's refusal is the multi-lock's own race, no misuse: no
     * ERROR line (the log at ERROR only, counted). */
    leash__client_core(C)->env.log.cb = count_errors;
    leash__client_core(C)->env.log.arg = NULL;
    leash__client_core(C)->env.log.level = LEASH_LOG_ERROR;
    errors_logged = 0;
    m = leash_multi_lock_new(C, names, 1);
    CHECK(m != NULL);
    CHECK_EQ_INT(leash_acquire(m, 0, simfx_on_acquired, &acq), LEASH_OK);
    sim_run(S);
    grant();
    CHECK_EQ_INT(acq.status, LEASH_OK);
    ml = member_of(m, "y");
    CHECK(ml != NULL && leash_held(ml));
    /* The member's hold ends unheard (its deadline, lost callback off). */
    cb = ml->lost_cb;
    ml->lost_cb = NULL;
    memset(&e, 0, sizeof(e));
    e.type = LEASH__EV_DEADLINE;
    leash__lock_dispatch(ml, &e);
    ml->lost_cb = cb;
    CHECK(!leash_held(ml));
    CHECK_EQ_INT(leash_release(m, simfx_on_released, &rel), LEASH_OK);
    CHECK_EQ_INT(rel.calls, 0); /* from the loop */
    sim_run(S);
    CHECK_EQ_INT(rel.calls, 1);
    CHECK_MSG(rel.status == LEASH_ENOTHELD, "the release answered %d (%s), not LEASH_ENOTHELD",
              rel.status, leash_strerror(rel.status));
    CHECK(!leash_held(m));
    CHECK_MSG(errors_logged == 0, "%d ERROR lines, the first: %s", errors_logged, first_error);
    leash_lock_free(m);
    down();
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(a_lost_callback_cannot_acquire_while_an_extra_holds_callback_is_owed),
        TEST_CASE(a_lost_callback_may_acquire_again_and_gets_its_own_answer),
        TEST_CASE(an_extra_holds_callback_fires_when_the_lost_callback_frees_the_handle),
        TEST_CASE(a_releases_callback_fires_when_the_lost_callback_frees_the_handle),
        TEST_CASE(a_partial_release_that_finds_the_hold_gone_answers_after_the_lost_callback),
        TEST_CASE(a_lost_callback_cannot_force_release_while_a_releases_callback_is_owed),
        TEST_CASE(a_callback_run_by_a_lock_free_may_free_the_client),
        TEST_CASE(completions_queued_behind_a_callback_that_frees_the_client_still_fire),
        TEST_CASE(commands_expiring_behind_a_callback_that_frees_the_client_are_settled),
        TEST_CASE(a_late_resend_that_ends_the_acquire_releases_an_earlier_copys_grant),
        TEST_CASE(a_late_resend_that_ends_a_multi_acquire_releases_the_first_copys_keys),
        TEST_CASE(a_late_resend_of_a_waiting_multi_acquire_asks_again_with_the_same_tokens),
        TEST_CASE(a_busy_resend_of_a_multi_acquire_releases_the_first_copys_keys),
        TEST_CASE(a_free_ends_a_multi_release_a_member_refused_with_ecanceled),
        TEST_CASE(a_multi_release_a_member_refuses_for_a_hold_gone_answers_enotheld),
        {0},
    };
    return test_main(argc, argv, cases);
}
