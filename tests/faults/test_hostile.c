/* SPDX-License-Identifier: MIT */
/*
 * Hostile and broken replies from a fake Redis: wrong types, error
 * replies, truncated frames, huge bulk strings, protocol garbage, replies
 * nobody asked for, and silence. Each gives the operation concerned
 * LEASH_EPROTO, LEASH_EREDIS or LEASH_ECONN, exactly once, from the loop;
 * nothing crashes or leaks (run under ASan), and the client works again as
 * soon as the server behaves. (Inputs on which hiredis 0.14 itself aborts
 * are in test_hiredis_asserts.c.)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/slot.h"
#include "hostile.h"
#include "prim/lock.h"

/* After a misbehaviour: the server behaves, the same handle works. */
static void works_again(hworld *w, leash_lock *l) {
    hw_behave(w);
    fr_reset_locks(w->f);
    CHECK_EQ_INT(fx_acquire_sync(w->loop, l, 2000, 5000), LEASH_OK);
    CHECK(leash_held(l));
    CHECK_EQ_INT(fx_release_sync(w->loop, l, 5000), LEASH_OK);
}

TEST(acquire_replies_of_the_wrong_shape_are_eproto) {
    static const char *const replies[] = {
        ":1\r\n",
        "+OK\r\n",
        "$5\r\nhello\r\n",
        "$-1\r\n",
        "*-1\r\n",
        "*0\r\n",
        "*1\r\n:1\r\n",
        "*4\r\n:7\r\n:1\r\n:0\r\n:1\r\n",        /* neither granted nor busy */
        "*4\r\n:1\r\n:-5\r\n:1\r\n:1\r\n",       /* negative fence */
        "*4\r\n$1\r\n1\r\n:1\r\n:1\r\n:1\r\n",   /* "1" as a string */
        "*4\r\n:1\r\n:1\r\n$1\r\n1\r\n:1\r\n",   /* count as a string */
        "*4\r\n:1\r\n:1\r\n:0\r\n:1\r\n",        /* a count of 0 */
        "*4\r\n:1\r\n:1\r\n:1\r\n$1\r\n1\r\n",   /* the server's time as a string */
        "*4\r\n:0\r\n$3\r\nabc\r\n:0\r\n:1\r\n", /* busy with a string ttl */
        "*3\r\n:1\r\n:1\r\n:1\r\n",              /* one too few */
        "*5\r\n:1\r\n:1\r\n:1\r\n:1\r\n:1\r\n",  /* one too many */
        "*4\r\n*1\r\n:1\r\n:1\r\n:1\r\n:1\r\n",  /* nested */
        "*4\r\n:1\r\n*-1\r\n:1\r\n:1\r\n",       /* nil array inside */
        "*4\r\n:1\r\n$-1\r\n:1\r\n:1\r\n",       /* nil inside */
    };
    hworld w;
    leash_lock *l;
    size_t i;

    hw_up(&w, 2000);
    l = leash_lock_new(w.c, "shapes");
    for (i = 0; i < sizeof replies / sizeof replies[0]; i++) {
        hw_set(&w, FR_ACQUIRE, NULL, HOSTILE_REPLY, replies[i], 1);
        fx_log_clear();
        CHECK_MSG(fx_acquire_sync(w.loop, l, i % 2 ? 0 : 1000, 3000) == LEASH_EPROTO,
                  "reply %zu: %s", i, replies[i]);
        CHECK(!leash_held(l));
        CHECK(fx_log_contains("unexpected shape"));
        CHECK(leash_client_connected(w.c));
    }
    works_again(&w, l);
    hw_down(&w);
}

