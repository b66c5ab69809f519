/* SPDX-License-Identifier: MIT */
/*
 * One connection to one Redis server (a node's command connection or its
 * subscriber connection): connecting, the handshake (AUTH, INFO for the
 * server's version, SELECT, TIME, SCRIPT LOAD; PING when there is none of
 * them: a connection is ready only once the server answered it), the
 * silence timeout that
 * hiredis 0.14 lacks, reconnecting with exponential backoff and jitter,
 * and the queue of commands not written yet: issued while it is not
 * ready, or waiting for the loop, or for room in the window of commands
 * written and not answered.
 *
 * A command (leash__cmd) given to leash__conn_send completes exactly once,
 * never inside leash__conn_send: with the reply, or without one:
 *   LEASH_ECONN      its deadline passed before it could be answered (Redis
 *                    down, or still answering a transient error: LOADING,
 *                    BUSY, ...), or the connection broke after it was sent
 *                    and it is not LEASH__CMD_RETRY (or its deadline passed);
 *   LEASH_EAUTH      the handshake was refused while it waited;
 *   LEASH_ETLS       TLS was refused while it waited (a certificate, an
 *                    alert, a server that does not speak TLS);
 *   LEASH_ECANCELED  the connection is torn down (the client is freed).
 * A LEASH__CMD_RETRY command whose connection broke is sent again once the
 * connection is back (leash's scripts are idempotent per owner token). Any
 * command answered with a transient error is sent again after a short pause
 * while its deadline allows: such an answer means it did not run. NOSCRIPT
 * turns an EVALSHA into the EVAL of the same script, sent again. Neither
 * goes again for a LEASH__CMD_ONCE command, nor for an orphan without
 * LEASH__CMD_RETRY (cancelled, or a Redlock grant's copy dropped: route/
 * copies.h): it would run behind the release written after it.
 *
 * The server's clock: the handshake asks for TIME, and the owner reports the
 * server time it reads in replies (leash__conn_server_time). From them the
 * connection keeps a lower bound of (server ms - monotonic ms), so that a
 * command can carry a server-time stamp, written into it at every write: a
 * copy of a command that sat in a frozen server's socket can then tell that
 * it arrived too late. The best bound is kept while the replies agree with
 * it; one whose upper bound (its command's write) is below it says that
 * the server's clock went back (a step: NTP, an operator): logged, and the
 * bound starts again from that reply. So that a stamp never rests on an
 * offset older than clock_check_ms (a lease), a stamped command written
 * later than that after the last reply that carried the server's time
 * goes behind a TIME (one round trip, on an idle connection only).
 */
#ifndef LEASH_WIRE_CONN_H
#define LEASH_WIRE_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "base/env.h"
#include "base/list.h"
#include "base/timer.h"
#include "wire/script.h"
#include "wire/sock.h"

struct redisReply;
typedef struct leash__conn leash__conn;
typedef struct leash__cmd leash__cmd;

/* What came with a command's completion besides its reply. */
typedef struct leash__reply_info {
    /* For a command sent with WAIT, how many replicas acknowledged it (-1
     * when WAIT failed or was not asked for). */
    long long acked;
    /* Monotonic ms when the copy that was answered was written (0: never
     * written): the server ran it after that. */
    int64_t written_at;
    /* It was written more than once (LEASH__CMD_REWRITTEN). */
    int rewritten;
} leash__reply_info;

/* reply is valid during the call only; NULL when status != LEASH_OK. */
typedef void leash__reply_fn(void *arg, struct redisReply *reply, int status,
                             const leash__reply_info *info);

