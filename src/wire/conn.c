/* SPDX-License-Identifier: MIT */
#include "wire/conn.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "base/clock.h"
#include "base/token.h"
#include "wire/resp.h"
#include "wire/script.h"
#include "wire/sock.h"

/* What each handshake reply answers, in the order they come. */
enum {
    HS_AUTH = 1,
    HS_SELECT = 2,
    HS_TIME = 3,
    HS_INFO = 4,
    HS_ROLE = 5,
    HS_MEMORY = 6,
    HS_PING = 7,
    HS_SCRIPT = 16
};

/* Pauses before a command answered with a transient error goes again:
 * 25 ms, doubling to TRANSIENT_MAX_MS. A connection whose handshake got such
 * an answer reconnects no slower than that either. */
#define TRANSIENT_FIRST_MS 25
#define TRANSIENT_MAX_MS 400
/* A server clock that went back by this much or more is a warning (less:
 * a slew, or the rounding of a reply's bounds; debug). */
#define CLOCK_STEP_WARN_MS 100

/* The window: how many bytes of commands may be written and not answered
 * yet. The rest wait in the queue, in order, and go as answers come back.
 * A command's "not after" stamp is written when it is written, and counts
 * command_timeout_ms from there: a command must not then wait behind more
 * than the server runs in that time. Bounded by the window, what is
 * ahead of a command takes a quarter of command_timeout_ms even on a
 * server that runs only WINDOW_BYTES_PER_MS * 4 bytes of leash's scripts
 * per ms (about 10 000 acquires a second; Redis runs ten times that). The
 * queue, unlike the socket, is not silence either: the silence timer
 * counts only what was written. */
#define WINDOW_BYTES_PER_MS 512
#define WINDOW_MIN 16384
#define WINDOW_MAX (1024 * 1024)

static void conn_arm(leash__conn *conn);
static void conn_gone(leash__conn *conn);
static void conn_break(leash__conn *conn);

/* "command connection to HOST:PORT", for log lines. */
static const char *role_name(const leash__conn *conn) {
    return conn->label;
}

static const leash__logger *conn_log(const leash__conn *conn) {
    return &conn->env->log;
}

/* ---- command lists ---- */

static leash__cmd *cmd_of(leash__list *n) {
    return LEASH__CONTAINER(n, leash__cmd, link);
}

/* Takes an unsent command off the list it waits in (queue or delayed). */
static void queue_remove(leash__conn *conn, leash__cmd *cmd) {
    cmd->flags &= ~(unsigned)LEASH__CMD_DELAYED;
    if (conn->retry_tail == &cmd->link)
        conn->retry_tail = cmd->link.prev;
    leash__list_remove(&cmd->link);
}

int leash__reply_transient(const redisReply *r) {
    static const char *const words[] = {"LOADING", "BUSY ", "TRYAGAIN", "CLUSTERDOWN",
                                        "MASTERDOWN"};
    size_t i;

    if (r == NULL || r->type != REDIS_REPLY_ERROR || r->str == NULL)
        return 0;
    for (i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (strncmp(r->str, words[i], strlen(words[i])) == 0)
            return 1;
    return 0;
}

void leash__cmd_publish_arg(leash__cmd *cmd, unsigned arg) {
    cmd->publish_arg = arg;
}

/* Makes cmd publish with PUBLISH where it says SPUBLISH (its publish_arg):
 * 0, or -1 without memory. */
static int publish_classic(leash__cmd *cmd) {
    static const char sharded[] = "$8\r\nspublish\r\n", classic[] = "$7\r\npublish\r\n";
    const char *p = memchr(cmd->buf, '\n', cmd->len), *end = cmd->buf + cmd->len;
    size_t at, tail;
    char *buf;
    unsigned i;

    for (i = 0; p != NULL && i < cmd->publish_arg; i++) {
        char *q;
        unsigned long n = strtoul(p + 2, &q, 10); /* p: the \n before "$<n>\r\n" */
        p = q + 2 + n + 1 < end ? q + 2 + n + 1 : NULL;
    }
    if (p == NULL || (size_t)(end - p - 1) < sizeof(sharded) - 1 ||
        memcmp(p + 1, sharded, sizeof(sharded) - 1) != 0) {
        cmd->publish_arg = 0;
        return 0;
    }
    at = (size_t)(p + 1 - cmd->buf);
    tail = cmd->len - at - (sizeof(sharded) - 1);
    buf = malloc(cmd->len - 1);
    if (buf == NULL)
        return -1;
    memcpy(buf, cmd->buf, at);
    memcpy(buf + at, classic, sizeof(classic) - 1);
    memcpy(buf + at + sizeof(classic) - 1, cmd->buf + cmd->len - tail, tail);
    free(cmd->buf);
    cmd->buf = buf;
    cmd->len -= 1;
    cmd->publish_arg = 0;
    return 0;
}

void leash__cmd_stamp(leash__cmd *cmd, int kind, int64_t stamp_ms) {
    cmd->stamp = kind;
    cmd->stamp_ms = stamp_ms;
}

void leash__conn_server_time(leash__conn *conn, int64_t server_ms, int64_t written_at) {
    /* The server read its clock before this reply left: server_ms - now
     * is at most the true offset, the side every use of it is safe on.
     * A reply read late (the process stalled) gives a poor bound: the
     * best one is kept, or "not after" stamps would lie in the past -
     * unless the reply shows it wrong: the server read its clock after
     * the command was written, so the offset is at most server_ms + 1 -
     * written_at; below the kept bound, the server's clock went back. */
    int64_t now = leash__now_ms(), offset = server_ms - now;
    int64_t at_most = server_ms + 1 - written_at;

    if (conn->server_offset_known && written_at > 0 && at_most < conn->server_offset) {
        int64_t back = conn->server_offset - at_most;
        leash__log(conn_log(conn), back >= CLOCK_STEP_WARN_MS ? LEASH_LOG_WARN : LEASH_LOG_DEBUG,
                   "%s: the server's clock went back by at least %lld ms (stepped, or slewed): "
                   "its time stamps follow it from now on",
                   role_name(conn), (long long)back);
        conn->server_offset = offset;
    } else if (!conn->server_offset_known || offset > conn->server_offset) {
        conn->server_offset = offset;
    }
    conn->server_offset_known = 1;
    conn->server_offset_at = now;
}

static void conn_arm(leash__conn *conn);

static void on_clock_probe(void *arg, redisReply *reply, int status,
                           const leash__reply_info *info) {
    leash__conn *conn = arg;

    conn->clock_probe = 0;
    /* Lost with its connection: the reconnect's handshake asks TIME. */
    if (status != LEASH_OK || conn->env->freeing)
        return;
    if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
        reply->element[0]->type == REDIS_REPLY_STRING &&
        reply->element[1]->type == REDIS_REPLY_STRING)
        leash__conn_server_time(conn,
                                strtoll(reply->element[0]->str, NULL, 10) * 1000 +
                                    strtoll(reply->element[1]->str, NULL, 10) / 1000,
                                info->written_at);
    else
        conn->server_offset_at = leash__now_ms(); /* refused: ask again a lease later */
    conn_arm(conn);
}

/* Whether cmd's stamp, written now, reads the offset (a first write of a
 * release writes 0). */
static int stamp_needs_clock(const leash__cmd *cmd) {
    return cmd->stamp == LEASH__STAMP_NOT_AFTER ||
           (cmd->stamp == LEASH__STAMP_RESEND_VALID_UNTIL && (cmd->flags & LEASH__CMD_WRITTEN));
}

/* Whether a stamp written now would rest on an offset no reply confirmed
 * for clock_check_ms. Not before the handshake's TIME gave one (a server
 * that refused TIME gets no stamps). */
static int clock_stale(const leash__conn *conn) {
    return conn->cfg->clock_check_ms > 0 && conn->server_offset_known &&
           leash__now_ms() - conn->server_offset_at >= conn->cfg->clock_check_ms;
}

/* Writes the stamp of cmd (see LEASH__STAMP_*) into its last argument. */
static void stamp_cmd(const leash__conn *conn, leash__cmd *cmd) {
    int64_t v = 0;
    char *p;
    int i;

    if (cmd->stamp == LEASH__STAMP_NONE || cmd->len < LEASH__STAMP_DIGITS + 2)
        return;
    if (conn->server_offset_known) {
        if (cmd->stamp == LEASH__STAMP_NOT_AFTER)
            v = leash__now_ms() + cmd->stamp_ms + conn->server_offset;
        else if (cmd->flags & LEASH__CMD_WRITTEN)
            v = cmd->stamp_ms + conn->server_offset;
    }
    if (v < 0)
        v = 0;
    p = cmd->buf + cmd->len - 2 - LEASH__STAMP_DIGITS;
    for (i = LEASH__STAMP_DIGITS - 1; i >= 0; i--) {
        p[i] = (char)('0' + v % 10);
        v /= 10;
    }
}

