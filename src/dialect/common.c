/* SPDX-License-Identifier: MIT */
#include "dialect/dialect.h"

#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>
#include <leash/leash.h>

#include "base/slot.h"
#include "wire/resp.h"

/*
 * What the dialects share: leash's layout (dialect/leash.c, with the lock
 * family's in dialect/family.c) and Redisson's (dialect/redisson.c) name a
 * lock's companions alike, take a one-key hold's acquire, release and
 * force in the same argument layout, raise a Redlock fence floor with the
 * same script, and answer in the same shapes. Each dialect uses this file;
 * this file uses none of them (scripts/check-layers).
 *
 * Names. A lock's key is key_prefix + name. Names that belong to a lock but
 * are not its key (leash's channel, the family's other keys) are companions: key + NUL + a part
 * that starts with the key's hash tag. A lock name never holds a NUL, so a
 * companion equals no lock key; the part before the first NUL is the whole
 * key, so two companions of different keys never meet; and the first {tag}
 * of a companion is the key's own, so it lands in the key's cluster slot:
 *   "leash:x"       -> "leash:x\0{leash:x}released:3"
 *   "app:{42}:lock" -> "app:{42}:lock\0released:3"
 * Pub/sub is shared by every db of a server: a channel carries the db, so
 * the same name in two dbs never meets.
 */

/* The fence floor's raise (Redlock), documented with leash's scripts in
 * dialect/leash.c; Redisson's dialect raises the same floor. Every floor
 * of KEYS (a multi-lock's members: dialect/multi.c) is read before any
 * is written. */
static const char raise_lua[] = "local cur = {}\n"
                                "for i = 1, #KEYS do\n"
                                "  cur[i] = tonumber(redis.call('get', KEYS[i]) or 0) or 0\n"
                                "end\n"
                                "for i = 1, #KEYS do\n"
                                "  if cur[i] < tonumber(ARGV[1]) then\n"
                                "    redis.call('set', KEYS[i], ARGV[1], 'PX', ARGV[2])\n"
                                "  else\n"
                                "    redis.call('pexpire', KEYS[i], ARGV[2])\n"
                                "  end\n"
                                "end\n"
                                "return 1\n";

leash__script leash__raise_script;

void leash__common_scripts_init(void) {
    leash__script_init(&leash__raise_script, raise_lua);
}

/* ---- names ---- */

size_t leash__companion_len(const char *key, size_t key_len, size_t kind_len) {
    size_t start, tag_len;

    if (leash__hash_tag(key, key_len, &start, &tag_len))
        return key_len + 1 + kind_len;
    return key_len + 1 + 1 + key_len + 1 + kind_len; /* key \0 { key } kind */
}

void leash__companion(char *out, const char *key, size_t key_len, const char *kind,
                      size_t kind_len) {
    size_t start, tag_len;

    memcpy(out, key, key_len);
    out += key_len;
    *out++ = '\0';
    if (!leash__hash_tag(key, key_len, &start, &tag_len)) {
        /* Untagged keys have no braces at all (names() refuses stray
         * ones), so "{key}" is a tag that hashes like the key. */
        *out++ = '{';
        memcpy(out, key, key_len);
        out += key_len;
        *out++ = '}';
    }
    memcpy(out, kind, kind_len);
}

void leash__names_clear(leash__names *n) {
    free(n->mem);
    memset(n, 0, sizeof(*n));
}