enum {
    LEASH__CMD_RETRY = 1,       /* resend after a reconnect while the deadline allows */
    LEASH__CMD_SENT = 2,        /* written to hiredis; its callback is pending */
    LEASH__CMD_ORPHAN = 4,      /* nobody waits for the answer any more */
    LEASH__CMD_WRITTEN = 8,     /* was written at least once: it may have run */
    LEASH__CMD_DELAYED = 16,    /* waits in the delayed list for its send_at */
    LEASH__CMD_KEEP = 32,       /* its owner frees it (or sends it again) after fn */
    LEASH__CMD_BACKGROUND = 64, /* written at teardown like an orphan (its owner still listens) */
    /* Never sent again after a transient answer (BUSY, LOADING...) nor as
     * EVAL after NOSCRIPT: it completes with that answer. A command that
     * may write what a command sent after it removes (a Redlock renewal
     * that spreads a hold) must not go behind that command (the delayed
     * list, or the tail of the queue). */
    LEASH__CMD_ONCE = 128,
    /* The connection's own (a TIME ahead of a stamp): not one of the
     * owner's commands, so not counted in commands_sent. */
    LEASH__CMD_UPKEEP = 256,
    /* Written more than once (a resend after a reconnect, a redirect, a
     * transient answer): a copy other than the answered one may have run. */
    LEASH__CMD_REWRITTEN = 512
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
    leash__list link; /* in one of its connection's lists */
    leash__conn *conn;
    char *buf;
    size_t len;
    const leash__script *script; /* EVALSHA of this script (NOSCRIPT -> EVAL), or NULL */
    unsigned flags;
    int64_t deadline; /* monotonic ms; 0 = none */
    int64_t send_at;  /* while delayed: when to write it */
    int stamp;        /* LEASH__STAMP_* */
    int64_t stamp_ms;
    unsigned transient; /* transient answers so far */
    /* A WAIT wait_replicas wait_timeout_ms follows it on the wire (0: no):
     * one WAIT for the commands written together (conn.c, held_for_wait). */
    int wait_replicas;
    int64_t wait_timeout_ms;
    struct redisReply *first; /* in acking: its own reply, until the WAIT's comes */
    int fate;                 /* in limbo: LEASH_OK lost with its connection, else the status */
    int64_t written_at;       /* monotonic ms of its last write */
    unsigned publish_arg;     /* the argument naming its publish verb (0: none) */
    leash__reply_fn *fn;
    void *arg;
};

enum leash__conn_role {
    LEASH__CONN_CMD,
    LEASH__CONN_SUB
};
enum leash__conn_state {
    LEASH__CONN_DOWN,       /* waiting for the next connect attempt */
    LEASH__CONN_CONNECTING, /* TCP / unix connect (and TLS handshake) in progress */
    LEASH__CONN_HANDSHAKE,  /* AUTH / SELECT / TIME / SCRIPT LOAD sent */
    LEASH__CONN_READY
};

/* Where and how to connect; owned by whoever made the connection, and
 * alive as long as it. The client's (options.h) is the wire layer's part
 * of its configuration, which a route copies per server with its address. */
typedef struct leash__conn_cfg {
    const char *host; /* when unix_path is NULL */
    int port;
    const char *unix_path;
    const char *username, *password;
    int db;
    int64_t connect_timeout_ms, command_timeout_ms;
    int64_t reconnect_min_ms, reconnect_max_ms;
    leash__tls *tls;             /* NULL: plain TCP; else TLS to a host (not a unix socket) */
    const char *tls_server_name; /* SNI and the name verified; NULL: host */
    const leash__script *const *scripts; /* SCRIPT LOADed on a command connection */
    int nscripts;
    /* ROLE in the handshake of a command connection: a server that is not
     * a master is refused (not_master, then the connection breaks and
     * retries), and so is -READONLY answering a command. */
    int require_master;
    int sentinel; /* a Redis Sentinel: AUTH only, no INFO, TIME or scripts */
    /* A server older than this (LEASH__VERSION) is refused: what the
     * options ask for (min_version_for, for the log line) needs it. */
    int min_version;
    const char *min_version_for;
    /* enum leash_pubsub, as asked. LEASH_PUBSUB_AUTO (and _OFF, which
     * publishes as AUTO does): on a server before
     * 7.0 (or whose version is not known) the client uses classic pub/sub,
     * and a command built with SPUBLISH before the version was known goes
     * with PUBLISH. */
    int pubsub;
    /* A stamp (LEASH__STAMP_*) is written with an offset that a reply
     * confirmed within this many ms (the client's lease): else the
     * connection asks TIME first and holds its queue for the answer. 0:
     * never asked. */
    int64_t clock_check_ms;
} leash__conn_cfg;

/* AUTH, ROLE, INFO server, INFO memory, TIME, SELECT and SCRIPT LOADs (the
 * scripts and their variants for older servers), or PING alone. */
#define LEASH__HANDSHAKE_MAX 32

