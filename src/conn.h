/*
 * One connection to Redis (the command connection or the subscriber
 * connection of a client): connecting, the handshake (AUTH, SELECT, SCRIPT
 * LOAD), the silence timeout that hiredis 0.14 lacks, reconnecting with
 * exponential backoff and jitter, and the queue of commands issued while it
 * is not ready.
 *
 * A command (leash__cmd) given to leash__conn_send completes exactly once,
 * never inside leash__conn_send: with the reply, or without one:
 *   LEASH_ECONN      its deadline passed before it could be answered (Redis
 *                    down, or still answering a transient error: LOADING,
 *                    BUSY), or the connection broke after it was sent and it
 *                    is not LEASH__CMD_RETRY (or its deadline passed);
 *   LEASH_EAUTH      the handshake was refused while it waited;
 *   LEASH_ECANCELED  the client is being freed.
 * A LEASH__CMD_RETRY command whose connection broke is sent again once the
 * connection is back (our scripts are idempotent per owner token). Any
 * command answered with a transient error is sent again after a short pause
 * while its deadline allows: such an answer means it did not run.
 *
 * The server's clock: the handshake asks for TIME, and the owner reports
 * the server time it reads in replies (leash__conn_server_time). From them
 * the connection keeps a lower bound of (server ms - monotonic ms), so that
 * a command can carry a server-time stamp, written into it at every write:
 * a copy of a command that sat in a frozen server's socket can then tell
 * that it arrived too late.
 */
#ifndef LEASH_CONN_H
#define LEASH_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "timer.h"

struct redisAsyncContext;
struct redisReply;
typedef struct leash_client leash_client;
typedef struct leash__conn leash__conn;
typedef struct leash__cmd leash__cmd;

/* reply is valid during the call only; NULL when status != LEASH_OK. */
typedef void leash__reply_fn(void *arg, struct redisReply *reply, int status);

enum {
    LEASH__CMD_RETRY = 1,   /* resend after a reconnect while the deadline allows */
    LEASH__CMD_SENT = 2,    /* written to hiredis; its callback is pending */
    LEASH__CMD_ORPHAN = 4,  /* nobody waits for the answer any more */
    LEASH__CMD_WRITTEN = 8, /* was written at least once: it may have run */
    LEASH__CMD_DELAYED = 16 /* in the connection's delayed list */
};

/* A server-time stamp in a command's last argument, which must be
 * LEASH__STAMP_DIGITS zeros when the command is built. */
enum {
    LEASH__STAMP_NONE,
    /* write time + stamp_ms on the server's clock: "void after this" */
    LEASH__STAMP_NOT_AFTER,
    /* 0 on the first write; on a resend stamp_ms (a monotonic time) on the
     * server's clock: "a resend; the hold was valid until then" */
    LEASH__STAMP_RESEND_VALID_UNTIL
};
#define LEASH__STAMP_DIGITS 19

struct leash__cmd {
    leash__cmd *next, *prev;
    leash__conn *conn;
    char *buf;
    size_t len;
    int script; /* enum leash__script, or -1 */
    unsigned flags;
    int64_t deadline; /* monotonic ms; 0 = none */
    int64_t send_at;  /* while delayed: when to write it */
    int stamp;        /* LEASH__STAMP_* */
    int64_t stamp_ms;
    unsigned transient; /* transient answers so far */
    leash__reply_fn *fn;
    void *arg;
};

typedef struct leash__cmd_list {
    leash__cmd *head, *tail;
} leash__cmd_list;

enum leash__conn_role {
    LEASH__CONN_CMD,
    LEASH__CONN_SUB
};
enum leash__conn_state {
    LEASH__CONN_DOWN,       /* waiting for the next connect attempt */
    LEASH__CONN_CONNECTING, /* TCP / unix connect in progress */
    LEASH__CONN_HANDSHAKE,  /* AUTH / SELECT / SCRIPT LOAD sent */
    LEASH__CONN_READY
};

struct leash__conn {
    leash_client *client;
    int role;
    int state;
    struct redisAsyncContext *ac;
    leash__timer timer; /* connect timeout, silence timeout, or backoff */
    int64_t next_attempt;
    int64_t backoff_ms;
    int64_t last_progress; /* last reply (or first send after idle) */
    unsigned inflight;     /* replies still expected */
    unsigned handshake_left;
    int auth_failed;         /* the last handshake was refused */
    int handshake_busy;      /* the last handshake got LOADING or BUSY */
    int break_soon;          /* drop it from the timer: hiredis is in a callback */
    unsigned failures;       /* connect attempts that failed since it was last ready */
    int down_pending;        /* our own break is in progress */
    leash__cmd_list queue;   /* not sent yet */
    leash__cmd *retry_tail;  /* last resent command at the queue's front */
    leash__cmd_list delayed; /* to be written at their send_at */
    leash__cmd_list sent;
    int64_t server_offset; /* lower bound of server ms - monotonic ms */
    int server_offset_known;
    /* The owner's hooks: the connection became ready / was lost. */
    void (*on_ready)(leash__conn *conn);
    void (*on_down)(leash__conn *conn);
};

void leash__conn_init(leash__conn *conn, leash_client *c, int role);
/* Starts the first connect (after the client was attached). */
void leash__conn_start(leash__conn *conn);
/* Teardown at client free: queued orphans are written if possible, every
 * other command completes LEASH_ECANCELED, the socket closes. */
void leash__conn_teardown(leash__conn *conn);

leash__cmd *leash__cmd_new(char *buf, size_t len, int script, unsigned flags, int64_t deadline,
                           leash__reply_fn *fn, void *arg);
/* Queues or sends cmd (ownership passes to the connection). */
void leash__conn_send(leash__conn *conn, leash__cmd *cmd);
/* The same, not written before the monotonic time send_at. */
void leash__conn_send_at(leash__conn *conn, leash__cmd *cmd, int64_t send_at);
/* Marks cmd's last argument as a stamp of the given kind. */
void leash__cmd_stamp(leash__cmd *cmd, int kind, int64_t stamp_ms);
/* The server's clock read `server_ms` (ms since the epoch) during a reply
 * that just arrived: a lower bound of the clock offset. */
void leash__conn_server_time(leash__conn *conn, int64_t server_ms);
/* The owner stops waiting: an unsent command is dropped, a sent one is
 * left to finish silently. */
void leash__cmd_cancel(leash__cmd *cmd);
/* The owner stops waiting, but the command still goes out (e.g. a release). */
void leash__cmd_orphan(leash__cmd *cmd);

/* For the subscriber connection: a raw command whose replies are routed by
 * hiredis's pub/sub machinery to fn; `replies` confirmations are expected. */
int leash__conn_send_raw(leash__conn *conn, void (*fn)(struct redisAsyncContext *, void *, void *),
                         const char *buf, size_t len, unsigned replies);
/* 1 for an error reply that means "not run now, try again soon": LOADING,
 * BUSY (a script runs), TRYAGAIN, CLUSTERDOWN, MASTERDOWN. */
int leash__reply_transient(const struct redisReply *reply);

/* Replies that were counted in `inflight` arrived (or other traffic did). */
void leash__conn_progress(leash__conn *conn, unsigned replies);

int leash__conn_ready(const leash__conn *conn);

#endif