TEST(acquire_error_replies_are_eredis_with_the_message_logged) {
    static const char *const replies[] = {
        "-ERR boom\r\n",
        "-NOPERM this user has no permissions to run the 'evalsha' command\r\n",
        "-OOM command not allowed when used memory > 'maxmemory'.\r\n",
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        "-READONLY You can't write against a read only replica.\r\n",
        "-\r\n", /* an empty error */
    };
    hworld w;
    leash_lock *l;
    size_t i;
    char word[32];

    hw_up(&w, 2000);
    l = leash_lock_new(w.c, "errors");
    for (i = 0; i < sizeof replies / sizeof replies[0]; i++) {
        hw_set(&w, FR_ACQUIRE, NULL, HOSTILE_REPLY, replies[i], 1);
        fx_log_clear();
        CHECK_MSG(fx_acquire_sync(w.loop, l, i % 2 ? 0 : 1000, 3000) == LEASH_EREDIS, "reply %zu",
                  i);
        sscanf(replies[i] + 1, "%31s", word);
        CHECK_MSG(replies[i][1] == '\r' || fx_log_contains(word), "log does not name %s", word);
        CHECK(leash_client_connected(w.c));
    }
    works_again(&w, l);
    hw_down(&w);
}

TEST(noscript_for_ever_is_eredis_not_a_loop) {
    hworld w;
    leash_lock *l;

    hw_up(&w, 2000);
    l = leash_lock_new(w.c, "noscript");
    hw_set(&w, FR_ACQUIRE, NULL, HOSTILE_REPLY, "-NOSCRIPT No matching script.\r\n", -1);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_EREDIS);
    /* EVALSHA, then its EVAL: one resend, no more. */
    CHECK_EQ_INT(w.h.hits, 2);
    works_again(&w, l);
    hw_down(&w);
}

TEST(release_replies_wrong_or_error) {
    static const struct {
        const char *reply;
        int status;
    } cases[] = {
        {"+OK\r\n", LEASH_EPROTO},       {"$1\r\n0\r\n", LEASH_EPROTO},
        {"*1\r\n:0\r\n", LEASH_EPROTO},  {"$-1\r\n", LEASH_EPROTO},
        {"-ERR nope\r\n", LEASH_EREDIS}, {"-NOPERM no publish for you\r\n", LEASH_EREDIS},
    };
    hworld w;
    leash_lock *l;
    size_t i;
    leash_stats before, after;

    hw_up(&w, 600);
    l = leash_lock_new(w.c, "release");
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hw_behave(&w);
        fr_reset_locks(w.f);
        CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK);
        hw_set(&w, FR_RELEASE, NULL, HOSTILE_REPLY, cases[i].reply, 1);
        CHECK_MSG(fx_release_sync(w.loop, l, 3000) == cases[i].status, "case %zu", i);
        /* Whatever Redis said, the hold is over here and the watchdog stopped. */
        CHECK(!leash_held(l));
        leash_client_stats(w.c, &before);
        test_run_for(w.loop, 300); /* more than a renew interval */
        leash_client_stats(w.c, &after);
        CHECK_EQ_INT((long long)(after.renew_commands - before.renew_commands), 0);
    }
    works_again(&w, l);
    hw_down(&w);
}

/* Holds a lock whose renewals get `reply`; returns the lost reason, and
 * checks that it came no later than the hold's deadline. */
static int renew_answered(const char *reply) {
    hworld w;
    leash_lock *l;
    fx_result lost = {0};
    int64_t deadline;

    hw_up(&w, 300);
    l = leash_lock_new(w.c, "renew");
    leash_on_lost(l, fx_lost_cb, &lost);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK);
    hw_set(&w, FR_RENEW, NULL, HOSTILE_REPLY, reply, -1);
    deadline = l->hold.deadline;
    fx_run_until(w.loop, &lost, 3000);
    test_run_for(w.loop, 50);
    CHECK_EQ_INT(lost.calls, 1);
    CHECK(!leash_held(l));
    CHECK_MSG(lost.at_ms <= deadline + TEST_SLACK_MS, "lost %lld ms after the deadline",
              (long long)(lost.at_ms - deadline));
    CHECK(w.h.hits >= 1);
    works_again(&w, l);
    hw_down(&w);
    return lost.status;
}