int leash__names_make(leash__names *n, const leash__logger *lg, const char *prefix,
                      const char *name, const char *kind, size_t kind_len) {
    size_t plen, nlen, klen, start, tag_len, chan_len;
    char *p, *grown;

    if (name == NULL || name[0] == '\0') {
        leash__log(lg, LEASH_LOG_ERROR, "leash_lock_new: the lock name is empty");
        return LEASH_EINVAL;
    }
    nlen = strlen(name);
    if (nlen > LEASH_NAME_MAX) {
        leash__log(lg, LEASH_LOG_ERROR, "leash_lock_new: the lock name is %zu bytes, over %d", nlen,
                   LEASH_NAME_MAX);
        return LEASH_EINVAL;
    }
    plen = strlen(prefix);
    klen = plen + nlen;
    p = malloc(klen + 1);
    if (p == NULL)
        return LEASH_ENOMEM;
    memcpy(p, prefix, plen);
    memcpy(p + plen, name, nlen + 1);
    /* Braces without a valid tag would give a companion another slot. */
    if (!leash__hash_tag(p, klen, &start, &tag_len) &&
        (memchr(p, '{', klen) != NULL || memchr(p, '}', klen) != NULL)) {
        free(p);
        leash__log(lg, LEASH_LOG_ERROR,
                   "leash_lock_new: prefix+name has braces that are not a hash tag: "
                   "use a balanced, non-empty {tag}");
        return LEASH_EINVAL;
    }
    chan_len = leash__companion_len(p, klen, kind_len);
    grown = realloc(p, klen + 1 + chan_len + 1);
    if (grown == NULL) {
        free(p);
        return LEASH_ENOMEM;
    }
    n->mem = grown;
    n->key = grown;
    n->key_len = klen;
    n->channel = grown + klen + 1;
    n->channel_len = chan_len;
    leash__companion(n->channel, n->key, klen, kind, kind_len);
    n->channel[chan_len] = '\0';
    n->slot = leash__key_slot(n->key, klen);
    return LEASH_OK;
}

/* The fence floor of lock n (Redlock): the companion "fence" of its key,
 * into buf (LEASH__FLOOR_MAX bytes). Its length. */
size_t leash__floor_name(const leash__names *n, char *buf) {
    size_t len = leash__companion_len(n->key, n->key_len, 5);
    leash__companion(buf, n->key, n->key_len, "fence", 5);
    return len;
}

/* ---- commands ---- */

/* The zeros the connection overwrites with a server-time stamp. */
const char leash__stamp_zeros[LEASH__STAMP_DIGITS + 1] = "0000000000000000000";

leash__cmd *leash__script_cmd(const leash__script *s, int numkeys, int argc, const char **argv,
                              size_t *lens, unsigned flags, int64_t deadline) {
    size_t len;
    char *buf = leash__script_call(&len, s, numkeys, argc, argv, lens);
    return buf ? leash__cmd_new(buf, len, s, flags, deadline, NULL, NULL) : NULL;
}

/* The zeros of a fence proposal (LEASH__PROPOSAL_DIGITS), which
 * leash__hold_propose_fence overwrites. */
static const char proposal_zeros[LEASH__PROPOSAL_DIGITS + 1] = "00000000000000000000";

int64_t leash__floor_ttl_ms(int64_t lease_ms) {
    int64_t ttl = lease_ms * LEASH__FENCE_FLOOR_LEASES;
    return ttl < LEASH__FENCE_FLOOR_MIN_MS ? LEASH__FENCE_FLOOR_MIN_MS : ttl;
}

/* The proposal is the argument before the stamp: "$20\r\n<digits>\r\n"
 * then "$19\r\n<stamp>\r\n" end the command. The command is built with
 * 20 zeros there; the proposal goes in with its own digits, no leading
 * zeros, and the stamp moves up behind it, so that a script writes the
 * fence as it came (cutting the zeros in Lua was a pattern match: about
 * 2,000 of a server's 111,000 instructions a Redlock cycle; issue 35). */
int leash__hold_propose_fence(leash__cmd *cmd, uint64_t fence) {
    const size_t stamp_tail = 5 + LEASH__STAMP_DIGITS + 2, arg = 5 + LEASH__PROPOSAL_DIGITS + 2;
    char digits[LEASH__PROPOSAL_DIGITS];
    size_t n = 0, head;
    char *p;

    if (cmd->len < stamp_tail + arg + 2 || cmd->stamp != LEASH__STAMP_NOT_AFTER)
        return -1;
    p = cmd->buf + cmd->len - stamp_tail - arg;
    if (memcmp(p, "$20\r\n", 5) != 0 || memcmp(p + arg - 2, "\r\n", 2) != 0)
        return -1;
    do {
        digits[sizeof digits - ++n] = (char)('0' + fence % 10);
        fence /= 10;
    } while (fence > 0);
    head = n < 10 ? 4 : 5; /* "$n\r\n" */
    p[0] = '$';
    if (n >= 10)
        p[1] = (char)('0' + n / 10);
    p[head - 3] = (char)('0' + n % 10);
    memcpy(p + head - 2, "\r\n", 2);
    memcpy(p + head, digits + sizeof digits - n, n);
    memcpy(p + head + n, "\r\n", 2);
    memmove(p + head + n + 2, cmd->buf + cmd->len - stamp_tail, stamp_tail);
    cmd->len -= arg - (head + n + 2);
    return 0;
}

