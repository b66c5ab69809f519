/* SPDX-License-Identifier: MIT */
/*
 * The `leash` command-line tool (leash.1 is its manual): what its files
 * share. main.c reads the command line; redis.c talks to the servers of a
 * topology through hiredis's blocking API; lockstate.c reads one lock's
 * state from one server; inspect.c lists and shows locks (every server of
 * a topology); output.c prints for people or as JSON; watch.c follows a
 * lock; force.c removes one through the library.
 */
#ifndef LEASH_TOOLS_CLI_H
#define LEASH_TOOLS_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <hiredis/hiredis.h>
#include <leash/leash.h>
#include <leash/url.h>

#include "dialect/dialect.h" /* the layouts' reader (read_state) */

/* Exit codes a script can use (leash.1, EXIT STATUS). */
enum {
    CLI_OK = 0,
    CLI_NOT_FOUND = 1,
    CLI_USAGE = 2,
    CLI_UNREACHABLE = 3
};

/* The most servers a cluster may tell of (its masters), and redirections
 * followed for one command before giving up. */
#define CLI_NODES_MAX 256
#define CLI_REDIRECTS_MAX 5
/* The longest the --timeout of a command may be, in ms. */
#define CLI_TIMEOUT_MAX_MS 600000

typedef struct cli_node {
    leash_url url; /* where; credentials and db come from cli_conn */
    redisContext *rc;
    int master;                     /* a cluster's master that CLUSTER SLOTS named; else 1 */
    int down;                       /* failed: not tried again until cli_conn_retry */
    char label[LEASH_NODE_MAX + 1]; /* "host:port" or the socket path */
} cli_node;

typedef struct cli_conn {
    int topology; /* LEASH_TOPOLOGY_* */
    int pubsub;   /* LEASH_PUBSUB_*, as given */
    const char *prefix;
    const char *username, *password; /* NULL: none */
    int db;
    int timeout_ms;
    /* Single: 1; Redlock: the servers given; cluster: the seeds, then
     * every master CLUSTER SLOTS and redirections name. */
    cli_node nodes[CLI_NODES_MAX];
    int nnodes;
    int nseeds;
    short slot_node[16384]; /* cluster: the node of each slot, -1 unknown */
    char err[1024];         /* why the last call failed */
    /* TLS to every server (rediss:// or a --tls option), as the library's
     * leash_options.tls* (the force release passes them on). */
    int tls;
    const char *tls_ca_file, *tls_ca_dir, *tls_cert_file, *tls_key_file, *tls_server_name;
    const char *tls_key_password; /* $LEASH_TLS_KEY_PASSWORD: of an encrypted --tls-key */
    int tls_verify;
    struct leash__tls *tls_ctx; /* made once by cli_tls_prepare */
    /* The redis+sentinel:// URL the one server came from, or NULL: watch
     * follows a failover through it. */
    const char *sentinel_url;
} cli_conn;

/* sentinel.c: the master the sentinels of a redis+sentinel:// URL name
 * (ROLE master checked), as a URL with the data nodes' credentials and
 * db. 0, or -1 with err. */
int cli_sentinel_master(const char *url, int timeout_ms, leash_url *out, char *err, size_t cap);
/* A connection subscribed to +switch-master and +promoted-slave on the
 * first sentinel of url that takes it (for redisBufferRead). NULL with
 * err. */
redisContext *cli_sentinel_subscribe(const char *url, int timeout_ms, char *err, size_t cap);
/* 1 when r is a +switch-master or +promoted-slave message about url's
 * master: the new master's address in *out, with the data nodes'
 * credentials and db; else 0. */
int cli_sentinel_switched(const char *url, const redisReply *r, leash_url *out);

/* tls.c */
/* Makes c->tls_ctx when c->tls (the files are read here). 0, or -1 with
 * the reason logged on stderr. */
