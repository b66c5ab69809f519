/* SPDX-License-Identifier: MIT */
/*
 * Security: least-privilege ACL users, users without the rights leash
 * needs, passwords kept out of logs, owner tokens, releases with forged
 * or stale tokens, and forged messages on a lock's channel, against real
 * redis-servers.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "base/token.h"
#include "fixture.h"
#include "lockdata.h"
#include "prim/holding.h"
#include "prim/lock.h"
#include "redis_server.h"

/* What leash runs: its scripts call these on the lock's key, and the
 * handshake asks for TIME. */
#define SCRIPT_COMMANDS "+time +get +set +del +pexpire +pttl +publish"
#define LOCK_KEYS "resetkeys ~leash:* resetchannels &leash:*"

typedef struct sworld {
    test_redis r;
    struct ev_loop *loop;
} sworld;

static void s_up(sworld *w, const char *acl_user, const char *requirepass) {
    test_redis_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.acl_user = acl_user;
    cfg.requirepass = requirepass;
    CHECK_EQ_INT(test_redis_start(&w->r, &cfg), 0);
    w->loop = ev_loop_new(EVFLAG_AUTO);
    fx_log_clear();
}

static void s_down(sworld *w) {
    test_redis_stop(&w->r);
    ev_loop_destroy(w->loop);
}

static leash_client *client_as(sworld *w, const char *user, const char *pw, int64_t lease) {
    leash_options o;
    fx_fault_options(&o, w->r.port, lease);
    o.username = user;
    o.password = pw;
    o.command_timeout_ms = 1000;
    return fx_client_opts(w->loop, &o);
}

TEST(acl_user_with_only_the_lock_keys_and_script_rights_works) {
    sworld w;
    leash_client *c;
    leash_lock *a, *b;
    fx_result res = {0};

    s_up(&w,
         "locker on >locker-pw " LOCK_KEYS " -@all +evalsha +eval +subscribe +unsubscribe "
         "+publish +info " SCRIPT_COMMANDS,
         NULL);
    c = client_as(&w, "locker", "locker-pw", 500);
    a = leash_lock_new(c, "acl");
    b = leash_lock_new(c, "acl");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 3000), LEASH_OK);
    /* waiting (SUBSCRIBE), renewing (the watchdog) and releasing (PUBLISH) */
    CHECK_EQ_INT(leash_acquire(b, 5000, fx_acquire_cb, &res), LEASH_OK);
    test_run_for(w.loop, 700);
    CHECK(leash_held(a));
    CHECK(leash_renewals(a) >= 2);
    CHECK_EQ_INT(res.calls, 0);
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 3000), LEASH_OK);
    fx_run_until(w.loop, &res, 3000);
    CHECK_EQ_INT(res.status, LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, b, 3000), LEASH_OK);
    /* SCRIPT LOAD is not among the rights: scripts came in through EVAL. */
    CHECK(fx_log_contains("SCRIPT LOAD not accepted"));
    leash_client_free(c);
    CHECK(!fx_log_contains("locker-pw"));
    s_down(&w);
}

/* One status, quickly, with a log line that says why (one of the ways
 * Redis versions say it: says is "a|b"); not a hang. */
static void refused(sworld *w, leash_client *c, int64_t wait, const char *says) {
    leash_lock *l = leash_lock_new(c, "denied");
    int64_t t0 = test_now_ms();
    char one[128];
    const char *p = says;
    int found = 0;

    CHECK_EQ_INT(fx_acquire_sync(w->loop, l, wait, 5000), LEASH_EREDIS);
    CHECK_MSG(test_now_ms() - t0 < 1000, "EREDIS after %lld ms", (long long)(test_now_ms() - t0));
    while (!found && *p) {
        size_t n = strcspn(p, "|");
        snprintf(one, sizeof(one), "%.*s", (int)n, p);
        found = fx_log_contains(one);
        p += n + (p[n] == '|');
    }
    CHECK_MSG(found, "no log line saying '%s'", says);
    leash_lock_free(l);
}

TEST(user_without_eval_rights_gets_a_clear_error_not_a_hang) {
    sworld w;
    leash_client *c;

    s_up(&w, "noeval on >noeval-pw ~* &* +@all -eval -evalsha", NULL);
    c = client_as(&w, "noeval", "noeval-pw", 1000);
    fx_wait_connected(w.loop, c, 3000);
    refused(&w, c, 0, "NOPERM");
    refused(&w, c, 3000, "NOPERM"); /* a wait does not turn it into a timeout */
    leash_client_free(c);
    s_down(&w);
}