TEST(renew_replies_of_the_wrong_shape_end_unreachable_by_the_deadline) {
    CHECK_EQ_INT(renew_answered(":1\r\n"), LEASH_LOST_UNREACHABLE);
    /* One verdict and the server's time is the renewal's shape; more is
     * not, and neither is a time that is no positive integer. */
    CHECK_EQ_INT(renew_answered("*3\r\n:1\r\n:1\r\n:1\r\n"), LEASH_LOST_UNREACHABLE);
    CHECK_EQ_INT(renew_answered("*2\r\n:1\r\n$1\r\n7\r\n"), LEASH_LOST_UNREACHABLE);
    CHECK_EQ_INT(renew_answered("*2\r\n:1\r\n:0\r\n"), LEASH_LOST_UNREACHABLE);
    CHECK_EQ_INT(renew_answered("-ERR renew broken\r\n"), LEASH_LOST_UNREACHABLE);
    CHECK_EQ_INT(renew_answered("*-1\r\n"), LEASH_LOST_UNREACHABLE);
    /* An element that is not the integer 0 or 1 is no verdict either. */
    CHECK_EQ_INT(renew_answered("*1\r\n$1\r\n1\r\n"), LEASH_LOST_UNREACHABLE);
    CHECK_EQ_INT(renew_answered("*1\r\n:7\r\n"), LEASH_LOST_UNREACHABLE);
    CHECK_EQ_INT(renew_answered("*1\r\n*0\r\n"), LEASH_LOST_UNREACHABLE);
    CHECK(fx_log_contains("neither 0 nor 1"));
    /* An answer "not ours" ends the hold at once. */
    CHECK_EQ_INT(renew_answered("*1\r\n:0\r\n"), LEASH_LOST_EXPIRED);
}

static int force_answered(hworld *w, leash_lock *l, int action, const char *reply) {
    fx_result r = {0};

    hw_set(w, FR_FORCE, NULL, action, reply, 1);
    CHECK_EQ_INT(leash_force_release(l, fx_release_cb, &r), LEASH_OK);
    CHECK_EQ_INT(r.calls, 0); /* never inside the call */
    fx_run_until(w->loop, &r, 3000);
    CHECK_EQ_INT(r.calls, 1);
    return r.status;
}

TEST(force_release_answers_and_a_lost_answer_is_never_resent) {
    hworld w;
    leash_lock *admin, *holder;
    fx_result got = {0};

    hw_up(&w, 2000);
    admin = leash_lock_new(w.c, "forced");
    holder = leash_lock_new(w.c, "forced");
    CHECK_EQ_INT(force_answered(&w, admin, HOSTILE_REPLY, "-ERR boom\r\n"), LEASH_EREDIS);
    CHECK(fx_log_contains("boom"));
    CHECK_EQ_INT(force_answered(&w, admin, HOSTILE_REPLY, ":2\r\n"), LEASH_EPROTO);
    CHECK_EQ_INT(force_answered(&w, admin, HOSTILE_REPLY, "$1\r\n1\r\n"), LEASH_EPROTO);
    CHECK(fx_log_contains("unexpected shape"));
    hw_behave(&w);
    CHECK_EQ_INT(force_answered(&w, admin, HOSTILE_REPLY, ":0\r\n"), LEASH_ENOTHELD);

    /* The connection dies with the force release unanswered, and the
     * holder's acquire goes out behind it. Resending the force release
     * after the reconnect would remove that new hold. */
    hw_set(&w, FR_FORCE, NULL, HOSTILE_CLOSE, "", 1);
    CHECK_EQ_INT(leash_force_release(admin, fx_release_cb, &got), LEASH_OK);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, holder, 2000, 5000), LEASH_OK);
    if (got.calls == 0)
        fx_run_until(w.loop, &got, 3000);
    CHECK_EQ_INT(got.status, LEASH_ECONN);
    CHECK_EQ_INT(w.h.hits, 1);
    test_run_for(w.loop, 300);
    CHECK(leash_held(holder));
    CHECK_EQ_INT(fx_release_sync(w.loop, holder, 3000), LEASH_OK);
    works_again(&w, admin);
    hw_down(&w);
}

