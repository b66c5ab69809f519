/* SPDX-License-Identifier: MIT */
/* Structs that grow (leash.h): a program built against another header than
 * the library's. An older header's struct is shorter than the library's, a
 * newer one's longer; struct_size (or the size argument) says which. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <leash/adapters/libev.h>

#include "check.h"
#include "fixture.h"

/* The options as a newer header might lay them out: a field appended. */
typedef struct {
    leash_options o;
    int64_t future_option;
} newer_options;

/* The hooks as a newer header might lay them out: a hook appended. */
typedef struct {
    leash_loop l;
    void (*future_hook)(void *data);
} newer_loop;

static int new_client(const leash_options *o) {
    leash_client *c = NULL;
    int rc = leash_client_new(&c, o);

    if (rc == LEASH_OK)
        leash_client_free(c);
    else
        CHECK(c == NULL);
    return rc;
}

TEST(init_writes_nothing_past_the_programs_struct) {
    unsigned char buf[sizeof(leash_options) + 16];

    memset(buf, 0xAB, sizeof buf);
    leash_options_init_sized((leash_options *)buf, sizeof(leash_options));
    for (size_t i = sizeof(leash_options); i < sizeof buf; i++)
        CHECK_EQ_INT(buf[i], 0xAB);
    CHECK_EQ_INT(((leash_options *)buf)->struct_size, sizeof(leash_options));
    CHECK_EQ_INT(((leash_options *)buf)->port, 6379);
}

TEST(the_plain_init_function_fills_what_the_macro_fills) {
    leash_options by_macro, by_function;
    void (*init)(leash_options *) = leash_options_init;

    memset(&by_macro, 0x5A, sizeof by_macro);
    memset(&by_function, 0xA5, sizeof by_function);
    leash_options_init(&by_macro);
    init(&by_function);
    /* This version's layout, as bindings (bindgen, cgo, cffi) lay it out. */
    CHECK_EQ_INT(by_function.struct_size, sizeof(leash_options));
    CHECK(memcmp(&by_function, &by_macro, sizeof by_macro) == 0);
    CHECK_EQ_INT(new_client(&by_function), LEASH_OK);
}

/* Issue 32 item 20: the function form filled the 0.2 layout, so tls = 1
 * connected in plaintext without a word. With a CA file that does not
 * exist, a client that reads the TLS options refuses to start. */
TEST(the_plain_init_function_keeps_the_fields_added_since_0_2) {
    leash_options o;

    (leash_options_init)(&o);
    o.log_cb = fx_log_cb;
    o.tls = 1;
    o.tls_ca_file = "/nonexistent/leash-test-ca.pem";
    fx_log_clear();
    CHECK_EQ_INT(new_client(&o), LEASH_ETLS);
    CHECK(fx_log_contains("leash-test-ca.pem"));
    (leash_options_init)(&o);
    o.dialect = -1;
    CHECK_EQ_INT(new_client(&o), LEASH_EINVAL);
}

/* A field added after 0.2 is zero by default, and means "as before". */
TEST(fields_added_after_0_2_default_to_zero_and_are_checked) {
    leash_options o;

    leash_options_init(&o);
    CHECK_EQ_INT(o.dialect, LEASH_DIALECT_LEASH);
    CHECK_EQ_INT(LEASH_DIALECT_LEASH, 0);
    o.dialect = LEASH_DIALECT_REDISSON;
    CHECK_EQ_INT(new_client(&o), LEASH_OK);
    o.dialect = -1;
    o.log_cb = fx_log_cb;
    fx_log_clear();
    CHECK_EQ_INT(new_client(&o), LEASH_EINVAL);
    CHECK(fx_log_contains("dialect -1"));
}

TEST(a_newer_headers_options_left_at_their_defaults_are_taken) {
    newer_options n;

    leash_options_init_sized(&n.o, sizeof n);
    CHECK_EQ_INT(n.o.struct_size, sizeof n);
    CHECK_EQ_INT(n.future_option, 0); /* zeroed by an older library */
    CHECK_EQ_INT(n.o.lease_ms, 30000);
    CHECK_EQ_INT(new_client(&n.o), LEASH_OK);
}

TEST(a_newer_headers_option_set_is_refused_with_a_log_line) {
    newer_options n;

    leash_options_init_sized(&n.o, sizeof n);
    n.o.log_cb = fx_log_cb;
    n.future_option = 7;
    fx_log_clear();
    CHECK_EQ_INT(new_client(&n.o), LEASH_EINVAL);
    CHECK(fx_log_contains("does not know"));
}

/* The next header's field may be an int right after the last one: it lands
 * in what is tail padding here, inside sizeof(leash_options) (none on LP64
 * while the last field is a pointer). A program that
 * sets it must be refused as one that sets a field past the struct is. */
