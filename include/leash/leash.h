/* SPDX-License-Identifier: MIT */
/*
 * leash — distributed locks on Redis that run on the caller's event loop.
 *
 * Everything in this header is non-blocking. Every outcome of a request is a
 * callback that runs on the loop the client is attached to (see
 * leash/adapters/libev.h), never inside the call that started the request.
 *
 * Signals: like any hiredis program, ignore SIGPIPE (a write to a connection
 * the server closed is then an error that leash handles).
 *
 * Threads: a client and its locks belong to the thread that runs their loop.
 * No function may be called on one client from two threads at once; distinct
 * clients on distinct loops are independent.
 *
 * Use: efficiency vs correctness. A lock is enough to avoid doing work twice.
 * To never let two writers in (a paused holder can outlive its lease), pass
 * leash_fence() to the storage you write and have it reject smaller fences.
 *
 * What Redis must do: run with maxmemory-policy noeviction (or no
 * maxmemory): an evicted lock key looks free, and two holders follow. Fences
 * come from the Redis server's clock (TIME, in microseconds): they keep
 * growing when Redis loses data, as long as that clock does not step back
 * (and, after a failover, the new master's is not behind the old one's by
 * more than the failover took). A step back is noticed in the next answer
 * that carries the server's time and logged (WARN); the client's "not
 * after" stamps follow the clock from then on. A connection that had no
 * such answer for lease_ms asks TIME before its next stamped command (one
 * round trip; docs/how-it-works.md, "Late copies").
 *
 * Fences on Redlock come from N clocks: a hold's fence is the largest of
 * its granting servers' (each at least its clock and above the lock's fence
 * floor there), and the floors of a majority are raised to it. The next
 * majority shares a server with that one, whose floor carries the fence on
 * however far the clocks differ, unless that server lost its data (a
 * restart without persistence, a FLUSHALL, an eviction): then the next
 * fence is the clocks' of the new majority alone, and goes back when it
 * comes sooner after the last grant than the clock that made the last
 * fence is ahead of theirs. Example (tests/test_redlock.c): servers A (10 s
 * ahead), B, C grant; B restarts empty and is back a lease later (the
 * Redlock "delayed restart"); B, D, E grant (A and C out of reach) within
 * 10 s of the first grant: a lower fence. To
 * keep fences growing, do one of: run NTP on the Redis hosts so that their
 * clocks differ by much less than a lease (the delayed restart then covers
 * the difference); keep a server that lost its data down for longer than
 * the clocks may differ; or run every server with appendonly yes and
 * appendfsync always (a restart keeps its floors). In every case the
 * clocks must differ by less than a floor lives: three leases, at least a
 * minute, after the last grant.
 *
 * Time: deadlines use CLOCK_MONOTONIC, which does not count a system
 * suspend. After a suspend the machine could not rule out, a holder's
 * leash_valid_ms() is too generous; trust the fence, not the clock.
 */
#ifndef LEASH_LEASH_H
#define LEASH_LEASH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(LEASH_STATIC)
#define LEASH_EXPORT
#elif defined(__GNUC__)
#define LEASH_EXPORT __attribute__((visibility("default")))
#else
#define LEASH_EXPORT
#endif

#define LEASH_VERSION_MAJOR 0
#define LEASH_VERSION_MINOR 4
#define LEASH_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH, for compile-time comparisons. */
#define LEASH_VERSION_NUMBER \
    (LEASH_VERSION_MAJOR * 10000 + LEASH_VERSION_MINOR * 100 + LEASH_VERSION_PATCH)

/* The Redis layout this library reads and writes: how a lock of each kind
 * is kept at its key. Clients of one name must run libraries whose layouts
 * can share it; CHANGELOG.md ("Layouts") says which do. 1: leash 0.3;
 * 2: leash 0.4. */
#define LEASH_LAYOUT_VERSION 2

/* The version of the library that is linked, as "MAJOR.MINOR.PATCH". */
LEASH_EXPORT const char *leash_version(void);

/*
 * Status codes. 0 is success, errors are negative. The numbers never change
 * and new codes are only appended; the comment at the end of each line is
 * the version that added it.
 * X(NAME, number, message)
 */
#define LEASH_STATUS_MAP(X)                                              \
    X(OK, 0, "success")                                        /* 0.1 */ \
    X(EINVAL, -1, "invalid argument")                          /* 0.1 */ \
    X(ENOMEM, -2, "out of memory")                             /* 0.1 */ \
    X(EBUSY, -3, "lock is held by another owner")              /* 0.1 */ \
    X(ETIMEDOUT, -4, "wait for the lock timed out")            /* 0.1 */ \
    X(ECANCELED, -5, "operation canceled")                     /* 0.1 */ \
    X(ENOTHELD, -6, "lock is not held by this owner")          /* 0.1 */ \
    X(ECONN, -7, "Redis not reachable in time")                /* 0.1 */ \
    X(EREDIS, -8, "Redis answered with an error")              /* 0.1 */ \
    X(EPROTO, -9, "unexpected reply from Redis")               /* 0.1 */ \
    X(ESTATE, -10, "call not valid in the current state")      /* 0.1 */ \
    X(EAUTH, -11, "Redis refused the credentials or database") /* 0.1 */ \
    X(ELOOP, -12, "client is not attached to an event loop")   /* 0.1 */ \
    X(EREPLICAS, -13, "too few replicas acknowledged in time") /* 0.2 */ \
    X(ETLS, -14, "TLS handshake or certificate check failed")  /* 0.3 */

enum leash_status {
#define LEASH_STATUS_ENUM_(name, num, msg) LEASH_##name = (num),
    LEASH_STATUS_MAP(LEASH_STATUS_ENUM_)
#undef LEASH_STATUS_ENUM_
};

/* A static message for any status (also for unknown numbers). Never NULL. */
LEASH_EXPORT const char *leash_strerror(int status);
/* The symbolic name of a status, e.g. "LEASH_EBUSY". Never NULL. */
LEASH_EXPORT const char *leash_status_name(int status);

/* Why a held lock was lost (argument `reason` of leash_lost_cb). */
enum leash_lost_reason {
    LEASH_LOST_EXPIRED = 1,     /* renewal found the hold gone or owned by another */
    LEASH_LOST_UNREACHABLE = 2, /* no renewal succeeded before the local deadline */
    LEASH_LOST_MAX_HOLD = 3,    /* the lock's maximum hold time was reached */
    LEASH_LOST_FIXED_LEASE = 4, /* a fixed lease (no watchdog) ran out */
    LEASH_LOST_REPLICAS = 5     /* a renewal was acknowledged by too few replicas (0.2) */
};
LEASH_EXPORT const char *leash_lost_reason_name(int reason);

/* wait_ms of leash_acquire: wait as long as it takes. */
#define LEASH_WAIT_FOREVER ((int64_t)-1)

/* The largest duration leash takes, in ms (10 years): every option and
 * argument in ms (lease, renew interval, max hold, timeouts, backoffs,
 * sub_linger_ms, wait_ms) is refused with LEASH_EINVAL above it, so that no
 * sum of them can overflow. */
#define LEASH_DURATION_MAX_MS ((int64_t)315360000000)

/* Fairness of the mutex (leash_lock_new; docs/how-it-works.md "Fairness"). Waiters
 * race for each release, which costs nothing while nobody waits long. A
 * waiter that has waited LEASH_STARVE_MS (from its leash_acquire() call)
 * asks with its age from then on (at its next attempt: a release woke it,
 * or passed it over for a queued waiter), and the busy lock queues it,
 * oldest first, for the grants after the current hold (Go's sync.Mutex
 * starvation mode, across processes; at most LEASH_RESERVE_QUEUE waiters
 * queue at once, the others ask again at the next turn). Each release
 * hands the lock to the head of that queue: the key stays, reserved for
 * it, for at most LEASH_RESERVE_MS, and only it is granted meanwhile (the
 * others sleep on). Once the queue is empty, waiters race again. A queued
 * waiter that died thus delays the lock by LEASH_RESERVE_MS at most, at
 * its turn; one that gives up (its wait ends, cancel, free) leaves the
 * queue, or gives its turn back, at once. Fixed constants. The price is
 * paid only while someone starves: an uncontended acquire and release cost
 * Redis the same 6 calls. Not with Redlock (every attempt there has a
 * token of its own, and servers could queue differently: its waiters
 * race, with a random pause after a split vote) nor in the Redisson
 * dialect (Redisson's own rules). */