TEST(truncated_frames_give_econn_then_recovery) {
    static const struct {
        const char *reply;
        int action;
    } cases[] = {
        {"*3\r\n:1\r\n:5", HOSTILE_CLOSE},
        {"*3\r\n:1\r\n", HOSTILE_SILENT},
        {"$10\r\nabc", HOSTILE_SILENT},
        {"$10\r\nabc", HOSTILE_CLOSE},
        {"", HOSTILE_CLOSE},
    };
    hworld w;
    leash_lock *l;
    size_t i;
    int64_t t0, took;

    hw_up(&w, 2000);
    l = leash_lock_new(w.c, "truncated");
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hw_set(&w, FR_ACQUIRE, NULL, cases[i].action, cases[i].reply, -1);
        t0 = test_now_ms();
        CHECK_MSG(fx_acquire_sync(w.loop, l, 0, 3000) == LEASH_ECONN, "case %zu", i);
        took = test_now_ms() - t0;
        /* try-once: its deadline is the command timeout (300 ms) */
        CHECK_MSG(took <= 300 + 200, "case %zu: ECONN after %lld ms", i, (long long)took);
        CHECK(!leash_held(l));
        works_again(&w, l);
    }
    hw_down(&w);
}

TEST(protocol_garbage_gives_econn_then_recovery) {
    static const char *const replies[] = {
        "!garbage\r\n",
        ":abc\r\n",
        "$-5\r\n",
        "*-2\r\n",
        "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", /* depth 9 */
        "$99999999999999999999999\r\n",
        ",1.5\r\n", /* RESP3, unknown to hiredis 0.14 */
    };
    hworld w;
    leash_lock *l;
    size_t i;

    hw_up(&w, 2000);
    l = leash_lock_new(w.c, "garbage");
    for (i = 0; i < sizeof replies / sizeof replies[0]; i++) {
        hw_set(&w, FR_ACQUIRE, NULL, HOSTILE_REPLY, replies[i], -1);
        CHECK_MSG(fx_acquire_sync(w.loop, l, 0, 3000) == LEASH_ECONN, "reply %zu: %s", i,
                  replies[i]);
        CHECK(w.h.hits >= 1);
        works_again(&w, l);
    }
    hw_down(&w);
}

TEST(huge_bulk_string_is_eproto_and_freed) {
    hworld w;
    leash_lock *l;
    size_t n = (size_t)64 << 20, head;
    char *reply = malloc(n + 64);

    CHECK(reply != NULL);
    head = (size_t)sprintf(reply, "$%zu\r\n", n);
    memset(reply + head, 'x', n);
    memcpy(reply + head + n, "\r\n", 2);
    /* The command timeout counts whole replies only: a reply still
     * streaming in after it is taken for silence (the connection breaks and
     * the acquire is sent again). 64 MiB under ASan can take longer than
     * 300 ms, so this client waits longer. */
    hw_command_timeout_ms = 10000;
    hw_up(&w, 2000);
    l = leash_lock_new(w.c, "huge");
    hw_set(&w, FR_ACQUIRE, NULL, HOSTILE_REPLY, reply, 1);
    w.h.reply_len = head + n + 2;
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 10000, 20000), LEASH_EPROTO);
    free(reply);
    works_again(&w, l);
    hw_down(&w);
}

TEST(huge_bulk_announced_and_never_sent_is_econn) {
    hworld w;
    leash_lock *l;

    hw_up(&w, 2000);
    l = leash_lock_new(w.c, "announced");
    hw_set(&w, FR_ACQUIRE, NULL, HOSTILE_SILENT, "$1000000000\r\nxxxx", -1);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_ECONN);
    works_again(&w, l);
    hw_down(&w);
}

