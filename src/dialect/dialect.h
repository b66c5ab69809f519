/* SPDX-License-Identifier: MIT */
/*
 * A dialect: how locks are laid out in Redis. Key names, the Lua scripts,
 * the argument layout of every call, what each reply means (a typed
 * answer), and what a message on a lock's channel says. leash's own layout
 * is dialect/leash.c; Redisson's RLock layout is a second dialect behind
 * the same face.
 *
 * A dialect does no I/O: it builds commands (wire/conn.h) and reads
 * replies. The route layer sends them where they go and, for a quorum of
 * servers (Redlock), combines the typed answers of several servers by the
 * operation's class; that is why the dialect sits below the route.
 */
#ifndef LEASH_DIALECT_DIALECT_H
#define LEASH_DIALECT_DIALECT_H

#include <stddef.h>
#include <stdint.h>

#include <leash/leash.h>

#include "base/log.h"
#include "wire/conn.h"
#include "wire/script.h"

struct redisReply;

/* The Redis names of one lock. */
typedef struct leash__names {
    char *key; /* key_prefix + name */
    size_t key_len;
    char *channel; /* where releases are announced */
    size_t channel_len;
    unsigned slot; /* the key's cluster hash slot (every name of a lock shares it) */
    /* Set by the owner, and read whenever a command is built: while
     * *sharded (NULL: never), messages go out with SPUBLISH, not PUBLISH. */
    const int *sharded;
    int fenced; /* set by the owner: grants read the lock's fence floor (Redlock) */
    int family; /* a lock of the family (fair, read-write, semaphore): channel is
                   this client's own, and ends with its 32-digit id */
    char *mem;  /* one allocation behind all of the above */
} leash__names;

/* What one operation answered. */
enum leash__answer_kind {
    LEASH__ANS_GRANTED,  /* acquire: fence, n = hold count */
    LEASH__ANS_BUSY,     /* acquire: n = the holder's remaining lease (-1: none) */
    LEASH__ANS_LATE,     /* acquire: this copy came after its not_after: it did nothing */
    LEASH__ANS_GONE,     /* acquire: an extra hold found its hold gone */
    LEASH__ANS_RELEASED, /* release: the last hold is given back (or a resend found it so) */
    LEASH__ANS_LEFT,     /* release: n holds are left */
    LEASH__ANS_NOT_OURS, /* release, renew: the hold is gone or another's */
    LEASH__ANS_UNSURE,   /* release resent after the hold's deadline: over, either way */
    LEASH__ANS_RENEWED,  /* renew */
    LEASH__ANS_REMOVED,  /* force: a hold was removed; n = 1: fence is the floor after it */
    LEASH__ANS_NOBODY,   /* force: nobody held it; n = 1: fence is the floor there */
    LEASH__ANS_RAISED,   /* raise: the fence floor is at least the fence asked */
    LEASH__ANS_QUEUED,   /* renew (family): the waiter's place is renewed */
    LEASH__ANS_HANDED,   /* renew (family): the waiter was let in: fence */
    LEASH__ANS_STATE     /* read: state is the lock's state on that server */
};

typedef struct leash__answer {
    int status;        /* LEASH_OK: `kind` says what; else why there is no answer */
    int kind;          /* enum leash__answer_kind */
    uint64_t fence;    /* GRANTED; BUSY, QUEUED of a family place: its mark (0 none) */
    int64_t n;         /* GRANTED: count; BUSY: pttl; LEFT: count left; NOT_OURS: see below */
    int64_t server_ms; /* the server's clock in the answer (ms since the epoch), 0 unknown */
    /* Monotonic ms when the command it answers was written (a quorum: the
     * earliest of the copies that count), 0 unknown: the server ran it
     * later, so a lease granted or renewed runs from then at the soonest. */
    int64_t sent_ms;
    /* The command was written more than once (a resend after a lost
     * answer, a redirect): an earlier copy may have run besides the one
     * answered. Set from one server's reply (route.c); a quorum's
     * combined answer does not gather it from its copies. */
    int resent;
    /* GRANTED, RENEWED: fewer replicas acknowledged it than the client
     * asks for (leash_options.wait_replicas): it does not count. */
    int replicas_short;
    /* BUSY from a quorum: attempts raced (this one had some grants, or
     * nobody held a majority: then n is a short random pause). */
    int split;
    /* (NOT_OURS of a renewal that spreads has n = 1 when it is so for now
     * only: an older hold stands there.)
     * RENEWED from a quorum, by a renewal that spreads: a server that is up
     * neither renewed it, took it, nor said "not ours" (it answered BUSY,
     * nothing in time, or not within a short wait once M renewed): the
     * spread is not done, the next renewal spreads again (hold/watchdog.c). */
    int spread_short;
    /* STATE: malloc'ed (leash__state_free), owned by the request's done
     * function, which frees it (route.h, LEASH__OP_READ). */
    struct leash__state *state;
} leash__answer;