leash__cmd *leash__cmd_new(char *buf, size_t len, const leash__script *script, unsigned flags,
                           int64_t deadline, leash__reply_fn *fn, void *arg) {
    leash__cmd *cmd = calloc(1, sizeof(*cmd));
    if (cmd == NULL) {
        free(buf);
        return NULL;
    }
    leash__list_init(&cmd->link);
    cmd->buf = buf;
    cmd->len = len;
    cmd->script = script;
    cmd->flags = flags;
    cmd->deadline = deadline;
    cmd->fn = fn;
    cmd->arg = arg;
    return cmd;
}

/* A command's own reply kept while its WAIT's is still to come. */
static void drop_first(leash__cmd *cmd) {
    if (cmd->first != NULL) {
        freeReplyObject(cmd->first);
        cmd->first = NULL;
    }
}

static void cmd_free(leash__cmd *cmd) {
    drop_first(cmd);
    free(cmd->buf);
    free(cmd);
}

void leash__cmd_free(leash__cmd *cmd) {
    cmd_free(cmd);
}

leash__cmd *leash__cmd_clone(const leash__cmd *cmd) {
    char *buf = malloc(cmd->len);
    leash__cmd *c;

    if (buf == NULL)
        return NULL;
    memcpy(buf, cmd->buf, cmd->len);
    c = leash__cmd_new(
        buf, cmd->len, cmd->script,
        cmd->flags & (LEASH__CMD_RETRY | LEASH__CMD_KEEP | LEASH__CMD_BACKGROUND | LEASH__CMD_ONCE),
        cmd->deadline, NULL, NULL);
    if (c != NULL) {
        c->stamp = cmd->stamp;
        c->stamp_ms = cmd->stamp_ms;
        c->send_at = cmd->send_at;
        c->wait_replicas = cmd->wait_replicas;
        c->wait_timeout_ms = cmd->wait_timeout_ms;
        c->publish_arg = cmd->publish_arg;
    }
    return c;
}

void leash__cmd_wait(leash__cmd *cmd, int n, int64_t timeout_ms) {
    cmd->wait_replicas = n;
    cmd->wait_timeout_ms = timeout_ms;
}

/* Tells the owner (if it still has one); the command is freed first
 * unless its owner keeps it (LEASH__CMD_KEEP): fn may free the client. */
static void cmd_complete(leash__cmd *cmd, redisReply *reply, int status, long long acked) {
    leash__reply_fn *fn = cmd->fn;
    void *arg = cmd->arg;
    int orphan = (cmd->flags & LEASH__CMD_ORPHAN) != 0 || fn == NULL;
    leash__reply_info info;

    info.acked = acked;
    info.written_at = cmd->written_at;
    info.rewritten = (cmd->flags & LEASH__CMD_REWRITTEN) != 0;
    if (orphan || !(cmd->flags & LEASH__CMD_KEEP))
        cmd_free(cmd);
    if (!orphan)
        fn(arg, reply, status, &info);
}

void leash__cmd_cancel(leash__cmd *cmd) {
    /* Sent (hiredis holds it), or being completed by fail_queue or
     * expire_queue (conn already NULL): whoever holds it frees it. */
    if ((cmd->flags & LEASH__CMD_SENT) || cmd->conn == NULL) {
        cmd->flags |= LEASH__CMD_ORPHAN;
        cmd->flags &= ~(unsigned)LEASH__CMD_RETRY;
        return;
    }
    queue_remove(cmd->conn, cmd);
    cmd_free(cmd);
}

void leash__cmd_orphan(leash__cmd *cmd) {
    cmd->flags |= LEASH__CMD_ORPHAN;
}

void leash__cmd_drop(leash__cmd *cmd) {
    if (!(cmd->flags & LEASH__CMD_SENT) && cmd->conn != NULL && leash__conn_ready(cmd->conn) &&
        !(cmd->flags & LEASH__CMD_DELAYED))
        leash__cmd_orphan(cmd);
    else
        leash__cmd_cancel(cmd);
}

int leash__cmd_take(leash__cmd *cmd) {
    if ((cmd->flags & LEASH__CMD_SENT) || cmd->conn == NULL)
        return -1;
    queue_remove(cmd->conn, cmd);
    cmd->conn = NULL;
    return 0;
}

static void cmd_lost(leash__conn *conn, leash__cmd *cmd);
static int answer_is_final(const leash__conn *conn, const leash__cmd *cmd, const redisReply *reply);

/* A command's fate in limbo when its connection broke after its own
 * answer came, which is final (answer_is_final): it completes with it
 * (statuses are 0 or below). */
#define FATE_ANSWERED 1

/* Settles the commands in limbo one by one, each as its fate says: lost
 * with the connection (LEASH_OK: resent after the reconnect or failed),
 * else completed with that status. A callback may free the client: the
 * teardown then finds the rest in limbo. */
static void drain_limbo(leash__conn *conn) {
    while (!leash__list_empty(&conn->limbo) && !conn->env->freeing) {
        leash__cmd *cmd = cmd_of(LEASH__LIST_FIRST(&conn->limbo));
        leash__list_remove(&cmd->link);
        if (cmd->fate == FATE_ANSWERED) {
            redisReply *reply = cmd->first;
            cmd->first = NULL;
            cmd->conn = NULL;
            cmd_complete(cmd, reply, LEASH_OK, -1);
            freeReplyObject(reply);
        } else if (cmd->fate == LEASH_OK) {
            cmd_lost(conn, cmd);
        } else {
            cmd->conn = NULL;
            cmd_complete(cmd, NULL, cmd->fate, -1);
        }
    }
}

/* Completes the commands of `doomed` with status. */
static void complete_all(leash__conn *conn, leash__list *doomed, int status) {
    leash__list *n;

    for (n = doomed->next; n != doomed; n = n->next) {
        cmd_of(n)->fate = status;
        cmd_of(n)->flags &= ~(unsigned)LEASH__CMD_DELAYED;
    }
    leash__list_splice_tail(&conn->limbo, doomed);
    drain_limbo(conn);
}

/* Completes every unsent command with status (orphans are dropped). */
static void fail_queue(leash__conn *conn, int status) {
    leash__list doomed;

    leash__list_init(&doomed);
    leash__list_splice_tail(&doomed, &conn->queue);
    conn->retry_tail = &conn->queue;
    leash__list_splice_tail(&doomed, &conn->delayed);
    leash__list_splice_tail(&doomed, &conn->owed);
    conn->owed_sweep_at = 0;
    complete_all(conn, &doomed, status);
}

/* Moves the commands of `from` whose own deadline passed to `doomed`. */
static void collect_expired(leash__conn *conn, leash__list *from, int64_t now,
                            leash__list *doomed) {
    leash__list *n, *next;

    for (n = from->next; n != from; n = next) {
        leash__cmd *cmd = cmd_of(n);
        next = n->next;
        if (cmd->deadline != 0 && now >= cmd->deadline) {
            if (cmd->transient > 0)
                leash__log(conn_log(conn), LEASH_LOG_WARN,
                           "%s: Redis kept answering LOADING or BUSY until a "
                           "command's deadline",
                           role_name(conn));
            queue_remove(conn, cmd);
            leash__list_insert_tail(doomed, &cmd->link);
        }
    }
}

/* How often orphans owed to a connection that is not ready expire. */
#define ORPHAN_SWEEP_MS 1000

static int64_t next_sweep(int64_t now) {
    return (now / ORPHAN_SWEEP_MS + 1) * ORPHAN_SWEEP_MS;
}

/* cmd, an orphan, waits in conn->owed (see conn.h). */
static void owe(leash__conn *conn, leash__cmd *cmd) {
    leash__list_insert_tail(&conn->owed, &cmd->link);
    if (conn->owed_sweep_at == 0)
        conn->owed_sweep_at = next_sweep(leash__now_ms());
}

/* The connection is ready: what it owes goes first, after the commands
 * resent from before the reconnect (they were written before the orphans
 * were even made). */