#define LEASH_STARVE_MS 10
#define LEASH_RESERVE_MS 100
#define LEASH_RESERVE_QUEUE 64

/* Limits on names: a lock name is 1..LEASH_NAME_MAX bytes, any bytes but NUL. */
#define LEASH_NAME_MAX 512
#define LEASH_PREFIX_MAX 128

/* Where the locks live (leash_options.topology). */
enum leash_topology {
    LEASH_TOPOLOGY_SINGLE = 0,  /* one server: host and port, or unix_path */
    LEASH_TOPOLOGY_CLUSTER = 1, /* a Redis Cluster: nodes are seed nodes */
    LEASH_TOPOLOGY_REDLOCK = 2, /* Redlock: nodes are N independent servers */
    /* Redis Sentinel: nodes are the sentinels, sentinel_master the name of
     * the master they watch (0.3) */
    LEASH_TOPOLOGY_SENTINEL = 3
};

/* How releases wake waiters (leash_options.pubsub). */
enum leash_pubsub {
    LEASH_PUBSUB_AUTO = 0,    /* sharded in a cluster, classic elsewhere */
    LEASH_PUBSUB_CLASSIC = 1, /* SUBSCRIBE/PUBLISH (a cluster broadcasts every message) */
    /* SSUBSCRIBE/SPUBLISH: Redis 7. A server older than 7.0, or one that
     * does not say its version (INFO refused), is refused at the
     * handshake: what waits for it ends LEASH_EREDIS, logged. */
    LEASH_PUBSUB_SHARDED = 2,
    /* 0.4: no pub/sub at all: waiters poll (docs/how-it-works.md "Waiting without
     * pub/sub"), and no subscriber connection is opened. For servers or
     * proxies that refuse SUBSCRIBE; with the other values a refused
     * SUBSCRIBE/SSUBSCRIBE makes the waiters that needed that server poll
     * as well, on its own: an error reply (NOPERM, unknown command), or
     * the connection closed right after SUBSCRIBE, before any answer, 3
     * times in a row (a proxy such as twemproxy). Per server: one server
     * or Sentinel, every waiter; a cluster, the waiters of the refusing
     * master's slots; Redlock, every waiter from the first refusing server
     * (docs/how-it-works.md "Waiting without pub/sub"). */
    LEASH_PUBSUB_OFF = 3
};

/* Waiters that poll (LEASH_PUBSUB_OFF, or a refused subscription where
 * they needed it: LEASH_PUBSUB_OFF above) ask
 * Redis again after a backoff that starts at LEASH_POLL_MIN_MS and doubles
 * up to LEASH_POLL_MAX_MS, each pause drawn at random from its upper half,
 * or at the holder's remaining TTL when that comes sooner: one asker per
 * lock name and client, the others wait behind it. */
#define LEASH_POLL_MIN_MS 10
#define LEASH_POLL_MAX_MS 500

/*
 * How locks are laid out in Redis (leash_options.dialect). Per client.
 *
 * LEASH_DIALECT_LEASH: leash's own layout (a string per lock, a fence from
 * the server's clock, the lock family).
 *
 * LEASH_DIALECT_REDISSON: the layout of Redisson's RLock (Java Redisson
 * 3.x and the ports that copy its scripts), so that a C service and a Java
 * service exclude each other on the same names and each wakes the other's
 * waiters (docs/operations.md "Redisson").
 * - Key: key_prefix followed by the name, as always (a program that shares
 *   Redisson's names sets key_prefix to ""): a hash whose PEXPIRE is the
 *   lease, renewed by the watchdog every renew_interval_ms (lease/3 by
 *   default, as Redisson's watchdog; its lockWatchdogTimeout is 30 s, so a
 *   lease_ms of 30000 matches it).
 * - Holder: the field "<uuid>:0" with the hold count as value, where <uuid>
 *   is the hold's owner token written as a UUID (8-4-4-4-12 hex digits). It
 *   is new for every hold, as leash's tokens are, not one per handle: a
 *   late release of an earlier hold can never match a later one. No Java
 *   thread has the id 0, so a leash holder is recognisable.
 * - Releases and force releases publish "0" on
 *   redisson_lock__channel:{name}, or redisson_lock__channel:name when the
 *   name holds a '{' (as Redisson writes it; the name must then hold a valid
 *   {hash tag}, so the channel shares the key's cluster slot). The channel
 *   carries no db, as Redisson's does not: the same name in two dbs of one
 *   server wakes the other db's waiters once, needlessly. In a cluster,
 *   leash_options.pubsub and the shardedSubscriptionMode of Redisson's
 *   cluster config must agree; LEASH_PUBSUB_SHARDED with another topology
 *   is refused (LEASH_EINVAL), as Redisson shards in a cluster only.
 * - Redisson's unlock latches (redisson_unlock_latch:{name}:<request id>)
 *   are Redisson's own: leash neither reads nor writes them. Its own
 *   release sent again after a lost answer is told apart without a key
 *   (see leash_release).
 * - Fences: Redisson's RLock has none. leash_fence() still gives a leash
 *   hold the server's clock at its grant (Redlock: the fence its servers
 *   agreed on, above the fence floor, a companion key with a TTL whose name
 *   Redisson never uses: docs/redlock.md), so fences grow across leash's
 *   holds as in the leash dialect. A Redisson holder has no fence: a store
 *   that checks fences cannot stop a stale Redisson writer, nor a stale
 *   leash writer after a Redisson hold. Nor can these
 *   fences be mixed with Redisson's RFencedLock tokens (a counter far
 *   below the server's clock in microseconds).
 * - The lock family (leash_fair_lock_new, leash_read_lock_new,
 *   leash_write_lock_new, leash_semaphore_new) is not available: Redisson's
 *   RFairLock, RReadWriteLock and RSemaphore have layouts of their own. The
 *   constructors return NULL and log why.
 * - Every topology works. On Redlock, leash's quorum and Redisson's
 *   RedissonRedLock (an RLock on each of several independent servers)
 *   exclude each other. An attempt that missed its majority gives its
 *   partial grants back without publishing (Redisson's waiters do not say
 *   that they wait, and the message would wake the attempt's own waiter
 *   again and again): a waiter kept out by such a partial grant (a
 *   Redisson one, or a leash one of another client whose own attempt got
 *   no grant) tries again after its own wait or the key's TTL.
 */
enum leash_dialect {
    LEASH_DIALECT_LEASH = 0,
    LEASH_DIALECT_REDISSON = 1
};

/* The most entries of leash_options.nodes, and the longest entry. */
#define LEASH_NODES_MAX 64
#define LEASH_NODE_MAX 300
/* The longest TLS file path (tls_ca_file, ...) and dns_servers list. */
#define LEASH_PATH_MAX 4095
#define LEASH_DNS_SERVERS_MAX 1024
/* The longest leash_options.tls_key_password (what OpenSSL's password
 * callback takes). */
#define LEASH_KEY_PASSWORD_MAX 1023
/* The longest leash_options.sentinel_master (a master's name in Sentinel). */
#define LEASH_SENTINEL_MASTER_MAX 255
/* The most replicas leash_options.wait_replicas may ask for. */
#define LEASH_WAIT_REPLICAS_MAX 64

/* Log levels, most severe first. At LEASH_LOG_DEBUG every change of a
 * lock handle's state is a line "STATE: FROM => TO (EVENT) lock NAME" (the
 * Sentinel route's discovery likewise: "... sentinel route of master
 * NAME"): the path a handle took, for a bug report. Above debug, those
 * lines cost a comparison each. */
enum leash_log_level {
    LEASH_LOG_ERROR = 0,
    LEASH_LOG_WARN = 1,
    LEASH_LOG_INFO = 2,
    LEASH_LOG_DEBUG = 3
};
/* `msg` is valid during the call only. Called on the loop's thread. */
typedef void leash_log_cb(int level, const char *msg, void *arg);

typedef struct leash_client leash_client;
typedef struct leash_lock leash_lock;