/* How the answers of several servers combine (route/quorum). */
enum leash__op_class {
    LEASH__OP_GRANT,   /* granted by a majority within the validity, else given back */
    LEASH__OP_RELEASE, /* done when a majority released or had nothing */
    LEASH__OP_RENEW,   /* per lock: renewed by a majority */
    LEASH__OP_FORCE,   /* removed anywhere; decided once every server answered */
    LEASH__OP_RAISE,   /* the quorum's own step after a grant */
    LEASH__OP_READ     /* a lock's state: every server's answer, once all answered */
};

typedef struct leash__opdef {
    const char *name; /* for log lines: "acquire", "release", ... */
    int cls;          /* enum leash__op_class */
    /* Reads reply (status LEASH_OK) into n answers (a renew batch has one
     * per lock, others one); a reply of another shape or an error reply
     * gives every answer that status (EPROTO, EREDIS) and a log line that
     * names `what` (the lock's name). */
    void (*parse)(const struct redisReply *reply, leash__answer *out, size_t n,
                  const leash__logger *lg, const char *what);
} leash__opdef;

/* How long a fence floor (Redlock) is kept after its last write (a grant
 * or a raise): three leases, and at least a minute. Fences grow across a
 * floor that expired while the servers' clocks differ by less than that,
 * less what route/quorum.c says. */
#define LEASH__FENCE_FLOOR_MIN_MS 60000
#define LEASH__FENCE_FLOOR_LEASES 3
/* The digits of a fence proposal (Redlock): every uint64_t fits. */
#define LEASH__PROPOSAL_DIGITS 20
/* Room for the name of a fence floor: key \0 {key} "fence". */
#define LEASH__FLOOR_MAX (2 * (LEASH_PREFIX_MAX + LEASH_NAME_MAX) + 16)

/* The most locks one renew command carries (Redisson renews up to 100
 * locks per script call too). */
#define LEASH__RENEW_BATCH 100

/* A lock of a renew batch. fence: the hold's, for a fenced lock (Redlock)
 * whose renewal may spread it onto a server that lacks it (dialect/leash.c,
 * renew); 0: a renewal only extends. */
typedef struct leash__renew_item {
    const leash__names *names;
    const char *token;
    int64_t lease_ms;
    uint64_t fence;
} leash__renew_item;

/* A message on a lock's channel. */
enum leash__msg_kind {
    LEASH__MSG_RELEASED, /* token: whose hold was released */
    LEASH__MSG_RENEWED,  /* lease_ms: the holder is alive for that long */
    LEASH__MSG_FORCED,   /* an operator removed the hold */
    LEASH__MSG_GRANTED,  /* family: token was let in with fence */
    LEASH__MSG_OTHER     /* not a message of this dialect: ignore it */
};

typedef struct leash__msg {
    int kind;
    const char *token; /* RELEASED, GRANTED: into the message */
    size_t token_len;
    uint64_t fence;   /* GRANTED */
    int64_t lease_ms; /* RENEWED */
    /* RELEASED: NULL, or the waiter's token (LEASH__TOKEN_LEN digits) for
     * which the lock is kept (LEASH_RESERVE_MS at most): it tries now. */
    const char *reserved;
} leash__msg;

/* One lock's state as one server has it, in no dialect's layout: what
 * read_state makes of the replies, for the leash tool (`leash inspect`,
 * `watch`), the tests and the benchmarks, so that the layout is read in
 * the dialect alone. */