TEST(big_array_announced_is_refused_and_the_attempt_retried) {
    hworld w;
    leash_lock *l;
    int64_t t0;

    hw_up(&w, 2000);
    l = leash_lock_new(w.c, "big-array");
    /* hiredis would allocate room for every element up front (800 MB here):
     * the reply guard refuses it, the connection is dropped and the
     * (idempotent) attempt goes out again on the next one, where the
     * server behaves. */
    hw_set(&w, FR_ACQUIRE, NULL, HOSTILE_SILENT, "*100000000\r\n", 1);
    t0 = test_now_ms();
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 5000), LEASH_OK);
    CHECK(test_now_ms() - t0 < 2000);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    works_again(&w, l);
    hw_down(&w);
}

TEST(loading_is_waited_out_by_a_waiting_acquire) {
    hworld w;
    leash_lock *l;

    hw_up(&w, 2000);
    l = leash_lock_new(w.c, "loading");
    /* A restarted server still loading its data: LOADING means "not run,
     * ask again", for a try-once acquire within its deadline... */
    hw_set(&w, FR_ACQUIRE, NULL, HOSTILE_REPLY,
           "-LOADING Redis is loading the dataset in memory\r\n", 1);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    /* ...which it reports ECONN when the server is still loading then... */
    hw_set(&w, FR_ACQUIRE, NULL, HOSTILE_REPLY,
           "-LOADING Redis is loading the dataset in memory\r\n", -1);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_ECONN);
    CHECK(fx_log_contains("still answers LOADING"));
    /* ...and a waiting acquire tries again until the server is ready. */
    hw_set(&w, FR_ACQUIRE, NULL, HOSTILE_REPLY,
           "-LOADING Redis is loading the dataset in memory\r\n", 3);
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 2000, 3000), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, l, 3000), LEASH_OK);
    hw_down(&w);
}

TEST(silence_gives_econn_on_time) {
    hworld w;
    leash_lock *l;
    int64_t t0, took;
    int st;

    hw_up(&w, 2000);
    l = leash_lock_new(w.c, "silence");
    hw_set(&w, FR_ACQUIRE, NULL, HOSTILE_SILENT, NULL, -1);
    t0 = test_now_ms();
    CHECK_EQ_INT(fx_acquire_sync(w.loop, l, 0, 3000), LEASH_ECONN);
    took = test_now_ms() - t0;
    CHECK_MSG(took >= 250 && took <= 500, "try-once ECONN after %lld ms", (long long)took);
    t0 = test_now_ms();
    st = fx_acquire_sync(w.loop, l, 1000, 3000);
    took = test_now_ms() - t0;
    CHECK_MSG(st == LEASH_ECONN || st == LEASH_ETIMEDOUT, "status %s", leash_status_name(st));
    CHECK_MSG(took >= 950 && took <= 1000 + 300 + 200, "1 s wait ended after %lld ms",
              (long long)took);
    CHECK(fx_log_contains("no reply for"));
    works_again(&w, l);
    hw_down(&w);
}

TEST(unsolicited_error_reply_drops_the_connection_and_it_comes_back) {
    hworld w;
    leash_lock *l;
    leash_stats st;

    hw_up(&w, 2000);
    l = leash_lock_new(w.c, "unsolicited");
    fr_send_str(hw_cmd_conn(&w), "-ERR max number of clients reached\r\n");
    test_run_for(w.loop, 100);
    leash_client_stats(w.c, &st);
    CHECK_EQ_INT((long long)st.disconnects, 1);
    works_again(&w, l);
    hw_down(&w);
}