/*
 * Structs that grow (the ABI rule). leash_options, leash_loop (leash/loop.h),
 * leash_stats and leash_lock_stats gain fields in later versions, only ever
 * at their end, and a field added later means "as before it existed" when
 * it is zero. The program tells the library how large its copy of the
 * struct is: the macros leash_options_init() and leash_loop_init() record sizeof in
 * struct_size, the macros leash_client_stats() and leash_lock_stats() pass it (the
 * functions of the same names use the library's own size). So a program built against an
 * older header runs on a newer library unchanged (fields it does not know take their defaults), and
 * a program built against a newer header runs on an older library as long as it leaves the fields
 * that library does not know at zero (leash_client_new() otherwise answers LEASH_EINVAL and logs
 * it). Before 1.0 every minor version may still change the ABI, and says so in the soname
 * (libleash.so.0.4): a program built against 0.3 does not load 0.4 by mistake. A struct grows
 * only with a new minor version, so the function forms, which fill this library's own layout,
 * never meet a program's smaller copy. From 1.0 on the soname follows the major version.
 */

/*
 * Client options. Always start from leash_options_init(), which fills every
 * field. Strings are copied by leash_client_new(); the struct can be
 * discarded afterwards. Every duration is in ms and at most
 * LEASH_DURATION_MAX_MS. An address a user wrote as a URL (redis://...,
 * unix://...) fills the connection fields through leash/url.h.
 */
typedef struct leash_options {
    size_t struct_size;         /* set by leash_options_init(); leave it alone */
    const char *host;           /* default "127.0.0.1"; ignored when unix_path is set */
    int port;                   /* default 6379, 1..65535 */
    const char *unix_path;      /* default NULL; a unix socket path instead of TCP */
    const char *username;       /* default NULL; ACL user (needs password) */
    const char *password;       /* default NULL; AUTH on every (re)connect. Never logged */
    int db;                     /* default 0; SELECT on every (re)connect, 0..INT_MAX */
    const char *key_prefix;     /* default "leash:"; prepended to every lock name */
    int64_t lease_ms;           /* default 30000; lease of a hold, >= 10 */
    int64_t renew_interval_ms;  /* default lease_ms / 3 (when 0); 0 < x < lease_ms */
    int64_t max_hold_ms;        /* default 0 = unlimited; a hold is lost after this */
    int64_t connect_timeout_ms; /* default 2000; > 0 */
    /* default 2000; silence that breaks a connection. With Redlock also
     * how long an attempt waits for a server that is down or silent before
     * it is decided by the others (no majority left: a wait with time left
     * attempts again, else LEASH_ECONN): keep it well below the lease. */
    int64_t command_timeout_ms;
    int64_t reconnect_min_ms; /* default 50; first reconnect backoff, > 0 */
    int64_t reconnect_max_ms; /* default 2000; backoff cap, >= reconnect_min_ms */
    leash_log_cb *log_cb;     /* default NULL: the library prints nothing */
    void *log_arg;
    int log_level; /* default LEASH_LOG_WARN: messages up to this level */
    /* default 1000: how long a name's pub/sub subscription outlives its
     * last local waiter (and its last local holder that had waited), so a
     * handle that contends again is covered at once; 0 = unsubscribe then. */
    int64_t sub_linger_ms;

    /* Where the locks live: LEASH_TOPOLOGY_SINGLE (default),
     * LEASH_TOPOLOGY_CLUSTER (docs/cluster.md),
     * LEASH_TOPOLOGY_REDLOCK (docs/redlock.md) or
     * LEASH_TOPOLOGY_SENTINEL (docs/sentinel.md). */
    int topology;
    /* A cluster's seed nodes (the cluster tells the rest), or the N
     * independent servers of Redlock (an odd number, usually 3 or 5; a
     * lock is held by a majority, N / 2 + 1); nodes_count
     * (1..LEASH_NODES_MAX) of them, each "host:port" ("[v6addr]:port") or
     * a unix socket path (starting with '/'), at most LEASH_NODE_MAX bytes;
     * copied. With LEASH_TOPOLOGY_SENTINEL: the sentinels, "host:port"
     * only. Not used with LEASH_TOPOLOGY_SINGLE (default NULL, 0). */
    const char *const *nodes;
    int nodes_count;
    /* LEASH_PUBSUB_AUTO (default), _CLASSIC, _SHARDED or _OFF (0.4:
     * waiters poll). */
    int pubsub;
    /* 0 (default) = off. Else a grant, and every renewal, counts only
     * once this many replicas (0..LEASH_WAIT_REPLICAS_MAX) acknowledged
     * it within wait_timeout_ms (Redis WAIT, sent with the script): a
     * failover to one of them keeps the hold if the lease outlasts the
     * failover (until a replica acknowledges at the new master, no
     * renewal counts: docs/sentinel.md). That keeps a second holder
     * out only if the old master takes no writes after the failover (it
     * died), or if this is the number of replicas (docs/sentinel.md, failover of a live master).
     * Too few: the acquire fails LEASH_EREPLICAS and is given back; a held lock is lost
     * LEASH_LOST_REPLICAS, and given back in Redis only at the end of the
     * validity leash_valid_ms() gave it (the last write that counted
     * covers it), so that no one else holds it meanwhile. Through
     * Sentinel such a renewal is tried again until that validity ends
     * (a failover re-points the replicas for a moment): the hold is lost
     * UNREACHABLE then, if no renewal counted. */
    int wait_replicas;
    /* default 100; how long WAIT waits, 1..command_timeout_ms - 1 (WAIT
     * holds up the commands behind it on the connection). */
    int64_t wait_timeout_ms;

    /* Fields added after 0.2 (zero: as before). */
    /* LEASH_DIALECT_LEASH (default, 0) or LEASH_DIALECT_REDISSON: see
     * enum leash_dialect. */
    int dialect;

    /* TLS (docs/tls-and-names.md), to every server of every topology (never over a
     * unix socket: Redis serves TLS on TCP only). Off (0) by
     * default; rediss:// URLs turn it on (leash/url.h). A failed handshake
     * or certificate check is LEASH_ETLS, with a log line that says why; a
     * handshake that gets no answer within connect_timeout_ms (a frozen
     * server, a plain-TCP port) is a connect timeout like any other
     * (LEASH_ECONN at the waiting work's own deadline, ordinary backoff).
     * Paths are at most LEASH_PATH_MAX bytes; the files are read once, by
     * leash_client_new (an unreadable one: LEASH_ETLS there). */
    int tls;
    const char *tls_ca_file;   /* PEM bundle of trusted CAs; NULL: the system's store */
    const char *tls_ca_dir;    /* a hashed CA directory (c_rehash); NULL: none */
    const char *tls_cert_file; /* client certificate (PEM), for tls-auth-clients; NULL: none */
    const char *tls_key_file;  /* its private key (PEM); required with tls_cert_file */
    /* SNI and the name verified; NULL: the host connected to. A host name
     * must be in the certificate's DNS SANs (its subject's CN alone is
     * refused), an IP address in its IP SANs; one trailing dot ("a.svc.")
     * is dropped. */
    const char *tls_server_name;
    /* 1 (the default that leash_options_init sets): verify the server's
     * chain and name. 0 only when asked for: the connection is then open
     * to anyone in the middle, and the client logs a warning. */
    int tls_verify;

    /* Name resolution never blocks the loop (c-ares on the loop's hooks);
     * a host name is resolved again on every connect. Resolving it and
     * connecting to one of its addresses (with TLS, the handshake too)
     * share connect_timeout_ms. Its addresses race (RFC 8305): the first
     * starts at once, each next one when the one before failed or has
     * not connected within 250 ms (less when what is left of
     * connect_timeout_ms, shared out, would not let every address start;
     * never less than 10 ms), IPv6 and IPv4 taking turns; the first to
     * connect is used and the others are closed. An address counts as
     * working once its server answered the handshake (the connection is
     * ready): it goes first on the next connect. One that connected but
     * failed before it was ready (a frozen server, whose kernel still
     * completes the TCP connect; a load balancer without a backend; a
     * TLS or AUTH refusal) goes last on the next connect, so the next
     * attempt starts at another address. Each DNS server is given connect_timeout_ms / 2 / the
     * number of servers (50..5000 ms) before the next is asked, so that
     * every one is asked within half of connect_timeout_ms; a query that
     * a connect gave up on runs on (4 rounds over the servers, each twice
     * as patient) and answers the next connect. A name's last answer
     * serves for its TTL when every server failed, or none answered
     * within that half (not after an answer that the name does not
     * exist).
     * NULL (default): the system's resolvers (/etc/resolv.conf). Else a
     * comma-separated list of "ip", "ip:port" or "[ipv6]:port" to ask
     * instead, at most LEASH_DNS_SERVERS_MAX bytes; one c-ares does not
     * read is refused by leash_client_new (LEASH_EINVAL, logged). */
    const char *dns_servers;

    /* Redis Sentinel (docs/sentinel.md), with
     * topology = LEASH_TOPOLOGY_SENTINEL: nodes are the sentinels
     * ("host:port"), and the locks live on the master they name
     * sentinel_master (required there, 1..LEASH_SENTINEL_MASTER_MAX
     * bytes; NULL elsewhere). username and password are the data nodes';
     * sentinel_username and sentinel_password (default NULL: none; at most
     * LEASH_NODE_MAX bytes each) are the sentinels' own (requirepass or an ACL user on the
     * sentinel). With tls on, the sentinels are reached over TLS too,
     * with the same tls_* settings as the data nodes. When no sentinel of
     * a round named the master and one refused the credentials or the TLS
     * handshake, what waits for the master fails LEASH_EAUTH or
     * LEASH_ETLS, with a log line naming that sentinel. */
    const char *sentinel_master;
    const char *sentinel_username;
    const char *sentinel_password;

    /* The password of an encrypted tls_key_file (docs/tls-and-names.md); default
     * NULL: none. At most LEASH_KEY_PASSWORD_MAX bytes; used by
     * leash_client_new while it reads the key, not kept, never logged.
     * The library never prompts for it: an encrypted key without it (or
     * with a wrong one) fails leash_client_new with LEASH_ETLS and the log
     * line "the client key is encrypted". */
    const char *tls_key_password;
} leash_options;

