/* SPDX-License-Identifier: MIT */
/* leash_url_parse, _apply and _format (include/leash/url.h): every form a
 * user may write, every refusal with its message, and clients made from
 * parsed URLs against real redis-servers (TCP with an ACL user and a db,
 * requirepass, a unix socket). */
#include <leash/url.h>

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "fixture.h"

typedef struct accepted {
    const char *url;
    const char *host;
    int port;
    const char *unix_path;
    const char *username;
    const char *password;
    int db;
} accepted;

static const accepted good[] = {
    {"redis://localhost", "localhost", 6379, "", "", "", 0},
    {"redis://127.0.0.1:6380", "127.0.0.1", 6380, "", "", "", 0},
    {"redis://127.0.0.1:6380/", "127.0.0.1", 6380, "", "", "", 0},
    {"redis://h:1/2", "h", 1, "", "", "", 2},
    {"redis://h:65535/2147483647", "h", 65535, "", "", "", INT_MAX},
    {"redis://h/0", "h", 6379, "", "", "", 0},
    {"redis://h?db=4", "h", 6379, "", "", "", 4},
    {"redis://h:7/?db=5", "h", 7, "", "", "", 5},
    {"REDIS://Cache.example.com", "Cache.example.com", 6379, "", "", "", 0},
    {"redis://:secret@h", "h", 6379, "", "", "secret", 0},
    {"redis://alice:pw@h:6390/3", "h", 6390, "", "alice", "pw", 3},
    {"redis://al%69ce:p%40ss%3Aw%2Frd@h", "h", 6379, "", "alice", "p@ss:w/rd", 0},
    /* The last '@' ends the credentials: an unescaped one in a password
     * still works. */
    {"redis://:a@b@h", "h", 6379, "", "", "a@b", 0},
    {"redis://:@h", "h", 6379, "", "", "", 0},
    {"redis://[::1]:6380", "::1", 6380, "", "", "", 0},
    {"redis://[::1]", "::1", 6379, "", "", "", 0},
    {"redis://u:p@[fe80::1:2]:9/1", "fe80::1:2", 9, "", "u", "p", 1},
    {"redis://[::ffff:127.0.0.1]:1", "::ffff:127.0.0.1", 1, "", "", "", 0},
    {"unix:///run/redis.sock", "", 0, "/run/redis.sock", "", "", 0},
    {"unix:///run/redis.sock?db=2", "", 0, "/run/redis.sock", "", "", 2},
    {"unix:///tmp/a%20b@c.sock", "", 0, "/tmp/a b@c.sock", "", "", 0},
    {"unix://:pw@/s", "", 0, "/s", "", "pw", 0},
    {"unix://bob:pw@/s?db=9", "", 0, "/s", "bob", "pw", 9},
};

typedef struct refused {
    const char *url;
    const char *says; /* a part of the message */
} refused;

