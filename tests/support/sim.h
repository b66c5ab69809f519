/* SPDX-License-Identifier: MIT */
/*
 * A simulated Redis on a virtual clock, for deterministic unit tests.
 *
 * The sim is an event loop (leash/loop.h) and the server side of every
 * connection a client makes through it. Time only moves when the test
 * moves it; every reply is written by the test (or by auto mode, below).
 * Nothing here knows leash's internal structs: what the sim knows about a
 * connection it learns from the bytes on it.
 *
 *     sim *s = sim_new();
 *     leash_options o;
 *     leash_client *c;
 *     sim_options(s, &o);                  // leash_options_init + test timeouts
 *     leash_client_new(&c, &o);
 *     sim_attach(s, c);
 *     sim_run(s);                          // connects; auto mode loads the scripts
 *     leash_acquire(l, 0, on_acquired, &r);
 *     sim_cmd *cmd = sim_wait_cmd(s, SIM_ROLE_CMD, "EVALSHA");
 *     sim_reply(cmd->conn, "-ERR x\r\n");
 *     sim_run(s);                          // on_acquired runs here
 *     leash_client_free(c);
 *     CHECK(sim_timers_alive(s) == 0);
 *     sim_free(s);
 *
 * How it works: leash connects its sockets itself (nonblocking, to a unix
 * socket that the sim listens on and never serves) and asks the loop to
 * watch each one (leash/loop.h's io hooks). io_new(fd) is where the sim
 * learns of a new connection: it dup3()s one end of a socketpair over the
 * client's fd (leash keeps its fd number; the first write event completes
 * its connect, whose SO_ERROR reads 0 on the pair) and holds the other
 * end. io_set says what the client waits for; the sim calls the watcher
 * back (LEASH_IO_WRITE while the client's end takes bytes, LEASH_IO_READ
 * while bytes or the EOF wait on it) instead of a real loop; io_free is
 * where the client drops the connection (it closes the fd right after).
 * A bare hiredis context (sim_attach_context) is driven the same way
 * through hiredis's own event hooks and redisAsyncHandleRead/Write. Timers
 * live in a table and fire on the virtual clock.
 *
 * Linking: sim.c defines leash__now_ms(), the virtual clock, in place of
 * the library's src/base/clock.c; it must be an object of the program (CMake:
 * link with leash_test_sim), not in an archive after libleash.a.
 *
 * Rules:
 * - Leash callbacks run only inside sim_run(), sim_advance() and
 *   sim_wait_cmd*() (and inside leash calls that document it, such as
 *   leash_client_free). sim_reply() and friends only queue bytes.
 * - A callback may call any leash function (frees included) and any
 *   sim_reply/push/publish/close/drop/set_auto; it must not call
 *   sim_run, sim_advance, sim_wait_cmd* or sim_free (the test fails).
 * - Free every client attached to a sim before sim_free().
 * - sim_new() ignores SIGPIPE for the process: a client writing to a
 *   connection the sim closed must get EPIPE, as in production.
 * - The sim fails the running test case (tests/support/check.h) when it
 *   cannot go on: out of memory, a socket call failing, a client writing
 *   something that is not a command, NULL passed for a sim or connection;
 *   and when a client breaks a rule of leash/loop.h's fd watchers: a
 *   socket not connected to the sim's, two watchers for one fd, io_set or
 *   io_free on a watcher already freed (or another loop's), unknown
 *   events, an fd closed before its watcher was freed, a watcher still
 *   alive when the loop's cleanup runs.
 * - One thread. Several sims may exist at once but they share one clock;
 *   one sim (with any number of clients) per case is the intended use.
 */
#ifndef LEASH_TESTS_SIM_H
#define LEASH_TESTS_SIM_H

#include <stddef.h>
#include <stdint.h>

#include <leash/leash.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The virtual clock (ms) is here when a sim is made while no other sim
 * exists: at the start of every case, forked or not. */
#define SIM_START_MS INT64_C(1000000)
/* TIME answers a wall clock of SIM_WALL_S seconds plus the virtual ms. */
#define SIM_WALL_S INT64_C(1795000000)
/* How far sim_wait_cmd() moves the clock, at most, looking for a command. */
#define SIM_WAIT_MS INT64_C(60000)

