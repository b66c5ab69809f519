/* SPDX-License-Identifier: MIT */
/*
 * compensation: a job of several steps under a lock, undone when the lock is
 * lost half-way, on a store that refuses stale holders.
 *
 *     compensation [--name NAME] [--wait MS] REDIS_URL
 *
 * REDIS_URL is what leash_url_parse() (leash/url.h) reads:
 * redis://[[user]:password@]host[:port][/db], or
 * unix://[[user]:password@]/path[?db=N].
 * tests/test_compensation.sh runs two of them and freezes the first.
 *
 * The store. One Redis hash, STORE_KEY, stands for a document of PARTS parts
 * (part:1 .. part:6) and the version that was last published whole
 * (committed). Its invariant: once no job is between its first and last
 * write, every part equals committed (an absent committed: no part at all).
 * Readers would read committed, and trust the parts only when they match.
 * Nothing writes it but STORE_LUA, and every write carries the writer's
 * fence (leash_fence()): the script keeps the highest fence it has accepted
 * and refuses any lower one, counting the refusal in the field rejected.
 * So once a holder with a newer fence has written, nothing an older holder
 * still sends can land, whatever the older one believes about its lease.
 *
 * The job. Take the lock "compensation-job" (waiting up to --wait ms), then,
 * each through the script with the hold's fence:
 *   begin      put back to committed any part that differs from it: dirt
 *              that an earlier holder left (it crashed, or its compensation
 *              was refused because we came first);
 *   apply i    part:i = NAME@FENCE, for i = 1 .. PARTS, STEP_MS apart (a
 *              pause is a pretend computation; a test freezes us there);
 *   commit     committed = NAME@FENCE: the new version is published;
 * then release. The lease (LEASE_MS) is renewed by the watchdog.
 *
 * The compensation. When the lost callback fires before the commit was
 * accepted, the job sends no more steps and, once the step in flight (if
 * any) has answered, undoes the parts it applied, last first: undo i puts
 * part:i back to committed. Each undo carries the same fence: if nobody
 * newer has written, it lands and the store is as before the job; if a newer
 * holder has written, it is refused, and that holder's own begin already
 * removed our parts (begin runs after our last accepted write: the fence
 * orders them), and its job ends by publishing a whole version, or by
 * compensating in turn. A step refused by the fence check stops the job the
 * same way: the lost callback follows (a newer fence means our hold is over)
 * and runs the compensation.
 *
 * Why the invariant holds in every interleaving: the script runs whole, and
 * the fence check totally orders the holders' writes; each holder's accepted
 * writes are a prefix of begin, apply..., commit or undo.... A holder's begin
 * cleans everything older holders wrote; its commit publishes all parts it
 * wrote itself (none can change under it: older writes are refused, and a
 * newer holder's writes would refuse its commit); its undos restore each part
 * it wrote to committed, which no one else changed meanwhile (a newer
 * writer's begin would have refused them). So after the last holder's job,
 * committed or compensated (or, if it crashed, after the next begin), every
 * part equals committed. Redis must keep the script's writes (no eviction,
 * persistence if the store must survive a restart), as any store must.
 *
 * A store that cannot be reached cannot be compensated: the job then exits 1
 * and its parts stay until the next holder's begin puts them back, as after
 * a crash.
 *
 * Keys: the lock key is leash's (it has a TTL). The store is the example's
 * data: it expires STORE_TTL_MS after its last accepted write, so that a demo
 * leaves nothing behind. A real store keeps its data and its fence for good;
 * forgetting the fence would let a holder stalled that long write again.
 *
 * Exit status: 0 committed and released, 3 lost the lock and compensated, 1
 * an error (the lock not had in time, Redis unreachable), 2 usage.
 */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/adapters/libev.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <leash/adapters/libev.h>
#include <leash/leash.h>
#include <leash/url.h>

#define LOCK_NAME "compensation-job"
#define STORE_KEY "leash-example:compensation:store"

enum {
    PARTS = 6,
    STEP_MS = 250,          /* between two applies */
    LEASE_MS = 1000,        /* the watchdog's lease ... */
    RENEW_MS = 300,         /* ... renewed this often */
    WAIT_MS = 15000,        /* default --wait */
    STORE_TTL_MS = 3600000, /* the store expires an hour after its last write */
    EXIT_COMPENSATED = 3
};

/*
 * KEYS[1] the store; ARGV: fence, op, part (apply, undo) or parts (begin),
 * value (apply, commit), ttl ms. Answers {1, n} when the fence was accepted
 * (n: parts begin repaired, else 0), {0, highest fence} when refused. The
 * fence is compared as a number (microseconds fit a double exactly until
 * the year 2255) but stored as the string it came as.
 */
