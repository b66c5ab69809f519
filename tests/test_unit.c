/* SPDX-License-Identifier: MIT */
/* Pieces of the core that need no server: options, status table, key
 * naming and hash slots, SHA-1, the wire format, tokens. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "base/sha1.h"
#include "base/slot.h"
#include "base/token.h"
#include "check.h"
#include "dialect/dialect.h"
#include "fixture.h"
#include "wire/resp.h"
#include "wire/script.h"

static int new_client_with(void (*tweak)(leash_options *)) {
    leash_options o;
    leash_client *c = NULL;
    int rc;

    leash_options_init(&o);
    o.log_cb = fx_log_cb;
    tweak(&o);
    rc = leash_client_new(&c, &o);
    if (rc == LEASH_OK)
        leash_client_free(c);
    else
        CHECK(c == NULL);
    return rc;
}

static void lease_zero(leash_options *o) {
    o->lease_ms = 0;
}
static void renew_not_below(leash_options *o) {
    o->lease_ms = 1000;
    o->renew_interval_ms = 1000;
}
static void port_zero(leash_options *o) {
    o->port = 0;
}
static void port_big(leash_options *o) {
    o->port = 70000;
}
static void no_endpoint(leash_options *o) {
    o->host = NULL;
    o->unix_path = NULL;
}
static void negative_timeout(leash_options *o) {
    o->command_timeout_ms = -1;
}
static void user_without_password(leash_options *o) {
    o->username = "bob";
}
static void backoff_inverted(leash_options *o) {
    o->reconnect_min_ms = 500;
    o->reconnect_max_ms = 100;
}
static void negative_db(leash_options *o) {
    o->db = -2;
}
static void lease_huge(leash_options *o) {
    o->lease_ms = INT64_MAX;
}
static void max_hold_huge(leash_options *o) {
    o->max_hold_ms = INT64_MAX;
}
static void linger_huge(leash_options *o) {
    o->sub_linger_ms = LEASH_DURATION_MAX_MS + 1;
}
static void command_timeout_huge(leash_options *o) {
    o->command_timeout_ms = INT64_MAX;
}
static void connect_timeout_huge(leash_options *o) {
    o->connect_timeout_ms = INT64_MAX;
}
static void backoff_huge(leash_options *o) {
    o->reconnect_max_ms = INT64_MAX;
}
static void all_at_their_maximum(leash_options *o) {
    o->lease_ms = LEASH_DURATION_MAX_MS;
    o->max_hold_ms = LEASH_DURATION_MAX_MS;
    o->sub_linger_ms = LEASH_DURATION_MAX_MS;
    o->command_timeout_ms = LEASH_DURATION_MAX_MS;
    o->connect_timeout_ms = LEASH_DURATION_MAX_MS;
    o->reconnect_min_ms = LEASH_DURATION_MAX_MS;
    o->reconnect_max_ms = LEASH_DURATION_MAX_MS;
}
static void defaults(leash_options *o) {
    (void)o;
}
static void dialect_unknown(leash_options *o) {
    o->dialect = 9;
}
static void redisson_sharded_on_one_server(leash_options *o) {
    o->dialect = LEASH_DIALECT_REDISSON;
    o->pubsub = LEASH_PUBSUB_SHARDED;
}
static void unix_only(leash_options *o) {
    o->host = NULL;
    o->unix_path = "/tmp/x.sock";
}

TEST(bad_options_are_refused_with_a_log_line) {
    struct {
        void (*tweak)(leash_options *);
        const char *says;
    } cases[] = {
        {lease_zero, "lease_ms must be 10..LEASH_DURATION_MAX_MS"},
        {lease_huge, "lease_ms must be 10..LEASH_DURATION_MAX_MS"},
        {max_hold_huge, "max_hold_ms must be 0..LEASH_DURATION_MAX_MS"},
        {linger_huge, "sub_linger_ms must be 0..LEASH_DURATION_MAX_MS"},
        {command_timeout_huge, "command_timeout_ms must be 1..LEASH_DURATION_MAX_MS"},
        {connect_timeout_huge, "connect_timeout_ms must be 1..LEASH_DURATION_MAX_MS"},
        {backoff_huge, "reconnect_max_ms must be 1..LEASH_DURATION_MAX_MS"},
        {renew_not_below, "renew_interval_ms must be > 0 and below lease_ms"},
        {port_zero, "port 0 is out of range"},
        {port_big, "port 70000 is out of range"},
        {no_endpoint, "neither host nor unix_path"},
        {negative_timeout, "command_timeout_ms must be 1..LEASH_DURATION_MAX_MS"},
        {user_without_password, "username given without a password"},
        {backoff_inverted, "reconnect_max_ms (100) is below"},
        {negative_db, "db must be >= 0"},
        {dialect_unknown, "dialect 9 is neither"},
        {redisson_sharded_on_one_server, "sharded pub/sub in a cluster only"},
    };
    size_t i;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fx_log_clear();
        CHECK_EQ_INT(new_client_with(cases[i].tweak), LEASH_EINVAL);
        CHECK_MSG(fx_log_contains(cases[i].says), "case %zu: no log line saying '%s'", i,
                  cases[i].says);
    }
    CHECK_EQ_INT(new_client_with(defaults), LEASH_OK);
    CHECK_EQ_INT(new_client_with(all_at_their_maximum), LEASH_OK);
    CHECK_EQ_INT(new_client_with(unix_only), LEASH_OK);
}

TEST(null_arguments_are_refused) {
    leash_options o;
    leash_client *c = (leash_client *)&o; /* must stay untouched */
    leash_options_init(&o);
    CHECK_EQ_INT(leash_client_new(NULL, &o), LEASH_EINVAL);
    CHECK_EQ_INT(leash_client_new(&c, NULL), LEASH_EINVAL);
    CHECK(c == (leash_client *)&o);
    CHECK(leash_lock_new(NULL, "x") == NULL);
    CHECK_EQ_INT(leash_acquire(NULL, 0, fx_acquire_cb, NULL), LEASH_EINVAL);
    CHECK_EQ_INT(leash_release(NULL, NULL, NULL), LEASH_EINVAL);
    CHECK_EQ_INT(leash_cancel(NULL), LEASH_EINVAL);
    CHECK_EQ_INT(leash_held(NULL), 0);
    CHECK_EQ_INT(leash_valid_ms(NULL), 0);
    CHECK_EQ_INT((long long)leash_fence(NULL), 0);
    leash_lock_free(NULL);
    leash_client_free(NULL);
    leash_on_lost(NULL, NULL, NULL);
}