/* a holds "sub"; b waits for it. */
static void holder_and_waiter(hworld *w, leash_lock **a, leash_lock **b, fx_result *res,
                              int64_t wait) {
    *a = leash_lock_new(w->c, "sub");
    *b = leash_lock_new(w->c, "sub");
    CHECK_EQ_INT(fx_acquire_sync(w->loop, *a, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(*b, wait, fx_acquire_cb, res), LEASH_OK);
}

TEST(subscribe_refused_waiter_still_ends_on_time) {
    hworld w;
    leash_lock *a, *b;
    fx_result res = {0};
    int64_t t0;

    hw_up(&w, 5000);
    /* From here: the set-up (a TLS handshake in test_hostile_tls) is not
     * the waiter's time. */
    t0 = test_now_ms();
    hw_set(&w, FR_NOT_A_SCRIPT, "SUBSCRIBE", HOSTILE_REPLY, "-ERR no pub/sub for you\r\n", -1);
    holder_and_waiter(&w, &a, &b, &res, 800);
    fx_run_until(w.loop, &res, 3000);
    CHECK_EQ_INT(res.status, LEASH_ETIMEDOUT);
    CHECK_MSG(res.at_ms - t0 <= 800 + 300 + 200, "ETIMEDOUT after %lld ms",
              (long long)(res.at_ms - t0));
    CHECK(w.h.hits >= 1);
    hw_behave(&w);
    memset(&res, 0, sizeof res);
    CHECK_EQ_INT(leash_acquire(b, 3000, fx_acquire_cb, &res), LEASH_OK);
    test_run_for(w.loop, 100);
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 3000), LEASH_OK);
    fx_run_until(w.loop, &res, 3000);
    CHECK_EQ_INT(res.status, LEASH_OK);
    hw_down(&w);
}

/* The channel of lock "sub" as a bulk string. */
#define CH "$20\r\n{leash:sub}:released\r\n"

TEST(pubsub_messages_of_odd_shapes_are_ignored) {
    static const char *const pushes[] = {
        "*3\r\n$7\r\nmessage\r\n" CH ":1\r\n",
        "*2\r\n$7\r\nmessage\r\n" CH "",
        "*3\r\n$7\r\nmessage\r\n" CH "*1\r\n:1\r\n",
        "*3\r\n$7\r\nmessage\r\n" CH "$-1\r\n",
        "*3\r\n$7\r\nmessage\r\n" CH "$8\r\nrenewed:\r\n",
        "*3\r\n$7\r\nmessage\r\n" CH "$10\r\nrenewed:-5\r\n",
        "*3\r\n$7\r\nmessage\r\n" CH "$11\r\nrenewed:abc\r\n",
        "*3\r\n$7\r\nmessage\r\n$13\r\nother-channel\r\n$1\r\nx\r\n",
        "*3\r\n$9\r\nsubscribe\r\n$13\r\nother-channel\r\n:1\r\n",
        "*3\r\n$8\r\npmessage\r\n$1\r\n*\r\n$1\r\nx\r\n",
        "*4\r\n$7\r\nmessage\r\n" CH "$1\r\nx\r\n$1\r\ny\r\n",
        "+OK\r\n",
        ":5\r\n",
        "$3\r\nabc\r\n",
    };
    hworld w;
    leash_lock *a, *b;
    fx_result res = {0};
    size_t i;

    hw_up(&w, 5000);
    holder_and_waiter(&w, &a, &b, &res, LEASH_WAIT_FOREVER);
    test_run_for(w.loop, 100);
    CHECK(fr_is_subscriber(hw_sub_conn(&w)));
    for (i = 0; i < sizeof pushes / sizeof pushes[0]; i++) {
        fr_send_str(hw_sub_conn(&w), pushes[i]);
        test_run_for(w.loop, 20);
        CHECK_MSG(res.calls == 0, "push %zu ended the wait: %s", i, leash_status_name(res.status));
    }
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 3000), LEASH_OK);
    fx_run_until(w.loop, &res, 3000);
    CHECK_EQ_INT(res.status, LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, b, 3000), LEASH_OK);
    hw_down(&w);
}

/* An UNSUBSCRIBE the client did not ask for (a server that drops a
 * channel: in a cluster, a sharded one whose slot moved) for a channel
 * nobody waits on any more, kept only for its linger: dropping the linger
 * frees the subscription while its confirmation is being read (the fuzz
 * target found it; ASan reads freed memory without the fix). */