leash__cmd *leash__hold_acquire_cmd(const leash__script *s, const leash__names *n,
                                    const char *holder, size_t holder_len, int64_t lease_ms,
                                    int count, const char *mark, int64_t validity_ms,
                                    int64_t deadline) {
    const char *argv[3 + 9];
    size_t lens[3 + 9];
    char lease[21], cnt[21], ttl[21], floor[LEASH__FLOOR_MAX];
    int k = n->fenced ? 2 : 1, a;
    leash__cmd *cmd;

    argv[3] = n->key;
    lens[3] = n->key_len;
    if (n->fenced) {
        argv[4] = floor;
        lens[4] = leash__floor_name(n, floor);
    }
    argv[3 + k] = holder;
    lens[3 + k] = holder_len;
    argv[4 + k] = lease;
    lens[4 + k] = leash__resp_int(lease, lease_ms);
    argv[5 + k] = cnt;
    lens[5 + k] = leash__resp_int(cnt, count);
    a = 6 + k;
    if (mark != NULL) {
        argv[a] = mark;
        lens[a++] = strlen(mark);
    }
    if (n->fenced) {
        argv[a] = ttl;
        lens[a++] = leash__resp_int(ttl, leash__floor_ttl_ms(lease_ms));
        argv[a] = proposal_zeros;
        lens[a++] = LEASH__PROPOSAL_DIGITS;
    }
    argv[a] = leash__stamp_zeros;
    lens[a++] = LEASH__STAMP_DIGITS;
    cmd = leash__script_cmd(s, k, a, argv, lens, LEASH__CMD_RETRY, deadline);
    if (cmd != NULL)
        leash__cmd_stamp(cmd, LEASH__STAMP_NOT_AFTER, validity_ms);
    return cmd;
}

leash__cmd *leash__publishing_cmd(char *buf, size_t len, unsigned verb_arg, int64_t deadline) {
    leash__cmd *cmd = buf != NULL ? leash__cmd_new(buf, len, NULL, 0, deadline, NULL, NULL) : NULL;

    if (cmd != NULL)
        leash__cmd_publish_arg(cmd, verb_arg);
    return cmd;
}

const char *leash__publish_verb(const leash__names *n, size_t *len) {
    int sharded = n->sharded != NULL && *n->sharded;

    *len = sharded ? 8 : 7;
    return sharded ? "spublish" : "publish";
}

leash__cmd *leash__hold_release_cmd(const leash__script *s, const leash__names *n,
                                    const char *holder, size_t holder_len, int count_after,
                                    int announce, int64_t valid_until, int64_t deadline) {
    const char *argv[3 + 6];
    size_t lens[3 + 6];
    char cnt[21];
    leash__cmd *cmd;

    argv[3] = n->key;
    lens[3] = n->key_len;
    argv[4] = holder;
    lens[4] = holder_len;
    argv[5] = cnt;
    lens[5] = leash__resp_int(cnt, count_after);
    argv[6] = n->channel;
    lens[6] = n->channel_len;
    if (announce) {
        argv[7] = leash__publish_verb(n, &lens[7]);
    } else {
        argv[7] = "";
        lens[7] = 0;
    }
    argv[8] = leash__stamp_zeros;
    lens[8] = LEASH__STAMP_DIGITS;
    cmd = leash__script_cmd(s, 1, 9, argv, lens, LEASH__CMD_RETRY, deadline);
    if (cmd != NULL && announce)
        leash__cmd_publish_arg(cmd, 7);
    if (cmd != NULL && valid_until != 0)
        leash__cmd_stamp(cmd, LEASH__STAMP_RESEND_VALID_UNTIL, valid_until);
    return cmd;
}