TEST(user_whose_scripts_may_not_touch_the_keys_gets_a_clear_error) {
    sworld w;
    leash_client *c;

    /* The scripts' own commands are checked against the user's ACL. */
    s_up(&w,
         "scriptonly on >so-pw " LOCK_KEYS " -@all +evalsha +eval +subscribe +unsubscribe "
         "+publish",
         NULL);
    c = client_as(&w, "scriptonly", "so-pw", 1000);
    fx_wait_connected(w.loop, c, 3000);
    /* Redis 7.0 says "can't run this command", 7.2 and Valkey "no
     * permissions to run the 'get' command". */
    refused(&w, c, 0, "can't run this command|no permissions to run");
    leash_client_free(c);
    s_down(&w);
}

TEST(user_without_subscribe_rights_waits_out_its_wait_and_says_why) {
    sworld w;
    leash_client *c;
    leash_lock *a, *b;
    fx_result res = {0};
    int64_t t0;

    s_up(&w, "nosub on >nosub-pw ~* &* +@all -subscribe", NULL);
    c = client_as(&w, "nosub", "nosub-pw", 5000);
    a = leash_lock_new(c, "nosub");
    b = leash_lock_new(c, "nosub");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 3000), LEASH_OK);
    t0 = test_now_ms();
    CHECK_EQ_INT(leash_acquire(b, 800, fx_acquire_cb, &res), LEASH_OK);
    fx_run_until(w.loop, &res, 3000);
    CHECK_EQ_INT(res.status, LEASH_ETIMEDOUT);
    CHECK(res.at_ms - t0 < 800 + 1000 + 300);
    CHECK(fx_log_contains("NOPERM"));
    leash_client_free(c);
    s_down(&w);
}

/* A password with format directives: a log line built with it as the
 * format would crash, not only leak. */
#define PW "S3cr3t-%s%n%x-pw"

TEST(password_never_appears_in_the_log) {
    sworld w;
    leash_client *c;
    leash_lock *l;
    leash_options o;

    s_up(&w, "user1 on >" PW " ~* &* +@all", PW);
    /* Connect, work, reconnect (both connections killed), fail. */
    c = client_as(&w, "user1", PW, 500);
    l = leash_lock_new(c, "pw");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK);
    test_redis_int(&w.r, "CLIENT KILL USER user1");
    test_run_for(w.loop, 200);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    leash_client_free(c);
    /* Refused logins: a wrong password, and the right one for another user. */
    fx_fault_options(&o, w.r.port, 500);
    o.username = "user1";
    o.password = PW "-wrong";
    c = fx_client_opts(w.loop, &o);
    l = leash_lock_new(c, "pw");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_EAUTH);
    leash_client_free(c);
    o.username = NULL;
    o.password = PW;
    c = fx_client_opts(w.loop, &o);
    l = leash_lock_new(c, "pw");
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK);
    leash_client_free(c);
    CHECK(fx_log_contains("AUTH refused"));
    CHECK(!fx_log_contains("S3cr3t"));
    s_down(&w);
}

TEST(owner_tokens_are_never_shared) {
    sworld w;
    leash_client *c1, *c2;
    leash_lock *l[4];
    static char seen[800][LEASH__TOKEN_LEN + 1];
    int n = 0, i, j, k;
    redisReply *r;

    s_up(&w, NULL, NULL);
    c1 = fx_fault_client(w.loop, w.r.port, 2000);
    c2 = fx_fault_client(w.loop, w.r.port, 2000);
    l[0] = leash_lock_new(c1, "tok");
    l[1] = leash_lock_new(c2, "tok");
    l[2] = leash_lock_new(c1, "tok2");
    l[3] = leash_lock_new(c2, "tok2");
    for (i = 0; i < 200; i++) {
        for (j = 0; j < 4; j++) {
            CHECK_EQ_INT(fx_acquire_sync(w.loop, l[j], 1000, 3000), LEASH_OK);
            /* The token Redis holds is the handle's, 128 random bits. */
            r = test_redis_cmd(&w.r, "GET %s", j < 2 ? "leash:tok" : "leash:tok2");
            CHECK(r != NULL && r->type == REDIS_REPLY_STRING && r->len > 33);
            CHECK(strncmp(r->str, l[j]->hold.token, 32) == 0 && r->str[32] == ':');
            CHECK_EQ_INT((long long)strspn(r->str, "0123456789abcdef"), 32);
            r->str[32] = '\0';
            for (k = 0; k < n; k++)
                CHECK_MSG(strcmp(seen[k], r->str) != 0, "token %s used twice", seen[k]);
            snprintf(seen[n++], sizeof seen[0], "%s", r->str);
            freeReplyObject(r);
            CHECK_EQ_INT(fx_release_sync(w.loop, l[j], 3000), LEASH_OK);
        }
    }
    leash_client_free(c1);
    leash_client_free(c2);
    s_down(&w);
}