int cli_tls_prepare(cli_conn *c);
/* A TLS connection to host:port within c->timeout_ms, handshake done, as
 * an fd for redisConnectFd (a thread relays it). -1 with err. */
int cli_tls_connect(cli_conn *c, const char *host, int port, char *err, size_t errlen);
/* Once every connection is closed: waits for the relays to end (each
 * ends when its hiredis side closes), then frees c->tls_ctx. */
void cli_tls_close(cli_conn *c);

/* redis.c */
int cli_node_add(cli_conn *c, const leash_url *u);
/* Points n at u (its connection closed; opened again on first use). */
void cli_node_retarget(cli_node *n, const leash_url *u);
/* Connects every server the topology has (a cluster: its masters, from
 * CLUSTER SLOTS of the first seed that answers). 0, or -1 with c->err. */
int cli_conn_open(cli_conn *c);
/* Connects n (AUTH, SELECT) unless it is; also for a node of the caller's
 * own, such as a subscriber. 0, or -1 with c->err. */
int cli_node_open(cli_conn *c, cli_node *n);
void cli_conn_close(cli_conn *c);
/* A node that failed (no connection, or no answer within the timeout) is
 * not tried again by the same command: a Redlock server that hangs would
 * cost a timeout per lock. watch calls this before each reading. */
void cli_conn_retry(cli_conn *c);
/* One command on node i, connecting first if need be. NULL on a broken
 * connection (c->err says why; the node is reconnected next time). */
redisReply *cli_node_cmd(cli_conn *c, int i, int argc, const char **argv, const size_t *lens);
/* A command of a pipeline: up to three arguments (NULL lens: strlen). */
typedef struct cli_cmd {
    int argc;
    const char *argv[3];
    size_t lens[3];
} cli_cmd;
/* Sends cmds[0..n) to node i in one go and reads their n replies into
 * out[] (the caller frees each). 0, or -1 with c->err when the connection
 * broke (out then holds nothing to free). */
int cli_node_pipeline(cli_conn *c, int i, const cli_cmd *cmds, size_t n, redisReply **out);
/* One command about a key, on *node; in a cluster, a MOVED answer moves
 * *node to the node named (learnt if new), an ASK one is followed once. */
redisReply *cli_key_cmd(cli_conn *c, int *node, int argc, const char **argv, const size_t *lens);
/* The node of a key: *node, after asking the cluster (CLUSTER KEYSLOT and
 * a probe) when there is one. -1 when unreachable. */
int cli_key_node(cli_conn *c, const char *key, size_t len, int *node);
/* Calls fn for every key of node i matching pattern (SCAN), NUL-free keys
 * only (companions have a NUL). 0, or -1 with c->err. */
int cli_scan(cli_conn *c, int i, const char *pattern,
             void (*fn)(const char *key, size_t len, void *arg), void *arg);
/* The servers to read: the masters (cluster), all of them (Redlock), the
 * one. */
int cli_is_master(const cli_conn *c, int i);
/* A lock's companion `kind` of key (dialect/common.c): key \0 [{key}] kind.
 * Returns its length; out holds at least 2 * len + strlen(kind) + 3 bytes. */
size_t cli_companion(char *out, const char *key, size_t len, const char *kind);
/* The server's Redis version on rc, as major * 10000 + minor * 100 + patch
 * (INFO server's redis_version, as the library reads it); 0 not known. */
int cli_server_version(redisContext *rc);
/* The channel Redisson announces lock `name`'s releases on (the library's
 * Redisson dialect names it), malloc'ed, its length in *len; NULL without
 * memory or for a name the dialect refuses. */
char *cli_redisson_channel(const cli_conn *c, const char *name, size_t *len);

/* lockstate.c: the library's dialects read the layouts (read_state,
 * dialect/dialect.h); the tool says what they read. A state's kind is
 * enum leash__state_kind. */
const char *cli_kind_name(int kind);

#define CLI_TOKEN_MAX LEASH__STATE_TOKEN_MAX