leash__cmd *leash__hold_force_cmd(const leash__script *s, const leash__names *n, int64_t deadline) {
    const char *argv[3 + 3];
    size_t lens[3 + 3], len;
    char *buf;

    argv[3] = n->key;
    lens[3] = n->key_len;
    argv[4] = n->channel;
    lens[4] = n->channel_len;
    argv[5] = leash__publish_verb(n, &lens[5]);
    /* EVAL, never resent after a lost answer nor after NOSCRIPT: a second
     * run behind commands issued later would remove the hold they made. */
    buf = leash__script_eval_call(&len, s, 1, 6, argv, lens);
    return leash__publishing_cmd(buf, len, 5, deadline);
}

leash__cmd *leash__raise_cmd(const leash__names *n, uint64_t fence, int64_t ttl_ms,
                             int64_t deadline) {
    return leash__raise_many_cmd(&n, 1, fence, ttl_ms, deadline);
}

leash__cmd *leash__raise_many_cmd(const leash__names *const *n, size_t count, uint64_t fence,
                                  int64_t ttl_ms, int64_t deadline) {
    enum {
        ARGC = 3 + LEASH__RAISE_MAX + 2
    };
    const char *argv[ARGC];
    size_t lens[ARGC], i;
    char *floors, f[21], ttl[21];
    leash__cmd *cmd;

    if (count < 1 || count > LEASH__RAISE_MAX ||
        (floors = malloc(count * LEASH__FLOOR_MAX)) == NULL)
        return NULL;
    for (i = 0; i < count; i++) {
        argv[3 + i] = floors + i * LEASH__FLOOR_MAX;
        lens[3 + i] = leash__floor_name(n[i], floors + i * LEASH__FLOOR_MAX);
    }
    argv[3 + count] = f;
    lens[3 + count] = leash__resp_int(f, (long long)fence);
    argv[4 + count] = ttl;
    lens[4 + count] = leash__resp_int(ttl, ttl_ms);
    /* Raising twice is raising once. */
    cmd = leash__script_cmd(&leash__raise_script, (int)count, (int)(5 + count), argv, lens,
                            LEASH__CMD_RETRY, deadline);
    free(floors);
    return cmd;
}

/* ---- answers ---- */

static void fail_all(leash__answer *out, size_t n, int status) {
    size_t i;
    for (i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof(out[i]));
        out[i].status = status;
    }
}

/* An error reply or one of no known shape, for every answer. */
static void bad_reply(const redisReply *r, leash__answer *out, size_t n, const leash__logger *lg,
                      const char *op, const char *what) {
    if (r->type == REDIS_REPLY_ERROR) {
        leash__log(lg, LEASH_LOG_ERROR, "%s %s: Redis error: %s", op, what, r->str);
        fail_all(out, n, LEASH_EREDIS);
    } else {
        leash__log(lg, LEASH_LOG_ERROR, "%s %s: reply of unexpected shape", op, what);
        fail_all(out, n, LEASH_EPROTO);
    }
}

/* {1, fence, count, now} or {0, x, 0, now}: x the holder's pttl, -3 too
 * late, -4 gone; a family attempt that wrote its place {0, x, 0, now,
 * mark}: mark (in fence) is at least every fence given before (see
 * dialect/family.c). */
