#include "conn.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "client.h"
#include "clock.h"
#include "guard.h"
#include "resp.h"
#include "scripts.h"
#include "token.h"

/* Handshake replies carry which command they answer as their privdata. */
enum {
    HS_AUTH = 1,
    HS_SELECT = 2,
    HS_SCRIPT = 16
};

static void conn_arm(leash__conn *conn);
static void conn_down(leash__conn *conn);

static const char *role_name(const leash__conn *conn) {
    return conn->role == LEASH__CONN_CMD ? "command" : "subscriber";
}

static const leash__logger *conn_log(const leash__conn *conn) {
    return &conn->client->cfg.log;
}

/* ---- command lists ---- */

static void list_unlink(leash__cmd_list *l, leash__cmd *cmd) {
    if (cmd->prev)
        cmd->prev->next = cmd->next;
    else
        l->head = cmd->next;
    if (cmd->next)
        cmd->next->prev = cmd->prev;
    else
        l->tail = cmd->prev;
    cmd->next = cmd->prev = NULL;
}

static void list_insert_after(leash__cmd_list *l, leash__cmd *after, leash__cmd *cmd) {
    cmd->prev = after;
    cmd->next = after ? after->next : l->head;
    if (cmd->next)
        cmd->next->prev = cmd;
    else
        l->tail = cmd;
    if (after)
        after->next = cmd;
    else
        l->head = cmd;
}

static void list_append(leash__cmd_list *l, leash__cmd *cmd) {
    list_insert_after(l, l->tail, cmd);
}

static void queue_remove(leash__conn *conn, leash__cmd *cmd) {
    if (conn->retry_tail == cmd)
        conn->retry_tail = cmd->prev;
    list_unlink(&conn->queue, cmd);
}

leash__cmd *leash__cmd_new(char *buf, size_t len, int script, unsigned flags, int64_t deadline,
                           leash__reply_fn *fn, void *arg) {
    leash__cmd *cmd = calloc(1, sizeof(*cmd));
    if (cmd == NULL)
        return NULL;
    cmd->buf = buf;
    cmd->len = len;
    cmd->script = script;
    cmd->flags = flags;
    cmd->deadline = deadline;
    cmd->fn = fn;
    cmd->arg = arg;
    return cmd;
}

static void cmd_free(leash__cmd *cmd) {
    free(cmd->buf);
    free(cmd);
}