static const char STORE_LUA[] =
    "local seen = redis.call('HGET', KEYS[1], 'fence') or '0'\n"
    "if tonumber(ARGV[1]) < tonumber(seen) then\n"
    "  redis.call('HINCRBY', KEYS[1], 'rejected', 1)\n"
    "  return {0, seen}\n"
    "end\n"
    "redis.call('HSET', KEYS[1], 'fence', ARGV[1])\n"
    "local committed = redis.call('HGET', KEYS[1], 'committed')\n"
    "local function restore(field)\n"
    "  if committed then redis.call('HSET', KEYS[1], field, committed)\n"
    "  else redis.call('HDEL', KEYS[1], field) end\n"
    "end\n"
    "local n = 0\n"
    "local op = ARGV[2]\n"
    "if op == 'begin' then\n"
    "  for i = 1, tonumber(ARGV[3]) do\n"
    "    if redis.call('HGET', KEYS[1], 'part:' .. i) ~= committed then\n"
    "      restore('part:' .. i)\n"
    "      n = n + 1\n"
    "    end\n"
    "  end\n"
    "elseif op == 'apply' then\n"
    "  redis.call('HSET', KEYS[1], 'part:' .. ARGV[3], ARGV[4])\n"
    "elseif op == 'undo' then\n"
    "  restore('part:' .. ARGV[3])\n"
    "elseif op == 'commit' then\n"
    "  redis.call('HSET', KEYS[1], 'committed', ARGV[4])\n"
    "end\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[5])\n"
    "return {1, n}\n";

/* Where the job is: a reply or the lost callback acts on what is left to do. */
enum phase {
    P_WAITING,      /* for the lock */
    P_BEGIN,        /* begin in flight */
    P_STEPS,        /* applying (a step in flight or the next one's timer running) */
    P_COMMIT,       /* commit in flight */
    P_RELEASING,    /* commit accepted, release in flight */
    P_STOPPED,      /* no more steps: waiting for the lost callback or the reply in flight */
    P_COMPENSATING, /* undos in flight, one at a time */
    P_DONE
};

static struct job {
    const char *name;
    enum phase phase;
    leash_client *client;
    leash_lock *lock;
    redisAsyncContext *store;
    struct ev_loop *loop;
    ev_timer step;
    struct timespec t0;
    uint64_t fence;
    char fence_text[24];
    char value[160];
    int applied;   /* parts 1 .. applied hold our value */
    int inflight;  /* a store command awaits its answer */
    int lost;      /* the lost callback fired */
    int committed; /* our commit was accepted */
    int undo_next; /* the part the next undo is for; 0 = none left */
    int undone, undo_refused;
    int exit_code;
} job;

/* Prints one line stamped with the time since start and the job's name. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    struct timespec now;
    va_list ap;
    clock_gettime(CLOCK_MONOTONIC, &now);
    printf("%7.3f %s: ",
           (double)(now.tv_sec - job.t0.tv_sec) + (double)(now.tv_nsec - job.t0.tv_nsec) / 1e9,
           job.name);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

/* Ends the run: the client goes (a hold still had is released), then the
 * store connection once its last answer is in. */
static void finish(int code) {
    if (job.phase == P_DONE)
        return;
    job.phase = P_DONE;
    job.exit_code = code;
    ev_timer_stop(job.loop, &job.step);
    leash_client_free(job.client);
    job.client = NULL;
    job.lock = NULL;
    if (job.store != NULL)
        redisAsyncDisconnect(job.store);
}

static void on_store_reply(redisAsyncContext *ac, void *r, void *arg);

/* Sends one fenced write: op with part (or the part count) and value. EVAL
 * with the whole script each time: an example need not handle NOSCRIPT. */
static void store_write(const char *op, int part, const char *value) {
    char num[16];
    snprintf(num, sizeof(num), "%d", part);
    if (redisAsyncCommand(job.store, on_store_reply, (void *)op, "EVAL %s 1 %s %s %s %s %s %d",
                          STORE_LUA, STORE_KEY, job.fence_text, op, num, value,
                          STORE_TTL_MS) != REDIS_OK) {
        say("cannot send %s to the store", op);
        finish(1);
        return;
    }
    job.inflight = 1;
}

static void send_undo(void) {
    if (job.undo_next == 0) {
        say("compensated: %d part%s undone, %d undo%s refused by the fence check%s", job.undone,
            job.undone == 1 ? "" : "s", job.undo_refused, job.undo_refused == 1 ? "" : "s",
            job.undo_refused > 0 ? " (a newer holder wrote: its job leaves the store whole)" : "");
        finish(EXIT_COMPENSATED);
        return;
    }
    store_write("undo", job.undo_next, "-");
}

/* No more steps. Compensation starts once the lost callback has fired (it
 * always does: a refusal means a newer fence, so our hold is over) and no
 * step is in flight (its answer says whether it needs undoing). */