struct leash__conn {
    leash__env *env;
    char label[160]; /* "command connection to HOST:PORT", for log lines */
    const leash__conn_cfg *cfg;
    int role;
    int state;
    leash__sock *sock;  /* NULL while down */
    leash__timer timer; /* connect timeout, silence timeout, backoff, delayed sends */
    int64_t next_attempt;
    int64_t backoff_ms;
    int64_t last_progress;   /* last reply (or first send after idle) */
    unsigned inflight;       /* replies still expected */
    size_t window_used;      /* bytes of the commands in `sent` */
    unsigned handshake_left; /* handshake commands written */
    unsigned handshake_next; /* ... and answered */
    int handshake_tags[LEASH__HANDSHAKE_MAX];
    /* The last handshake was refused: LEASH_EAUTH, LEASH_ETLS, or
     * LEASH_EREDIS (a server older than cfg->min_version). */
    int refused;
    /* The last loss was not ours: the server or the network closed the
     * socket (EOF, a reset, an error), where 0 is a break of ours (a
     * timeout, a refused handshake, leash__conn_reset). A subscriber
     * connection tells a proxy that closes on SUBSCRIBE by it (node.c). */
    int peer_closed;
    /* The server's version (LEASH__VERSION; Valkey: the Redis version it
     * is compatible with) from INFO in the handshake of a command
     * connection; 0 while not known. Scripts go in their variant for it,
     * and what only newer servers have is used from it, never from an
     * error at run time. */
    int version;
    int handshake_busy;      /* the last handshake got LOADING or BUSY */
    int not_master;          /* require_master: the server said it is a replica */
    int evict_warned;        /* its maxmemory-policy can evict locks: said once */
    unsigned failures;       /* connect attempts that failed since it was last ready */
    int was_ready;           /* has been ready once: the next ready is a reconnect */
    leash__list queue;       /* not sent yet */
    leash__list *retry_tail; /* last resent command at the queue's front (or &queue) */
    leash__list delayed;     /* to be written at their send_at */
    leash__list sent;        /* written, waiting for their reply */
    /* Answered, waiting for the answer of the WAIT written behind them (in
     * the order written: the replies before it of commands without one
     * too, so that commands complete in order). */
    leash__list acking;
    unsigned wait_group; /* commands written since the last WAIT that ask for one */
    int wait_group_replicas;
    int64_t wait_group_timeout_ms;
    int wait_out;      /* that WAIT is written and not answered */
    leash__list limbo; /* being settled one by one (failed, expired, lost) */
    /* Orphans (nobody waits for their answer) waiting for the connection
     * to be ready: a server that is down can be owed thousands of
     * releases (route/copies.h). Kept apart from the queue so that its
     * timer and scans cost nothing per orphan: they expire together, every
     * ORPHAN_SWEEP_MS, and go first once the connection is ready. */
    leash__list owed;
    int64_t owed_sweep_at; /* 0 while owed is empty */
    int64_t server_offset; /* lower bound of server ms - monotonic ms */
    int server_offset_known;
    int64_t server_offset_at; /* monotonic ms of the last sample that agreed */
    int clock_probe;          /* a TIME is out: the queue waits for it */
    /* The owner's hooks: the connection became ready / was lost; a frame
     * on a subscriber connection (valid during the call). */
    void (*on_ready)(leash__conn *conn);
    void (*on_down)(leash__conn *conn);
    void (*on_frame)(leash__conn *conn, struct redisReply *frame);
    void *owner;
};

void leash__conn_init(leash__conn *conn, leash__env *env, const leash__conn_cfg *cfg, int role);
/* Makes the connection's timer (the env is attached). LEASH_OK / ENOMEM. */
int leash__conn_prepare(leash__conn *conn);
/* Starts the first connect. */
void leash__conn_start(leash__conn *conn);
/* Teardown at client free: queued orphans are written if possible (until
 * the socket would block: nothing waits), every other command completes
 * LEASH_ECANCELED, the socket closes. */
void leash__conn_teardown(leash__conn *conn);

/* A command in buf (malloc'ed, owned by the command from here on). NULL
 * without memory (buf is then freed). */
leash__cmd *leash__cmd_new(char *buf, size_t len, const leash__script *script, unsigned flags,
                           int64_t deadline, leash__reply_fn *fn, void *arg);