enum leash__state_kind {
    LEASH__STATE_NONE = 0,  /* no key */
    LEASH__STATE_OTHER,     /* a key that is no lock of the dialect */
    LEASH__STATE_MUTEX,     /* leash_lock_new */
    LEASH__STATE_FAIR,      /* leash_fair_lock_new */
    LEASH__STATE_RW,        /* leash_read_lock_new / leash_write_lock_new */
    LEASH__STATE_SEMAPHORE, /* leash_semaphore_new */
    LEASH__STATE_FAMILY,    /* a family lock with nobody in it now */
    LEASH__STATE_REDISSON,  /* Redisson's RLock layout */
    /* Redisson's RReadWriteLock hash ("mode" read or write) */
    LEASH__STATE_REDISSON_RW
};

/* Room for a holder's name: leash's 32 hex digits, Redisson's
 * "<uuid>:<thread id>" (longer ones are cut). */
#define LEASH__STATE_TOKEN_MAX 96

typedef struct leash__state_entry {
    char token[LEASH__STATE_TOKEN_MAX];
    char mode;      /* m mutex, f fair, r read, w write, s semaphore, R Redisson
                       (Redisson's read-write lock: r, w) */
    int64_t count;  /* holder: reentrant holds; waiter: its place (1 first) */
    uint64_t fence; /* 0: none (Redisson, a waiter) */
    int64_t ttl_ms; /* lease left; -1 none known */
} leash__state_entry;

typedef struct leash__state {
    int kind;                    /* enum leash__state_kind */
    int64_t ttl_ms;              /* the key's PTTL, -1 none */
    uint64_t fence;              /* the last fence given (0 none) */
    int marked;                  /* mutex: someone found it busy (its releases publish) */
    int64_t permits;             /* semaphore; 0 otherwise */
    int64_t server_ms;           /* the server's clock when read */
    leash__state_entry *holders; /* malloc'ed (leash__state_clear) */
    size_t nholders;
    leash__state_entry *waiters; /* in queue order */
    size_t nwaiters;
    /* The connections subscribed to the lock's channel (PUBSUB NUMSUB or
     * SHARDNUMSUB, read with the state by leash__state_cmd); -1 not read. */
    int64_t subscribers;
} leash__state;

/* Frees what read_state allocated and zeroes s. */
void leash__state_clear(leash__state *s);

