/* SPDX-License-Identifier: MIT */
/* redis+sentinel:// URLs (leash/url.h), and a client made from one. */
#include <string.h>

#include <leash/url.h>

#include "check.h"
#include "fixture.h"

static int parse(const char *url, leash_sentinel_url *u, char *err) {
    return leash_sentinel_url_parse(url, u, err, LEASH_URL_ERR_MAX);
}

TEST(the_sentinels_the_master_and_the_db_are_read) {
    leash_sentinel_url u;
    char err[LEASH_URL_ERR_MAX];

    CHECK(leash_url_is_sentinel("REDIS+SENTINEL://h"));
    CHECK(!leash_url_is_sentinel("redis://h"));
    CHECK_EQ_INT(parse("redis+sentinel://a:1,b,[::1]:3/my%20master/2", &u, err), LEASH_OK);
    CHECK_EQ_INT(u.nsentinels, 3);
    CHECK_STR_EQ(u.sentinels[0], "a:1");
    CHECK_STR_EQ(u.sentinels[1], "b:26379");
    CHECK_STR_EQ(u.sentinels[2], "[::1]:3");
    CHECK_STR_EQ(u.master, "my master");
    CHECK_EQ_INT(u.data.db, 2);
    CHECK_STR_EQ(u.data.password, "");
    CHECK_EQ_INT(
        parse("redis+sentinel://al:p%40ss@h:5/m?db=3&sentinel_user=w&sentinel_password=s%26", &u,
              err),
        LEASH_OK);
    CHECK_STR_EQ(u.data.username, "al");
    CHECK_STR_EQ(u.data.password, "p@ss");
    CHECK_EQ_INT(u.data.db, 3);
    CHECK_STR_EQ(u.sentinel_username, "w");
    CHECK_STR_EQ(u.sentinel_password, "s&");
    CHECK_EQ_INT(u.data.pubsub, -1);
    CHECK_EQ_INT(parse("redis+sentinel://h/m?pubsub=off&db=1", &u, err), LEASH_OK);
    CHECK_EQ_INT(u.data.pubsub, LEASH_PUBSUB_OFF);
    CHECK_EQ_INT(u.data.db, 1);
}

TEST(bad_sentinel_urls_are_refused_with_a_reason) {
    leash_sentinel_url u;
    char err[LEASH_URL_ERR_MAX];

    CHECK_EQ_INT(parse("redis://h/m", &u, err), LEASH_EINVAL);
    CHECK_EQ_INT(parse("redis+sentinel://h:1", &u, err), LEASH_EINVAL);
    CHECK(strstr(err, "master") != NULL);
    CHECK_EQ_INT(parse("redis+sentinel://h:1/", &u, err), LEASH_EINVAL);
    CHECK_EQ_INT(parse("redis+sentinel://h:1,,h:2/m", &u, err), LEASH_EINVAL);
    CHECK(strstr(err, "empty") != NULL);
    CHECK_EQ_INT(parse("redis+sentinel://h:70000/m", &u, err), LEASH_EINVAL);
    CHECK_EQ_INT(parse("redis+sentinel://h/m/x", &u, err), LEASH_EINVAL);
    CHECK_EQ_INT(parse("redis+sentinel://h/m/1?db=2", &u, err), LEASH_EINVAL);
    CHECK_EQ_INT(parse("redis+sentinel://h/m?sentinel_user=w", &u, err), LEASH_EINVAL);
    CHECK_EQ_INT(parse("redis+sentinel://h/m?tls=1", &u, err), LEASH_EINVAL);
    CHECK(strstr(err, "unknown query parameter") != NULL);
    CHECK_EQ_INT(parse("redis+sentinel://h/m?pubsub=poll", &u, err), LEASH_EINVAL);
    CHECK(strstr(err, "pubsub must be") != NULL);
    CHECK_EQ_INT(parse("redis+sentinel://h/m?pubsub=off&pubsub=off", &u, err), LEASH_EINVAL);
    CHECK_EQ_INT(parse("redis+sentinel://u:secret@h/m%zz", &u, err), LEASH_EINVAL);
    CHECK(strstr(err, "secret") == NULL);
}

TEST(a_client_is_made_from_a_sentinel_url) {
    leash_sentinel_url u;
    leash_options o;
    leash_client *c = NULL;
    char err[LEASH_URL_ERR_MAX];

    CHECK_EQ_INT(
        parse("redis+sentinel://127.0.0.1:1,127.0.0.1:2/mymaster?sentinel_password=x", &u, err),
        LEASH_OK);
    leash_options_init(&o);
    leash_sentinel_url_apply(&u, &o);
    CHECK_EQ_INT(o.topology, LEASH_TOPOLOGY_SENTINEL);
    CHECK_EQ_INT(o.nodes_count, 2);
    CHECK_STR_EQ(o.nodes[1], "127.0.0.1:2");
    CHECK_STR_EQ(o.sentinel_master, "mymaster");
    CHECK_STR_EQ(o.sentinel_password, "x");
    CHECK(o.password == NULL);
    CHECK_EQ_INT(o.pubsub, LEASH_PUBSUB_AUTO);
    CHECK_EQ_INT(leash_client_new(&c, &o), LEASH_OK);
    leash_client_free(c);
    CHECK_EQ_INT(parse("redis+sentinel://127.0.0.1:1/mymaster?pubsub=off", &u, err), LEASH_OK);
    leash_sentinel_url_apply(&u, &o);
    CHECK_EQ_INT(o.pubsub, LEASH_PUBSUB_OFF);
    CHECK_EQ_INT(leash_client_new(&c, &o), LEASH_OK);
    leash_client_free(c);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(the_sentinels_the_master_and_the_db_are_read),
        TEST_CASE(bad_sentinel_urls_are_refused_with_a_reason),
        TEST_CASE(a_client_is_made_from_a_sentinel_url),
        {0},
    };
    return fx_main(argc, argv, cases);
}