TEST(bad_names_and_lock_settings) {
    leash_options o;
    leash_client *c;
    leash_lock *l;
    char longname[LEASH_NAME_MAX + 2];
    fx_result res = {0};

    leash_options_init(&o);
    o.log_cb = fx_log_cb;
    CHECK_EQ_INT(leash_client_new(&c, &o), LEASH_OK);
    fx_log_clear();
    CHECK(leash_lock_new(c, "") == NULL);
    CHECK(fx_log_contains("name is empty"));
    CHECK(leash_lock_new(c, NULL) == NULL);
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    CHECK(leash_lock_new(c, longname) == NULL);
    CHECK(fx_log_contains("over 512"));
    CHECK(leash_lock_new(c, "a{b") == NULL);
    CHECK(fx_log_contains("not a hash tag"));
    longname[LEASH_NAME_MAX] = '\0';
    l = leash_lock_new(c, longname);
    CHECK(l != NULL);
    CHECK_EQ_INT(leash_lock_set_watchdog(l, 0, 0), LEASH_EINVAL);
    CHECK_EQ_INT(leash_lock_set_watchdog(l, 1000, 1000), LEASH_EINVAL);
    CHECK_EQ_INT(leash_lock_set_watchdog(l, 1000, 100), LEASH_OK);
    CHECK_EQ_INT(leash_lock_set_fixed_lease(l, -5), LEASH_EINVAL);
    CHECK_EQ_INT(leash_lock_set_max_hold(l, -1), LEASH_EINVAL);
    CHECK_EQ_INT(leash_acquire(l, -2, fx_acquire_cb, &res), LEASH_EINVAL);
    CHECK_EQ_INT(leash_acquire(l, 0, NULL, &res), LEASH_EINVAL);
    /* Numbers above the documented maximum are refused, never summed into
     * an overflow (UBSan stops the process on one). */
    fx_log_clear();
    CHECK_EQ_INT(leash_acquire(l, INT64_MAX, fx_acquire_cb, &res), LEASH_EINVAL);
    CHECK(fx_log_contains("over LEASH_DURATION_MAX_MS"));
    CHECK_EQ_INT(leash_lock_set_max_hold(l, INT64_MAX), LEASH_EINVAL);
    CHECK_EQ_INT(leash_lock_set_watchdog(l, INT64_MAX, 0), LEASH_EINVAL);
    CHECK_EQ_INT(leash_lock_set_fixed_lease(l, LEASH_DURATION_MAX_MS + 1), LEASH_EINVAL);
    CHECK_EQ_INT(leash_lock_set_max_hold(l, LEASH_DURATION_MAX_MS), LEASH_OK);
    CHECK_EQ_INT(leash_lock_set_watchdog(l, LEASH_DURATION_MAX_MS, 0), LEASH_OK);
    CHECK_EQ_INT(leash_lock_set_fixed_lease(l, LEASH_DURATION_MAX_MS), LEASH_OK);
    leash_lock_free(l);
    l = leash_lock_new(c, "short");
    fx_log_clear();
    CHECK_EQ_INT(leash_release(l, fx_release_cb, &res), LEASH_ESTATE);
    CHECK(fx_log_contains("not held"));
    CHECK_EQ_INT(leash_cancel(l), LEASH_ESTATE);
    CHECK(fx_log_contains("no acquire is pending"));
    CHECK_EQ_INT(res.calls, 0);
    leash_client_free(c);
}