/* Argument `arg` of cmd (0 is the command's name) is the verb its script
 * publishes with: "spublish" there becomes "publish" on a connection with
 * cfg->pubsub other than LEASH_PUBSUB_SHARDED to a server without sharded pub/sub (see
 * there). */
void leash__cmd_publish_arg(leash__cmd *cmd, unsigned arg);
/* Marks cmd's last argument as a stamp of the given kind. */
void leash__cmd_stamp(leash__cmd *cmd, int kind, int64_t stamp_ms);
/* Frees a command that no connection holds (never given to one, or a
 * LEASH__CMD_KEEP command after its completion). */
void leash__cmd_free(leash__cmd *cmd);
/* A copy of cmd (its bytes, script, flags, deadline, stamp and WAIT), not
 * given to any connection, with no owner; NULL without memory. */
leash__cmd *leash__cmd_clone(const leash__cmd *cmd);
/* Sends WAIT n timeout_ms right behind cmd, on every write of it. */
void leash__cmd_wait(leash__cmd *cmd, int n, int64_t timeout_ms);
/* Takes cmd back from its connection while it is not written (queued,
 * delayed, or waiting to be resent after a reconnect): 0, and the caller
 * owns it; -1 when it is written and its answer is still to come. */
int leash__cmd_take(leash__cmd *cmd);
/* Queues cmd (ownership passes to the connection); it is written from the
 * loop, in the order sent, once the connection is ready and the window of
 * written commands has room (conn.c). */
void leash__conn_send(leash__conn *conn, leash__cmd *cmd);
/* The same, not written before the monotonic time send_at. */
void leash__conn_send_at(leash__conn *conn, leash__cmd *cmd, int64_t send_at);
/* The owner stops waiting: an unsent command is dropped, a sent one is
 * left to finish silently. */
void leash__cmd_cancel(leash__cmd *cmd);
/* The owner stops waiting, but the command still goes out (e.g. a release). */
void leash__cmd_orphan(leash__cmd *cmd);
/* The owner stops waiting for a copy that others made moot: one written,
 * or waiting for its turn on a ready connection (the loop, the window),
 * goes out unheard, as it would have were it written at once; one that
 * waits for its connection is dropped. */
void leash__cmd_drop(leash__cmd *cmd);

/* The server's clock read `server_ms` (ms since the epoch) during a reply
 * that just arrived: a lower bound of the clock offset. */
/* A reply read server_ms (the server's clock, whole ms) after the command
 * it answers was written at written_at (monotonic ms; 0 unknown). */
void leash__conn_server_time(leash__conn *conn, int64_t server_ms, int64_t written_at);

/* For the subscriber connection: a raw command (buf is copied) whose
 * answers come as frames (on_frame); `replies` confirmations are expected.
 * 0, or -1 when the connection is not ready or without memory. */
int leash__conn_send_raw(leash__conn *conn, const char *buf, size_t len, unsigned replies);
/* Replies that were counted in `inflight` arrived (or other traffic did). */
void leash__conn_progress(leash__conn *conn, unsigned replies);

/* 1 for an error reply that means "not run now, try again soon": LOADING,
 * BUSY (a script runs), TRYAGAIN, CLUSTERDOWN, MASTERDOWN. */
int leash__reply_transient(const struct redisReply *reply);

int leash__conn_ready(const leash__conn *conn);
/* The Redis version (LEASH__VERSION) in the text of an INFO server reply:
 * its redis_version, which Valkey keeps for the Redis version it is
 * compatible with; 0 when it has none. */
int leash__info_version(const char *info);
/* Drops the connection now (the owner saw the server misbehave or refuse
 * something): what was written is lost as on any break; it reconnects
 * after the longest backoff (reconnect_max_ms). */
void leash__conn_reset(leash__conn *conn);
/* The cfg's address was changed by its owner (a host of NULL and no
 * unix_path: none yet, the connection then waits without connecting):
 * what was written is lost as on any break, and it connects there now.
 * The old address strings must stay readable until this returns. */
void leash__conn_retarget(leash__conn *conn);
/* Completes every command not written yet with status (a route that
 * learned they cannot go anywhere, e.g. LEASH_EAUTH). */
void leash__conn_fail_unsent(leash__conn *conn, int status);
/* "command connection to HOST:PORT" (or the socket path), for log lines. */
const char *leash__conn_role_name(const leash__conn *conn);

#endif