TEST(a_newer_headers_option_in_this_headers_tail_padding_is_refused) {
    union {
        leash_options o;
        unsigned char b[sizeof(leash_options)];
    } n;
    size_t at = offsetof(leash_options, tls_key_password) + sizeof(n.o.tls_key_password);
    int seven = 7;

    if (at + sizeof(seven) > sizeof(n.o))
        return; /* no room for an int there on this ABI */
    leash_options_init_sized(&n.o, sizeof(n.o));
    n.o.log_cb = fx_log_cb;
    memcpy(n.b + at, &seven, sizeof(seven));
    fx_log_clear();
    CHECK_EQ_INT(new_client(&n.o), LEASH_EINVAL);
    CHECK(fx_log_contains("does not know"));
}

TEST(options_not_filled_by_init_are_refused) {
    leash_options o;

    leash_options_init(&o);
    o.struct_size = 0;
    CHECK_EQ_INT(new_client(&o), LEASH_EINVAL);
    /* It ends inside the last field of 0.2, or inside one added after. */
    o.struct_size = offsetof(leash_options, wait_timeout_ms) + 1;
    CHECK_EQ_INT(new_client(&o), LEASH_EINVAL);
    o.struct_size = offsetof(leash_options, dialect) + 1;
    CHECK_EQ_INT(new_client(&o), LEASH_EINVAL);
    /* It ends right after that field: a binding's struct without padding. */
    o.struct_size = offsetof(leash_options, dialect) + sizeof(o.dialect);
    CHECK_EQ_INT(new_client(&o), LEASH_OK);
    /* The TLS fields came together (0.3): inside them, or after them. */
    o.struct_size = offsetof(leash_options, tls_ca_file) + 1;
    CHECK_EQ_INT(new_client(&o), LEASH_EINVAL);
    o.struct_size = offsetof(leash_options, tls_verify) + sizeof(o.tls_verify);
    CHECK_EQ_INT(new_client(&o), LEASH_OK);
    o.struct_size = offsetof(leash_options, dns_servers) + 1;
    CHECK_EQ_INT(new_client(&o), LEASH_EINVAL);
    o.struct_size = offsetof(leash_options, dns_servers) + sizeof(o.dns_servers);
    CHECK_EQ_INT(new_client(&o), LEASH_OK);
    /* The Sentinel fields came together (0.3). */
    o.struct_size = offsetof(leash_options, sentinel_master) + 1;
    CHECK_EQ_INT(new_client(&o), LEASH_EINVAL);
    o.struct_size = offsetof(leash_options, sentinel_username) + sizeof(o.sentinel_username);
    CHECK_EQ_INT(new_client(&o), LEASH_EINVAL);
    o.struct_size = offsetof(leash_options, sentinel_password) + sizeof(o.sentinel_password);
    CHECK_EQ_INT(new_client(&o), LEASH_OK);
    o.struct_size = offsetof(leash_options, tls_key_password) + 1;
    CHECK_EQ_INT(new_client(&o), LEASH_EINVAL);
    o.struct_size = offsetof(leash_options, tls_key_password) + sizeof(o.tls_key_password);
    CHECK_EQ_INT(new_client(&o), LEASH_OK);
}