/* token: leash: 32 hex digits; Redisson: uuid:thread. mode: m mutex, f,
 * r, w, s (family), R Redisson. count: reentrant holds (a waiter: its
 * place). fence: 0 none (Redisson). ttl_ms: left, -1 none. */
typedef leash__state_entry cli_holder;

typedef struct cli_lockstate {
    int kind;
    int64_t ttl_ms;     /* the key's PTTL */
    uint64_t fence;     /* the last fence given; Redlock: the least the hold's can be */
    uint64_t fence_max; /* Redlock: the most it can be (inspect.c says why); else 0 */
    int marked;         /* mutex: someone found it busy ("w") */
    int64_t permits;    /* semaphore; 0 otherwise */
    int64_t server_ms;  /* the server's clock when read */
    cli_holder *holders;
    size_t nholders;
    cli_holder *waiters; /* in queue order; count = place */
    size_t nwaiters;
    int64_t subscribers;           /* on leash's channel of the lock; -1 not read (ls) */
    char node[LEASH_NODE_MAX + 1]; /* where it was read */
} cli_lockstate;

/* Reads key's lock on *node (moved along in a cluster). 0, or -1 when the
 * server could not be reached (c->err). */
int cli_lock_read(cli_conn *c, int *node, const char *key, size_t len, cli_lockstate *out);
/* Reads the locks of n keys on node, pipelined: a few round trips for the
 * lot instead of four a key (`ls` over many locks). A key the pipeline
 * cannot settle (a redirection, a key that changed under it) is read
 * alone with cli_lock_read. up[i] says whether
 * out[i] was read. 0, or -1 when the node did not answer (c->err; up[] all
 * 0 but for keys read alone elsewhere). */
int cli_lock_read_many(cli_conn *c, int node, char *const *keys, const size_t *lens, size_t n,
                       cli_lockstate *out, int *up);
void cli_lockstate_clear(cli_lockstate *s);
/* The holder token a majority of n Redlock servers agree on (states of
 * the same key), or NULL; *agree is how many hold it. */
const char *cli_majority(const cli_lockstate *s, int n, int *agree);

/* output.c */
void cli_json_str(FILE *f, const char *s, size_t len);
/* A lock name for people: bytes outside printable ASCII as \xHH. */
void cli_text_str(FILE *f, const char *s, size_t len);
void cli_print_state_json(FILE *f, const cli_lockstate *s);
/* A Redisson read-write lock's mode: "write" while a writer holds it. */
const char *cli_rw_mode(const cli_lockstate *s);
/* Prints lines of tab-separated cells as aligned columns (16 at most). */
void cli_print_table(FILE *f, const char *text, size_t len);
/* "12.3s", "250ms", "-" */
const char *cli_ms_text(int64_t ms, char *buf, size_t size);
/* Now, UTC, to the millisecond: 2026-11-24T11:50:01.123Z. */
const char *cli_now_text(char *buf, size_t size);
/* The first 12 digits of a token, all of it when full. */
const char *cli_token_text(const char *tok, int full, char *buf, size_t size);

/* The commands, each returning an exit code. */
typedef struct cli_args {
    int json, full, yes, force;
    int64_t interval_ms, events, seconds;
    const char *pattern, *name;
} cli_args;
/* The state of lock `name` (the caller clears *out). With Redlock, the
 * one standing for the majority, *agree of *of servers holding it, its
 * holder's fence between fence and fence_max; without a majority, no
 * holder (a minority's leftovers hold nothing). */
int cli_read_one(cli_conn *c, const char *name, cli_lockstate *out, int *agree, int *of);
int cli_ls(cli_conn *c, const cli_args *a);
int cli_show(cli_conn *c, const cli_args *a);
int cli_watch(cli_conn *c, const cli_args *a);
/* main.c has refused a release without --force, or without --yes off a
 * terminal. */
int cli_release(cli_conn *c, const cli_args *a);

#endif