/* The release script, run by hand with any token (a first send). */
static long long release_with(test_redis *r, const char *token) {
    return test_redis_int(r, "EVAL %s 1 %s %s 0 %s 0",
                          leash__dialect_leash.scripts[LEASH__LEASH_SCRIPT_RELEASE]->src,
                          "leash:victim", token, "leash:victim-channel");
}

static int holds_with(test_redis *r, const char *token) {
    char tok[33];
    return test_lock_value(r, "leash:victim", tok, NULL) == 1 && strcmp(tok, token) == 0;
}

TEST(forged_or_stale_tokens_never_release_someone_elses_hold) {
    sworld w;
    leash_client *c;
    leash_lock *old, *holder;
    fx_result lost = {0};
    char stale[LEASH__TOKEN_LEN + 1], forged[LEASH__TOKEN_LEN + 1];

    s_up(&w, NULL, NULL);
    c = fx_fault_client(w.loop, w.r.port, 300);
    old = leash_lock_new(c, "victim");
    holder = leash_lock_new(c, "victim");
    leash_on_lost(holder, fx_lost_cb, &lost);
    /* A stale token: a hold that was released before the current one. */
    CHECK_EQ_INT(fx_acquire_sync(w.loop, old, 0, 3000), LEASH_OK);
    memcpy(stale, old->hold.token, sizeof stale);
    CHECK_EQ_INT(fx_release_sync(w.loop, old, 3000), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(leash__token_new(forged), 0);

    /* By hand: "not ours" (-1) for the stale, the forged and the empty
     * token, a count for none of them; the hold stays. */
    CHECK_EQ_INT(release_with(&w.r, stale), -1);
    CHECK_EQ_INT(release_with(&w.r, forged), -1);
    CHECK_EQ_INT(release_with(&w.r, ""), -1);
    CHECK(holds_with(&w.r, holder->hold.token));

    /* Through leash: a handle that holds the lock under a forged token. */
    memcpy(old->hold.token, forged, sizeof forged);
    old->state = LEASH__LOCK_HELD;
    old->hold.count = 1;
    old->hold.lease_ms = 300;
    old->hold.deadline = test_now_ms() + 300;
    CHECK_EQ_INT(fx_release_sync(w.loop, old, 3000), LEASH_ENOTHELD);
    /* and one with the stale token: not ours either, and still nothing of
     * the holder's is touched */
    memcpy(old->hold.token, stale, sizeof stale);
    old->state = LEASH__LOCK_HELD;
    old->hold.count = 1;
    old->hold.deadline = test_now_ms() + 300;
    CHECK_EQ_INT(fx_release_sync(w.loop, old, 3000), LEASH_ENOTHELD);

    /* The holder renews on, untouched, for several leases. */
    test_run_for(w.loop, 900);
    CHECK_EQ_INT(lost.calls, 0);
    CHECK(leash_held(holder));
    CHECK(holds_with(&w.r, holder->hold.token));
    CHECK_EQ_INT(fx_release_sync(w.loop, holder, 3000), LEASH_OK);
    leash_client_free(c);
    s_down(&w);
}

TEST(lock_names_cannot_inject_commands) {
    sworld w;
    leash_client *c;
    leash_lock *l;
    redisReply *r;
    static const char name[] = "x\r\n*1\r\n$8\r\nFLUSHALL\r\n ";

    s_up(&w, NULL, NULL);
    r = test_redis_cmd(&w.r, "SET canary alive");
    CHECK(r != NULL);
    freeReplyObject(r);
    c = fx_fault_client(w.loop, w.r.port, 1000);
    l = leash_lock_new(c, name);
    CHECK(l != NULL);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(test_redis_int(&w.r, "EXISTS %b", "leash:x\r\n*1\r\n$8\r\nFLUSHALL\r\n ",
                                sizeof name - 1 + 6),
                 1);
    CHECK_EQ_INT(test_redis_int(&w.r, "EXISTS canary"), 1);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    leash_client_free(c);
    s_down(&w);
}

/* PUBLISH msg on the channel of lock `name` (prefix "leash:", db 0), as
 * anyone allowed to publish there could. */
static long long publish_on(test_redis *r, const char *name, const char *msg) {
    leash__names k;
    leash__logger lg = {NULL, NULL, LEASH_LOG_ERROR};
    long long n;

    CHECK_EQ_INT(leash__dialect_leash.names(&k, &lg, "leash:", name, 0), LEASH_OK);
    n = test_redis_int(r, "PUBLISH %b %s", k.channel, k.channel_len, msg);
    leash__names_clear(&k);
    return n;
}

/*
 * A waiter takes "renewed:<lease>" messages on the lock's channel at their
 * word: holder_alive() (src/prim/holding.c) computes now + lease_ms + 1 with the
 * number from the message, which overflows int64_t (undefined behaviour:
 * UBSan stops the process) for a large one. Anyone allowed to PUBLISH on
 * the channel can send it; a holder's own watchdog never would.
 */
TEST(renewed_message_with_a_huge_lease_is_not_undefined_behaviour) {
    test_redis r;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    leash_client *c;
    leash_lock *a, *b;
    fx_result res = {0};

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    c = fx_fault_client(loop, r.port, 300);
    fx_wait_connected(loop, c, 3000);
    a = leash_lock_new(c, "forged");
    b = leash_lock_new(c, "forged");
    CHECK_EQ_INT(fx_acquire_sync(loop, a, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(b, 3000, fx_acquire_cb, &res), LEASH_OK);
    test_run_for(loop, 100); /* subscribed and parked */
    CHECK_EQ_INT(publish_on(&r, "forged", "renewed:9223372036854775807"), 1);
    test_run_for(loop, 100);
    CHECK_EQ_INT(fx_release_sync(loop, a, 3000), LEASH_OK);
    fx_run_until(loop, &res, 3000);
    CHECK_EQ_INT(res.status, LEASH_OK);
    leash_client_free(c);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}

/*
 * DESIGN 5.3 and "no waiter stranded": a waiter wakes at the holder's
 * remaining TTL at the latest, because a crashed holder publishes nothing.
 * A forged "renewed:<lease>" message (any client with PUBLISH on the
 * channel) moves that wake-up as far as it likes: here a day. The holder
 * then vanishes (its key expires, nothing is published) and the waiter
 * sleeps on past its expiry. The lease in a message should be capped (for
 * instance by the waiter's own lease setting, or the PTTL it saw).
 */
TEST(forged_renewed_message_does_not_strand_a_waiter) {
    test_redis r;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    leash_client *c;
    leash_lock *b;
    fx_result res = {0};
    redisReply *rep;
    int64_t t0;

    CHECK_EQ_INT(test_redis_start(&r, NULL), 0);
    c = fx_fault_client(loop, r.port, 300);
    fx_wait_connected(loop, c, 3000);
    /* A holder that will vanish: a key with another owner and 300 ms left. */
    rep = test_redis_cmd(&r, "SET leash:stranded %s:0:1:1 PX 300",
                         "0123456789abcdef0123456789abcdef");
    CHECK(rep != NULL && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    b = leash_lock_new(c, "stranded");
    t0 = test_now_ms();
    CHECK_EQ_INT(leash_acquire(b, 5000, fx_acquire_cb, &res), LEASH_OK);
    test_run_for(loop, 100);
    CHECK_EQ_INT(res.calls, 0);
    publish_on(&r, "stranded", "renewed:86400000");
    fx_run_until(loop, &res, 6000);
    CHECK_MSG(res.status == LEASH_OK && res.at_ms - t0 < 1000,
              "the waiter got %s after %lld ms; the key expired after 300 ms",
              leash_status_name(res.status), (long long)(res.at_ms - t0));
    leash_client_free(c);
    test_redis_stop(&r);
    ev_loop_destroy(loop);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(acl_user_with_only_the_lock_keys_and_script_rights_works),
        TEST_CASE(user_without_eval_rights_gets_a_clear_error_not_a_hang),
        TEST_CASE(user_whose_scripts_may_not_touch_the_keys_gets_a_clear_error),
        TEST_CASE(user_without_subscribe_rights_waits_out_its_wait_and_says_why),
        TEST_CASE(password_never_appears_in_the_log),
        TEST_CASE(owner_tokens_are_never_shared),
        TEST_CASE(forged_or_stale_tokens_never_release_someone_elses_hold),
        TEST_CASE(lock_names_cannot_inject_commands),
        TEST_CASE(renewed_message_with_a_huge_lease_is_not_undefined_behaviour),
        TEST_CASE(forged_renewed_message_does_not_strand_a_waiter),
        {0},
    };
    return test_main(argc, argv, cases);
}