static void owed_to_queue(leash__conn *conn) {
    leash__list *at = conn->retry_tail;

    while (!leash__list_empty(&conn->owed)) {
        leash__list *n = LEASH__LIST_FIRST(&conn->owed);
        leash__list_remove(n);
        leash__list_insert_after(at, n);
        at = n;
    }
    conn->owed_sweep_at = 0;
}

/* Commands whose own deadline passed while they waited for a connection,
 * or for their turn after a transient answer. */
static void expire_queue(leash__conn *conn, int64_t now) {
    leash__list doomed;

    leash__list_init(&doomed);
    if (conn->state != LEASH__CONN_READY)
        collect_expired(conn, &conn->queue, now, &doomed);
    collect_expired(conn, &conn->delayed, now, &doomed);
    if (conn->owed_sweep_at != 0 && now >= conn->owed_sweep_at) {
        collect_expired(conn, &conn->owed, now, &doomed);
        conn->owed_sweep_at = leash__list_empty(&conn->owed) ? 0 : next_sweep(now);
    }
    complete_all(conn, &doomed, conn->refused ? conn->refused : LEASH_ECONN);
}

/* ---- sending ---- */

static void count_send(leash__conn *conn, unsigned replies) {
    if (conn->inflight == 0) {
        conn->last_progress = leash__now_ms();
        conn->inflight += replies;
        conn_arm(conn);
    } else {
        conn->inflight += replies;
    }
}

/* The WAIT behind the commands written since the last one (wait_group):
 * one for all of them, written as the connection's own command, whose
 * answer settles them (on_group_wait). -1 without memory. */
static void on_group_wait(void *arg, redisReply *reply, int status, const leash__reply_info *info);
static int write_cmd(leash__conn *conn, leash__cmd *cmd);

/* Writes a command of the connection's own (LEASH__CMD_UPKEEP: a TIME, a
 * group's WAIT) from buf (malloc'ed; taken, also on failure), answered to
 * fn. -1 without memory: nothing was written. */
static int write_own(leash__conn *conn, char *buf, size_t len, unsigned flags,
                     leash__reply_fn *fn) {
    leash__cmd *own = leash__cmd_new(buf, len, NULL, LEASH__CMD_UPKEEP | flags, 0, fn, conn);

    if (own == NULL)
        return -1;
    own->conn = conn;
    if (write_cmd(conn, own) != 0) {
        cmd_free(own);
        return -1;
    }
    return 0;
}

static int write_group_wait(leash__conn *conn) {
    char n[24], t[24], *buf;
    const char *argv[3] = {"WAIT", n, t};
    size_t lens[3], len;

    lens[0] = 4;
    lens[1] = (size_t)snprintf(n, sizeof(n), "%d", conn->wait_group_replicas);
    lens[2] = (size_t)snprintf(t, sizeof(t), "%lld", (long long)conn->wait_group_timeout_ms);
    buf = leash__resp_format(&len, 3, argv, lens);
    if (buf == NULL)
        return -1;
    /* ONCE: an error answer (BUSY, NOPERM) is its answer, acked -1, not
     * a reason to write it again behind later commands. */
    if (write_own(conn, buf, len, LEASH__CMD_ONCE, on_group_wait) != 0)
        return -1;
    conn->wait_group = 0;
    conn->wait_group_replicas = 0;
    conn->wait_group_timeout_ms = 0;
    conn->wait_out = 1;
    return 0;
}

/* Makes a command's bytes what this server needs, at the moment they are
 * written: its version (a command built before the handshake told it), and
 * its clock (stamps). -1: no memory, nothing changed that matters. */
static int fit_to_server(leash__conn *conn, leash__cmd *cmd) {
    if (cmd->publish_arg != 0 && conn->cfg->pubsub != LEASH_PUBSUB_SHARDED &&
        conn->version < LEASH__VERSION(7, 0, 0) && publish_classic(cmd) != 0)
        return -1;
    stamp_cmd(conn, cmd);
    if (cmd->script != NULL)
        leash__script_retarget(cmd->buf, cmd->len, leash__script_for(cmd->script, conn->version));
    return 0;
}

/* Puts a command on the wire as this server needs it (fit_to_server): the
 * one place that both writers, write_cmd and the teardown, go through.
 * The teardown writes no WAIT: nobody reads its answers. -1: nothing of
 * it was written. */
static int put_on_wire(leash__conn *conn, leash__cmd *cmd) {
    if (fit_to_server(conn, cmd) != 0)
        return -1;
    return leash__sock_write(conn->sock, cmd->buf, cmd->len);
}

static int write_cmd(leash__conn *conn, leash__cmd *cmd) {
    if (put_on_wire(conn, cmd) != 0)
        return -1;
    if (cmd->flags & LEASH__CMD_WRITTEN)
        cmd->flags |= LEASH__CMD_REWRITTEN;
    cmd->flags |= LEASH__CMD_SENT | LEASH__CMD_WRITTEN;
    cmd->written_at = leash__now_ms();
    conn->window_used += cmd->len;
    leash__list_insert_tail(&conn->sent, &cmd->link);
    if (conn->role == LEASH__CONN_CMD && !(cmd->flags & LEASH__CMD_UPKEEP))
        conn->env->stats->commands_sent++;
    if (cmd->wait_replicas > 0) {
        conn->wait_group++;
        if (cmd->wait_replicas > conn->wait_group_replicas)
            conn->wait_group_replicas = cmd->wait_replicas;
        if (cmd->wait_timeout_ms > conn->wait_group_timeout_ms)
            conn->wait_group_timeout_ms = cmd->wait_timeout_ms;
    }
    count_send(conn, 1);
    return 0;
}

/* Whether cmd must wait before it is written: it asks for a WAIT while
 * the last group's WAIT is still out. Redis holds the connection on a
 * WAIT, so a command written behind it would run only after it anyway;
 * held here instead, the commands that come meanwhile go out together
 * behind one WAIT, and no command waits longer than two WAITs, however
 * many asked for one while replicas were short. */
static int held_for_wait(const leash__conn *conn, const leash__cmd *cmd) {
    return cmd->wait_replicas > 0 && conn->wait_out;
}

/* Whether a command of len bytes may be written now (see WINDOW_*): one
 * always may when nothing else is waiting for its answer. */
static int window_open(const leash__conn *conn, size_t len) {
    int64_t t = conn->cfg->command_timeout_ms;
    size_t window = t < WINDOW_MIN / WINDOW_BYTES_PER_MS   ? WINDOW_MIN
                    : t > WINDOW_MAX / WINDOW_BYTES_PER_MS ? WINDOW_MAX
                                                           : (size_t)t * WINDOW_BYTES_PER_MS;

    if (conn->state != LEASH__CONN_READY || conn->sock == NULL)
        return 0;
    return conn->window_used == 0 || conn->window_used + len <= window;
}

/* TIME, written ahead of a stamped command (clock_stale); 0, or -1
 * without memory (the stamp then rests on the offset it has). */
static int send_clock_probe(leash__conn *conn) {
    static const char time_cmd[] = "*1\r\n$4\r\nTIME\r\n";
    char *buf = malloc(sizeof(time_cmd) - 1);

    if (buf == NULL)
        return -1;
    memcpy(buf, time_cmd, sizeof(time_cmd) - 1);
    if (write_own(conn, buf, sizeof(time_cmd) - 1, 0, on_clock_probe) != 0)
        return -1;
    conn->clock_probe = 1;
    return 0;
}

/* Writes queued commands, in order, while the window lets them go; none
 * while a TIME is out (clock_stale), so that their order stays. */
static void pump_queue(leash__conn *conn) {
    while (!leash__list_empty(&conn->queue)) {
        leash__cmd *cmd = cmd_of(LEASH__LIST_FIRST(&conn->queue));
        int last_resent = conn->retry_tail == &cmd->link;
        if (conn->clock_probe || !window_open(conn, cmd->len) || held_for_wait(conn, cmd))
            return;
        if (stamp_needs_clock(cmd) && clock_stale(conn) && send_clock_probe(conn) == 0)
            return;
        queue_remove(conn, cmd);
        if ((cmd->flags & LEASH__CMD_ORPHAN) && cmd->deadline != 0 &&
            leash__now_ms() >= cmd->deadline) {
            /* Owed until its deadline, which passed while it waited. */
            cmd->conn = NULL;
            cmd_complete(cmd, NULL, LEASH_ECONN, -1);
            continue;
        }
        if (write_cmd(conn, cmd) != 0) {
            /* No memory: it stays first, and waits for the next answer. */
            leash__list_insert_after(&conn->queue, &cmd->link);
            if (last_resent)
                conn->retry_tail = &cmd->link;
            return;
        }
    }
}