/* Fills every field of *o with its default: leash_options_init(&opts).
 * A macro, so that the size of the program's struct reaches the library. */
#define leash_options_init(o) leash_options_init_sized((o), sizeof(leash_options))
/* What the macro calls: fills the first struct_size bytes of *o (struct_size
 * included) and nothing past them. For bindings that cannot use the macro:
 * pass the size of the struct as the binding lays it out. */
LEASH_EXPORT void leash_options_init_sized(leash_options *o, size_t struct_size);
/* The same as a function (what bindings such as Rust's bindgen, cgo or
 * cffi call, and code that takes its address): it fills the whole struct
 * as this version's header lays it out, struct_size = sizeof(leash_options)
 * of the library. Call it only on a struct from the header of the version
 * the program loads (the soname says which); a binding that may lay out an
 * older struct calls leash_options_init_sized with its own size. */
LEASH_EXPORT void(leash_options_init)(leash_options *o);

/*
 * Creates a client. Nothing connects until the client is attached to a loop
 * (leash_libev_attach()). On success *out is set and LEASH_OK returned; on
 * failure *out is left alone.
 * Errors: LEASH_EINVAL: a NULL argument, or opts not filled by
 * leash_options_init (silently: nothing in them can be trusted, the log
 * callback included); an option out of range, or one this version of the
 * library does not know that is set (the log callback of opts, if any,
 * receives a line naming it), or a dns_servers list c-ares does not read.
 * LEASH_ETLS: with tls on, a CA, certificate or key file that cannot be
 * read or does not match, or an encrypted key without its password
 * (logged). LEASH_ENOMEM.
 */
LEASH_EXPORT int leash_client_new(leash_client **out, const leash_options *opts);

/*
 * Frees a client and every lock handle made from it. Every pending acquire
 * and release callback fires with LEASH_ECANCELED during this call; held locks
 * (and acquires whose answer is still in flight) are released best-effort:
 * the release commands are written before the connections close, and a hold
 * that could not be released expires with its lease. Lost callbacks do not
 * fire. Safe inside any leash callback (the memory goes when it returns).
 * NULL is a no-op.
 */
LEASH_EXPORT void leash_client_free(leash_client *c);

/* status: LEASH_OK (every release was answered), LEASH_ECONN (some could
 * not be confirmed before their deadlines: those holds expire with their
 * leases), LEASH_ECANCELED (leash_client_free came first). */
typedef void leash_close_cb(int status, void *arg);

/*
 * Closes a client gracefully, for a process that shuts down holding locks:
 * unlike leash_client_free, which hands the socket only what it takes at
 * once without waiting (a few thousand releases), this releases every held
 * lock for real and waits for Redis's answers, on the loop.
 * From this call on: every pending acquire completes LEASH_ECANCELED (from
 * the loop); releases in flight complete as they would; every held lock is
 * released (all of its holds; its watchdog stops now, no lost callback
 * fires); any other call on the client or its handles returns
 * LEASH_ESTATE (leash_client_free excepted). Once every release was
 * answered, or failed at its deadline (at most the hold's deadline or
 * command_timeout_ms from now, whichever is later), the client and all its
 * handles are freed as by leash_client_free, and then cb fires once, from
 * the loop. cb may be NULL.
 * leash_client_free during the close frees at once; cb then fires
 * LEASH_ECANCELED inside that call.
 * Errors (cb never fires): LEASH_EINVAL (NULL client), LEASH_ESTATE (being
 * closed or freed already), LEASH_ELOOP (not attached: use
 * leash_client_free).
 */
LEASH_EXPORT int leash_client_close(leash_client *c, leash_close_cb *cb, void *arg);

/* A slot for the user; leash never touches it. */
LEASH_EXPORT void leash_client_set_data(leash_client *c, void *data);
LEASH_EXPORT void *leash_client_get_data(const leash_client *c);

/* 1 while the command connection is connected and ready (handshake done),
 * else 0 (also for NULL). */
LEASH_EXPORT int leash_client_connected(const leash_client *c);

/*
 * Counters, for monitoring (docs/operations.md) and tests: one set
 * per client (leash_stats) and one per lock handle (leash_lock_stats).
 *
 * Reading: leash_client_stats(c, &st) and leash_lock_stats(l, &st) copy
 * the counters into a struct the caller owns; they allocate nothing and
 * never fail (a NULL client or handle gives zeros). Counting is a plain
 * increment where the event is decided, without atomics: read on the
 * thread that runs the client's loop (a reading from another thread may
 * be torn).
 *
 * Growth: both structs gain fields only at their end. The macros pass the
 * size of the program's struct, and the library fills that much: a program
 * built against an older header gets the fields it knows, one built
 * against a newer header gets zeros for the fields this library does not
 * count.
 *
 * Units: counts are events since the client (or the handle) was made;
 * times are in microseconds (_us), from CLOCK_MONOTONIC. The "now"
 * fields are gauges: they go down as well as up.
 *
 * When an acquire counts: it is one of acquires when leash_acquire()
 * accepted it (an extra reentrant hold included). It ends exactly once, in
 * one of grants, busy, timeouts, cancels (leash_cancel, a leash_release
 * while acquiring, or a free) or acquire_errors (the other statuses). It
 * is one of waits if Redis said the lock was taken and it went to sleep
 * until a release (try-once never waits); its wait time runs from the
 * call to the grant or the end of the wait.
 * A hold is counted when it starts (a grant of a handle that held nothing);
 * its hold time runs from the grant to its end (the last release, a loss,
 * a free) and is added when it ends.
 */