typedef struct sim sim;
typedef struct sim_conn sim_conn;
struct redisAsyncContext;

/* A command the client sent: an array of bulk strings. argv[i] holds
 * argvlen[i] bytes plus a NUL (arguments may contain NULs). Owned by the
 * sim; valid until it is answered (sim_reply*, auto mode), dropped
 * (sim_drop_pending) or the sim is freed. A command on a connection that
 * closed stays until sim_free, so what a client wrote just before it went
 * away can still be read. */
typedef struct sim_cmd {
    int argc;
    char **argv;
    size_t *argvlen;
    sim_conn *conn;        /* where it arrived */
    struct sim_cmd *next_; /* private */
} sim_cmd;

/* What a connection is, judged by what it sent: NONE until it sends one of
 * SUBSCRIBE, SSUBSCRIBE, PSUBSCRIBE (then SUB, for good) or EVAL, EVALSHA,
 * SCRIPT (then CMD, unless already SUB). ANY is for lookups only. */
enum sim_role {
    SIM_ROLE_ANY = -1,
    SIM_ROLE_NONE = 0,
    SIM_ROLE_CMD = 1,
    SIM_ROLE_SUB = 2
};

/* Commands auto mode answers (all on after sim_new). It answers a command
 * only once it is the oldest pending on its connection, so replies keep
 * the order of a pipeline: an auto command behind one the test has not
 * answered yet waits for it.
 *   AUTH          +OK (any credentials)
 *   SELECT        +OK
 *   PING          +PONG, or the bulk string PING was given; on a
 *                 connection with subscriptions the RESP2 pub/sub form
 *                 ["pong", arg or ""], as Redis does (hiredis 0.14 does
 *                 not give that to the PING's callback, with Redis either)
 *   TIME          [seconds, microseconds] of SIM_WALL_S + the virtual ms
 *   INFO          "# Server" with redis_version SIM_REDIS_VERSION
 *   INFO_MEMORY   INFO memory: "# Memory" with maxmemory 0, policy noeviction
 *   SCRIPT_LOAD   SCRIPT LOAD src: the SHA1 of src
 *   SUBSCRIBE     one confirmation per channel, with the running count
 *   UNSUBSCRIBE   the same (no channel: every channel subscribed)
 * On a connection with subscriptions, AUTH, SELECT, TIME, INFO and SCRIPT LOAD
 * get Redis's "only (P|S)SUBSCRIBE / ... are allowed in this context"
 * error instead. Every other command (EVAL, EVALSHA, PSUBSCRIBE, ...)
 * waits for the test. */
enum sim_auto {
    SIM_AUTO_AUTH = 1u << 0,
    SIM_AUTO_SELECT = 1u << 1,
    SIM_AUTO_PING = 1u << 2,
    SIM_AUTO_TIME = 1u << 3,
    SIM_AUTO_SCRIPT_LOAD = 1u << 4,
    SIM_AUTO_SUBSCRIBE = 1u << 5,
    SIM_AUTO_UNSUBSCRIBE = 1u << 6,
    SIM_AUTO_INFO = 1u << 7,
    SIM_AUTO_INFO_MEMORY = 1u << 8,
    SIM_AUTO_ALL = (1u << 9) - 1
};
/* The version the sim's INFO reports (Debian 12's). */
#define SIM_REDIS_VERSION "7.0.15"

/* ---- the sim and its clock ---- */

/* A new sim, listening on a socket in test_tmpdir(). Never NULL (fails the
 * test instead). Auto mode is on for every kind. The clock restarts at
 * SIM_START_MS if no other sim exists. */
sim *sim_new(void);

/* Closes every connection, frees every command and the sim. Fails the test
 * if a client attached through it, or a context of sim_attach_context, has
 * not been freed (its timers, fd watchers and contexts would point into
 * freed memory).
 * NULL is a no-op. */
void sim_free(sim *s);

/* The virtual clock, in ms; what leash__now_ms() answers. */
int64_t sim_now(void);

/* leash_options_init(o), then: unix_path = the sim's socket,
 * connect_timeout_ms = command_timeout_ms = 200, reconnect_min_ms = 10,
 * reconnect_max_ms = 40. With LEASH_SIM_DEBUG set in the environment, a
 * log callback that prints every leash line (debug level) with the virtual
 * time, and the sim traces the traffic to stderr. The unix_path string
 * belongs to the sim (leash_client_new copies it). */