/* Writes what may go (pump_queue), then one WAIT behind the commands that
 * asked for one. Without memory for the WAIT the connection breaks: its
 * commands ran, and without an answer to WAIT they cannot count. */
static void pump(leash__conn *conn) {
    pump_queue(conn);
    if (conn->wait_group > 0 && conn->state == LEASH__CONN_READY && conn->sock != NULL &&
        write_group_wait(conn) != 0)
        conn_break(conn);
}

/* A command is written from the loop (the connection's timer, due at
 * once, or the answer that opened the window), not inside the call that
 * sends it: a caller that issues thousands of commands in one go, or runs
 * long after it, keeps the loop from turning, and a command written then
 * would count that time as the server's silence and against its stamp. */
void leash__conn_send(leash__conn *conn, leash__cmd *cmd) {
    int first = leash__list_empty(&conn->queue);

    cmd->conn = conn;
    if ((cmd->flags & LEASH__CMD_ORPHAN) && conn->state != LEASH__CONN_READY) {
        int unarmed = conn->owed_sweep_at == 0;
        owe(conn, cmd);
        if (unarmed && (conn->timer.due == 0 || conn->owed_sweep_at < conn->timer.due))
            conn_arm(conn);
        return;
    }
    leash__list_insert_tail(&conn->queue, &cmd->link);
    if ((first && window_open(conn, cmd->len)) ||
        (cmd->deadline != 0 && (conn->timer.due == 0 || cmd->deadline < conn->timer.due)))
        conn_arm(conn);
}

void leash__conn_send_at(leash__conn *conn, leash__cmd *cmd, int64_t send_at) {
    cmd->conn = conn;
    cmd->send_at = send_at;
    cmd->flags |= LEASH__CMD_DELAYED;
    leash__list_insert_tail(&conn->delayed, &cmd->link);
    if (conn->timer.due == 0 || send_at < conn->timer.due)
        conn_arm(conn);
}

/* Delayed commands whose time came go out (or join the queue). */
static void send_delayed(leash__conn *conn, int64_t now) {
    leash__list due, *n, *next;

    leash__list_init(&due);
    for (n = conn->delayed.next; n != &conn->delayed; n = next) {
        next = n->next;
        if (now >= cmd_of(n)->send_at) {
            queue_remove(conn, cmd_of(n));
            leash__list_insert_tail(&due, n);
        }
    }
    while (!leash__list_empty(&due)) {
        leash__cmd *cmd = cmd_of(LEASH__LIST_FIRST(&due));
        leash__list_remove(&cmd->link);
        leash__conn_send(conn, cmd);
    }
}

int leash__conn_send_raw(leash__conn *conn, const char *buf, size_t len, unsigned replies) {
    if (conn->state != LEASH__CONN_READY || conn->sock == NULL)
        return -1;
    if (leash__sock_write(conn->sock, buf, len) != 0)
        return -1;
    count_send(conn, replies);
    return 0;
}

void leash__conn_progress(leash__conn *conn, unsigned replies) {
    conn->inflight = replies > conn->inflight ? 0 : conn->inflight - replies;
    conn->last_progress = leash__now_ms();
}

int leash__conn_ready(const leash__conn *conn) {
    return conn->state == LEASH__CONN_READY;
}

/* ---- the connection's life ---- */

static void become_ready(leash__conn *conn) {
    /* The server answered: for a name, this address is the one to try
     * first next time (a TCP connect alone does not tell). */
    leash__sock_ready(conn->sock);
    conn->state = LEASH__CONN_READY;
    conn->backoff_ms = conn->cfg->reconnect_min_ms;
    conn->refused = 0;
    conn->handshake_busy = 0;
    if (conn->role == LEASH__CONN_CMD)
        conn->env->stats->connects++;
    else
        conn->env->stats->sub_connects++;
    if (conn->was_ready)
        conn->env->stats->reconnects++;
    conn->was_ready = 1;
    leash__log(conn_log(conn), conn->failures ? LEASH_LOG_WARN : LEASH_LOG_INFO,
               "%s ready (after %u failed attempts)", role_name(conn), conn->failures);
    conn->failures = 0;

    owed_to_queue(conn);
    pump(conn);
    /* pump may have broken it (no memory for a WAIT), and a callback of
     * that break may have freed the client. */
    if (conn->on_ready && conn->state == LEASH__CONN_READY && !conn->env->freeing)
        conn->on_ready(conn);
}

/* The connection is gone with commands written on it: each is resent
 * after the reconnect (LEASH__CMD_RETRY, in its order) or fails. */
static void lose_sent(leash__conn *conn) {
    leash__list *n;

    /* Those answered but not yet by their WAIT were written first. One
     * that asked for no WAIT has its answer: it completes with it. */
    leash__list_splice_tail(&conn->acking, &conn->sent);
    for (n = conn->acking.next; n != &conn->acking; n = n->next) {
        leash__cmd *cmd = cmd_of(n);
        cmd->flags &= ~(unsigned)LEASH__CMD_SENT;
        if (cmd->first != NULL && cmd->wait_replicas == 0 &&
            answer_is_final(conn, cmd, cmd->first)) {
            cmd->fate = FATE_ANSWERED;
            continue;
        }
        drop_first(cmd);
        cmd->fate = LEASH_OK;
    }
    leash__list_splice_tail(&conn->limbo, &conn->acking);
    conn->window_used = 0;
    conn->wait_group = 0;
    conn->wait_group_replicas = 0;
    conn->wait_group_timeout_ms = 0;
    conn->wait_out = 0;
    drain_limbo(conn);
}

/* Drops the connection on our own decision (timeout, refused handshake,
 * a reply to no command). */
static void conn_break(leash__conn *conn) {
    if (conn->sock == NULL)
        return;
    leash__sock_close(conn->sock);
    conn->sock = NULL;
    conn->peer_closed = 0;
    conn_gone(conn);
}

void leash__conn_reset(leash__conn *conn) {
    /* What the server refused, it refuses again: not at once. */
    conn->backoff_ms = conn->cfg->reconnect_max_ms;
    conn_break(conn);
}

/* The first failure in a row is a warning; the retries that follow are
 * debug lines, until the connection is ready again. */
static int failure_level(leash__conn *conn) {
    return conn->failures++ == 0 ? LEASH_LOG_WARN : LEASH_LOG_DEBUG;
}

/* The same for a refusal that needs the user (TLS): an error first. */
static int refusal_level(leash__conn *conn) {
    return conn->failures++ == 0 ? LEASH_LOG_ERROR : LEASH_LOG_DEBUG;
}

static void schedule_reconnect(leash__conn *conn) {
    const leash__conn_cfg *cfg = conn->cfg;
    int64_t delay;

    if (conn->refused)
        conn->backoff_ms = cfg->reconnect_max_ms;
    /* A server that is loading or running a long script is back soon:
     * look again often, whatever the backoff has grown to. */
    if (conn->handshake_busy && conn->backoff_ms > TRANSIENT_MAX_MS)
        conn->backoff_ms = TRANSIENT_MAX_MS;
    /* Full backoff halved plus jitter over the other half: clients that
     * lost the same server do not all come back in the same millisecond. */
    delay = conn->backoff_ms / 2 + (int64_t)leash__random_below((uint64_t)conn->backoff_ms / 2 + 1);
    conn->next_attempt = leash__now_ms() + delay;
    conn->backoff_ms *= 2;
    if (conn->backoff_ms > cfg->reconnect_max_ms)
        conn->backoff_ms = cfg->reconnect_max_ms;
}

static void conn_down(leash__conn *conn) {
    int was_ready = conn->state == LEASH__CONN_READY;

    conn->state = LEASH__CONN_DOWN;
    conn->inflight = 0;
    conn->handshake_left = 0;
    if (was_ready && conn->role == LEASH__CONN_CMD)
        conn->env->stats->disconnects++;
    schedule_reconnect(conn);
    if (conn->refused) {
        fail_queue(conn, conn->refused);
        if (conn->env->freeing)
            return;
    }
    if (conn->on_down)
        conn->on_down(conn);
    if (conn->env->freeing)
        return;
    conn_arm(conn);
}