typedef struct leash_stats {
    uint64_t connects;         /* command connections that became ready */
    uint64_t disconnects;      /* command connections that broke */
    uint64_t sub_connects;     /* subscriber connections that became ready */
    uint64_t commands_sent;    /* commands written on the command connection */
    uint64_t noscript_reloads; /* EVALSHA answered NOSCRIPT and resent as EVAL */
    uint64_t renewals;         /* successful renewals of held locks */
    uint64_t renew_commands;   /* renew commands sent (each renews up to 100 locks) */
    uint64_t wakeups;          /* waiters woken by a release (message or local) */
    uint64_t losts;            /* lost callbacks fired (holds lost, any reason) */
    /* 0.3: the same meaning as leash_lock_stats's fields of the same
     * names, summed over every handle the client had. */
    uint64_t acquires, grants, busy, timeouts, cancels, acquire_errors;
    uint64_t waits, wait_us_total, wait_us_max;
    uint64_t holds, hold_us_total, hold_us_max;
    uint64_t renewals_failed;
    uint64_t lost_expired, lost_unreachable, lost_max_hold, lost_fixed_lease, lost_replicas;
    /* 0.3: the client's own. */
    uint64_t reconnects;       /* connections (any kind) ready again after a break */
    uint64_t acquire_commands; /* acquire scripts handed to the route (a Redlock */
    uint64_t release_commands; /*   one counts once, whatever its servers) */
    uint64_t other_commands;   /* force releases, state reads (leash_lock_state) */
    uint64_t subscriptions;    /* SUBSCRIBE/SSUBSCRIBE written (again after reconnects) */
    uint64_t held_now;         /* handles that hold their lock now */
    uint64_t waiting_now;      /* acquires asleep until a release now (counted in waits) */
    /* Servers whose maxmemory-policy can evict a held lock (volatile-* or
     * allkeys-* with maxmemory set: docs/how-it-works.md),
     * each counted once, at the handshake that said so; a warning is
     * logged then. */
    uint64_t evicting_servers;
    /* 0.4: waiting without pub/sub (docs/how-it-works.md "Waiting without pub/sub"). */
    uint64_t servers_polling; /* servers that give no pub/sub: each counted once, when it
                                 refused a subscription (logged once) or, LEASH_PUBSUB_OFF,
                                 at start; which waiters poll: LEASH_PUBSUB_OFF above */
    uint64_t polls;           /* attempts a waiter sent because its poll came due */
} leash_stats;
#define leash_client_stats(c, out) leash_client_stats_sized((c), (out), sizeof(leash_stats))
/* What the macro calls: fills the first size bytes of *out (zeros for a NULL
 * client) and nothing past them. The function of the same name fills the
 * whole struct as this version's header lays it out (the same rule as the
 * function leash_options_init). */
LEASH_EXPORT void leash_client_stats_sized(const leash_client *c, leash_stats *out, size_t size);
LEASH_EXPORT void(leash_client_stats)(const leash_client *c, leash_stats *out);

/* One handle's counters (0.3); see leash_stats above for the rules. They
 * outlive holds and acquires, and go with the handle. */
typedef struct leash_lock_stats {
    uint64_t acquires;       /* leash_acquire calls accepted */
    uint64_t grants;         /* acquires that ended LEASH_OK */
    uint64_t busy;           /* try-once acquires that found it held (LEASH_EBUSY) */
    uint64_t timeouts;       /* acquires whose wait ran out (LEASH_ETIMEDOUT) */
    uint64_t cancels;        /* acquires that ended LEASH_ECANCELED */
    uint64_t acquire_errors; /* acquires that ended with any other error */
    uint64_t waits;          /* acquires that slept until a release */
    uint64_t wait_us_total;  /* their time from the call to the end of the wait */
    uint64_t wait_us_max;
    uint64_t holds;         /* holds that started */
    uint64_t hold_us_total; /* time held, of the holds that ended */
    uint64_t hold_us_max;
    uint64_t renewals;        /* renewals that kept the hold */
    uint64_t renewals_failed; /* renewal answers that did not (errors, gone, too late) */
    uint64_t lost_expired;    /* lost callbacks, one counter per LEASH_LOST_* reason */
    uint64_t lost_unreachable;
    uint64_t lost_max_hold;
    uint64_t lost_fixed_lease;
    uint64_t lost_replicas;
} leash_lock_stats;
/* leash_lock_stats(l, &st): copies l's counters into st. */
#define leash_lock_stats(l, out) leash_lock_stats_sized((l), (out), sizeof(leash_lock_stats))
/* What the macro calls (there is no function of that name: it is the
 * struct's): fills the first size bytes of *out, zeros for a NULL handle. */
LEASH_EXPORT void leash_lock_stats_sized(const leash_lock *l, leash_lock_stats *out, size_t size);

/*
 * A lock handle for `name` (1..LEASH_NAME_MAX bytes; copied). The Redis key is
 * key_prefix followed by name. A handle starts not held and takes the lease
 * settings of the client's options. Two handles with the same name, in one
 * client or not, are two owners and exclude each other. Waiters of the
 * mutex go in in no set order, but none waits past its share for long: one
 * that has waited LEASH_STARVE_MS reserves the next grant (above; not with
 * Redlock or the Redisson dialect). For arrival order: leash_fair_lock_new.
 * Returns NULL (and logs why) on a NULL client, a client being freed, a bad
 * name, or no memory. The handle belongs to its client: leash_client_free()
 * frees it too.
 */
LEASH_EXPORT leash_lock *leash_lock_new(leash_client *c, const char *name);

/*
 * The lock family (docs/family.md). Each returns a leash_lock that
 * every call of this header works on (acquire, release, cancel, lost,
 * held, valid_ms, fence, the per-lock settings, free) with every promise
 * made for the mutex; only who may hold at once, and in which order
 * waiters go in, differ. They share one Redis layout (a queue of waiters
 * on the server, not the mutex's string key): a name is either a mutex or
 * a member of the family, and each kind keeps to its own names (a fair
 * lock, a read-write lock and a semaphore of one name exclude each other
 * like strangers, which is seldom what anyone wants).
 *
 * How waiting works for all three: an acquire that cannot go in at once
 * takes a place in the name's queue in Redis, ordered by the server (first
 * come, first served across clients and processes). The place is a lease
 * that the waiter's watchdog renews, like a hold: a waiter that crashed
 * drops out after one lease, a live one keeps its place however long it
 * waits. When the holders ahead leave (release, expiry of a crashed
 * holder, noticed by the next script that touches the name: at the latest
 * the head's next renewal), the script that notices makes the next in line
 * holders itself and tells each one in a message on its client's own
 * channel: a waiter goes in without an attempt of its own, and no other
 * waiter sends anything. A handed-over hold starts with the deadline of the
 * place it was given for (its last renewal), and is renewed on the
 * place's schedule.
 * A waiter that times out or is cancelled leaves the queue at once;
 * try-once (wait_ms 0) never queues and never jumps the queue: LEASH_EBUSY
 * when anyone waits.
 * Not with LEASH_TOPOLOGY_REDLOCK: a queue needs one server that decides
 * its order, and Redlock's servers decide independently (each would order
 * the waiters its own way, and no majority need agree on a head): the
 * constructors return NULL there and log why. With wait_replicas, a
 * handed-over hold counts only after an attempt of its own that enough
 * replicas acknowledged (one round trip more).
 *
 * leash_fair_lock_new: one holder at a time, waiters in arrival order.
 * leash_read_lock_new / leash_write_lock_new (the same `name` for both):
 *   many readers or one writer. A waiting writer blocks readers that come
 *   after it, so writers do not starve; when a writer leaves, the readers
 *   queued behind it go in together, up to the next writer. Each read
 *   handle is its own hold (own lease, watchdog, lost callback, fence).
 *   Handles of one client are owners like any others: a read handle
 *   waits behind a write handle of its own client, and the reverse. A task
 *   that holds the write and wants to keep reading (a downgrade) pairs a
 *   read handle with its write handle (leash_rw_lock_pair): while the
 *   write handle holds, the paired read handle goes in at once; then
 *   release the write. The other way, an upgrade, deadlocks (the write
 *   waits for the task's own read; two upgraders wait for each other):
 *   leash_acquire on a write handle whose paired read handle holds or
 *   waits answers LEASH_ESTATE.
 * leash_semaphore_new: up to `permits` (1..LEASH_PERMITS_MAX) holders at
 *   once; each handle is one permit. Every handle of a name must pass the
 *   same `permits`: an acquire that finds the name in use with another
 *   count fails LEASH_EINVAL (and logs both numbers). A release lets in as
 *   many waiters as permits came free, in arrival order.
 * All return NULL (and log why) where leash_lock_new does, for Redlock,
 * for LEASH_DIALECT_REDISSON (Redisson's family has layouts of its own),
 * and for permits out of range.
 */