static const refused bad[] = {
    {"", "expected redis://"},
    {"localhost:6379", "expected redis://"},
    {"redis://h?ca=/ca.pem", "ca= is a TLS parameter: the URL must be rediss://"},
    {"unix:///s?sni=h", "sni= is a TLS parameter"},
    {"redis://h?verify=0", "verify= is a TLS parameter"},
    {"rediss://h?cert=/c.pem", "cert= and key= go together"},
    {"rediss://h?key=/k.pem", "cert= and key= go together"},
    {"rediss://h?verify=2", "verify must be 0 or 1"},
    {"rediss://h?verify", "verify must be 0 or 1"},
    {"rediss://h?verify=0&verify=0", "verify is given twice"},
    {"rediss://h?ca=", "ca needs a value"},
    {"rediss://h?ca=/a&ca=/b", "ca is given twice"},
    {"rediss://h?ca=/a%zz", "two hex digits"},
    {"rediss://h?tls=1", "unknown query parameter \"tls\""},
    {"http://h", "unknown scheme"},
    {"://h", "unknown scheme"},
    {"h:6379/x://", "expected redis://"},
    {"redis://u:p/w@h", "%2F"},
    {"redis://u:p?w@h", "%3F"},
    {"redis://", "host is missing"},
    {"redis://:6379", "host is missing"},
    {"redis://:pw@", "host is missing"},
    {"redis:///3", "host is missing"},
    {"redis://h:", "port must be"},
    {"redis://h:0", "port must be"},
    {"redis://h:65536", "port must be"},
    {"redis://h:99999999999999999999", "port must be"},
    {"redis://h:-1", "port must be"},
    {"redis://h:6379x", "port must be"},
    {"redis://h:+6379", "port must be"},
    {"redis://h/-1", "only /db"},
    {"redis://h/2147483648", "only /db"},
    {"redis://h/1x", "only /db"},
    {"redis://h/1/", "only /db"},
    {"redis://h/db", "only /db"},
    {"redis://h?db=2147483648", "db must be"},
    {"redis://h?db=", "db must be"},
    {"redis://h/1?db=1", "given twice"},
    {"redis://h?db=1&db=2", "given twice"},
    {"redis://h?timeout=5", "unknown query parameter \"timeout\""},
    {"redis://h?db", "db must be"},
    {"redis://h?", "empty query parameter"},
    {"redis://h?db=1&", "empty query parameter"},
    {"redis://h#frag", "fragment"},
    {"redis://alice@h", "user:password@"},
    {"redis://alice:@h", "needs a password"},
    {"redis://:p%4@h", "two hex digits"},
    {"redis://:p%zz@h", "two hex digits"},
    {"redis://:p%00q@h", "%00"},
    {"redis://[::1", "closing ']'"},
    {"redis://[::1]x", "only ':port'"},
    {"redis://[]:1", "host is missing"},
    {"redis://[zz::1]", "not an IPv6 address"},
    {"redis://::1", "brackets"},
    {"redis://h:1:2", "brackets"},
    {"redis://a b", "not a host name"},
    {"redis://h%41", "not a host name"},
    {"unix://", "socket path is missing"},
    {"unix:///", "socket path is missing"},
    {"unix:///s?db=1x", "db must be"},
    {"unix:///s?db=1&db=1", "given twice"},
    {"unix:///s?password=x", "unknown query parameter \"password\""},
    {"unix://host/s", "takes no host"},
    {"unix://relative.sock", "takes no host"},
    {"unix:///s%2", "two hex digits"},
    {"redis://h?pubsub=maybe", "pubsub must be"},
    {"redis://h?pubsub", "pubsub must be"},
    {"redis://h?pubsub=off&pubsub=off", "pubsub is given twice"},
};

TEST(accepted_forms) {
    char err[LEASH_URL_ERR_MAX];
    size_t i;

    for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        const accepted *a = &good[i];
        leash_url u;

        memset(&u, 0x5a, sizeof(u));
        CHECK_MSG(leash_url_parse(a->url, &u, err, sizeof(err)) == LEASH_OK, "%s: %s", a->url, err);
        CHECK_STR_EQ(err, "");
        CHECK_STR_EQ(u.host, a->host);
        CHECK_MSG(u.port == a->port, "%s: port %d", a->url, u.port);
        CHECK_STR_EQ(u.unix_path, a->unix_path);
        CHECK_STR_EQ(u.username, a->username);
        CHECK_STR_EQ(u.password, a->password);
        CHECK_MSG(u.db == a->db, "%s: db %d", a->url, u.db);
    }
}

TEST(rediss_is_tls_with_its_files_in_the_query) {
    char err[LEASH_URL_ERR_MAX];
    leash_url u;

    CHECK_EQ_INT(leash_url_parse("redis://h", &u, err, sizeof(err)), LEASH_OK);
    CHECK(u.tls == 0 && u.tls_verify == 1 && u.tls_ca_file[0] == '\0');
    CHECK_EQ_INT(leash_url_parse("rediss://:pw@cache.example.com:6380", &u, err, sizeof(err)),
                 LEASH_OK);
    CHECK(u.tls == 1 && u.tls_verify == 1 && u.port == 6380);
    CHECK_STR_EQ(u.host, "cache.example.com");
    CHECK_STR_EQ(u.tls_ca_file, "");
    CHECK_STR_EQ(u.tls_server_name, "");
    CHECK_MSG(leash_url_parse("REDISS://h/2?ca=/etc/ca%20files/ca.pem&ca_dir=/etc/certs&"
                              "cert=/c%26d.pem&key=/k.pem&sni=redis.example&verify=0",
                              &u, err, sizeof(err)) == LEASH_OK,
              "%s", err);
    CHECK(u.tls == 1 && u.tls_verify == 0 && u.db == 2);
    CHECK_STR_EQ(u.tls_ca_file, "/etc/ca files/ca.pem");
    CHECK_STR_EQ(u.tls_ca_dir, "/etc/certs");
    CHECK_STR_EQ(u.tls_cert_file, "/c&d.pem");
    CHECK_STR_EQ(u.tls_key_file, "/k.pem");
    CHECK_STR_EQ(u.tls_server_name, "redis.example");
    CHECK_EQ_INT(leash_url_parse("rediss://h?db=3&verify=1", &u, err, sizeof(err)), LEASH_OK);
    CHECK(u.tls == 1 && u.tls_verify == 1 && u.db == 3);
}