static int handshake_cmd(leash__conn *conn, int tag, int argc, const char **argv) {
    size_t lens[4], len;
    char *buf;
    int i, rc;

    if (conn->handshake_left == LEASH__HANDSHAKE_MAX)
        return -1;
    for (i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    buf = leash__resp_format(&len, argc, (const char *const *)argv, lens);
    if (buf == NULL)
        return -1;
    rc = leash__sock_write(conn->sock, buf, len);
    free(buf);
    if (rc != 0)
        return -1;
    conn->handshake_tags[conn->handshake_left++] = tag;
    count_send(conn, 1);
    return 0;
}

static void start_handshake(leash__conn *conn) {
    const leash__conn_cfg *cfg = conn->cfg;
    char db[16];
    int i, failed = 0;

    conn->state = LEASH__CONN_HANDSHAKE;
    conn->handshake_left = 0;
    conn->handshake_next = 0;
    if (cfg->password != NULL) {
        const char *argv[3] = {"AUTH", cfg->username ? cfg->username : cfg->password,
                               cfg->password};
        failed |= handshake_cmd(conn, HS_AUTH, cfg->username ? 3 : 2, argv);
    }
    conn->not_master = 0;
    if (conn->role == LEASH__CONN_CMD && cfg->require_master) {
        const char *role_argv[1] = {"ROLE"};
        failed |= handshake_cmd(conn, HS_ROLE, 1, role_argv);
    }
    if (conn->role == LEASH__CONN_CMD && !cfg->sentinel) {
        const char *info_argv[2] = {"INFO", "server"};
        /* maxmemory and its policy: one section per INFO before 7.0. */
        const char *memory_argv[2] = {"INFO", "memory"};
        const char *time_argv[1] = {"TIME"};
        const leash__script *s;
        failed |= handshake_cmd(conn, HS_INFO, 2, info_argv);
        failed |= handshake_cmd(conn, HS_MEMORY, 2, memory_argv);
        failed |= handshake_cmd(conn, HS_TIME, 1, time_argv);
        if (cfg->db != 0) {
            const char *argv[2] = {"SELECT", db};
            snprintf(db, sizeof(db), "%d", cfg->db);
            failed |= handshake_cmd(conn, HS_SELECT, 2, argv);
        }
        /* Every variant: the version is not known yet, and loading one
         * that this server does not run costs nothing. */
        for (i = 0; i < cfg->nscripts; i++)
            for (s = cfg->scripts[i]; s != NULL; s = s->older) {
                const char *argv[3] = {"SCRIPT", "LOAD", s->src};
                failed |= handshake_cmd(conn, HS_SCRIPT, 3, argv);
            }
    }
    /* A connection is ready when the server has answered it: a subscriber
     * (or a sentinel) without AUTH asks PING. A TLS 1.3 server that
     * refuses this client (no client certificate) says so only after the
     * client's handshake completed, in place of the first answer. */
    if (conn->handshake_left == 0) {
        const char *ping_argv[1] = {"PING"};
        failed |= handshake_cmd(conn, HS_PING, 1, ping_argv);
    }
    if (failed) {
        leash__log(conn_log(conn), LEASH_LOG_ERROR, "%s: could not send the handshake",
                   role_name(conn));
        conn_break(conn);
    }
}

/* TIME answers [seconds, microseconds] as bulk strings. */
static void note_server_time(leash__conn *conn, const redisReply *r) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING) {
        leash__log(conn_log(conn), LEASH_LOG_INFO,
                   "%s: TIME not answered (%s): late copies of commands are then "
                   "bounded by the first acquire's answer",
                   role_name(conn), r->type == REDIS_REPLY_ERROR ? r->str : "bad reply");
        return;
    }
    /* A new connection may reach another machine behind the same address:
     * its own samples only. */
    conn->server_offset_known = 0;
    leash__conn_server_time(conn,
                            strtoll(r->element[0]->str, NULL, 10) * 1000 +
                                strtoll(r->element[1]->str, NULL, 10) / 1000,
                            0);
}

/* Whether sha (LEASH__SHA_LEN hex digits) is one of the scripts'. */
static int known_sha(const leash__conn_cfg *cfg, const char *sha) {
    const leash__script *s;
    int i;

    for (i = 0; i < cfg->nscripts; i++)
        for (s = cfg->scripts[i]; s != NULL; s = s->older)
            if (memcmp(s->sha, sha, LEASH__SHA_LEN) == 0)
                return 1;
    return 0;
}

/* The number of "field:7.2.4" in INFO's text (LEASH__VERSION), or 0. */
static int info_version(const char *info, const char *field) {
    const char *p = info;
    size_t n = strlen(field);
    int a = 0, b = 0, c = 0;

    while ((p = strstr(p, field)) != NULL) {
        if ((p == info || p[-1] == '\n') && p[n] == ':')
            return sscanf(p + n + 1, "%d.%d.%d", &a, &b, &c) >= 2 && a > 0 && a < 100 && b >= 0 &&
                           b < 100 && c >= 0 && c < 100
                       ? LEASH__VERSION(a, b, c)
                       : 0;
        p += n;
    }
    return 0;
}

/* The value of "field:value\r\n" in INFO's text, copied into out (at most
 * cap - 1 bytes): 0, or -1 when the field is not there. */
static int info_field(const char *info, const char *field, char *out, size_t cap) {
    const char *p = info;
    size_t n = strlen(field), len;

    while ((p = strstr(p, field)) != NULL) {
        if ((p == info || p[-1] == '\n') && p[n] == ':') {
            p += n + 1;
            len = strcspn(p, "\r\n");
            if (len >= cap)
                len = cap - 1;
            memcpy(out, p, len);
            out[len] = '\0';
            return 0;
        }
        p += n;
    }
    return -1;
}

int leash__info_version(const char *info) {
    return info_version(info, "redis_version");
}

static void version_text(char *out, size_t cap, int v) {
    snprintf(out, cap, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
}

/* INFO server: redis_version (Valkey keeps it, for the Redis version it is
 * compatible with, beside its own valkey_version). INFO works on every
 * version and needs nothing but the login before it (HELLO, which also
 * says the version, is 6.0+, and switches the protocol when asked for
 * RESP3). Returns 0 when the server is refused (cfg->min_version): the
 * connection is then dropped, and retried every reconnect_max_ms; the
 * refusal is an error once, its repeats debug lines (refusal_level). */
static int note_server_version(leash__conn *conn, const redisReply *r) {
    const leash__conn_cfg *cfg = conn->cfg;
    char have[24], need[24];
    int valkey;

    conn->version = r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS
                        ? leash__info_version(r->str)
                        : 0;
    if (conn->version == 0 && cfg->min_version <= LEASH__VERSION(6, 0, 0)) {
        leash__log(conn_log(conn), LEASH_LOG_WARN,
                   "%s: INFO server did not say the version (%s): using only what Redis 6.0 "
                   "has",
                   role_name(conn), r->type == REDIS_REPLY_ERROR ? r->str : "no redis_version");
        return 1;
    }
    if (conn->version == 0) {
        /* Taken as 6.0, as everywhere else: what needs a later one cannot
         * be promised on it. */
        version_text(need, sizeof(need), cfg->min_version);
        leash__log(conn_log(conn), refusal_level(conn),
                   "%s: INFO server did not say the version (%s), so the server is taken as "
                   "Redis 6.0; %s needs Redis %s or later (let the user run INFO)",
                   role_name(conn), r->type == REDIS_REPLY_ERROR ? r->str : "no redis_version",
                   cfg->min_version_for, need);
        conn->refused = LEASH_EREDIS;
        conn_break(conn);
        return 0;
    }
    version_text(have, sizeof(have), conn->version);
    valkey = info_version(r->str, "valkey_version");
    if (valkey != 0) {
        char own[24];
        version_text(own, sizeof(own), valkey);
        leash__log(conn_log(conn), LEASH_LOG_INFO, "%s: Valkey %s (Redis %s)", role_name(conn), own,
                   have);
    } else {
        leash__log(conn_log(conn), LEASH_LOG_INFO, "%s: Redis %s", role_name(conn), have);
    }
    if (conn->version >= cfg->min_version)
        return 1;
    version_text(need, sizeof(need), cfg->min_version);
    leash__log(conn_log(conn), refusal_level(conn),
               "%s: %s needs Redis %s or later; the server is %s", role_name(conn),
               cfg->min_version_for, need, have);
    conn->refused = LEASH_EREDIS;
    conn_break(conn);
    return 0;
}

/* INFO memory: a policy that evicts keys with a TTL (volatile-*) or any
 * key (allkeys-*) can evict a lock that is held, and a second client then
 * gets it. It evicts only under maxmemory: maxmemory 0 (no limit, the
 * default on 64-bit servers) evicts nothing, whatever the policy. Said
 * once per server (per connection's life, and again after a retarget to
 * another server), and counted in the stats. */
static void note_eviction_policy(leash__conn *conn, const redisReply *r) {
    char policy[48], maxmemory[32];

    if (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS) {
        leash__log(conn_log(conn), LEASH_LOG_INFO,
                   "%s: INFO memory not answered (%s): maxmemory-policy not checked",
                   role_name(conn), r->type == REDIS_REPLY_ERROR ? r->str : "bad reply");
        return;
    }
    if (conn->evict_warned || info_field(r->str, "maxmemory_policy", policy, sizeof policy) != 0 ||
        info_field(r->str, "maxmemory", maxmemory, sizeof maxmemory) != 0 ||
        strtoull(maxmemory, NULL, 10) == 0 ||
        (strncmp(policy, "volatile-", 9) != 0 && strncmp(policy, "allkeys-", 8) != 0))
        return;
    conn->evict_warned = 1;
    conn->env->stats->evicting_servers++;
    leash__log(conn_log(conn), LEASH_LOG_WARN,
               "%s: maxmemory-policy %s with maxmemory %s bytes: Redis may evict a lock that is "
               "held, and another client then gets it; run maxmemory-policy noeviction",
               role_name(conn), policy, maxmemory);
}

/* The socket is gone: what was written on it is lost, then the
 * connection is down. */
static void conn_gone(leash__conn *conn) {
    lose_sent(conn);
    if (conn->env->freeing)
        return;
    conn_down(conn);
}

/* ROLE answers [role, ...]: anything but "master" (a replica, or a
 * sentinel) is refused. A server that does not let the user ask (NOPERM)
 * is taken at its word: -READONLY still catches a replica. */
static int role_is_master(leash__conn *conn, const redisReply *r) {
    if (r->type == REDIS_REPLY_ERROR) {
        leash__log(conn_log(conn), LEASH_LOG_WARN, "%s: ROLE not answered (%s): not checked",
                   role_name(conn), r->str);
        return 1;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
        r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, "master") == 0)
        return 1;
    leash__log(conn_log(conn), LEASH_LOG_WARN, "%s: ROLE says %s, not master: reconnecting",
               role_name(conn),
               r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                       r->element[0]->type == REDIS_REPLY_STRING
                   ? r->element[0]->str
                   : "something else");
    return 0;
}