void sim_options(const sim *s, leash_options *o);

/* Attaches client c to the sim's loop (leash_client_attach_loop): c starts
 * connecting (its sockets become connections of the sim at once, see
 * sim_conn_at); nothing happens on the wire until sim_run. Returns what
 * leash_client_attach_loop returns (LEASH_OK, LEASH_ESTATE, ...), or
 * LEASH_ENOMEM. */
int sim_attach(sim *s, leash_client *c);

/* The path of the sim's listening socket (owned by the sim). */
const char *sim_unix_path(const sim *s);

/* Attaches a bare hiredis context, made with redisAsyncConnectUnix(
 * sim_unix_path(s)): for tests of hiredis itself or of the sim, which
 * serves it as it serves a leash client's sockets. Its connection has no
 * client (sim_conn_client is NULL).
 * Returns 0, or -1 if the context is attached to a loop already. The
 * caller frees the context (redisAsyncFree), before sim_free. */
int sim_attach_context(sim *s, struct redisAsyncContext *ac);

/* Runs until nothing changes, without moving the clock: fires due timers
 * (earliest first), gives a write event to each client that waits for one
 * (the first completes a connect), reads and parses what clients wrote,
 * auto-answers, and delivers queued server bytes one complete reply per
 * read event, so the client reads exactly the bytes of that reply. Fails
 * the test if the client never settles (a timer re-armed at 0 ms forever,
 * say), or a read event leaves every waiting byte unread. */
void sim_run(sim *s);

/* Moves the clock forward by ms (>= 0): to each timer due on the way, in
 * order, with a sim_run at each stop, then to now + ms and a last
 * sim_run. */
void sim_advance(sim *s, int64_t ms);

/* Due time of the earliest running timer, or -1 if none runs. */
int64_t sim_next_due(const sim *s);

/* Timers made by clients and not freed yet (running or stopped). 0 after
 * every client was freed, or a timer outlived its client. */
int sim_timers_alive(const sim *s);

/* Clients attached whose loop cleanup has not run yet. */
int sim_client_count(const sim *s);

/* The n-th timer_new call from now (1-based) answers NULL, as a loop out
 * of memory would (the sim's own memory is not failalloc's). 0 disarms. */
void sim_fail_timer_new(sim *s, int n);
/* 1 once the timer_new failure armed by sim_fail_timer_new happened. */
int sim_timer_new_failed(const sim *s);

/* Turns auto mode on or off for the kinds in the mask (enum sim_auto). */
void sim_set_auto(sim *s, unsigned kinds, int on);

/* ---- connections (the server's side) ---- */

/* Every connection ever attached, oldest first (index 0..count-1). The
 * sim_conn objects live until sim_free, also after they closed. */
int sim_conn_count(const sim *s);
sim_conn *sim_conn_at(const sim *s, int i);

/* The newest live connection of role (SIM_ROLE_ANY: any) made by client c
 * (NULL: any client); NULL if there is none. */
sim_conn *sim_conn_find(const sim *s, const leash_client *c, int role);
/* sim_conn_find(s, NULL, SIM_ROLE_CMD) and (s, NULL, SIM_ROLE_SUB). */
sim_conn *sim_cmd_conn(const sim *s);
sim_conn *sim_sub_conn(const sim *s);

/* Its position in sim_conn_at's order. */
int sim_conn_index(const sim_conn *c);
/* enum sim_role. */
int sim_conn_role(const sim_conn *c);
/* The client that made it (compare only: it may have been freed). */
const leash_client *sim_conn_client(const sim_conn *c);
/* 1 while the client's end exists (its fd watcher, or a bare hiredis
 * context) and the sim has not closed it. */
int sim_conn_live(const sim_conn *c);
/* Commands received on it so far (answered or not). */
uint64_t sim_conn_received(const sim_conn *c);
/* Commands received and not answered nor dropped yet. */
int sim_conn_pending(const sim_conn *c);
/* The i-th of those, oldest first (0 = the one sim_reply answers); NULL
 * when i is out of range. */