TEST(status_table) {
    CHECK_STR_EQ(leash_strerror(LEASH_OK), "success");
    CHECK_STR_EQ(leash_strerror(LEASH_EBUSY), "lock is held by another owner");
    CHECK_STR_EQ(leash_strerror(-999), "unknown status");
    CHECK_STR_EQ(leash_status_name(LEASH_ETIMEDOUT), "LEASH_ETIMEDOUT");
    CHECK_STR_EQ(leash_status_name(LEASH_ELOOP), "LEASH_ELOOP");
    CHECK_EQ_INT(LEASH_EINVAL, -1);
    CHECK_EQ_INT(LEASH_ESTATE, -10);
    CHECK_EQ_INT(LEASH_WAIT_FOREVER, -1);
    CHECK_STR_EQ(leash_lost_reason_name(LEASH_LOST_UNREACHABLE), "unreachable");
    {
        char v[32];
        snprintf(v, sizeof(v), "%d.%d.%d", LEASH_VERSION_MAJOR, LEASH_VERSION_MINOR,
                 LEASH_VERSION_PATCH);
        CHECK_STR_EQ(leash_version(), v);
    }
}

TEST(keys_share_one_hash_slot) {
    leash__names k;
    leash__logger lg = {fx_log_cb, NULL, LEASH_LOG_DEBUG};
    static const char chan1[] = "leash:orders:42\0{leash:orders:42}released:0";
    static const char chan2[] = "app:user:{42}:lock\0released:7";

    /* Reference values from the Redis Cluster specification. */
    CHECK_EQ_INT(leash__key_slot("123456789", 9), 0x31C3 & 16383);
    CHECK_EQ_INT(leash__key_slot("foo", 3), 12182);
    CHECK_EQ_INT(leash__key_slot("{user1000}.following", 20), leash__key_slot("user1000", 8));

    CHECK_EQ_INT(leash__dialect_leash.names(&k, &lg, "leash:", "orders:42", 0), LEASH_OK);
    CHECK_STR_EQ(k.key, "leash:orders:42");
    CHECK_EQ_INT(k.channel_len, sizeof(chan1) - 1);
    CHECK(memcmp(k.channel, chan1, sizeof(chan1) - 1) == 0);
    CHECK_EQ_INT(leash__key_slot(k.channel, k.channel_len), leash__key_slot(k.key, k.key_len));
    leash__names_clear(&k);

    CHECK_EQ_INT(leash__dialect_leash.names(&k, &lg, "app:", "user:{42}:lock", 7), LEASH_OK);
    CHECK_EQ_INT(k.channel_len, sizeof(chan2) - 1);
    CHECK(memcmp(k.channel, chan2, sizeof(chan2) - 1) == 0);
    CHECK_EQ_INT(leash__key_slot(k.channel, k.channel_len), leash__key_slot("42", 2));
    CHECK_EQ_INT(leash__key_slot(k.key, k.key_len), leash__key_slot("42", 2));
    leash__names_clear(&k);

    CHECK_EQ_INT(leash__dialect_leash.names(&k, &lg, "", "plain", 0), LEASH_OK);
    CHECK_STR_EQ(k.key, "plain");
    leash__names_clear(&k);
    CHECK_EQ_INT(leash__dialect_leash.names(&k, &lg, "", "x{}y", 0), LEASH_EINVAL);
}