#define LEASH_PERMITS_MAX 1000000
/* Pairs a read handle with a write handle of the same name and client, as
 * one task's (see above); a handle is in at most one pair (pairing again
 * replaces it), and leaves it when either is freed. LEASH_OK, or
 * LEASH_EINVAL (NULL, not a read and a write handle, other names or
 * clients). */
LEASH_EXPORT int leash_rw_lock_pair(leash_lock *read, leash_lock *write);
LEASH_EXPORT leash_lock *leash_fair_lock_new(leash_client *c, const char *name);
LEASH_EXPORT leash_lock *leash_read_lock_new(leash_client *c, const char *name);
LEASH_EXPORT leash_lock *leash_write_lock_new(leash_client *c, const char *name);
LEASH_EXPORT leash_lock *leash_semaphore_new(leash_client *c, const char *name, int permits);

/*
 * A multi-lock (docs/multi.md "Several locks at once"): the mutexes of names[0..n)
 * (1..LEASH_MULTI_MAX distinct names, each 1..LEASH_NAME_MAX bytes; copied)
 * held as one handle, all or none. Every call of this header works on it as
 * on a mutex: one leash_acquire, one acquire callback, one leash_release
 * with one callback, leash_cancel, one lost callback, leash_held,
 * leash_valid_ms (the least over the members), the per-lock settings
 * (which every member takes), leash_lock_free / leash_lock_abandon. Each
 * member is a mutex like leash_lock_new's, on every topology and dialect:
 * a mutex handle of another task on one of the names excludes the
 * multi-lock and the reverse. Other kinds (the lock family) are not
 * members.
 *
 * Taking: the members are tried in one global order (cluster hash slot,
 * then name), each try-once; the members of one slot (every name on one
 * server or Sentinel; one hash tag's in a cluster) together in one script,
 * all or none (not with wait_replicas, where each member takes its own
 * attempt). With LEASH_TOPOLOGY_REDLOCK every server gets one such script
 * for all the members, and one majority decides the whole, each member's
 * fence a Redlock mutex's (docs/multi.md). When one is busy and wait_ms
 * allows waiting, every member taken so far is given back and the acquire
 * waits for that member alone, with what is left of wait_ms (one deadline
 * for the whole), then tries the others again. A multi-lock that waits holds nothing, so
 * two multi-locks over overlapping names, named in any order, never
 * deadlock, and a busy member keeps none of the others from anyone. A
 * waiting multi-lock can be overtaken on a member it does not wait for
 * (it holds none while it waits); it waits again for that one.
 * Outcomes: LEASH_OK only with every member held. Any other status (and
 * leash_cancel, a timeout, leash_lock_free) gives back every member taken
 * (a grant still on its way included) before the callback. One deadline
 * covers the whole: the callback comes by wait_ms (a try-once: by
 * command_timeout_ms, else LEASH_ECONN), however many members there are.
 * leash_release while acquiring ends the acquire LEASH_ECANCELED, then
 * calls its own callback with LEASH_ENOTHELD, both from the loop.
 * Keeping: the watchdog renews the members together (their renewals fall
 * due at once: one script per server and slot). The first member that is
 * lost loses the whole: the other members are released and the lost
 * callback fires once with that member's reason.
 * Not reentrant: leash_acquire on a held multi-lock is LEASH_ESTATE, and
 * so is one while its release has not answered yet. leash_release answers
 * once every member answered: LEASH_OK, or the first error in the global
 * order (LEASH_ENOTHELD for a member that no longer held when the release
 * reached it, as a mutex's release of a hold that is gone).
 * leash_force_release is LEASH_ESTATE. leash_fence is 0 and
 * leash_hold_count 1 while held; leash_renewals is the least over the
 * members; leash_lock_name is names[0]. A member's hold counts in the
 * client's stats as a mutex hold.
 * Returns NULL (and logs why) where leash_lock_new does, for n out of
 * range, a NULL name, and a name given twice.
 */
#define LEASH_MULTI_MAX 64
LEASH_EXPORT leash_lock *leash_multi_lock_new(leash_client *c, const char *const *names, int n);
/* The fence of member i (the index in names[] as given) of the multi-lock's
 * current (or last) hold, as leash_fence() of a mutex of that name: it grows
 * with every hold of that name. 0 for a handle that is no multi-lock, i
 * out of range, or a member not taken yet. */
LEASH_EXPORT uint64_t leash_multi_fence(const leash_lock *l, int i);

/*
 * Frees a handle: a pending acquire's callback fires LEASH_ECANCELED and a
 * pending release's callback LEASH_ECANCELED during this call; a held lock
 * is released (in the background, best-effort), its watchdog stops now; an
 * acquire whose answer is in flight is released if it turns out granted.
 * Lost callbacks do not fire. Safe inside any leash callback. NULL is a no-op.
 */
LEASH_EXPORT void leash_lock_free(leash_lock *l);
/*
 * Frees a handle as leash_lock_free does, except that a hold is not
 * released: its watchdog stops, and its key stays in Redis until the lease
 * runs out (lease_ms at most after the last renewal), as a crashed
 * holder's would; waiters get it then. For a holder that cannot tell
 * whether the work the lock guards is over (a proxy that gave up on a
 * backend that may still be working): the overlap with a next holder is
 * then bounded by the lease, and the fence stays the guard past it. A
 * pending acquire ends as with leash_lock_free. Safe inside any leash
 * callback. NULL is a no-op.
 */
LEASH_EXPORT void leash_lock_abandon(leash_lock *l);

/* A slot for the user; leash never touches it. NULL-safe. */
LEASH_EXPORT void leash_lock_set_data(leash_lock *l, void *data);
LEASH_EXPORT void *leash_lock_get_data(const leash_lock *l);
/* The name given to leash_lock_new (owned by the handle, valid until it is
 * freed); NULL for a NULL handle. */
LEASH_EXPORT const char *leash_lock_name(const leash_lock *l);
/* The client the handle belongs to; NULL for a NULL handle. */
LEASH_EXPORT leash_client *leash_lock_client(const leash_lock *l);

/*
 * Per-lock settings; each takes effect at the next acquire that starts a new
 * hold. They return LEASH_EINVAL for a NULL lock or a value out of range and
 * LEASH_ESTATE while the handle is acquiring or held.
 *
 * leash_lock_set_watchdog: the watchdog (the default) keeps the hold alive
 *   for as long as it is held: the key's lease is lease_ms and it is renewed
 *   every renew_interval_ms (0 = lease_ms / 3; else 0 < interval < lease).
 * leash_lock_set_fixed_lease: no renewal; the hold ends after lease_ms and
 *   the lost callback fires with LEASH_LOST_FIXED_LEASE, unless released
 *   first.
 * leash_lock_set_max_hold: a hold (watchdog or not) ends after max_hold_ms
 *   with lost LEASH_LOST_MAX_HOLD and is released in Redis; 0 = unlimited.
 *   leash_valid_ms() never reaches past it.
 * leash_lock_set_reentrant: 1 (the default) lets leash_acquire() on a held
 *   handle take the hold once more (the count is kept in Redis; each release
 *   takes one back, the last one deletes the key); 0 makes it LEASH_ESTATE.
 */
LEASH_EXPORT int leash_lock_set_watchdog(leash_lock *l, int64_t lease_ms,
                                         int64_t renew_interval_ms);
LEASH_EXPORT int leash_lock_set_fixed_lease(leash_lock *l, int64_t lease_ms);
LEASH_EXPORT int leash_lock_set_max_hold(leash_lock *l, int64_t max_hold_ms);
LEASH_EXPORT int leash_lock_set_reentrant(leash_lock *l, int on);

/* status: LEASH_OK (held: leash_held() is 1 and the watchdog runs), or
 * LEASH_EBUSY (try-once found it held elsewhere; or an extra reentrant
 * hold found the hold gone), LEASH_ETIMEDOUT, LEASH_ECANCELED, LEASH_ECONN
 * (Redis not reachable before the wait ended, or a grant came too late to
 * trust), LEASH_EREDIS (an error reply, logged), LEASH_EPROTO, LEASH_EAUTH
 * (AUTH or SELECT refused), LEASH_ETLS (TLS handshake or certificate
 * refused), LEASH_EREPLICAS (wait_replicas: too few replicas acknowledged
 * the grant, which was given back), LEASH_EINVAL (a semaphore whose name
 * is in use with another number of permits, logged), LEASH_ENOMEM (no
 * memory to wait, or to raise a Redlock fence). Manual: leash_acquire(3). */