typedef struct leash__dialect {
    const char *name;
    /* The names of lock `name` (1..LEASH_NAME_MAX bytes) with key_prefix
     * in db. LEASH_OK, LEASH_EINVAL (logged) or LEASH_ENOMEM. */
    int (*names)(leash__names *out, const leash__logger *lg, const char *prefix, const char *name,
                 int db);
    /* Scripts to load on every command connection. */
    const leash__script *const *scripts;
    int nscripts;
    const leash__opdef *acquire, *release, *renew, *force, *raise;
    /* Commands; NULL without memory. flags/deadline as wire/conn.h; the
     * dialect adds LEASH__CMD_RETRY to the ones that may run twice and
     * sets the stamps its scripts read. fn/arg are left to the route. */
    /* waits: 1 for the attempt of an acquire that waits, whose busy
     * answer marks the lock as waited on (leash's layout: its release
     * and renewals then publish); 0 for a try-once, which will not wait
     * for a message and so marks nothing. */
    leash__cmd *(*acquire_cmd)(const leash__names *n, const char *token, int64_t lease_ms,
                               int count, int waits, int64_t validity_ms, int64_t deadline);
    /* valid_until: the hold's local deadline, which a resend after a lost
     * answer compares with the server's clock; 0 = not known. */
    leash__cmd *(*release_cmd)(const leash__names *n, const char *token, int count_after,
                               int64_t valid_until, int64_t deadline);
    /* A release of a grant that was never reported (a quorum attempt
     * that missed its majority, route/quorum.c): release_cmd's with
     * count_after 0 and no valid_until, except that a dialect which cannot
     * tell whether anyone waits (Redisson's) wakes nobody, else the
     * attempt's own waiter would wake on it and try again at once, for
     * ever. Whoever that grant kept out retries by itself (a split vote's
     * pause). */
    leash__cmd *(*giveback_cmd)(const leash__names *n, const char *token, int64_t deadline);
    /* A copy that runs later than void_after_ms after its write (the
     * command timeout: the client gave up on it) does nothing. */
    leash__cmd *(*renew_cmd)(const leash__renew_item *items, size_t n, int64_t void_after_ms,
                             int64_t deadline);
    leash__cmd *(*force_cmd)(const leash__names *n, int64_t deadline);
    /* Raises lock n's fence floor to at least fence (a Redlock grant). */
    leash__cmd *(*raise_cmd)(const leash__names *n, uint64_t fence, int64_t ttl_ms,
                             int64_t deadline);
    /* Writes fence into an acquire command of a fenced lock (Redlock) as
     * the fence its servers grant when it is above their floor and not
     * far below their clock (dialect/leash.c, acquire); route/quorum.c
     * proposes the same one to all of them, once per command (its digits,
     * no leading zeros, replace the zeros the command was built with, and
     * cmd->len shrinks). 0, or -1 when cmd is not such a command (it is
     * left as it was). */
    int (*propose_fence)(leash__cmd *cmd, uint64_t fence);
    /* What a message on a lock's channel says. */
    void (*message)(const char *msg, size_t len, leash__msg *out);
    /* The lock family (fair lock, read-write lock, semaphore); NULL
     * where the dialect has none. names: as names(), with this client's
     * own channel (client_id: LEASH__TOKEN_LEN hex digits). acquire: mode
     * 'f' fair, 'r' read, 'w' write, 's' semaphore of `permits`; once: a
     * try-once, which never queues; under: a read's paired write
     * hold's token, or NULL (the read goes in at once while it holds).
     * release: as release_cmd (also gives
     * up a waiter's place). */
    int (*family_names)(leash__names *out, const leash__logger *lg, const char *prefix,
                        const char *name, int db, const char *client_id);
    leash__cmd *(*family_acquire_cmd)(const leash__names *n, const char *token, int64_t lease_ms,
                                      char mode, int permits, int once, int count,
                                      const char *under, int64_t validity_ms, int64_t deadline);
    leash__cmd *(*family_release_cmd)(const leash__names *n, const char *token, int count_after,
                                      int64_t valid_until, int64_t deadline);
    leash__cmd *(*family_force_cmd)(const leash__names *n, int64_t deadline);
    /* 1: a waiter that has waited LEASH_STARVE_MS may queue for grants:
     * acquire_cmd's count is then minus the ms it has waited (a new hold,
     * never an extra one), and a busy lock queues it, oldest first, for
     * the grants after the current hold; message() reports such a grant
     * kept (docs/how-it-works.md "Fairness"). 0: count is never below 1 (Redisson's
     * layout keeps Redisson's rules). */
    int reserves;
    /* Reading a lock back (never written): state_cmd is the command that
     * reads the value of a key whose TYPE answered type ("GET",
     * "HGETALL"), NULL when the dialect keeps no lock in such a key.
     * read_state fills *out (which it zeroes first) from TYPE's answer,
     * that command's reply (NULL when there was none), the key's PTTL and
     * the server's clock (TIME, ms; holders and waiters whose lease ran
     * out by then are left out): kind OTHER for a key that is no lock of
     * this dialect. 0, or -1 without memory (*out then cleared). */
    const char *(*state_cmd)(const char *type);
    int (*read_state)(const char *type, const struct redisReply *value, int64_t pttl,
                      int64_t server_ms, leash__state *out);
} leash__dialect;

/* leash's scripts by id: each is the index of its script in
 * leash__dialect_leash.scripts (dialect/leash.c fills the array by these
 * ids, and nscripts is its length), for the fake servers of the tests and
 * the benchmarks, which tell the scripts apart. */