static void parse_acquire(const redisReply *r, leash__answer *a, size_t n, const leash__logger *lg,
                          const char *what) {
    (void)n;
    memset(a, 0, sizeof(*a));
    if (r->type == REDIS_REPLY_ARRAY && (r->elements == 4 || r->elements == 5) &&
        r->element[0]->type == REDIS_REPLY_INTEGER && r->element[1]->type == REDIS_REPLY_INTEGER &&
        r->element[2]->type == REDIS_REPLY_INTEGER && r->element[3]->type == REDIS_REPLY_INTEGER &&
        (r->elements == 4 || (r->element[4]->type == REDIS_REPLY_INTEGER &&
                              r->element[0]->integer == 0 && r->element[4]->integer > 0))) {
        a->server_ms = r->element[3]->integer;
        if (r->element[0]->integer == 1 && r->element[1]->integer >= 0 &&
            r->element[2]->integer >= 1 && r->element[2]->integer <= INT32_MAX) {
            a->kind = LEASH__ANS_GRANTED;
            a->fence = (uint64_t)r->element[1]->integer;
            a->n = r->element[2]->integer;
            return;
        }
        if (r->element[0]->integer == 0 && r->element[1]->integer == -5) {
            leash__log(lg, LEASH_LOG_ERROR,
                       "acquire %s: the semaphore is in use with %lld permits, not this handle's",
                       what, (long long)r->element[2]->integer);
            a->status = LEASH_EINVAL;
            return;
        }
        if (r->element[0]->integer == 0) {
            if (r->elements == 5)
                a->fence = (uint64_t)r->element[4]->integer;
            a->n = r->element[1]->integer;
            a->kind = a->n == -3 ? LEASH__ANS_LATE : a->n == -4 ? LEASH__ANS_GONE : LEASH__ANS_BUSY;
            return;
        }
    }
    bad_reply(r, a, 1, lg, "acquire", what);
}

/* count left (> 0), 0 released, -1 not ours, -2 a resend that cannot tell. */
static void parse_release(const redisReply *r, leash__answer *a, size_t n, const leash__logger *lg,
                          const char *what) {
    (void)n;
    memset(a, 0, sizeof(*a));
    if (r->type == REDIS_REPLY_INTEGER && r->integer >= -2) {
        a->n = r->integer;
        a->kind = r->integer > 0     ? LEASH__ANS_LEFT
                  : r->integer == 0  ? LEASH__ANS_RELEASED
                  : r->integer == -1 ? LEASH__ANS_NOT_OURS
                                     : LEASH__ANS_UNSURE;
        return;
    }
    bad_reply(r, a, 1, lg, "release", what);
}

/* {r1..rN} or {r1..rN, now}: 1 renewed, 0 not ours, -5 not ours for now
 * (a spread met an older hold: n = 1), -3 too late (not_after passed);
 * the family's waiters also {2, mark} (the place renewed; mark, in fence,
 * is at least every fence given before) and a fence (let in by this
 * renewal); anything else is a protocol error for that lock, never a
 * verdict on its hold. now: the server's clock (ms), in every answer's
 * server_ms. */
static void parse_renew(const redisReply *r, leash__answer *out, size_t n, const leash__logger *lg,
                        const char *what) {
    int64_t now = 0;
    size_t i;

    /* A server's time that is not a positive integer is no clock. */
    if (r->type != REDIS_REPLY_ARRAY || (r->elements != n && r->elements != n + 1) ||
        (r->elements == n + 1 &&
         (r->element[n]->type != REDIS_REPLY_INTEGER || r->element[n]->integer <= 0))) {
        bad_reply(r, out, n, lg, "renew", what);
        return;
    }
    if (r->elements == n + 1)
        now = r->element[n]->integer;
    for (i = 0; i < n; i++) {
        const redisReply *e = r->element[i];
        memset(&out[i], 0, sizeof(out[i]));
        out[i].server_ms = now;
        if (e->type == REDIS_REPLY_ARRAY && e->elements == 2 &&
            e->element[0]->type == REDIS_REPLY_INTEGER && e->element[0]->integer == 2 &&
            e->element[1]->type == REDIS_REPLY_INTEGER && e->element[1]->integer > 0) {
            out[i].kind = LEASH__ANS_QUEUED;
            out[i].fence = (uint64_t)e->element[1]->integer;
        } else if (e->type == REDIS_REPLY_INTEGER && e->integer == -3) {
            /* Too late to count: it did nothing, as one never written. */
            out[i].status = LEASH_ECONN;
        } else if (e->type == REDIS_REPLY_INTEGER && e->integer == -5) {
            out[i].kind = LEASH__ANS_NOT_OURS;
            out[i].n = 1; /* for now: an older hold stands there */
        } else if (e->type == REDIS_REPLY_INTEGER && e->integer >= 0) {
            out[i].kind = e->integer == 0   ? LEASH__ANS_NOT_OURS
                          : e->integer == 1 ? LEASH__ANS_RENEWED
                          : e->integer == 2 ? LEASH__ANS_QUEUED
                                            : LEASH__ANS_HANDED;
            /* A place's 2 without a mark: none (0). */
            out[i].fence = e->integer == 2 ? 0 : (uint64_t)e->integer;
        } else {
            leash__log(lg, LEASH_LOG_WARN,
                       "renew: answer %zu is neither 0 nor 1 (nor a family place's 2 or fence)", i);
            out[i].status = LEASH_EPROTO;
        }
    }
}