/* Frees the command, then tells its owner (if it still has one). */
static void cmd_complete(leash__cmd *cmd, redisReply *reply, int status) {
    leash__reply_fn *fn = cmd->fn;
    void *arg = cmd->arg;
    int orphan = (cmd->flags & LEASH__CMD_ORPHAN) != 0;

    cmd_free(cmd);
    if (!orphan && fn != NULL)
        fn(arg, reply, status);
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

/* Completes every queued command with status (orphans are dropped). */
static void fail_queue(leash__conn *conn, int status) {
    leash__cmd_list doomed = conn->queue;
    leash__cmd *cmd;

    conn->queue.head = conn->queue.tail = NULL;
    conn->retry_tail = NULL;
    for (cmd = doomed.head; cmd; cmd = cmd->next)
        cmd->conn = NULL;
    while ((cmd = doomed.head) != NULL) {
        list_unlink(&doomed, cmd);
        cmd_complete(cmd, NULL, status);
        if (conn->client->freeing)
            return;
    }
}

/* Commands whose own deadline passed while they waited for a connection. */
static void expire_queue(leash__conn *conn, int64_t now) {
    leash__cmd_list doomed = {NULL, NULL};
    leash__cmd *cmd, *next;
    int status = conn->auth_failed ? LEASH_EAUTH : LEASH_ECONN;

    for (cmd = conn->queue.head; cmd; cmd = next) {
        next = cmd->next;
        if (cmd->deadline != 0 && now >= cmd->deadline) {
            queue_remove(conn, cmd);
            cmd->conn = NULL;
            list_append(&doomed, cmd);
        }
    }
    while ((cmd = doomed.head) != NULL) {
        list_unlink(&doomed, cmd);
        cmd_complete(cmd, NULL, status);
        if (conn->client->freeing)
            return;
    }
}

/* ---- sending ---- */

static void on_cmd_reply(redisAsyncContext *ac, void *r, void *privdata);

static void count_send(leash__conn *conn, unsigned replies) {
    if (conn->inflight == 0) {
        conn->last_progress = leash__now_ms();
        conn->inflight += replies;
        conn_arm(conn);
    } else {
        conn->inflight += replies;
    }
}

static int write_cmd(leash__conn *conn, leash__cmd *cmd) {
    if (redisAsyncFormattedCommand(conn->ac, on_cmd_reply, cmd, cmd->buf, cmd->len) != REDIS_OK)
        return -1;
    cmd->flags |= LEASH__CMD_SENT | LEASH__CMD_WRITTEN;
    list_append(&conn->sent, cmd);
    if (conn->role == LEASH__CONN_CMD)
        conn->client->stats.commands_sent++;
    count_send(conn, 1);
    return 0;
}

static void enqueue(leash__conn *conn, leash__cmd *cmd) {
    list_append(&conn->queue, cmd);
    /* The timer must also watch this command's deadline. */
    if (cmd->deadline != 0 && (conn->timer.due == 0 || cmd->deadline < conn->timer.due))
        conn_arm(conn);
}

void leash__conn_send(leash__conn *conn, leash__cmd *cmd) {
    cmd->conn = conn;
    if (conn->state == LEASH__CONN_READY && conn->ac != NULL && write_cmd(conn, cmd) == 0)
        return;
    enqueue(conn, cmd);
}

int leash__conn_send_raw(leash__conn *conn, void (*fn)(redisAsyncContext *, void *, void *),
                         const char *buf, size_t len, unsigned replies) {
    if (conn->state != LEASH__CONN_READY || conn->ac == NULL)
        return -1;
    if (redisAsyncFormattedCommand(conn->ac, fn, NULL, buf, len) != REDIS_OK)
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
    leash__cmd_list pending = conn->queue;
    leash__cmd *cmd;

    conn->state = LEASH__CONN_READY;
    conn->backoff_ms = conn->client->cfg.reconnect_min_ms;
    conn->auth_failed = 0;
    if (conn->role == LEASH__CONN_CMD)
        conn->client->stats.connects++;
    else
        conn->client->stats.sub_connects++;
    leash__log(conn_log(conn), conn->failures ? LEASH_LOG_WARN : LEASH_LOG_INFO,
               "%s connection ready (after %u failed attempts)", role_name(conn), conn->failures);
    conn->failures = 0;

    conn->queue.head = conn->queue.tail = NULL;
    conn->retry_tail = NULL;
    while ((cmd = pending.head) != NULL) {
        list_unlink(&pending, cmd);
        if (conn->ac == NULL || write_cmd(conn, cmd) != 0)
            list_append(&conn->queue, cmd);
    }
    if (conn->on_ready)
        conn->on_ready(conn);
}

/* Drops the connection on our own decision (timeout, refused handshake).
 * Sent commands come back through on_cmd_reply with no reply. */
static void conn_break(leash__conn *conn) {
    redisAsyncContext *ac = conn->ac;

    if (ac == NULL)
        return;
    conn->ac = NULL;
    ac->data = NULL;
    ac->onDisconnect = NULL;
    redisAsyncFree(ac);
    conn_down(conn);
}

/* The first failure in a row is a warning; the retries that follow are
 * debug lines, until the connection is ready again. */
static int failure_level(leash__conn *conn) {
    return conn->failures++ == 0 ? LEASH_LOG_WARN : LEASH_LOG_DEBUG;
}

static void schedule_reconnect(leash__conn *conn) {
    const leash__config *cfg = &conn->client->cfg;
    int64_t delay;

    if (conn->auth_failed)
        conn->backoff_ms = cfg->reconnect_max_ms;
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
        conn->client->stats.disconnects++;
    schedule_reconnect(conn);
    if (conn->auth_failed) {
        fail_queue(conn, LEASH_EAUTH);
        if (conn->client->freeing)
            return;
    }
    if (conn->on_down)
        conn->on_down(conn);
    if (conn->client->freeing)
        return;
    conn_arm(conn);
}

static void on_handshake_reply(redisAsyncContext *ac, void *r, void *privdata);

static int handshake_cmd(leash__conn *conn, intptr_t tag, int argc, const char **argv) {
    size_t lens[4], len;
    char *buf;
    int i, rc;

    for (i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    buf = leash__resp_format(&len, argc, (const char *const *)argv, lens);
    if (buf == NULL)
        return -1;
    rc = redisAsyncFormattedCommand(conn->ac, on_handshake_reply, (void *)tag, buf, len);
    free(buf);
    if (rc != REDIS_OK)
        return -1;
    conn->handshake_left++;
    count_send(conn, 1);
    return 0;
}

static void start_handshake(leash__conn *conn) {
    const leash__config *cfg = &conn->client->cfg;
    char db[16];
    int i, failed = 0;

    conn->state = LEASH__CONN_HANDSHAKE;
    conn->handshake_left = 0;
    if (cfg->password != NULL) {
        const char *argv[3] = {"AUTH", cfg->username ? cfg->username : cfg->password,
                               cfg->password};
        failed |= handshake_cmd(conn, HS_AUTH, cfg->username ? 3 : 2, argv);
    }
    if (conn->role == LEASH__CONN_CMD) {
        if (cfg->db != 0) {
            const char *argv[2] = {"SELECT", db};
            snprintf(db, sizeof(db), "%d", cfg->db);
            failed |= handshake_cmd(conn, HS_SELECT, 2, argv);
        }
        for (i = 0; i < LEASH__SCRIPT_COUNT; i++) {
            const char *argv[3] = {"SCRIPT", "LOAD", leash__script_source(i)};
            failed |= handshake_cmd(conn, HS_SCRIPT + i, 3, argv);
        }
    }
    if (failed) {
        leash__log(conn_log(conn), LEASH_LOG_ERROR, "%s connection: could not send the handshake",
                   role_name(conn));
        conn_break(conn);
        return;
    }
    if (conn->handshake_left == 0)
        become_ready(conn);
}

static void on_handshake_reply(redisAsyncContext *ac, void *r, void *privdata) {
    leash__conn *conn = ac->data;
    redisReply *reply = r;
    intptr_t tag = (intptr_t)privdata;
    leash_client *c;

    if (conn == NULL || conn->ac != ac || reply == NULL)
        return; /* a connection we already dropped */
    c = conn->client;
    leash__client_enter(c);
    leash__conn_progress(conn, 1);
    /* NOAUTH on any handshake command: the server wants a password that
     * we do not have. */
    if (reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "NOAUTH", 6) == 0)
        tag = HS_AUTH;
    if (reply->type == REDIS_REPLY_ERROR && (tag == HS_AUTH || tag == HS_SELECT)) {
        if (tag == HS_AUTH)
            leash__log(conn_log(conn), LEASH_LOG_ERROR, "%s connection: AUTH refused by Redis: %s",
                       role_name(conn), reply->str);
        else
            leash__log(conn_log(conn), LEASH_LOG_ERROR,
                       "%s connection: SELECT %d refused by Redis: %s", role_name(conn), c->cfg.db,
                       reply->str);
        conn->auth_failed = 1;
        conn_break(conn);
    } else {
        if (tag >= HS_SCRIPT) {
            int script = (int)(tag - HS_SCRIPT);
            if (reply->type != REDIS_REPLY_STRING)
                /* ACL users may lack SCRIPT: EVALSHA's NOSCRIPT path loads it. */
                leash__log(conn_log(conn), LEASH_LOG_INFO,
                           "SCRIPT LOAD not accepted (%s): scripts load on first use",
                           reply->type == REDIS_REPLY_ERROR ? reply->str : "bad reply");
            else if (reply->len != LEASH__SHA_LEN ||
                     memcmp(reply->str, c->scripts.sha[script], LEASH__SHA_LEN) != 0)
                leash__log(conn_log(conn), LEASH_LOG_WARN,
                           "SCRIPT LOAD returned an unexpected SHA1 for script %d", script);
        }
        if (--conn->handshake_left == 0 && conn->state == LEASH__CONN_HANDSHAKE)
            become_ready(conn);
    }
    leash__client_leave(c);
}

static void on_connect(const redisAsyncContext *cac, int status) {
    redisAsyncContext *ac = (redisAsyncContext *)cac;
    leash__conn *conn = ac->data;
    leash_client *c;

    if (conn == NULL || conn->ac != ac)
        return;
    c = conn->client;
    leash__client_enter(c);
    if (status != REDIS_OK) {
        leash__log(conn_log(conn), failure_level(conn), "%s connection: connect failed: %s",
                   role_name(conn), ac->errstr ? ac->errstr : "unknown error");
        conn->ac = NULL; /* hiredis frees it when we return */
        ac->data = NULL;
        conn_down(conn);
    } else {
        /* TCP keepalive finds peers that vanished without a FIN; it does
         * not apply to unix sockets (and fails there). */
        if (c->cfg.unix_path == NULL)
            redisEnableKeepAlive(&ac->c);
        start_handshake(conn);
    }
    leash__client_leave(c);
}

static void on_disconnect(const redisAsyncContext *cac, int status) {
    redisAsyncContext *ac = (redisAsyncContext *)cac;
    leash__conn *conn = ac->data;
    leash_client *c;

    if (conn == NULL || conn->ac != ac)
        return;
    c = conn->client;
    leash__client_enter(c);
    leash__log(conn_log(conn), LEASH_LOG_WARN, "%s connection lost: %s", role_name(conn),
               status == REDIS_OK ? "closed" : (ac->errstr ? ac->errstr : "error"));
    conn->ac = NULL;
    ac->data = NULL;
    conn_down(conn);
    leash__client_leave(c);
}

/* The connection of a sent command broke: resend it later, or give up. */
static void cmd_lost(leash__conn *conn, leash__cmd *cmd) {
    int64_t now = leash__now_ms();

    if ((cmd->flags & LEASH__CMD_RETRY) && (cmd->deadline == 0 || now < cmd->deadline)) {
        list_insert_after(&conn->queue, conn->retry_tail, cmd);
        conn->retry_tail = cmd;
        return;
    }
    cmd->conn = NULL;
    cmd_complete(cmd, NULL, LEASH_ECONN);
}

static void on_cmd_reply(redisAsyncContext *ac, void *r, void *privdata) {
    leash__cmd *cmd = privdata;
    redisReply *reply = r;
    leash__conn *conn = cmd->conn;
    leash_client *c;

    (void)ac;
    if (conn == NULL) { /* its client is gone */
        cmd_free(cmd);
        return;
    }
    c = conn->client;
    leash__client_enter(c);
    list_unlink(&conn->sent, cmd);
    cmd->flags &= ~(unsigned)LEASH__CMD_SENT;
    if (reply == NULL) {
        if (conn->inflight > 0)
            conn->inflight--;
        cmd_lost(conn, cmd);
    } else {
        leash__conn_progress(conn, 1);
        if (reply->type == REDIS_REPLY_ERROR && cmd->script >= 0 &&
            strncmp(reply->str, "NOSCRIPT", 8) == 0) {
            size_t len;
            char *eval = leash__script_as_eval(&len, cmd->buf, cmd->len, cmd->script);
            if (eval != NULL) {
                c->stats.noscript_reloads++;
                free(cmd->buf);
                cmd->buf = eval;
                cmd->len = len;
                cmd->script = -1;
                leash__conn_send(conn, cmd);
                leash__client_leave(c);
                return;
            }
        }
        cmd->conn = NULL;
        cmd_complete(cmd, reply, LEASH_OK);
    }
    leash__client_leave(c);
}

static void conn_connect(leash__conn *conn) {
    const leash__config *cfg = &conn->client->cfg;
    redisAsyncContext *ac;

    ac = cfg->unix_path ? redisAsyncConnectUnix(cfg->unix_path)
                        : redisAsyncConnect(cfg->host, cfg->port);
    if (ac == NULL || ac->err) {
        leash__log(conn_log(conn), failure_level(conn), "%s connection: cannot connect: %s",
                   role_name(conn), ac ? ac->errstr : "out of memory");
        if (ac != NULL)
            redisAsyncFree(ac);
        schedule_reconnect(conn);
        return;
    }
    if (conn->client->loop.attach(conn->client->loop.data, ac) != 0) {
        leash__log(conn_log(conn), LEASH_LOG_ERROR, "%s connection: the loop adapter refused it",
                   role_name(conn));
        redisAsyncFree(ac);
        schedule_reconnect(conn);
        return;
    }
    ac->data = conn;
    leash__guard_install(ac);
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    conn->ac = ac;
    conn->state = LEASH__CONN_CONNECTING;
    conn->next_attempt = leash__now_ms() + cfg->connect_timeout_ms;
}

/* One timer per connection; what it waits for depends on the state. */
static void conn_arm(leash__conn *conn) {
    int64_t due = 0;
    leash__cmd *cmd;
    int keep_alive = conn->queue.head != NULL || conn->inflight > 0;

    if (conn->client->freeing)
        return;
    switch (conn->state) {
    case LEASH__CONN_DOWN:
    case LEASH__CONN_CONNECTING:
        due = conn->next_attempt;
        break;
    default:
        if (conn->inflight > 0)
            due = conn->last_progress + conn->client->cfg.command_timeout_ms;
        break;
    }
    if (conn->state != LEASH__CONN_READY) {
        for (cmd = conn->queue.head; cmd; cmd = cmd->next)
            if (cmd->deadline != 0 && (due == 0 || cmd->deadline < due))
                due = cmd->deadline;
    }
    if (due == 0)
        leash__timer_stop(&conn->timer);
    else
        leash__timer_at(&conn->timer, due, keep_alive);
}

static void conn_timer_fired(void *arg) {
    leash__conn *conn = arg;
    leash_client *c = conn->client;
    int64_t now = leash__now_ms();

    if (conn->state != LEASH__CONN_READY) {
        expire_queue(conn, now);
        if (c->freeing)
            return;
    }
    switch (conn->state) {
    case LEASH__CONN_DOWN:
        if (now >= conn->next_attempt)
            conn_connect(conn);
        break;
    case LEASH__CONN_CONNECTING:
        if (now >= conn->next_attempt) {
            leash__log(conn_log(conn), failure_level(conn), "%s connection: connect timed out",
                       role_name(conn));
            conn_break(conn);
            if (c->freeing)
                return;
        }
        break;
    default:
        if (conn->inflight > 0 && now - conn->last_progress >= c->cfg.command_timeout_ms) {
            leash__log(conn_log(conn), LEASH_LOG_WARN,
                       "%s connection: no reply for %lld ms with %u outstanding: reconnecting",
                       role_name(conn), (long long)(now - conn->last_progress), conn->inflight);
            conn_break(conn);
            if (c->freeing)
                return;
        }
        break;
    }
    conn_arm(conn);
}

void leash__conn_init(leash__conn *conn, leash_client *c, int role) {
    memset(conn, 0, sizeof(*conn));
    conn->client = c;
    conn->role = role;
    conn->state = LEASH__CONN_DOWN;
    conn->backoff_ms = c->cfg.reconnect_min_ms;
    leash__timer_init(&conn->timer, c, conn_timer_fired, conn);
}

void leash__conn_start(leash__conn *conn) {
    conn_connect(conn);
    conn_arm(conn);
}

void leash__conn_teardown(leash__conn *conn) {
    redisAsyncContext *ac = conn->ac;
    leash__cmd *cmd;
    int done = 0;

    leash__timer_clear(&conn->timer);
    /* Orphans (best-effort releases) go out now if the socket takes them. */
    while ((cmd = conn->queue.head) != NULL) {
        queue_remove(conn, cmd);
        if ((cmd->flags & LEASH__CMD_ORPHAN) && ac != NULL && conn->state == LEASH__CONN_READY)
            redisAsyncFormattedCommand(ac, NULL, NULL, cmd->buf, cmd->len);
        cmd->conn = NULL;
        cmd_complete(cmd, NULL, LEASH_ECANCELED);
    }
    if (ac != NULL && conn->state == LEASH__CONN_READY)
        redisBufferWrite(&ac->c, &done);
    /* Sent commands are freed by hiredis's last call to on_cmd_reply. */
    for (cmd = conn->sent.head; cmd; cmd = cmd->next) {
        leash__reply_fn *fn = cmd->fn;
        int orphan = (cmd->flags & LEASH__CMD_ORPHAN) != 0;
        cmd->conn = NULL;
        cmd->fn = NULL;
        if (!orphan && fn != NULL)
            fn(cmd->arg, NULL, LEASH_ECANCELED);
    }
    conn->sent.head = conn->sent.tail = NULL;
    if (ac != NULL) {
        conn->ac = NULL;
        ac->data = NULL;
        ac->onConnect = NULL;
        ac->onDisconnect = NULL;
        redisAsyncFree(ac);
    }
}