typedef void leash_acquire_cb(leash_lock *l, int status, void *arg);
/* status: LEASH_OK (one hold given back; the key is deleted with the last),
 * LEASH_ENOTHELD (the hold was already gone or taken), LEASH_ECANCELED,
 * LEASH_ECONN (no answer before the hold's deadline, or the answer was lost
 * and the release sent again only after that deadline: released or
 * expired, the hold is over), LEASH_EREDIS, LEASH_EPROTO, LEASH_EAUTH,
 * LEASH_ETLS (a reconnect refused: the hold expires with its lease).
 * A release sent again after a lost answer never says LEASH_ENOTHELD for a
 * release that ran. */
typedef void leash_release_cb(leash_lock *l, int status, void *arg);
/* Fired once per hold that ends without a release; the hold is already over
 * (leash_held() is 0) when it runs. reason: enum leash_lost_reason. */
typedef void leash_lost_cb(leash_lock *l, int reason, void *arg);

/*
 * Takes the lock. wait_ms: 0 = try once (LEASH_EBUSY if held elsewhere),
 * 1..LEASH_DURATION_MAX_MS = wait up to that many ms, LEASH_WAIT_FOREVER =
 * wait without limit. When the wait ends while an attempt is on the wire,
 * that attempt's answer decides: the callback may then come up to
 * command_timeout_ms (and a turn of the loop) later, with LEASH_OK or
 * LEASH_ECONN, also when the answers come too slowly for the connection
 * ever to go silent (bytes that trickle in; a burst of the program's own
 * commands that the server cannot answer that soon): an answer not in by
 * then ends the acquire LEASH_ECONN, and a grant it still brings is
 * released. A try-once has no bound of its own: it waits for its answer
 * as long as the connection keeps answering (a burst is not an outage);
 * command_timeout_ms of silence ends it, LEASH_ECONN.
 * A waiting acquire sleeps until a release of the lock is announced on Redis
 * pub/sub, until the holder's lease runs out, or until its wait ends; it
 * sends no command while it sleeps. Local waiters of one name are served in
 * FIFO order.
 * On LEASH_OK the call was accepted and `cb` will fire exactly once, from the
 * loop. On a held handle with reentrancy on, it adds one hold (cb fires
 * LEASH_OK once Redis counted it); if Redis no longer has the hold (it
 * expired, was force-released, or the server lost its data), the hold ends:
 * the lost callback fires (LEASH_LOST_EXPIRED), then cb with LEASH_EBUSY.
 * Errors (cb never fires): LEASH_EINVAL (NULL lock or cb, wait_ms < -1 or
 * over LEASH_DURATION_MAX_MS),
 * LEASH_ESTATE (already acquiring; a release in flight; held and not
 * reentrant; client being freed), LEASH_ELOOP (client not attached),
 * LEASH_ENOMEM.
 */
LEASH_EXPORT int leash_acquire(leash_lock *l, int64_t wait_ms, leash_acquire_cb *cb, void *arg);

/*
 * Gives one hold back. The watchdog stops at once when this is the last hold
 * (leash_held() is 0 from here on, whatever Redis answers). The script only
 * ever deletes this handle's own hold, and announces the release to waiters.
 * `cb` may be NULL (fire and forget). On LEASH_OK the callback fires exactly
 * once, from the loop.
 * A release asked for while the handle is still acquiring ends that acquire
 * (its callback fires LEASH_ECANCELED) and releases the grant if one arrives:
 * the release callback then says LEASH_OK, or LEASH_ENOTHELD when no grant
 * came. No renewal ever starts for such a grant.
 * Errors (cb never fires): LEASH_EINVAL (NULL lock), LEASH_ESTATE (not held
 * and not acquiring, a release already in flight, an extra reentrant hold
 * still in flight, client being freed), LEASH_ENOMEM.
 */
LEASH_EXPORT int leash_release(leash_lock *l, leash_release_cb *cb, void *arg);

/*
 * An operator's tool: removes the lock `l` names, whoever holds it, and
 * wakes its waiters (every client's) as a release would. For a holder that
 * crashed without its lease running out soon, or a stuck job.
 * This breaks mutual exclusion on purpose: the holder is not asked, and its
 * leash_held() says 1 until its next renewal finds the hold gone (lost,
 * LEASH_LOST_EXPIRED, within one renew interval) or, with a fixed lease,
 * until that lease ends. Writers that pass the fence to their storage stay
 * safe: the next holder's fence is higher.
 * A key at the lock's name that is not a lock is left alone (LEASH_EREDIS,
 * WRONGTYPE in the log).
 * With Redlock it goes to every server and completes once each answered
 * (one that is down, after command_timeout_ms): LEASH_OK when one removed
 * a hold and a majority of the servers no longer have it and keep it out
 * (removed one there, or held by nobody there, with the lock's fence floor
 * at least the majority-th largest of all N servers', counting a server
 * that did not answer so as above all: at least the hold's fence, which a
 * majority's floors hold): the holder cannot renew on a majority and is
 * lost at its next renewal. A server with a lower floor does not count,
 * whether it had nothing (it never had the hold) or removed a key (an
 * older holder's, still there): the holder's renewal could spread the hold
 * onto it. Removed on some, but fewer than a majority answered so (the
 * others did not answer, or had a lower floor):
 * LEASH_ECONN (or the error those servers gave), and a warning in the log
 * saying how many servers it reached: the holder may keep the lock on a
 * majority of the others; force it again once they answer. Where it was
 * removed, the hold is not written back (docs/redlock.md).
 * `l` must be idle: not holding, not acquiring, no release in flight; it may
 * acquire again at once, from the callback or right after this call (the
 * force release runs first).
 * `cb` may be NULL. On LEASH_OK it fires exactly once, with LEASH_OK (a hold
 * was removed), LEASH_ENOTHELD (nobody held it), LEASH_ECONN (the
 * connection broke or fell silent before the answer, or stayed down for
 * command_timeout_ms: it may or may not have run; it is never resent, so
 * that it cannot remove a later holder), LEASH_EREDIS, LEASH_EPROTO,
 * LEASH_EAUTH, LEASH_ETLS, all from the loop; or LEASH_ECANCELED inside
 * leash_lock_free / leash_client_free (the command may still go out).
 * Errors (cb never fires): LEASH_EINVAL (NULL lock), LEASH_ESTATE (the handle
 * holds or is acquiring, a release in flight, client being freed),
 * LEASH_ELOOP (client not attached), LEASH_ENOMEM.
 */
LEASH_EXPORT int leash_force_release(leash_lock *l, leash_release_cb *cb, void *arg);

/*
 * Cancels a pending acquire: its callback fires LEASH_ECANCELED from the loop
 * (not inside this call). A grant that was already on its way is released.
 * Errors: LEASH_EINVAL (NULL), LEASH_ESTATE (no acquire pending, client
 * being freed or closed), LEASH_ENOMEM (nothing changed: the acquire goes on).
 */
LEASH_EXPORT int leash_cancel(leash_lock *l);

/* Sets (or clears, with NULL) the lost callback of a handle, for the current
 * hold and the next ones. It fires from the loop, at most once per hold,
 * and never for a hold that ends by leash_release, leash_lock_free or
 * leash_client_free. NULL handle: no-op. */
LEASH_EXPORT void leash_on_lost(leash_lock *l, leash_lost_cb *cb, void *arg);

/* 1 while the handle holds the lock and its local deadline is ahead. */
LEASH_EXPORT int leash_held(const leash_lock *l);
/* Milliseconds the current hold is guaranteed valid (0 when not held). */
LEASH_EXPORT int64_t leash_valid_ms(const leash_lock *l);
/* The fencing token of the current (or last) hold: grows with every new
 * hold of this name, also across releases and Redis data loss (it is the
 * server's clock in microseconds at the grant; see the top of this file
 * for the clock assumption; with LEASH_TOPOLOGY_REDLOCK the fence the
 * servers agreed on, kept above each lock's fence floor, and where it can
 * go back: docs/redlock.md). 0 before the first hold. With
 * LEASH_DIALECT_REDISSON it orders leash's holds only: Redisson's holds
 * have no fence (see enum leash_dialect). */