/* Pub/sub is shared by every db: the same name in two dbs has two
 * channels. And no two keys share a channel, also when one key is the
 * other's hash tag spelled out ("{leash:x}" and "leash:x"). */
TEST(channels_are_distinct_per_db_and_per_key) {
    leash__names a, b;
    leash__logger lg = {fx_log_cb, NULL, LEASH_LOG_DEBUG};

    CHECK_EQ_INT(leash__dialect_leash.names(&a, &lg, "leash:", "x", 0), LEASH_OK);
    CHECK_EQ_INT(leash__dialect_leash.names(&b, &lg, "leash:", "x", 1), LEASH_OK);
    CHECK(a.channel_len != b.channel_len || memcmp(a.channel, b.channel, a.channel_len) != 0);
    leash__names_clear(&b);
    CHECK_EQ_INT(leash__dialect_leash.names(&b, &lg, "", "{leash:x}", 0), LEASH_OK);
    CHECK(a.channel_len != b.channel_len || memcmp(a.channel, b.channel, a.channel_len) != 0);
    CHECK_EQ_INT(leash__key_slot(b.channel, b.channel_len), leash__key_slot(a.key, a.key_len));
    leash__names_clear(&a);
    leash__names_clear(&b);
}

/* 1 if the n bytes at hay hold the string needle. */
static int holds(const char *hay, size_t n, const char *needle) {
    size_t len = strlen(needle), i;

    for (i = 0; i + len <= n; i++)
        if (memcmp(hay + i, needle, len) == 0)
            return 1;
    return 0;
}

/* Redisson's names: the key as is, its channel as Redisson's prefixName()
 * writes it (no db in it), in the key's slot; the field of a hold; what
 * its channel's messages say. */
TEST(redisson_names_fields_and_messages) {
    const leash__dialect *d = &leash__dialect_redisson;
    leash__logger lg = {fx_log_cb, NULL, LEASH_LOG_DEBUG};
    leash__names k;
    leash__msg m;
    leash__cmd *cmd;

    leash__dialects_init();
    CHECK_EQ_INT(d->names(&k, &lg, "", "orders:42", 3), LEASH_OK);
    CHECK_STR_EQ(k.key, "orders:42");
    CHECK_STR_EQ(k.channel, "redisson_lock__channel:{orders:42}");
    CHECK_EQ_INT(k.channel_len, strlen(k.channel));
    CHECK_EQ_INT(leash__key_slot(k.channel, k.channel_len), leash__key_slot(k.key, k.key_len));
    CHECK_EQ_INT(k.slot, leash__key_slot(k.key, k.key_len));

    cmd = d->acquire_cmd(&k, "0123456789abcdef0123456789abcdef", 30000, 1, 1, 1000, 0);
    CHECK(cmd != NULL);
    CHECK(holds(cmd->buf, cmd->len, "$38\r\n01234567-89ab-cdef-0123-456789abcdef:0\r\n"));
    leash__cmd_free(cmd);
    cmd = d->release_cmd(&k, "0123456789abcdef0123456789abcdef", 0, 0, 0);
    CHECK(cmd != NULL);
    CHECK(holds(cmd->buf, cmd->len, "01234567-89ab-cdef-0123-456789abcdef:0"));
    CHECK(holds(cmd->buf, cmd->len, "$7\r\npublish\r\n"));
    leash__cmd_free(cmd);
    cmd = d->giveback_cmd(&k, "0123456789abcdef0123456789abcdef", 0);
    CHECK(cmd != NULL);
    CHECK(!holds(cmd->buf, cmd->len, "publish"));
    leash__cmd_free(cmd);
    leash__names_clear(&k);

    CHECK_EQ_INT(d->names(&k, &lg, "app:", "user:{42}:lock", 0), LEASH_OK);
    CHECK_STR_EQ(k.channel, "redisson_lock__channel:app:user:{42}:lock");
    CHECK_EQ_INT(leash__key_slot(k.channel, k.channel_len), leash__key_slot("42", 2));
    leash__names_clear(&k);
    fx_log_clear();
    CHECK_EQ_INT(d->names(&k, &lg, "", "x{}y", 0), LEASH_EINVAL);
    CHECK(fx_log_contains("braces"));
    CHECK_EQ_INT(d->names(&k, &lg, "", "", 0), LEASH_EINVAL);

    d->message("0", 1, &m);
    CHECK_EQ_INT(m.kind, LEASH__MSG_RELEASED);
    CHECK_EQ_INT(m.token_len, 0);
    d->message("1", 1, &m); /* a read-write lock's, on another channel */
    CHECK_EQ_INT(m.kind, LEASH__MSG_OTHER);
    d->message("00", 2, &m);
    CHECK_EQ_INT(m.kind, LEASH__MSG_OTHER);
    CHECK(d->family_names == NULL);
}