TEST(the_sentinel_options_are_checked) {
    static const char *const sentinels[] = {"127.0.0.1:26379", "127.0.0.1:26380"};
    static const char *const unix_sentinel[] = {"/tmp/sentinel.sock"};
    char long_name[LEASH_SENTINEL_MASTER_MAX + 2];
    leash_options o;

    leash_options_init(&o);
    CHECK(o.sentinel_master == NULL && o.sentinel_username == NULL && o.sentinel_password == NULL);
    o.log_cb = fx_log_cb;
    o.topology = LEASH_TOPOLOGY_SENTINEL;
    o.nodes = sentinels;
    o.nodes_count = 2;
    fx_log_clear();
    CHECK_EQ_INT(new_client(&o), LEASH_EINVAL);
    CHECK(fx_log_contains("sentinel_master"));
    o.sentinel_master = "mymaster";
    CHECK_EQ_INT(new_client(&o), LEASH_OK);
    memset(long_name, 'm', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    o.sentinel_master = long_name;
    CHECK_EQ_INT(new_client(&o), LEASH_EINVAL);
    o.sentinel_master = "mymaster";
    o.sentinel_username = "watcher";
    fx_log_clear();
    CHECK_EQ_INT(new_client(&o), LEASH_EINVAL);
    CHECK(fx_log_contains("without a sentinel_password"));
    o.sentinel_password = "secret";
    CHECK_EQ_INT(new_client(&o), LEASH_OK);
    o.nodes = unix_sentinel;
    o.nodes_count = 1;
    fx_log_clear();
    CHECK_EQ_INT(new_client(&o), LEASH_EINVAL);
    CHECK(fx_log_contains("not unix"));
    o.nodes = NULL;
    o.nodes_count = 0;
    CHECK_EQ_INT(new_client(&o), LEASH_EINVAL);
    /* A Sentinel option with another topology. */
    o.topology = LEASH_TOPOLOGY_SINGLE;
    fx_log_clear();
    CHECK_EQ_INT(new_client(&o), LEASH_EINVAL);
    CHECK(fx_log_contains("are for topology LEASH_TOPOLOGY_SENTINEL"));
}

TEST(the_reach_options_are_checked) {
    leash_options o;

    leash_options_init(&o);
    CHECK_EQ_INT(o.tls, 0);
    CHECK_EQ_INT(o.tls_verify, 1);
    CHECK(o.dns_servers == NULL);
    o.log_cb = fx_log_cb;
    o.tls = 2;
    fx_log_clear();
    CHECK_EQ_INT(new_client(&o), LEASH_EINVAL);
    CHECK(fx_log_contains("tls must be 0 or 1"));
    o.tls = 1;
    o.tls_cert_file = "/etc/leash/client.pem";
    fx_log_clear();
    CHECK_EQ_INT(new_client(&o), LEASH_EINVAL);
    CHECK(fx_log_contains("go together"));
    o.tls_cert_file = NULL;
    o.dns_servers = "";
    CHECK_EQ_INT(new_client(&o), LEASH_EINVAL);
}

/* The libev adapter's hooks, in a struct the caller sized. */
static void libev_hooks(leash_loop *l, struct ev_loop *loop) {
    leash_libev *a = (leash_libev *)calloc(1, sizeof(*a));

    CHECK(a != NULL);
    a->loop = loop;
    l->data = a;
    l->timer_new = leash_libev_timer_new_;
    l->timer_start = leash_libev_timer_start_;
    l->timer_stop = leash_libev_timer_stop_;
    l->timer_free = leash_libev_timer_free_;
    l->cleanup = leash_libev_cleanup_;
    l->io_new = leash_libev_io_new_;
    l->io_set = leash_libev_io_set_;
    l->io_free = leash_libev_io_free_;
}

static leash_client *unattached_client(void) {
    leash_options o;
    leash_client *c = NULL;

    leash_options_init(&o);
    o.log_cb = fx_log_cb;
    CHECK_EQ_INT(leash_client_new(&c, &o), LEASH_OK);
    return c;
}

TEST(hooks_not_made_by_loop_init_are_refused) {
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    leash_client *c = unattached_client();
    leash_loop hooks;

    memset(&hooks, 0, sizeof hooks);
    libev_hooks(&hooks, loop);
    fx_log_clear();
    CHECK_EQ_INT(leash_client_attach_loop(c, &hooks), LEASH_EINVAL);
    CHECK(fx_log_contains("leash_loop_init"));
    free(hooks.data);
    leash_client_free(c);
    ev_loop_destroy(loop);
}

TEST(a_newer_adapters_hooks_are_taken_unless_it_sets_one_unknown) {
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    leash_client *c = unattached_client();
    newer_loop n;

    memset(&n, 0, sizeof n);
    n.l.struct_size = sizeof n;
    libev_hooks(&n.l, loop);
    n.future_hook = leash_libev_cleanup_;
    fx_log_clear();
    CHECK_EQ_INT(leash_client_attach_loop(c, &n.l), LEASH_EINVAL);
    CHECK(fx_log_contains("does not know"));
    n.future_hook = NULL;
    CHECK_EQ_INT(leash_client_attach_loop(c, &n.l), LEASH_OK);
    CHECK(leash_client_connected(c) == 0);
    leash_client_free(c); /* frees n.l.data through cleanup */
    ev_loop_destroy(loop);
}

TEST(stats_fill_only_the_programs_struct) {
    leash_client *c = unattached_client();
    unsigned char buf[sizeof(leash_stats) + 16];
    leash_stats whole;

    memset(buf, 0xAB, sizeof buf);
    leash_client_stats_sized(c, (leash_stats *)buf, 2 * sizeof(uint64_t));
    for (size_t i = 0; i < 2 * sizeof(uint64_t); i++)
        CHECK_EQ_INT(buf[i], 0);
    for (size_t i = 2 * sizeof(uint64_t); i < sizeof buf; i++)
        CHECK_EQ_INT(buf[i], 0xAB);
    /* The function by name fills this version's whole struct (item 20). */
    memset(&whole, 0xAB, sizeof whole);
    (leash_client_stats)(c, &whole);
    CHECK_EQ_INT(whole.losts, 0);
    CHECK_EQ_INT(whole.waiting_now, 0);
    leash_client_free(c);
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        TEST_CASE(init_writes_nothing_past_the_programs_struct),
        TEST_CASE(the_plain_init_function_fills_what_the_macro_fills),
        TEST_CASE(the_plain_init_function_keeps_the_fields_added_since_0_2),
        TEST_CASE(fields_added_after_0_2_default_to_zero_and_are_checked),
        TEST_CASE(a_newer_headers_options_left_at_their_defaults_are_taken),
        TEST_CASE(a_newer_headers_option_set_is_refused_with_a_log_line),
        TEST_CASE(a_newer_headers_option_in_this_headers_tail_padding_is_refused),
        TEST_CASE(options_not_filled_by_init_are_refused),
        TEST_CASE(the_reach_options_are_checked),
        TEST_CASE(the_sentinel_options_are_checked),
        TEST_CASE(hooks_not_made_by_loop_init_are_refused),
        TEST_CASE(a_newer_adapters_hooks_are_taken_unless_it_sets_one_unknown),
        TEST_CASE(stats_fill_only_the_programs_struct),
        {0},
    };
    return test_main(argc, argv, cases);
}