/* A handshake command's name, for log lines. */
static const char *hs_name(int tag) {
    switch (tag) {
    case HS_AUTH:
        return "AUTH";
    case HS_SELECT:
        return "SELECT";
    case HS_TIME:
        return "TIME";
    case HS_INFO:
        return "INFO server";
    case HS_MEMORY:
        return "INFO memory";
    case HS_ROLE:
        return "ROLE";
    case HS_PING:
        return "PING";
    default:
        return "SCRIPT LOAD";
    }
}

/* What a server at maxclients writes on a new connection before closing
 * it (Redis and Valkey alike), read as the first command's answer. */
static int reply_maxclients(const redisReply *r) {
    return r->type == REDIS_REPLY_ERROR && r->str != NULL &&
           strstr(r->str, "max number of clients reached") != NULL;
}

static void on_handshake_reply(leash__conn *conn, const redisReply *reply, int tag) {
    leash__conn_progress(conn, 1);
    /* NOAUTH on any handshake command: the server wants a password that
     * we do not have. */
    if (reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "NOAUTH", 6) == 0)
        tag = HS_AUTH;
    if (reply_maxclients(reply)) {
        /* The server refused the connection, not a command: what answers
         * the first command, then it closes. Other clients leave: an
         * ordinary failed attempt, queued work keeps its deadlines. */
        leash__log(conn_log(conn), failure_level(conn),
                   "%s: connection refused by Redis: %s (maxclients)", role_name(conn), reply->str);
        conn_break(conn);
    } else if (reply->type == REDIS_REPLY_ERROR && tag != HS_SCRIPT &&
               leash__reply_transient(reply)) {
        /* Loading its data or running a long script: nothing was refused,
         * and ROLE, INFO and TIME did not answer what they ask (a BUSY
         * server answers them so too). Queued work waits for its own
         * deadlines. */
        leash__log(conn_log(conn), LEASH_LOG_INFO, "%s: %s answered %s: trying again",
                   role_name(conn), hs_name(tag), reply->str);
        conn->handshake_busy = 1;
        conn_break(conn);
    } else if (reply->type == REDIS_REPLY_ERROR && (tag == HS_AUTH || tag == HS_SELECT)) {
        if (tag == HS_AUTH)
            leash__log(conn_log(conn), LEASH_LOG_ERROR, "%s: AUTH refused by Redis: %s",
                       role_name(conn), reply->str);
        else
            leash__log(conn_log(conn), LEASH_LOG_ERROR, "%s: SELECT %d refused by Redis: %s",
                       role_name(conn), conn->cfg->db, reply->str);
        conn->refused = LEASH_EAUTH;
        conn_break(conn);
    } else if (tag == HS_ROLE && !role_is_master(conn, reply)) {
        conn->not_master = 1;
        conn_break(conn);
    } else {
        if (tag == HS_TIME)
            note_server_time(conn, reply);
        if (tag == HS_INFO && !note_server_version(conn, reply))
            return;
        if (tag == HS_MEMORY)
            note_eviction_policy(conn, reply);
        if (tag == HS_SCRIPT) {
            if (reply->type != REDIS_REPLY_STRING)
                /* ACL users may lack SCRIPT: EVALSHA's NOSCRIPT path loads it. */
                leash__log(conn_log(conn), LEASH_LOG_INFO,
                           "SCRIPT LOAD not accepted (%s): scripts load on first use",
                           reply->type == REDIS_REPLY_ERROR ? reply->str : "bad reply");
            else if (reply->len != LEASH__SHA_LEN || !known_sha(conn->cfg, reply->str))
                leash__log(conn_log(conn), LEASH_LOG_WARN,
                           "SCRIPT LOAD returned an unexpected SHA1 (%.*s)", (int)reply->len,
                           reply->str);
        }
        if (conn->handshake_next == conn->handshake_left)
            become_ready(conn);
    }
}

static void on_sock_connected(void *owner) {
    start_handshake(owner);
}

static void on_sock_closed(void *owner, int status, const char *why) {
    leash__conn *conn = owner;

    if (status == LEASH_ETLS) {
        /* Refused, like a wrong password: it would be refused again. */
        leash__log(conn_log(conn), refusal_level(conn), "%s: %s", role_name(conn), why);
        conn->refused = LEASH_ETLS;
    } else if (conn->state == LEASH__CONN_CONNECTING)
        leash__log(conn_log(conn), failure_level(conn), "%s: %s", role_name(conn), why);
    else
        leash__log(conn_log(conn), LEASH_LOG_WARN, "%s lost: %s", role_name(conn), why);
    conn->sock = NULL;
    conn->peer_closed = 1;
    conn_gone(conn);
}

/* The connection of a sent command broke: resend it later, or give up. */
static void cmd_lost(leash__conn *conn, leash__cmd *cmd) {
    int64_t now = leash__now_ms();

    if ((cmd->flags & LEASH__CMD_RETRY) && (cmd->deadline == 0 || now < cmd->deadline)) {
        leash__list_insert_after(conn->retry_tail, &cmd->link);
        conn->retry_tail = &cmd->link;
        return;
    }
    cmd->conn = NULL;
    cmd_complete(cmd, NULL, LEASH_ECONN, -1);
}

/* Whether a command that did not run (a transient answer, NOSCRIPT) must
 * not go again: sent again, it would run behind what was written after it.
 * So a LEASH__CMD_ONCE command, and one nobody wants that is not owed
 * either (an orphan without LEASH__CMD_RETRY: a grant's copy dropped at
 * the decision, an acquire cancelled), which its owner's release or
 * give-back follows. */
static int not_again(const leash__cmd *cmd) {
    return (cmd->flags & LEASH__CMD_ONCE) ||
           ((cmd->flags & LEASH__CMD_ORPHAN) && !(cmd->flags & LEASH__CMD_RETRY));
}

/* A transient answer (LOADING, BUSY...): the command did not run. It goes
 * again after a pause while its deadline allows (returns 1); at the
 * deadline it completes LEASH_ECONN (returns 1 too). Returns 0 for a
 * command that must not go again (not_again): it completes with the
 * answer. */