/* 1 removed, 0 nobody held it; or, with a fence floor (Redlock, leash's
 * layout), {1 or 0, the floor after it}: fence is that floor, n = 1 says
 * the server reported it. A WRONGTYPE error for a key that is not a lock. */
static void parse_force(const redisReply *r, leash__answer *a, size_t n, const leash__logger *lg,
                        const char *what) {
    const redisReply *e = r;

    (void)n;
    memset(a, 0, sizeof(*a));
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_INTEGER && r->element[1]->integer >= 0) {
        e = r->element[0];
        a->fence = (uint64_t)r->element[1]->integer;
        a->n = 1;
    }
    if (e->type == REDIS_REPLY_INTEGER && (e->integer == 0 || e->integer == 1)) {
        a->kind = e->integer == 1 ? LEASH__ANS_REMOVED : LEASH__ANS_NOBODY;
        return;
    }
    bad_reply(r, a, 1, lg, "force release", what);
}

const leash__opdef leash__op_acquire = {"acquire", LEASH__OP_GRANT, parse_acquire};
const leash__opdef leash__op_release = {"release", LEASH__OP_RELEASE, parse_release};
const leash__opdef leash__op_renew = {"renew", LEASH__OP_RENEW, parse_renew};
const leash__opdef leash__op_force = {"force release", LEASH__OP_FORCE, parse_force};

/* 1; anything else is a protocol error. */
static void parse_raise(const redisReply *r, leash__answer *a, size_t n, const leash__logger *lg,
                        const char *what) {
    (void)n;
    memset(a, 0, sizeof(*a));
    if (r->type == REDIS_REPLY_INTEGER && r->integer == 1) {
        a->kind = LEASH__ANS_RAISED;
        return;
    }
    bad_reply(r, a, 1, lg, "fence raise", what);
}

const leash__opdef leash__op_raise = {"fence raise", LEASH__OP_RAISE, parse_raise};

/* ---- reading a lock back ---- */

void leash__state_clear(leash__state *s) {
    free(s->holders);
    free(s->waiters);
    memset(s, 0, sizeof(*s));
}

leash__state_entry *leash__state_add(leash__state_entry **v, size_t *n, const char *token,
                                     size_t len) {
    leash__state_entry *grown = realloc(*v, (*n + 1) * sizeof(**v)), *h;

    if (grown == NULL)
        return NULL;
    *v = grown;
    h = &grown[(*n)++];
    memset(h, 0, sizeof(*h));
    if (len >= sizeof(h->token))
        len = sizeof(h->token) - 1;
    memcpy(h->token, token, len);
    h->ttl_ms = -1;
    return h;
}

int leash__all_digits(const char *p, size_t n) {
    size_t i;

    for (i = 0; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return 0;
    return n > 0;
}

const redisReply *leash__hash_field(const redisReply *all, const char *name) {
    size_t i, len = strlen(name);

    if (all == NULL || all->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (i = 0; i + 1 < all->elements; i += 2) {
        const redisReply *f = all->element[i];
        if (f->type == REDIS_REPLY_STRING && f->len == len && memcmp(f->str, name, len) == 0)
            return all->element[i + 1];
    }
    return NULL;
}