sim_cmd *sim_conn_cmd(const sim_conn *c, int i);
/* Channels (and patterns) the server side has confirmed to it, judged by
 * the subscribe/unsubscribe frames the sim queued for it, whoever wrote
 * them; and whether it is subscribed to one channel. */
int sim_conn_subscriptions(const sim_conn *c);
int sim_conn_subscribed(const sim_conn *c, const char *channel, size_t len);
/* The i-th of them, in the order they were confirmed (NUL-terminated,
 * owned by the connection, valid until it changes); its length in *len if
 * len is not NULL, and in *pattern (1 for PSUBSCRIBE) if that is not NULL.
 * NULL when i is out of range. */
const char *sim_conn_subscription(const sim_conn *c, int i, size_t *len, int *pattern);

/*
 * Answers the oldest pending command of c with raw RESP bytes (which may
 * hold several replies, as a SUBSCRIBE of several channels needs, or part
 * of one: the rest can follow with sim_push). The bytes are queued and
 * reach the client in the next sim_run. Returns 0, or -1 (nothing sent)
 * when c has no pending command or is not live: CHECK it where it matters.
 * sim_reply takes a NUL-terminated string, sim_reply_len any bytes,
 * sim_replyf a printf format.
 */
int sim_reply(sim_conn *c, const char *resp);
int sim_reply_len(sim_conn *c, const void *resp, size_t len);
int sim_replyf(sim_conn *c, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Answers the oldest pending command as auto mode would, whether its kind
 * is switched on or not (to send a SUBSCRIBE confirmation late, say).
 * Returns 0, or -1 when there is none, c is not live, or auto mode has no
 * answer for that command. */
int sim_reply_auto(sim_conn *c);

/* Queues bytes that answer nothing (pub/sub messages, garbage, the rest of
 * a partial reply). Returns 0, or -1 when c is not live. */
int sim_push(sim_conn *c, const char *resp);
int sim_push_len(sim_conn *c, const void *resp, size_t len);

/* Queues ["message", channel, msg] on every live connection subscribed to
 * channel (exact names; patterns are not matched). Returns how many. */
int sim_publish(sim *s, const char *channel, size_t channel_len, const char *msg, size_t msg_len);

/* The server closes c: bytes already queued are delivered first, then the
 * client reads EOF. Pending commands stay readable. No-op if closed. */
void sim_close(sim_conn *c);

/* Forgets c's pending commands without answering them (a server that fell
 * silent; the commands are freed). Returns how many. */
int sim_drop_pending(sim_conn *c);

/* ---- commands ---- */

/*
 * Runs until a command named `name` (case-insensitive, first word) is
 * pending on a live connection of `role` (SIM_ROLE_ANY: any) and returns
 * the oldest such on the newest such connection. While none is there it
 * moves the clock to the next timer and runs again, up to SIM_WAIT_MS (or
 * max_ms) of virtual time; then the test fails at the caller's line.
 * sim_now() tells how far it went.
 */
#define sim_wait_cmd(s, role, name) \
    sim_wait_cmd_at_((s), (role), (name), SIM_WAIT_MS, __FILE__, __LINE__)
#define sim_wait_cmd_for(s, role, name, max_ms) \
    sim_wait_cmd_at_((s), (role), (name), (max_ms), __FILE__, __LINE__)
sim_cmd *sim_wait_cmd_at_(sim *s, int role, const char *name, int64_t max_ms, const char *file,
                          int line);

/* 1 if cmd's first word is name (case-insensitive); 0 also for NULL. */
int sim_cmd_is(const sim_cmd *cmd, const char *name);

/* Argument i (0 = the command's name) as a NUL-terminated copy that the
 * sim owns and keeps until sim_free, so it outlives the command (answer
 * first, look later); NULL when i is out of range. */
const char *sim_cmd_arg(const sim_cmd *cmd, int i);

/* For EVALSHA: the SHA1 it calls (copy, as sim_cmd_arg); else NULL. */
const char *sim_cmd_sha(const sim_cmd *cmd);

/* The source of the script whose SHA1 is sha, as sent with SCRIPT LOAD or
 * EVAL on any connection so far (owned by the sim); NULL if never seen.
 * Lets a test tell leash's scripts apart without knowing them by heart. */
const char *sim_script_source(const sim *s, const char *sha);

#ifdef __cplusplus
}
#endif

#endif