LEASH_EXPORT uint64_t leash_fence(const leash_lock *l);
/* Number of holds of a reentrant handle (0 when not held). */
LEASH_EXPORT int leash_hold_count(const leash_lock *l);
/* Successful renewals of the current hold. */
LEASH_EXPORT uint64_t leash_renewals(const leash_lock *l);

/*
 * A lock's state, read from Redis (0.4): who holds it and how often, how
 * long until it frees by itself, its fence, who waits. What Redisson's
 * isLocked / getHoldCount / remainTimeToLive and redis-py's locked() read,
 * for any lock of the name, not only this process's; leash_held() and
 * leash_valid_ms() answer for a handle's own hold without asking Redis.
 *
 * One read of the lock's key (one script: a snapshot no lock script runs
 * inside of), on the server that has the key: the one server, the
 * Sentinel's master, the master of the key's slot in a Cluster (after a
 * MOVED/ASK, as every command), or every Redlock server. It tells apart
 * leash's mutex and lock family and Redisson's RLock and RReadWriteLock
 * (enum leash_state_kind), whichever dialect the client speaks.
 *
 * Redlock ("majority view"; M = N / 2 + 1 of the N servers): every server
 * is read, and the callback fires once each answered (one that is down: by
 * command_timeout_ms). Fewer than M answers: the call completes with the
 * error of one that failed. held: one owner holds the key on M servers or
 * more (agree says on how many; a minority's leftovers hold nothing);
 * holders: that owner, with the count of the first server that has it;
 * ttl_ms: the M-th longest PTTL among those servers (after it fewer than M
 * have it); fence..fence_max: the M-th smallest and the largest fence
 * those servers keep. The hold's own fence (which only its holder knows)
 * is at least fence; it is at most fence_max when every server that
 * granted it answered, and may be above it when the one whose fence was
 * the largest did not; not held: fence is the largest any server keeps;
 * subscribers: the M-th largest count of the servers; waiters: none (no
 * queue on Redlock). kind: the holding servers', else the first answer
 * that has a lock.
 */
enum leash_state_kind {
    LEASH_STATE_FREE = 0,   /* no key: nobody holds it or queues for it */
    LEASH_STATE_NOT_A_LOCK, /* a key of a layout leash does not know */
    LEASH_STATE_MUTEX,      /* leash_lock_new */
    LEASH_STATE_FAIR,       /* leash_fair_lock_new */
    LEASH_STATE_RW,         /* leash_read_lock_new, leash_write_lock_new */
    LEASH_STATE_SEMAPHORE,  /* leash_semaphore_new */
    LEASH_STATE_FAMILY,     /* a fair or read-write lock with nobody in it */
    LEASH_STATE_REDISSON,   /* Redisson's RLock (or leash's Redisson dialect) */
    LEASH_STATE_REDISSON_RW /* Redisson's RReadWriteLock: mode read or write */
};

/* A holder or a waiter. */
typedef struct leash_state_entry {
    /* leash: the owner token, 32 hex digits; Redisson:
     * "<uuid>:<thread id>" (cut at 95 bytes). */
    const char *owner;
    /* 'm' mutex, 'f' fair, 'r' read, 'w' write, 's' semaphore permit, 'R'
     * Redisson RLock (Redisson's read-write lock: 'r', 'w'). */
    char mode;
    /* A holder: its reentrant holds. A waiter: its place, 1 first. */
    int64_t count;
    uint64_t fence; /* a holder's fence; 0: none (Redisson, a waiter) */
    int64_t ttl_ms; /* its lease (a waiter: its place) runs out in; -1 not known */
} leash_state_entry;

typedef struct leash_state {
    const char *name; /* the lock's name, as asked */
    int kind;         /* enum leash_state_kind */
    int held;         /* 1: someone holds it (Redlock: a majority agrees) */
    /* The holders (a read-write lock's readers, a semaphore's permits), and
     * holds: their counts summed (a mutex: the reentrant count). */
    const leash_state_entry *holders;
    size_t nholders;
    int64_t holds;
    /* How long until it frees by itself unless renewed: the key's PTTL (a
     * mutex, Redisson's), the longest holder's lease (the family); -1 when
     * nobody holds it or no expiry is set. */
    int64_t ttl_ms;
    /* The fence: a mutex's, the hold's; the family's, the last one given
     * (0 none; Redisson's: 0). Redlock: the least the hold's can be, and
     * fence_max the largest the answering servers keep (see above);
     * elsewhere fence_max == fence. */
    uint64_t fence, fence_max;
    /* A semaphore: its permits, those held and those free; else 0. */
    int64_t permits, permits_used, permits_free;
    /* The waiters queued in Redis, in order (count: the place): a fair
     * lock's, a read-write lock's and a semaphore's queue; a mutex's
     * starving waiters (LEASH_STARVE_MS, at most LEASH_RESERVE_QUEUE).
     * Other mutex waiters, and Redisson's, queue in no key: see
     * subscribers. */
    const leash_state_entry *waiters;
    size_t nwaiters;
    /* A mutex or Redisson RLock: the connections subscribed to the lock's
     * channel (in the client's dialect) on the server that has the key, by
     * PUBSUB NUMSUB and SHARDNUMSUB. Each process (client) that waits for
     * the lock subscribes once however many of its handles wait, and stays
     * subscribed a little after its wait (and while a hold that came
     * through it lasts); `leash watch` subscribes too. Waiters that poll
     * (LEASH_PUBSUB_OFF, a server that refused pub/sub: docs/how-it-works.md "Waiting
     * without pub/sub") subscribe nothing and are not counted: 0 means
     * no process waits by pub/sub, and more is an upper bound on the
     * processes waiting that way.
     * -1: not read (other kinds, which list their waiters). */
    int64_t subscribers;
    /* The servers read (Redlock: N; else 1) and the ones that hold what it
     * shows held (Redlock: the majority's; else 1 when held, else 0). */
    int servers, agree;
    /* The server's clock when it read the key, ms since the epoch. */
    int64_t server_ms;
} leash_state;

/*
 * status LEASH_OK: st is the lock's state. Else st is NULL and status says
 * why: LEASH_ECONN (no server answered in command_timeout_ms; Redlock: fewer
 * than a majority did; an answer later than that, from a connection whose
 * answers come too slowly to go silent, is not waited for), LEASH_EREDIS
 * (Redis refused the read: an ACL without EVAL, a script error; logged),
 * LEASH_EPROTO, LEASH_EAUTH, LEASH_ENOMEM, LEASH_ECANCELED
 * (leash_client_free ran before the answer: inside it).
 * st and everything it points to are valid during the callback only; any
 * leash call is allowed inside it, frees of the lock or the client
 * included.
 */
typedef void leash_state_cb(const leash_state *st, int status, void *arg);

/*
 * Reads the state of lock `name` (1..LEASH_NAME_MAX bytes, copied; the key
 * is the client's key_prefix + name) and calls cb once with it, from the
 * loop, never inside this call. Nothing is written. The read does not
 * depend on any handle: freeing one meanwhile does not end it.
 * Errors (cb never fires): LEASH_EINVAL (NULL client, name or cb; a name
 * out of bounds), LEASH_ESTATE (the client is closing or being freed),
 * LEASH_ELOOP (not attached to a loop), LEASH_ENOMEM.
 */
LEASH_EXPORT int leash_client_lock_state(leash_client *c, const char *name, leash_state_cb *cb,
                                         void *arg);
/* The same for the lock handle l names (its client and name), whatever its
 * kind; the handle need not hold anything. A multi-lock's name is
 * names[0] (leash_lock_name): this reads that member only; read the others
 * with leash_client_lock_state. Errors as above (LEASH_EINVAL also for a
 * freed handle). */
LEASH_EXPORT int leash_lock_state(leash_lock *l, leash_state_cb *cb, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* LEASH_LEASH_H */