enum leash__leash_script_id {
    LEASH__LEASH_SCRIPT_ACQUIRE,
    LEASH__LEASH_SCRIPT_RELEASE,
    LEASH__LEASH_SCRIPT_RENEW,
    LEASH__LEASH_SCRIPT_FORCE,
    LEASH__LEASH_SCRIPT_RAISE,
    LEASH__LEASH_SCRIPT_FAMILY_ACQUIRE,
    LEASH__LEASH_SCRIPT_FAMILY_RELEASE,
    LEASH__LEASH_SCRIPT_MULTI_ACQUIRE,
    LEASH__LEASH_SCRIPT_MULTI_ACQUIRE_FENCED,
    LEASH__LEASH_SCRIPT_COUNT
};
/* Redisson's dialect's scripts by id (dialect/redisson.c), likewise. */
enum leash__redisson_script_id {
    LEASH__REDISSON_SCRIPT_ACQUIRE,
    LEASH__REDISSON_SCRIPT_RELEASE,
    LEASH__REDISSON_SCRIPT_RENEW,
    LEASH__REDISSON_SCRIPT_FORCE,
    LEASH__REDISSON_SCRIPT_RAISE,
    LEASH__REDISSON_SCRIPT_COUNT
};

/* leash's own layout (dialect/leash.c). */
extern const leash__dialect leash__dialect_leash;
/* Redisson's RLock layout (dialect/redisson.c); no lock family. */
extern const leash__dialect leash__dialect_redisson;
/* Reading a lock back (dialect/state.c), for leash_lock_state and the
 * leash tool alike: one command and one reader of the layouts.
 * leash__state_read: the state of a key from TYPE's answer, its value
 * (read with the command leash__state_value_cmd names for that type; NULL
 * when there was none), its PTTL and the server's clock (ms): each
 * dialect's read_state in turn (leash's, then Redisson's), the first that
 * knows the layout; subscribers -1. 0, or -1 without memory (*out cleared).
 * leash__state_args: the command that reads all of it in one script (one
 * snapshot), with the subscribers of chan (NULL: not read), as argv/lens
 * (LEASH__STATE_ARGS_MAX slots; argv[0] "EVAL"); its argc. Pointers into
 * key, chan and static text. leash__state_cmd: the same as a command of
 * lock n, without the channel when !with_channel; NULL without memory.
 * leash__state_parse: that command's reply into *out: 0; -1 without
 * memory; 1 for a reply of another shape (*out then cleared).
 * leash__op_state: the opdef of leash__state_cmd (LEASH__OP_READ): an
 * answer STATE owns a malloc'ed state (leash__state_free). */
#define LEASH__STATE_ARGS_MAX 32
const char *leash__state_value_cmd(const char *type);
int leash__state_read(const char *type, const struct redisReply *value, int64_t pttl,
                      int64_t server_ms, leash__state *out);
int leash__state_args(const char *key, size_t key_len, const char *chan, size_t chan_len,
                      const char **argv, size_t *lens);
leash__cmd *leash__state_cmd(const leash__names *n, int with_channel, int64_t deadline);
int leash__state_parse(const struct redisReply *r, leash__state *out);
void leash__state_free(leash__state *s);
extern const leash__opdef leash__op_state;
void leash__state_scripts_init(void);
/* Makes the dialects' script SHA1s (once, before any client exists;
 * dialect/dialects.c), each dialect's by its own function. */
void leash__dialects_init(void);
void leash__leash_scripts_init(void);
void leash__redisson_scripts_init(void);

/* What the dialects share (dialect/common.c). Their scripts answer in the
 * same shapes, so the answers read alike; and a Redlock fence floor is the
 * companion "fence" of the lock's key, which only leash reads. */
extern const leash__opdef leash__op_acquire, leash__op_release, leash__op_renew, leash__op_force,
    leash__op_raise;
extern leash__script leash__raise_script;
/* Makes the raise script's SHA1 (leash__dialects_init). */
void leash__common_scripts_init(void);
leash__cmd *leash__raise_cmd(const leash__names *n, uint64_t fence, int64_t ttl_ms,
                             int64_t deadline);
/* The raise of the floors of locks n[0..count) (1..LEASH__RAISE_MAX) to
 * at least fence, in one script: a Redlock multi-lock's members, whose
 * one script granted them one fence (dialect/multi.c). NULL without
 * memory or out of range. */