TEST(an_unasked_unsubscribe_of_a_lingering_channel_is_dropped_once) {
    hworld w;
    leash_lock *a, *b;
    fx_result res = {0};
    char frame[256];
    int n;

    hw_up(&w, 5000);
    holder_and_waiter(&w, &a, &b, &res, LEASH_WAIT_FOREVER);
    test_run_for(w.loop, 100);
    CHECK(fr_is_subscriber(hw_sub_conn(&w)));
    CHECK_EQ_INT(leash_cancel(b), LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 3000), LEASH_OK); /* the channel lingers */
    n = snprintf(frame, sizeof frame, "*3\r\n$11\r\nunsubscribe\r\n$%zu\r\n", b->names.channel_len);
    CHECK(n > 0 && (size_t)n + b->names.channel_len + 8 < sizeof frame);
    memcpy(frame + n, b->names.channel, b->names.channel_len);
    n += (int)b->names.channel_len;
    n += snprintf(frame + n, sizeof frame - (size_t)n, "\r\n:0\r\n");
    fr_send(hw_sub_conn(&w), frame, (size_t)n);
    test_run_for(w.loop, 50);
    /* The client goes on: the lock is taken and given back, woken waiters
     * included. */
    res = (fx_result){0};
    CHECK_EQ_INT(fx_acquire_sync(w.loop, a, 0, 3000), LEASH_OK);
    CHECK_EQ_INT(leash_acquire(b, 3000, fx_acquire_cb, &res), LEASH_OK);
    test_run_for(w.loop, 100);
    CHECK_EQ_INT(fx_release_sync(w.loop, a, 3000), LEASH_OK);
    fx_run_until(w.loop, &res, 3000);
    CHECK_EQ_INT(res.status, LEASH_OK);
    CHECK_EQ_INT(fx_release_sync(w.loop, b, 3000), LEASH_OK);
    hw_down(&w);
}

/* Two cluster nodes that send an attempt to each other (MOVED, MOVED...),
 * as an old and a new master can for a moment during a failover: the
 * attempt waits for a fresh slot map between rounds of redirects, and is
 * granted once they agree, not failed with the redirect as a Redis error
 * (the cluster torture saw LEASH_EREDIS "MOVED" at a failover). */
typedef struct pingpong {
    fake_redis *f[2];
    int moved, limit;
} pingpong;

static int pingpong_hook(fake_redis *f, fr_conn *c, int argc, const char **argv, const size_t *lens,
                         void *arg) {
    pingpong *p = arg;
    char buf[128];

    if (argc >= 2 && strcasecmp(argv[0], "CLUSTER") == 0 && strcasecmp(argv[1], "SLOTS") == 0) {
        snprintf(buf, sizeof buf, "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n",
                 fr_port(p->f[0]));
        fr_send_str(c, buf);
        return 1;
    }
    if (fr_script_of(argc, argv, lens) == FR_ACQUIRE && p->moved < p->limit) {
        p->moved++;
        snprintf(buf, sizeof buf, "-MOVED %u 127.0.0.1:%d\r\n",
                 leash__key_slot("leash:pingpong", 14), fr_port(p->f[f == p->f[0]]));
        fr_send_str(c, buf);
        return 1;
    }
    return 0;
}

TEST(nodes_that_redirect_to_each_other_are_waited_out) {
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    pingpong p = {{NULL, NULL}, 0, 60};
    leash_options o;
    leash_client *c;
    leash_lock *l;
    char seed[32];
    const char *seeds[1] = {seed};
    int i;

    for (i = 0; i < 2; i++) {
        p.f[i] = fr_start(loop);
        CHECK(p.f[i] != NULL);
        fr_set_hook(p.f[i], pingpong_hook, &p);
    }
    snprintf(seed, sizeof seed, "127.0.0.1:%d", fr_port(p.f[0]));
    fx_fault_options(&o, fr_port(p.f[0]), 5000);
    o.topology = LEASH_TOPOLOGY_CLUSTER;
    o.pubsub = LEASH_PUBSUB_CLASSIC;
    o.nodes = seeds;
    o.nodes_count = 1;
    c = fx_client_opts(loop, &o);
    fx_wait_connected(loop, c, 3000);
    l = leash_lock_new(c, "pingpong");
    CHECK_EQ_INT(fx_acquire_sync(loop, l, 5000, 8000), LEASH_OK);
    CHECK_EQ_INT(p.moved, p.limit);
    /* Rounds paced by the map's asks (at most one per 100 ms), not a spin. */
    CHECK_MSG(fr_calls(p.f[0], "cluster") <= 2 + p.limit / 2, "%d maps asked",
              fr_calls(p.f[0], "cluster"));
    CHECK_EQ_INT(fx_release_sync(loop, l, 3000), LEASH_OK);
    leash_client_free(c);
    test_run_for(loop, 5);
    fr_stop(p.f[0]);
    fr_stop(p.f[1]);
    ev_loop_destroy(loop);
}