TEST(refused_forms_leave_out_alone) {
    char err[LEASH_URL_ERR_MAX];
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        leash_url u, before;

        memset(&u, 0x5a, sizeof(u));
        before = u;
        CHECK_MSG(leash_url_parse(bad[i].url, &u, err, sizeof(err)) == LEASH_EINVAL,
                  "\"%s\" was accepted", bad[i].url);
        CHECK_MSG(strstr(err, bad[i].says) != NULL, "\"%s\": \"%s\" lacks \"%s\"", bad[i].url, err,
                  bad[i].says);
        CHECK_MSG(strncmp(err, "redis URL: ", 11) == 0, "%s", err);
        CHECK(memcmp(&u, &before, sizeof(u)) == 0);
    }
}

TEST(messages_never_show_the_credentials) {
    static const char *const urls[] = {
        "redis://sekrituser:topsecret@h:99999",
        "redis://:topsecret@h/x",
        "redis://sekrituser:topsecret@h?password=topsecret",
        "redis://sekrituser:topsecret@[zz]",
        "redis://sekrituser:topsecret%zz@h",
        "unix://sekrituser:topsecret@host/s",
        "rediss://sekrituser:topsecret@h?ca=",
        "redis://sekrituser:top/secret@h:1",
        "redis://sekrituser:top?secret@h:1",
        "redis://sekrituser:top#secret@h:1",
        "redis://sekrituser:top:secret@h:1/x",
        "sekrituser:topsecret@h://",
        "sekrituser:topsecret@h",
    };
    char err[LEASH_URL_ERR_MAX];
    leash_url u;
    size_t i;

    for (i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
        CHECK_EQ_INT(leash_url_parse(urls[i], &u, err, sizeof(err)), LEASH_EINVAL);
        CHECK_MSG(strstr(err, "secret") == NULL && strstr(err, "sekrituser") == NULL, "%s", err);
    }
}

TEST(field_limits) {
    char url[2048], err[LEASH_URL_ERR_MAX];
    leash_url u;

    /* Exactly at each limit, then one byte over. */
    snprintf(url, sizeof(url), "redis://%0*d", LEASH_URL_HOST_MAX, 0);
    CHECK_MSG(leash_url_parse(url, &u, err, sizeof(err)) == LEASH_OK, "%s", err);
    CHECK_EQ_INT((int)strlen(u.host), LEASH_URL_HOST_MAX);
    snprintf(url, sizeof(url), "redis://%0*d", LEASH_URL_HOST_MAX + 1, 0);
    CHECK_EQ_INT(leash_url_parse(url, &u, err, sizeof(err)), LEASH_EINVAL);
    CHECK(strstr(err, "host is longer") != NULL);

    snprintf(url, sizeof(url), "unix:///%0*d", LEASH_URL_PATH_MAX - 1, 0);
    CHECK_MSG(leash_url_parse(url, &u, err, sizeof(err)) == LEASH_OK, "%s", err);
    CHECK_EQ_INT((int)strlen(u.unix_path), LEASH_URL_PATH_MAX);
    snprintf(url, sizeof(url), "unix:///%0*d", LEASH_URL_PATH_MAX, 0);
    CHECK_EQ_INT(leash_url_parse(url, &u, err, sizeof(err)), LEASH_EINVAL);
    CHECK(strstr(err, "socket path is longer") != NULL);

    snprintf(url, sizeof(url), "redis://%0*d:p@h", LEASH_URL_USER_MAX, 0);
    CHECK_MSG(leash_url_parse(url, &u, err, sizeof(err)) == LEASH_OK, "%s", err);
    snprintf(url, sizeof(url), "redis://%0*d:p@h", LEASH_URL_USER_MAX + 1, 0);
    CHECK_EQ_INT(leash_url_parse(url, &u, err, sizeof(err)), LEASH_EINVAL);
    CHECK(strstr(err, "user is longer") != NULL);

    snprintf(url, sizeof(url), "redis://:%0*d@h", LEASH_URL_PASSWORD_MAX, 0);
    CHECK_MSG(leash_url_parse(url, &u, err, sizeof(err)) == LEASH_OK, "%s", err);
    /* Escapes count once decoded. */
    snprintf(url, sizeof(url), "redis://:%%41%0*d@h", LEASH_URL_PASSWORD_MAX - 1, 0);
    CHECK_MSG(leash_url_parse(url, &u, err, sizeof(err)) == LEASH_OK, "%s", err);
    snprintf(url, sizeof(url), "redis://:%0*d@h", LEASH_URL_PASSWORD_MAX + 1, 0);
    CHECK_EQ_INT(leash_url_parse(url, &u, err, sizeof(err)), LEASH_EINVAL);
    CHECK(strstr(err, "password is longer") != NULL);
}