static void stop_steps(void) {
    ev_timer_stop(job.loop, &job.step);
    if (job.phase != P_COMPENSATING)
        job.phase = P_STOPPED;
    if (!job.lost || job.inflight || job.phase == P_COMPENSATING)
        return;
    if (job.committed) {
        say("the commit was accepted before the hold ended: nothing to undo");
        finish(0);
        return;
    }
    job.phase = P_COMPENSATING;
    job.undo_next = job.applied;
    say("compensating: undoing %d applied part%s, last first", job.applied,
        job.applied == 1 ? "" : "s");
    send_undo();
}

static void on_released(leash_lock *l, int status, void *arg) {
    (void)l, (void)arg;
    say("released the lock: %s", leash_strerror(status));
    finish(0);
}

static void on_store_reply(redisAsyncContext *ac, void *r, void *arg) {
    const char *op = arg;
    redisReply *reply = r;
    int accepted;
    (void)ac;

    job.inflight = 0;
    if (job.phase == P_DONE)
        return;
    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER) {
        say("%s: the store answered %s", op,
            reply == NULL                      ? "nothing (connection lost)"
            : reply->type == REDIS_REPLY_ERROR ? reply->str
                                               : "something unexpected");
        finish(1);
        return;
    }
    accepted = reply->element[0]->integer == 1;
    if (!accepted) {
        const redisReply *seen = reply->element[1];
        char what[32];
        if (strcmp(op, "apply") == 0 || strcmp(op, "undo") == 0)
            snprintf(what, sizeof(what), "%s of part %d", op,
                     op[0] == 'a' ? job.applied + 1 : job.undo_next);
        else
            snprintf(what, sizeof(what), "%s", op);
        say("%s REFUSED by the store's fence check: it has seen fence %s > ours %s", what,
            seen->type == REDIS_REPLY_STRING ? seen->str : "?", job.fence_text);
    }

    if (strcmp(op, "undo") == 0) {
        if (accepted) {
            say("undo of part %d: back to the committed version", job.undo_next);
            job.undone++;
        } else {
            job.undo_refused++;
        }
        job.undo_next--;
        send_undo();
        return;
    }
    if (!accepted) {
        stop_steps();
        return;
    }
    if (strcmp(op, "begin") == 0) {
        say("begin: the store takes fence %s; %lld part%s an earlier holder left put back",
            job.fence_text, reply->element[1]->integer, reply->element[1]->integer == 1 ? "" : "s");
    } else if (strcmp(op, "apply") == 0) {
        job.applied++;
        say("step %d/%d applied: part:%d = %s", job.applied, PARTS, job.applied, job.value);
    } else {
        job.committed = 1;
        say("committed %s: every part is ours", job.value);
    }
    if (job.phase == P_STOPPED || job.lost) {
        stop_steps();
    } else if (job.committed) {
        job.phase = P_RELEASING;
        if (leash_release(job.lock, on_released, NULL) != LEASH_OK)
            finish(1);
    } else if (job.applied == PARTS) {
        job.phase = P_COMMIT;
        store_write("commit", 0, job.value);
    } else {
        job.phase = P_STEPS;
        /* libev keeps what is left of a timer that fired, zero: set it again */
        ev_timer_set(&job.step, STEP_MS / 1000., 0.);
        ev_timer_start(job.loop, &job.step);
    }
}

static void on_step(struct ev_loop *loop, ev_timer *w, int revents) {
    (void)loop, (void)w, (void)revents;
    /* leash_held reads the clock now: after a pause it is 0 before any
     * timer of leash's had a chance to run, and no step goes out late. */
    if (!leash_held(job.lock)) {
        say("the hold is no longer valid (we were paused?): no more steps; the lost callback "
            "will say why");
        stop_steps();
        return;
    }
    store_write("apply", job.applied + 1, job.value);
}

static void on_lost(leash_lock *l, int reason, void *arg) {
    (void)l, (void)arg;
    say("LOST the lock (%s) after %d of %d steps", leash_lost_reason_name(reason), job.applied,
        PARTS);
    job.lost = 1;
    if (job.phase == P_RELEASING) /* committed: the release cannot be far behind */
        return;
    stop_steps();
}

static void on_acquired(leash_lock *l, int status, void *arg) {
    (void)arg;
    if (status != LEASH_OK) {
        say("no lock: %s", leash_strerror(status));
        finish(1);
        return;
    }
    job.fence = leash_fence(l);
    snprintf(job.fence_text, sizeof(job.fence_text), "%" PRIu64, job.fence);
    snprintf(job.value, sizeof(job.value), "%s@%s", job.name, job.fence_text);
    say("got the lock, fence %s", job.fence_text);
    job.phase = P_BEGIN;
    store_write("begin", PARTS, "-");
}