static int again_after_transient(leash__conn *conn, leash__cmd *cmd, const redisReply *reply) {
    int64_t now = leash__now_ms(), pause;
    unsigned shift = cmd->transient < 4 ? cmd->transient : 4;

    if (not_again(cmd))
        return 0;
    pause = (int64_t)TRANSIENT_FIRST_MS << shift;
    if (pause > TRANSIENT_MAX_MS)
        pause = TRANSIENT_MAX_MS;
    if (cmd->transient++ == 0)
        leash__log(conn_log(conn), LEASH_LOG_INFO, "%s: Redis answered %s: sending again",
                   role_name(conn), reply->str);
    if (cmd->deadline != 0 && now + pause >= cmd->deadline) {
        leash__log(conn_log(conn), LEASH_LOG_WARN,
                   "%s: Redis still answers %s at a command's deadline", role_name(conn),
                   reply->str);
        cmd->conn = NULL;
        cmd_complete(cmd, NULL, LEASH_ECONN, -1);
        return 1;
    }
    leash__conn_send_at(conn, cmd, now + pause);
    return 1;
}

/* -READONLY: a replica refused a write. Redis 7 answers a script's write
 * so too; Redis 6.x wraps it in the script's error ("ERR Error running
 * script (call to f_...): @user_script:18: ... -READONLY You can't write
 * against a read only replica."). */
static int reply_readonly(const redisReply *r) {
    static const char script_error[] = "ERR Error running script";

    if (r->type != REDIS_REPLY_ERROR || r->str == NULL)
        return 0;
    return strncmp(r->str, "READONLY", 8) == 0 ||
           (strncmp(r->str, script_error, sizeof(script_error) - 1) == 0 &&
            strstr(r->str, " -READONLY ") != NULL);
}

/* Whether reply is what cmd completes with, as settle would take it: not
 * an answer that makes it go again (READONLY from a demoted master, a
 * transient error, NOSCRIPT). */
static int answer_is_final(const leash__conn *conn, const leash__cmd *cmd,
                           const redisReply *reply) {
    if (conn->cfg->require_master && reply_readonly(reply))
        return 0;
    if (leash__reply_transient(reply) && !not_again(cmd))
        return 0;
    return !(reply->type == REDIS_REPLY_ERROR && cmd->script != NULL && !not_again(cmd) &&
             strncmp(reply->str, "NOSCRIPT", 8) == 0);
}

/* What a command's answer does, once it counts: with a WAIT, when the
 * WAIT answered (acked replicas, or -1). */
static void settle(leash__conn *conn, leash__cmd *cmd, redisReply *reply, long long acked) {
    cmd->flags &= ~(unsigned)LEASH__CMD_SENT;
    if (conn->cfg->require_master && reply_readonly(reply)) {
        /* A master demoted under us: the command did not run. It is lost
         * with the connection as on any break (resent or failed), first
         * of those not settled yet, as it was written. */
        leash__log(conn_log(conn), LEASH_LOG_WARN, "%s: Redis answered %s: reconnecting",
                   role_name(conn), reply->str);
        cmd->flags |= LEASH__CMD_SENT;
        leash__list_insert_after(&conn->acking, &cmd->link);
        conn->not_master = 1;
        conn_break(conn);
        return;
    }
    if (leash__reply_transient(reply) && again_after_transient(conn, cmd, reply))
        return;
    /* Sent again as EVAL it would go behind what was written after it:
     * a command that must not go again (not_again) completes with the
     * NOSCRIPT error. */
    if (reply->type == REDIS_REPLY_ERROR && cmd->script != NULL && !not_again(cmd) &&
        strncmp(reply->str, "NOSCRIPT", 8) == 0) {
        size_t len;
        char *eval = leash__script_as_eval(&len, cmd->buf, cmd->len,
                                           leash__script_for(cmd->script, conn->version));
        if (eval != NULL) {
            conn->env->stats->noscript_reloads++;
            free(cmd->buf);
            cmd->buf = eval;
            cmd->len = len;
            cmd->script = NULL;
            leash__conn_send(conn, cmd);
            return;
        }
    }
    cmd->conn = NULL;
    cmd_complete(cmd, reply, LEASH_OK, acked);
}

/* The WAIT behind a group answered (or was lost: the group is then lost
 * with the connection, lose_sent): it settles the group in order. A
 * callback may free the client: the teardown then finds the rest. */
static void on_group_wait(void *arg, redisReply *reply, int status, const leash__reply_info *info) {
    leash__conn *conn = arg;
    long long acked = -1;

    (void)info;
    conn->wait_out = 0;
    if (status != LEASH_OK)
        return;
    if (reply->type == REDIS_REPLY_INTEGER)
        acked = reply->integer;
    while (!leash__list_empty(&conn->acking) && !conn->env->freeing) {
        leash__cmd *cmd = cmd_of(LEASH__LIST_FIRST(&conn->acking));
        redisReply *own = cmd->first;
        leash__list_remove(&cmd->link);
        cmd->first = NULL;
        settle(conn, cmd, own, cmd->wait_replicas > 0 ? acked : -1);
        freeReplyObject(own);
        if (conn->sock == NULL)
            return; /* broke (settle): the rest went with it */
    }
}

/* The answer of the command at the head of the sent list. One that asked
 * for a WAIT, and any behind it before the group's WAIT, is kept in
 * acking until the WAIT answers (so commands complete in the order they
 * were written). Returns 1 when reply was kept. */
static int on_cmd_reply(leash__conn *conn, leash__cmd *cmd, redisReply *reply) {
    leash__conn_progress(conn, 1);
    leash__list_remove(&cmd->link);
    conn->window_used -= cmd->len;
    if (!(cmd->flags & LEASH__CMD_UPKEEP) &&
        (cmd->wait_replicas > 0 || !leash__list_empty(&conn->acking))) {
        cmd->first = reply;
        leash__list_insert_tail(&conn->acking, &cmd->link);
        return 1;
    }
    settle(conn, cmd, reply, -1);
    return 0;
}

/* Every reply, in order: the handshake's first, then each answers the
 * oldest command written (a subscriber connection hands its frames to its
 * owner instead). */
static int on_sock_reply(void *owner, redisReply *reply) {
    leash__conn *conn = owner;
    int kept;

    if (conn->state == LEASH__CONN_HANDSHAKE && conn->handshake_next < conn->handshake_left) {
        int tag = conn->handshake_tags[conn->handshake_next++];
        on_handshake_reply(conn, reply, tag);
        return 0;
    }
    if (conn->state != LEASH__CONN_READY) {
        conn_break(conn);
        return 0;
    }
    if (conn->role == LEASH__CONN_SUB) {
        conn->on_frame(conn, reply);
        return 0;
    }
    if (leash__list_empty(&conn->sent)) {
        leash__log(conn_log(conn), LEASH_LOG_ERROR,
                   "%s: protocol violation by the server (a reply to no command): "
                   "reconnecting",
                   role_name(conn));
        conn_break(conn);
        return 0;
    }
    kept = on_cmd_reply(conn, cmd_of(LEASH__LIST_FIRST(&conn->sent)), reply);
    /* The answer made room in the window. */
    if (!conn->env->freeing)
        pump(conn);
    return kept;
}

static const leash__sock_hooks sock_hooks = {on_sock_connected, on_sock_reply, on_sock_closed};

static void conn_connect(leash__conn *conn) {
    const leash__conn_cfg *cfg = conn->cfg;
    /* A name's addresses race inside the connect budget (wire/sock.h). */
    leash__sock_addr addr = {cfg->host,
                             cfg->port,
                             cfg->unix_path,
                             cfg->tls,
                             cfg->tls_server_name ? cfg->tls_server_name : cfg->host,
                             cfg->connect_timeout_ms};
    char err[160];

    if (cfg->host == NULL && cfg->unix_path == NULL)
        return; /* no address yet (leash__conn_retarget gives one) */
    conn->sock = leash__sock_open(conn->env, &addr, &sock_hooks, conn, err, sizeof(err));
    if (conn->sock == NULL) {
        leash__log(conn_log(conn), failure_level(conn), "%s: cannot connect: %s", role_name(conn),
                   err);
        schedule_reconnect(conn);
        return;
    }
    conn->state = LEASH__CONN_CONNECTING;
    conn->next_attempt = leash__now_ms() + cfg->connect_timeout_ms;
}