/* The acquire of a fenced lock (Redlock) carries the fence proposal as its
 * own digits, no leading zeros (the script writes it as it came), and the
 * not-after stamp still ends the command, where the connection writes it. */
TEST(a_fence_proposal_goes_in_with_its_own_digits) {
    static const struct {
        uint64_t fence;
        const char *arg;
    } cases[] = {{1796226731607050u, "$16\r\n1796226731607050\r\n"},
                 {0, "$1\r\n0\r\n"},
                 {7, "$1\r\n7\r\n"},
                 {UINT64_MAX, "$20\r\n18446744073709551615\r\n"}};
    static const char stamp[] = "$19\r\n0000000000000000000\r\n";
    const leash__dialect *d = &leash__dialect_leash;
    leash__logger lg = {fx_log_cb, NULL, LEASH_LOG_DEBUG};
    leash__names k;
    size_t i, tail = strlen(stamp);

    leash__dialects_init();
    CHECK_EQ_INT(d->names(&k, &lg, "leash:", "orders:42", 0), LEASH_OK);
    k.fenced = 1;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        leash__cmd *cmd =
            d->acquire_cmd(&k, "0123456789abcdef0123456789abcdef", 30000, 1, 0, 1000, 0);
        size_t arg = strlen(cases[i].arg), built;
        redisReader *rd = redisReaderCreate();
        void *r = NULL;

        CHECK(cmd != NULL && rd != NULL);
        built = cmd->len;
        CHECK_EQ_INT(d->propose_fence(cmd, cases[i].fence), 0);
        CHECK_EQ_INT(cmd->len, built - (27 - arg));
        CHECK(memcmp(cmd->buf + cmd->len - tail - arg, cases[i].arg, arg) == 0);
        CHECK(memcmp(cmd->buf + cmd->len - tail, stamp, tail) == 0);
        /* Still one well-formed command: its elements, the last the stamp. */
        CHECK_EQ_INT(redisReaderFeed(rd, cmd->buf, cmd->len), REDIS_OK);
        CHECK_EQ_INT(redisReaderGetReply(rd, &r), REDIS_OK);
        CHECK(r != NULL && ((redisReply *)r)->type == REDIS_REPLY_ARRAY &&
              ((redisReply *)r)->elements == 12);
        CHECK_STR_EQ(((redisReply *)r)->element[11]->str, "0000000000000000000");
        freeReplyObject(r);
        redisReaderFree(rd);
        leash__cmd_free(cmd);
    }
    leash__names_clear(&k);
}