TEST(null_arguments_and_small_err_buffers) {
    char err[8];
    leash_url u;

    CHECK_EQ_INT(leash_url_parse(NULL, &u, err, sizeof(err)), LEASH_EINVAL);
    CHECK_EQ_INT(leash_url_parse("redis://h", NULL, err, sizeof(err)), LEASH_EINVAL);
    CHECK_EQ_INT(leash_url_parse("redis://h:0", &u, NULL, 0), LEASH_EINVAL);
    CHECK_EQ_INT(leash_url_parse("redis://h", &u, NULL, 0), LEASH_OK);
    /* Cut, and terminated. */
    CHECK_EQ_INT(leash_url_parse("redis://h:0", &u, err, sizeof(err)), LEASH_EINVAL);
    CHECK_STR_EQ(err, "redis U");
    err[0] = 'x';
    CHECK_EQ_INT(leash_url_parse("redis://h:0", &u, err, 1), LEASH_EINVAL);
    CHECK_EQ_INT(err[0], '\0');
    leash_url_apply(NULL, NULL);
    CHECK_EQ_INT(leash_url_format(NULL, err, sizeof(err)), -1);
    CHECK_EQ_INT(leash_url_format(&u, NULL, 1), -1);
}

TEST(apply_points_the_options_at_the_url) {
    leash_options o;
    leash_url u;

    leash_options_init(&o);
    CHECK_EQ_INT(leash_url_parse("redis://alice:pw@10.1.2.3:6390/7", &u, NULL, 0), LEASH_OK);
    o.unix_path = "/left/over";
    leash_url_apply(&u, &o);
    CHECK(o.host == u.host && o.port == 6390 && o.unix_path == NULL);
    CHECK(o.username == u.username && o.password == u.password && o.db == 7);

    CHECK_EQ_INT(leash_url_parse("unix:///s?db=2", &u, NULL, 0), LEASH_OK);
    leash_url_apply(&u, &o);
    CHECK(o.unix_path == u.unix_path && o.db == 2);
    CHECK(o.username == NULL && o.password == NULL);
    CHECK(o.tls == 0);

    /* rediss://: what the URL gives; what it does not is left alone. */
    o.tls_cert_file = "/from/the/command/line.pem";
    CHECK_EQ_INT(leash_url_parse("rediss://h:6380?ca=/ca.pem&sni=n.example&verify=0", &u, NULL, 0),
                 LEASH_OK);
    leash_url_apply(&u, &o);
    CHECK(o.tls == 1 && o.tls_verify == 0 && o.tls_ca_file == u.tls_ca_file);
    CHECK(o.tls_server_name == u.tls_server_name && o.tls_ca_dir == NULL);
    CHECK_STR_EQ(o.tls_cert_file, "/from/the/command/line.pem");
    CHECK_EQ_INT(leash_url_parse("redis://h", &u, NULL, 0), LEASH_OK);
    leash_url_apply(&u, &o);
    CHECK(o.tls == 0);
}

/* ?pubsub= sets leash_options.pubsub; without it the option stays. */
TEST(pubsub_in_the_query) {
    leash_url u;
    leash_options o;

    leash_options_init(&o);
    o.pubsub = LEASH_PUBSUB_CLASSIC;
    CHECK_EQ_INT(leash_url_parse("redis://h/1", &u, NULL, 0), LEASH_OK);
    CHECK_EQ_INT(u.pubsub, -1);
    leash_url_apply(&u, &o);
    CHECK_EQ_INT(o.pubsub, LEASH_PUBSUB_CLASSIC);
    CHECK_EQ_INT(leash_url_parse("redis://h/1?pubsub=off", &u, NULL, 0), LEASH_OK);
    CHECK_EQ_INT(u.pubsub, LEASH_PUBSUB_OFF);
    leash_url_apply(&u, &o);
    CHECK_EQ_INT(o.pubsub, LEASH_PUBSUB_OFF);
    CHECK_EQ_INT(leash_url_parse("unix:///s?pubsub=auto", &u, NULL, 0), LEASH_OK);
    leash_url_apply(&u, &o);
    CHECK_EQ_INT(o.pubsub, LEASH_PUBSUB_AUTO);
    CHECK_EQ_INT(leash_url_parse("rediss://h?pubsub=sharded", &u, NULL, 0), LEASH_OK);
    CHECK_EQ_INT(u.pubsub, LEASH_PUBSUB_SHARDED);
}