/* One timer per connection; what it waits for depends on the state. */
static void conn_arm(leash__conn *conn) {
    int64_t due = 0;
    leash__list *n;
    int keep_alive = !leash__list_empty(&conn->queue) || !leash__list_empty(&conn->delayed) ||
                     conn->inflight > 0;

    if (conn->env->freeing)
        return;
    switch (conn->state) {
    case LEASH__CONN_DOWN:
    case LEASH__CONN_CONNECTING:
        due = conn->next_attempt;
        break;
    default:
        if (conn->inflight > 0)
            due = conn->last_progress + conn->cfg->command_timeout_ms;
        if (!leash__list_empty(&conn->queue) && !conn->clock_probe &&
            window_open(conn, cmd_of(LEASH__LIST_FIRST(&conn->queue))->len) &&
            !held_for_wait(conn, cmd_of(LEASH__LIST_FIRST(&conn->queue))))
            due = leash__now_ms(); /* to be written */
        break;
    }
    if (conn->state != LEASH__CONN_READY) {
        leash__list *next;
        for (n = conn->queue.next; n != &conn->queue; n = next) {
            leash__cmd *cmd = cmd_of(n);
            next = n->next;
            if (cmd->flags & LEASH__CMD_ORPHAN) {
                /* Let go of since it was queued: owed from now on. */
                queue_remove(conn, cmd);
                owe(conn, cmd);
            } else if (cmd->deadline != 0 && (due == 0 || cmd->deadline < due)) {
                due = cmd->deadline;
            }
        }
        if (conn->owed_sweep_at != 0 && (due == 0 || conn->owed_sweep_at < due))
            due = conn->owed_sweep_at;
    }
    for (n = conn->delayed.next; n != &conn->delayed; n = n->next) {
        leash__cmd *cmd = cmd_of(n);
        if (due == 0 || cmd->send_at < due)
            due = cmd->send_at;
        if (cmd->deadline != 0 && cmd->deadline < due)
            due = cmd->deadline;
    }
    if (due == 0)
        leash__timer_stop(&conn->timer);
    else
        leash__timer_at(&conn->timer, due, keep_alive);
}

/* Why a connect attempt is still under way at its deadline, for the log
 * line: nothing (a TCP connect), the name, or the TLS handshake with what
 * the server sent in it. A handshake that gets no answer is a server that
 * is frozen or slow, or a port that is not TLS (a plain Redis waits for
 * the end of a line that a ClientHello lacks): both are a connect timeout,
 * and the line says which it may be. */
static void connect_stage(const leash__conn *conn, char *out, size_t len) {
    char seen[200];

    if (conn->sock != NULL && leash__sock_resolving(conn->sock))
        snprintf(out, len, " (no answer from DNS yet)");
    else if (conn->sock != NULL && leash__sock_tls_seen(conn->sock, seen, sizeof(seen)))
        snprintf(out, len, " (in the TLS handshake: %s%s)", seen,
                 strncmp(seen, "no byte", 7) == 0
                     ? ": a frozen or slow server, or is this port TLS? (a plain-TCP Redis never "
                       "answers a ClientHello)"
                     : "");
    else
        out[0] = '\0';
}

static void conn_timer_fired(void *arg) {
    leash__conn *conn = arg;
    leash__env *env = conn->env;
    int64_t now = leash__now_ms();

    expire_queue(conn, now);
    if (env->freeing)
        return;
    send_delayed(conn, now);
    switch (conn->state) {
    case LEASH__CONN_DOWN:
        if (now >= conn->next_attempt)
            conn_connect(conn);
        break;
    case LEASH__CONN_CONNECTING:
        if (now >= conn->next_attempt) {
            char stage[400];
            connect_stage(conn, stage, sizeof(stage));
            leash__log(conn_log(conn), failure_level(conn), "%s: connect timed out%s",
                       role_name(conn), stage);
            conn_break(conn);
            if (env->freeing)
                return;
        }
        break;
    default:
        pump(conn);
        if (conn->inflight > 0 && now - conn->last_progress >= conn->cfg->command_timeout_ms) {
            /* An answer waits unread: this process did not run its loop
             * for that long (a callback that blocked), the server was not
             * silent. Its read event comes in this turn of the loop. */
            if (conn->sock != NULL && leash__sock_has_input(conn->sock)) {
                conn->last_progress = now;
                break;
            }
            leash__log(conn_log(conn), LEASH_LOG_WARN,
                       "%s: no reply for %lld ms with %u outstanding: reconnecting",
                       role_name(conn), (long long)(now - conn->last_progress), conn->inflight);
            conn_break(conn);
            if (env->freeing)
                return;
        }
        break;
    }
    conn_arm(conn);
}

static void make_label(leash__conn *conn) {
    const leash__conn_cfg *cfg = conn->cfg;
    const char *kind = cfg->sentinel                   ? "sentinel"
                       : conn->role == LEASH__CONN_CMD ? "command"
                                                       : "subscriber";

    if (cfg->unix_path != NULL)
        snprintf(conn->label, sizeof(conn->label), "%s connection to %s", kind, cfg->unix_path);
    else if (cfg->host != NULL)
        snprintf(conn->label, sizeof(conn->label), "%s connection to %s:%d", kind, cfg->host,
                 cfg->port);
    else
        snprintf(conn->label, sizeof(conn->label), "%s connection (no address yet)", kind);
}

void leash__conn_init(leash__conn *conn, leash__env *env, const leash__conn_cfg *cfg, int role) {
    memset(conn, 0, sizeof(*conn));
    conn->env = env;
    conn->cfg = cfg;
    conn->role = role;
    make_label(conn);
    conn->state = LEASH__CONN_DOWN;
    conn->backoff_ms = cfg->reconnect_min_ms;
    leash__list_init(&conn->queue);
    leash__list_init(&conn->delayed);
    leash__list_init(&conn->owed);
    leash__list_init(&conn->sent);
    leash__list_init(&conn->acking);
    leash__list_init(&conn->limbo);
    conn->retry_tail = &conn->queue;
    leash__timer_init(&conn->timer, env, conn_timer_fired, conn);
}

int leash__conn_prepare(leash__conn *conn) {
    return leash__timer_create(&conn->timer);
}

const char *leash__conn_role_name(const leash__conn *conn) {
    return role_name(conn);
}

void leash__conn_retarget(leash__conn *conn) {
    /* Another server: what the old one refused, or its clock, says
     * nothing of the new one. */
    conn->refused = 0;
    conn->handshake_busy = 0;
    conn->server_offset_known = 0;
    conn->evict_warned = 0;
    conn_break(conn);
    if (conn->env->freeing)
        return;
    make_label(conn);
    conn->backoff_ms = conn->cfg->reconnect_min_ms;
    conn->failures = 0;
    conn->next_attempt = leash__now_ms();
    conn_arm(conn);
}

void leash__conn_fail_unsent(leash__conn *conn, int status) {
    fail_queue(conn, status);
}

void leash__conn_start(leash__conn *conn) {
    conn_connect(conn);
    conn_arm(conn);
}

/* Teardown of an unsent list: orphans (best-effort releases) go into the
 * socket's buffer if it is ready, put on the wire as write_cmd puts them;
 * the others complete LEASH_ECANCELED. */
static void teardown_list(leash__conn *conn, leash__list *list) {
    while (!leash__list_empty(list)) {
        leash__cmd *cmd = cmd_of(LEASH__LIST_FIRST(list));
        queue_remove(conn, cmd);
        if ((cmd->flags & (LEASH__CMD_ORPHAN | LEASH__CMD_BACKGROUND)) && conn->sock != NULL &&
            conn->state == LEASH__CONN_READY)
            (void)put_on_wire(conn, cmd);
        cmd->conn = NULL;
        cmd_complete(cmd, NULL, LEASH_ECANCELED, -1);
    }
}

void leash__conn_teardown(leash__conn *conn) {
    leash__timer_clear(&conn->timer);
    teardown_list(conn, &conn->queue);
    teardown_list(conn, &conn->owed);
    teardown_list(conn, &conn->delayed);
    teardown_list(conn, &conn->limbo);
    /* There is no later write event: the socket takes what it takes now. */
    if (conn->sock != NULL && conn->state == LEASH__CONN_READY)
        leash__sock_flush_now(conn->sock);
    leash__list_splice_tail(&conn->acking, &conn->sent);
    while (!leash__list_empty(&conn->acking)) {
        leash__cmd *cmd = cmd_of(LEASH__LIST_FIRST(&conn->acking));
        leash__list_remove(&cmd->link);
        cmd->conn = NULL;
        drop_first(cmd);
        cmd_complete(cmd, NULL, LEASH_ECANCELED, -1);
    }
    if (conn->sock != NULL) {
        leash__sock_close(conn->sock);
        conn->sock = NULL;
    }
}