TEST(sha1_matches_known_digests) {
    char hex[41];
    leash__sha1_hex("abc", 3, hex);
    CHECK_STR_EQ(hex, "a9993e364706816aba3e25717850c26c9cd0d89d");
    leash__sha1_hex("", 0, hex);
    CHECK_STR_EQ(hex, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    leash__sha1_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, hex);
    CHECK_STR_EQ(hex, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
}

TEST(wire_format_and_eval_fallback) {
    const char *argv[3 + 2];
    size_t lens[3 + 2], len, elen;
    leash__script s;
    char *cmd, *eval, expect[64];
    const char *src = "return 1";

    {
        const char *a[2] = {"GET", "k"};
        size_t l[2] = {3, 1};
        cmd = leash__resp_format(&len, 2, a, l);
        CHECK_STR_EQ(cmd, "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
        free(cmd);
    }
    leash__script_init(&s, src);
    argv[3] = "key";
    lens[3] = 3;
    argv[4] = "arg";
    lens[4] = 3;
    cmd = leash__script_call(&len, &s, 1, 5, argv, lens);
    CHECK(cmd != NULL);
    CHECK(strncmp(cmd, "*5\r\n$7\r\nEVALSHA\r\n$40\r\n", 21) == 0);
    eval = leash__script_as_eval(&elen, cmd, len, &s);
    CHECK(eval != NULL);
    snprintf(expect, sizeof(expect), "*5\r\n$4\r\nEVAL\r\n$%zu\r\n", strlen(src));
    CHECK(strncmp(eval, expect, strlen(expect)) == 0);
    CHECK(strcmp(eval + elen - strlen("$1\r\n1\r\n$3\r\nkey\r\n$3\r\narg\r\n"),
                 "$1\r\n1\r\n$3\r\nkey\r\n$3\r\narg\r\n") == 0);
    free(eval);
    free(cmd);
}

TEST(decimal_writer) {
    char buf[21];
    CHECK_EQ_INT((long long)leash__resp_int(buf, 0), 1);
    CHECK_STR_EQ(buf, "0");
    CHECK_EQ_INT((long long)leash__resp_int(buf, 30000), 5);
    CHECK_STR_EQ(buf, "30000");
    CHECK_EQ_INT((long long)leash__resp_int(buf, -42), 3);
    CHECK_STR_EQ(buf, "-42");
    CHECK_EQ_INT((long long)leash__resp_int(buf, 9223372036854775807LL), 19);
    CHECK_STR_EQ(buf, "9223372036854775807");
    CHECK_EQ_INT((long long)leash__resp_int(buf, -9223372036854775807LL - 1), 20);
    CHECK_STR_EQ(buf, "-9223372036854775808");
}

TEST(tokens_are_random_and_well_formed) {
    char a[LEASH__TOKEN_LEN + 1], b[LEASH__TOKEN_LEN + 1];
    int i, n = 0;
    CHECK_EQ_INT(leash__token_new(a), 0);
    CHECK_EQ_INT((long long)strlen(a), 32);
    CHECK_EQ_INT((long long)strspn(a, "0123456789abcdef"), 32);
    for (i = 0; i < 1000; i++) {
        CHECK_EQ_INT(leash__token_new(b), 0);
        n += strcmp(a, b) == 0;
    }
    CHECK_EQ_INT(n, 0);
}

/* Tokens come from a per-thread block of random bytes: a forked child must
 * not hand out the ones its parent will. */
TEST(tokens_after_a_fork_differ_from_the_parents) {
    char first[LEASH__TOKEN_LEN + 1], mine[LEASH__TOKEN_LEN + 1], child[LEASH__TOKEN_LEN + 1];
    int fds[2], status;
    pid_t pid;

    CHECK_EQ_INT(leash__token_new(first), 0); /* the block is filled now */
    CHECK_EQ_INT(pipe(fds), 0);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        char t[LEASH__TOKEN_LEN + 1];
        ssize_t n = leash__token_new(t) == 0 ? write(fds[1], t, LEASH__TOKEN_LEN) : -1;
        _exit(n == LEASH__TOKEN_LEN ? 0 : 1);
    }
    close(fds[1]);
    CHECK_EQ_INT((long long)read(fds[0], child, LEASH__TOKEN_LEN), LEASH__TOKEN_LEN);
    child[LEASH__TOKEN_LEN] = '\0';
    close(fds[0]);
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_EQ_INT(leash__token_new(mine), 0);
    CHECK_MSG(strcmp(mine, child) != 0, "the child's token %s is the parent's next one", child);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(tokens_after_a_fork_differ_from_the_parents),
        TEST_CASE(bad_options_are_refused_with_a_log_line),
        TEST_CASE(null_arguments_are_refused),
        TEST_CASE(bad_names_and_lock_settings),
        TEST_CASE(status_table),
        TEST_CASE(keys_share_one_hash_slot),
        TEST_CASE(channels_are_distinct_per_db_and_per_key),
        TEST_CASE(redisson_names_fields_and_messages),
        TEST_CASE(a_fence_proposal_goes_in_with_its_own_digits),
        TEST_CASE(sha1_matches_known_digests),
        TEST_CASE(wire_format_and_eval_fallback),
        TEST_CASE(decimal_writer),
        TEST_CASE(tokens_are_random_and_well_formed),
        {0},
    };
    return test_main(argc, argv, cases);
}