#define LEASH__RAISE_MAX 64
leash__cmd *leash__raise_many_cmd(const leash__names *const *n, size_t count, uint64_t fence,
                                  int64_t ttl_ms, int64_t deadline);
/* The commands of a one-key hold, as both dialects' scripts take them
 * (s: the dialect's script; holder: how it names the holder, the token or
 * Redisson's field):
 *   acquire  KEYS: lock [, fence floor]  ARGV: holder, lease_ms, count
 *            [, mark (when not NULL: leash's)] [, floor_ttl_ms, proposal
 *            (with a floor)], not_after
 *   release  KEYS: lock  ARGV: holder, count_after, channel, publish verb
 *            ("" with announce 0: nothing published), valid_until
 *   force    KEYS: lock  ARGV: channel, publish verb (EVAL, see dialect/leash.c) */
leash__cmd *leash__hold_acquire_cmd(const leash__script *s, const leash__names *n,
                                    const char *holder, size_t holder_len, int64_t lease_ms,
                                    int count, const char *mark, int64_t validity_ms,
                                    int64_t deadline);
leash__cmd *leash__hold_release_cmd(const leash__script *s, const leash__names *n,
                                    const char *holder, size_t holder_len, int count_after,
                                    int announce, int64_t valid_until, int64_t deadline);
leash__cmd *leash__hold_force_cmd(const leash__script *s, const leash__names *n, int64_t deadline);
/* The acquire's proposal argument (both dialects' layout). */
int leash__hold_propose_fence(leash__cmd *cmd, uint64_t fence);
/* How long a fence floor lives after its last write, for holds of lease_ms:
 * LEASH__FENCE_FLOOR_LEASES leases, at least LEASH__FENCE_FLOOR_MIN_MS. */
int64_t leash__floor_ttl_ms(int64_t lease_ms);
/* The fence floor's name for lock n into buf (LEASH__FLOOR_MAX bytes); its
 * length. */
size_t leash__floor_name(const leash__names *n, char *buf);
/* An EVALSHA of script s with argv[3..argc-1] (numkeys keys first): the
 * first three slots are the call's own. NULL without memory. */
leash__cmd *leash__script_cmd(const leash__script *s, int numkeys, int argc, const char **argv,
                              size_t *lens, unsigned flags, int64_t deadline);

/* What read_state readers share (dialect/common.c): a new holder or
 * waiter at the end of *v (token of len bytes, cut to fit; ttl_ms -1), or
 * NULL without memory; whether p[0..n) is n > 0 decimal digits; the value
 * of field `name` in an HGETALL reply, or NULL. */
leash__state_entry *leash__state_add(leash__state_entry **v, size_t *n, const char *token,
                                     size_t len);
int leash__all_digits(const char *p, size_t n);
const struct redisReply *leash__hash_field(const struct redisReply *all, const char *name);

void leash__names_clear(leash__names *n);
/* "publish" or "spublish" (sharded), for n's messages; its length in *len.
 * A command with it marks its argument (leash__cmd_publish_arg). */
const char *leash__publish_verb(const leash__names *n, size_t *len);
/* The command of the EVAL in buf (NULL after a failed allocation) whose
 * argument verb_arg is its publish verb; never resent. NULL without
 * memory (buf is then freed). */
leash__cmd *leash__publishing_cmd(char *buf, size_t len, unsigned verb_arg, int64_t deadline);
/* The zeros a stamped argument starts as (wire/conn.h). */
extern const char leash__stamp_zeros[LEASH__STAMP_DIGITS + 1];
/* The names of lock `name` whose channel is the companion `kind`
 * (kind_len bytes) of its key. LEASH_OK, LEASH_EINVAL (logged),
 * LEASH_ENOMEM. */
int leash__names_make(leash__names *n, const leash__logger *lg, const char *prefix,
                      const char *name, const char *kind, size_t kind_len);

/* Bytes of the companion `kind` of a key of key_len bytes, and the
 * companion itself at out (no NUL added): key + NUL + the key's hash tag
 * part + kind (see dialect/common.c for why this shape). */
size_t leash__companion_len(const char *key, size_t key_len, size_t kind_len);
void leash__companion(char *out, const char *key, size_t key_len, const char *kind,
                      size_t kind_len);

#endif
