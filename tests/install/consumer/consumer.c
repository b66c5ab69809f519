/* SPDX-License-Identifier: MIT */
/*
 * A program that lives outside the leash tree. tests/install/run.sh builds it
 * against an installed leash only: with find_package(leash) and with
 * pkg-config. It needs no Redis server: the client is attached to a loop and
 * freed again before the loop ever runs.
 */
#include <stdio.h>
#include <string.h>

#include <ev.h>
#include <leash/adapters/libev.h>
#include <leash/leash.h>
#include <leash/url.h>

#define CONSUMER_STR_(x) #x
#define CONSUMER_STR(x) CONSUMER_STR_(x)
/* The version the installed header announces, as "MAJOR.MINOR.PATCH". */
#define CONSUMER_HEADER_VERSION       \
    CONSUMER_STR(LEASH_VERSION_MAJOR) \
    "." CONSUMER_STR(LEASH_VERSION_MINOR) "." CONSUMER_STR(LEASH_VERSION_PATCH)

int main(void) {
    const char *version = leash_version();
    struct ev_loop *loop;
    leash_options opts;
    leash_url url;
    char err[LEASH_URL_ERR_MAX];
    leash_client *client = NULL;
    int rc;

    /* The header and the library that was linked must be the same release. */
    if (version == NULL || strcmp(version, CONSUMER_HEADER_VERSION) != 0) {
        fprintf(stderr, "consumer: library is %s but the header says %s\n",
                version != NULL ? version : "(null)", CONSUMER_HEADER_VERSION);
        return 1;
    }

    loop = ev_loop_new(EVFLAG_AUTO);
    if (loop == NULL) {
        fprintf(stderr, "consumer: ev_loop_new failed\n");
        return 1;
    }

    /* leash/url.h is installed, and its functions exported. */
    leash_options_init(&opts);
    rc = leash_url_parse("redis://127.0.0.1:6379/1", &url, err, sizeof(err));
    if (rc != LEASH_OK) {
        fprintf(stderr, "consumer: leash_url_parse: %s\n", err);
        ev_loop_destroy(loop);
        return 1;
    }
    leash_url_apply(&url, &opts);
    rc = leash_client_new(&client, &opts);
    if (rc != LEASH_OK) {
        fprintf(stderr, "consumer: leash_client_new: %s\n", leash_strerror(rc));
        ev_loop_destroy(loop);
        return 1;
    }
    rc = leash_libev_attach(loop, client);
    if (rc != LEASH_OK) {
        fprintf(stderr, "consumer: leash_libev_attach: %s\n", leash_strerror(rc));
        leash_client_free(client);
        ev_loop_destroy(loop);
        return 1;
    }
    leash_client_free(client);
    ev_loop_destroy(loop);

    printf("leash %s\n", version);
    return 0;
}