static void on_store_connect(const redisAsyncContext *ac, int status) {
    if (status != REDIS_OK) {
        say("cannot connect to the store: %s", ac->errstr);
        job.store = NULL; /* hiredis frees it */
        finish(1);
    }
}

static void on_store_disconnect(const redisAsyncContext *ac, int status) {
    (void)ac;
    job.store = NULL;
    if (status != REDIS_OK && job.phase != P_DONE) {
        say("lost the store connection");
        finish(1);
    }
}

/* The answer of AUTH or SELECT: only an error matters. */
static void on_setup_reply(redisAsyncContext *ac, void *r, void *arg) {
    redisReply *reply = r;
    (void)ac;
    if (reply != NULL && reply->type == REDIS_REPLY_ERROR) {
        say("%s refused: %s", (const char *)arg, reply->str);
        finish(1);
    }
}

static int usage(void) {
    fprintf(stderr, "usage: compensation [--name NAME] [--wait MS] REDIS_URL\n"
                    "  REDIS_URL: redis://[[user]:password@]host[:port][/db] or "
                    "unix://[[user]:password@]/path[?db=N]\n");
    return 2;
}

int main(int argc, char **argv) {
    static char default_name[32];
    leash_url u;
    char err[LEASH_URL_ERR_MAX];
    leash_options opts;
    int64_t wait_ms = WAIT_MS;
    const char *url = NULL;
    int i;

    snprintf(default_name, sizeof(default_name), "job%ld", (long)getpid());
    job.name = default_name;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--name") == 0 && i + 1 < argc && argv[i + 1][0] != '\0' &&
            strlen(argv[i + 1]) < 100 && strpbrk(argv[i + 1], " @") == NULL)
            job.name = argv[++i];
        else if (strcmp(argv[i], "--wait") == 0 && i + 1 < argc)
            wait_ms = strtoll(argv[++i], NULL, 10);
        else if (url == NULL && argv[i][0] != '-')
            url = argv[i];
        else
            return usage();
    }
    if (url == NULL || wait_ms < 0)
        return usage();
    if (leash_url_parse(url, &u, err, sizeof(err)) != LEASH_OK) {
        fprintf(stderr, "compensation: %s\n", err);
        return 2;
    }

    signal(SIGPIPE, SIG_IGN);         /* a dropped connection is an error, not a signal */
    setvbuf(stdout, NULL, _IOLBF, 0); /* a test reads our lines as they come */
    clock_gettime(CLOCK_MONOTONIC, &job.t0);
    job.loop = EV_DEFAULT;
    ev_timer_init(&job.step, on_step, STEP_MS / 1000., 0.);

    /* The store's own connection: leash's are for the locks only. */
    job.store = u.unix_path[0] != '\0' ? redisAsyncConnectUnix(u.unix_path)
                                       : redisAsyncConnect(u.host, u.port);
    if (job.store == NULL || job.store->err) {
        fprintf(stderr, "compensation: %s\n", job.store ? job.store->errstr : "out of memory");
        return 1;
    }
    redisLibevAttach(job.loop, job.store);
    redisAsyncSetConnectCallback(job.store, on_store_connect);
    redisAsyncSetDisconnectCallback(job.store, on_store_disconnect);
    if (u.username[0] != '\0')
        redisAsyncCommand(job.store, on_setup_reply, "AUTH", "AUTH %s %s", u.username, u.password);
    else if (u.password[0] != '\0')
        redisAsyncCommand(job.store, on_setup_reply, "AUTH", "AUTH %s", u.password);
    if (u.db != 0)
        redisAsyncCommand(job.store, on_setup_reply, "SELECT", "SELECT %d", u.db);

    leash_options_init(&opts);
    leash_url_apply(&u, &opts);
    opts.lease_ms = LEASE_MS;
    opts.renew_interval_ms = RENEW_MS;
    if (leash_client_new(&job.client, &opts) != LEASH_OK ||
        leash_libev_attach(job.loop, job.client) != LEASH_OK ||
        (job.lock = leash_lock_new(job.client, LOCK_NAME)) == NULL) {
        fprintf(stderr, "compensation: cannot make the leash client\n");
        return 1;
    }
    leash_on_lost(job.lock, on_lost, NULL);
    say("waiting up to %" PRId64 " ms for the lock \"%s\" (lease %d ms); the store is %s, %d parts",
        wait_ms, LOCK_NAME, LEASE_MS, STORE_KEY, PARTS);
    if (leash_acquire(job.lock, wait_ms, on_acquired, NULL) != LEASH_OK) {
        fprintf(stderr, "compensation: leash_acquire refused\n");
        return 1;
    }
    job.exit_code = 1;
    ev_run(job.loop, 0);
    leash_client_free(job.client); /* NULL unless the loop ended early */
    return job.exit_code;
}