TEST(format_masks_the_password_and_parses_back) {
    static const char *const urls[] = {
        "redis://h",
        "redis://al%20ice:p%40ss@h:6390/3",
        "redis://:pw@[::1]:6380",
        "unix:///run/a%3Fb.sock?db=2",
        "unix://bob:pw@/s",
        "rediss://h:6380?sni=n.example&ca=/etc/a%26b.pem&verify=0",
        "rediss://:pw@h?cert=/c.pem&key=/k.pem&ca_dir=/d",
        "redis://h?pubsub=off",
        "unix:///s?pubsub=sharded&db=3",
        "rediss://h?verify=0&pubsub=classic",
        "unix:///s",
    };
    static const char *const shown[] = {
        "redis://h:6379/0",
        "redis://al%20ice:***@h:6390/3",
        "redis://:***@[::1]:6380/0",
        "unix:///run/a%3Fb.sock?db=2",
        "unix://bob:***@/s",
        "rediss://h:6380/0?ca=/etc/a%26b.pem&sni=n.example&verify=0",
        "rediss://:***@h:6379/0?ca_dir=/d&cert=/c.pem&key=/k.pem",
        "redis://h:6379/0?pubsub=off",
        "unix:///s?db=3&pubsub=sharded",
        "rediss://h:6379/0?verify=0&pubsub=classic",
        "unix:///s",
    };
    char buf[LEASH_URL_ERR_MAX], small[10];
    leash_url u, back;
    size_t i;

    for (i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
        CHECK_EQ_INT(leash_url_parse(urls[i], &u, NULL, 0), LEASH_OK);
        CHECK_EQ_INT(leash_url_format(&u, buf, sizeof(buf)), (int)strlen(shown[i]));
        CHECK_STR_EQ(buf, shown[i]);
        CHECK_EQ_INT(leash_url_parse(buf, &back, NULL, 0), LEASH_OK);
        CHECK_STR_EQ(back.host, u.host);
        CHECK_STR_EQ(back.unix_path, u.unix_path);
        CHECK_STR_EQ(back.username, u.username);
        CHECK(back.port == u.port && back.db == u.db);
        CHECK(back.tls == u.tls && back.tls_verify == u.tls_verify);
        CHECK_STR_EQ(back.tls_ca_file, u.tls_ca_file);
        CHECK_STR_EQ(back.tls_ca_dir, u.tls_ca_dir);
        CHECK_STR_EQ(back.tls_cert_file, u.tls_cert_file);
        CHECK_STR_EQ(back.tls_key_file, u.tls_key_file);
        CHECK_STR_EQ(back.tls_server_name, u.tls_server_name);
    }
    /* Like snprintf: the whole length, what fits, terminated. */
    CHECK_EQ_INT(leash_url_format(&u, small, sizeof(small)), (int)strlen("unix:///s"));
    CHECK_EQ_INT(leash_url_parse("redis://localhost:6379/12", &u, NULL, 0), LEASH_OK);
    CHECK_EQ_INT(leash_url_format(&u, small, sizeof(small)), 25);
    CHECK_STR_EQ(small, "redis://l");
    CHECK_EQ_INT(leash_url_format(&u, NULL, 0), 25);
}

/* On the test's own connection to r, which keeps it. */
static void select_db(test_redis *r, int db) {
    redisReply *reply = test_redis_cmd(r, "SELECT %d", db);

    CHECK(reply != NULL && reply->type == REDIS_REPLY_STATUS);
    freeReplyObject(reply);
}

/* A client from url takes a lock on r; the lock's keys land in db `db`
 * only, and the log never shows `secret`. */