TEST(client_free_with_a_huge_reply_half_read) {
    hworld w;
    leash_lock *l;
    fx_result res = {0};

    hw_up(&w, 2000);
    l = leash_lock_new(w.c, "half");
    hw_set(&w, FR_ACQUIRE, NULL, HOSTILE_SILENT, "$100000\r\nxxxxxxxxxx", -1);
    CHECK_EQ_INT(leash_acquire(l, 5000, fx_acquire_cb, &res), LEASH_OK);
    test_run_for(w.loop, 50);
    leash_client_free(w.c);
    CHECK_EQ_INT(res.calls, 1);
    CHECK_EQ_INT(res.status, LEASH_ECANCELED);
    w.c = NULL;
    hw_down(&w);
}

/*
 * The busy answer's PTTL, from a hostile server: now + pttl + 1 in
 * wait_for_release() overflows the same way (UBSan stops the process).
 */
TEST(busy_answer_with_a_huge_ttl_is_not_undefined_behaviour) {
    hworld w;
    leash_lock *l;
    fx_result res = {0};

    hw_up(&w, 2000);
    l = leash_lock_new(w.c, "ttl");
    hw_set(&w, FR_ACQUIRE, NULL, HOSTILE_REPLY, "*4\r\n:0\r\n:9223372036854775807\r\n:0\r\n:1\r\n",
           1);
    CHECK_EQ_INT(leash_acquire(l, 500, fx_acquire_cb, &res), LEASH_OK);
    fx_run_until(w.loop, &res, 3000);
    CHECK(res.status == LEASH_OK || res.status == LEASH_ETIMEDOUT);
    hw_down(&w);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(acquire_replies_of_the_wrong_shape_are_eproto),
        TEST_CASE(acquire_error_replies_are_eredis_with_the_message_logged),
        TEST_CASE(noscript_for_ever_is_eredis_not_a_loop),
        TEST_CASE(release_replies_wrong_or_error),
        TEST_CASE(renew_replies_of_the_wrong_shape_end_unreachable_by_the_deadline),
        TEST_CASE(force_release_answers_and_a_lost_answer_is_never_resent),
        TEST_CASE(truncated_frames_give_econn_then_recovery),
        TEST_CASE(protocol_garbage_gives_econn_then_recovery),
        TEST_CASE(huge_bulk_string_is_eproto_and_freed),
        TEST_CASE(huge_bulk_announced_and_never_sent_is_econn),
        TEST_CASE(big_array_announced_is_refused_and_the_attempt_retried),
        TEST_CASE(loading_is_waited_out_by_a_waiting_acquire),
        TEST_CASE(silence_gives_econn_on_time),
        TEST_CASE(unsolicited_error_reply_drops_the_connection_and_it_comes_back),
        TEST_CASE(subscribe_refused_waiter_still_ends_on_time),
        TEST_CASE(pubsub_messages_of_odd_shapes_are_ignored),
        TEST_CASE(an_unasked_unsubscribe_of_a_lingering_channel_is_dropped_once),
        TEST_CASE(nodes_that_redirect_to_each_other_are_waited_out),
        TEST_CASE(client_free_with_a_huge_reply_half_read),
        TEST_CASE(busy_answer_with_a_huge_ttl_is_not_undefined_behaviour),
        {0},
    };
#ifdef LEASH_HOSTILE_TLS
    /* test_hostile_tls: the same replies, through TLS. */
    hw_tls = 1;
#endif
    return test_main(argc, argv, cases);
}