static void lock_through(test_redis *r, const char *url, int db, const char *secret) {
    char err[LEASH_URL_ERR_MAX];
    fx_loop *loop = fx_loop_new();
    leash_options o;
    leash_client *c;
    leash_lock *l;
    leash_url u;

    CHECK_MSG(leash_url_parse(url, &u, err, sizeof(err)) == LEASH_OK, "%s: %s", url, err);
    leash_options_init(&o);
    o.log_cb = fx_log_cb;
    o.log_level = LEASH_LOG_DEBUG;
    o.lease_ms = 5000;
    leash_url_apply(&u, &o);
    c = fx_client_opts(loop, &o);
    /* The client copied what it needs: the URL may go. */
    memset(&u, 0, sizeof(u));
    fx_wait_connected(loop, c, 5000);
    l = leash_lock_new(c, "url-lock");
    CHECK(l != NULL);
    CHECK_EQ_INT(fx_acquire_sync(loop, l, 0, 5000), LEASH_OK);
    select_db(r, db);
    CHECK_MSG(test_redis_int(r, "DBSIZE") > 0, "no key in db %d", db);
    if (db != 0) {
        select_db(r, 0);
        CHECK_EQ_INT(test_redis_int(r, "DBSIZE"), 0);
    }
    CHECK_EQ_INT(fx_release_sync(loop, l, 5000), LEASH_OK);
    leash_client_free(c);
    fx_loop_free(loop);
    if (secret != NULL)
        CHECK(!fx_log_contains(secret));
}

TEST(a_client_from_a_url_with_an_acl_user_and_a_db) {
    test_redis r;
    test_redis_config cfg = {0};
    char url[256];

    /* '@', ':' and '/' in the password, written as %40, %3A and %2F. */
    cfg.acl_user = "alice on >p@ss:w/rd ~* &* +@all";
    CHECK_EQ_INT(test_redis_start(&r, &cfg), 0);
    snprintf(url, sizeof(url), "redis://alice:p%%40ss%%3Aw%%2Frd@127.0.0.1:%d/3", r.port);
    lock_through(&r, url, 3, "p@ss:w/rd");
    test_redis_stop(&r);
}

TEST(a_client_from_a_url_with_a_password_only) {
    test_redis r;
    test_redis_config cfg = {0};
    char url[256];

    cfg.requirepass = "only-pw";
    CHECK_EQ_INT(test_redis_start(&r, &cfg), 0);
    snprintf(url, sizeof(url), "redis://:only-pw@localhost:%d", r.port);
    lock_through(&r, url, 0, "only-pw");
    test_redis_stop(&r);
}

TEST(a_client_from_a_unix_url) {
    test_redis r;
    test_redis_config cfg = {0};
    char url[256];

    cfg.unix_socket = 1;
    CHECK_EQ_INT(test_redis_start(&r, &cfg), 0);
    snprintf(url, sizeof(url), "unix://%s?db=2", r.unix_path);
    lock_through(&r, url, 2, NULL);
    test_redis_stop(&r);
}

TEST(a_client_from_a_rediss_url) {
    test_redis r;
    test_redis_config cfg = {0};
    char url[1200];

    cfg.tls_dir = test_tls_certs();
    CHECK(cfg.tls_dir != NULL);
    cfg.tls_auth_clients = 1;
    cfg.requirepass = "tls-pw";
    CHECK_EQ_INT(test_redis_start(&r, &cfg), 0);
    snprintf(url, sizeof(url), "rediss://:tls-pw@127.0.0.1:%d/4?ca=%s&cert=%s&key=%s&sni=localhost",
             r.tls_port, test_tls_file(0, "ca.pem"), test_tls_file(1, "client.pem"),
             test_tls_file(2, "client.key"));
    lock_through(&r, url, 4, "tls-pw");
    test_redis_stop(&r);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(accepted_forms),
        TEST_CASE(rediss_is_tls_with_its_files_in_the_query),
        TEST_CASE(refused_forms_leave_out_alone),
        TEST_CASE(messages_never_show_the_credentials),
        TEST_CASE(field_limits),
        TEST_CASE(null_arguments_and_small_err_buffers),
        TEST_CASE(apply_points_the_options_at_the_url),
        TEST_CASE(pubsub_in_the_query),
        TEST_CASE(format_masks_the_password_and_parses_back),
        TEST_CASE(a_client_from_a_url_with_an_acl_user_and_a_db),
        TEST_CASE(a_client_from_a_url_with_a_password_only),
        TEST_CASE(a_client_from_a_unix_url),
        TEST_CASE(a_client_from_a_rediss_url),
        {0},
    };
    return test_main(argc, argv, cases);
}
