/* SPDX-License-Identifier: MIT */
/*
 * redis+sentinel:// URLs (leash/url.h). Each piece is checked by the
 * redis:// parser (credentials, db, each sentinel's host and port), so
 * both forms take the same escapes and give the same messages.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <leash/url.h>

#include "base/log.h"

#define SCHEME "redis+sentinel://"
#define SENTINEL_PORT "26379"

static int refuse(char *err, size_t err_size, const char *fmt, ...) LEASH__PRINTF(3, 4);
static int refuse(char *err, size_t err_size, const char *fmt, ...) {
    va_list ap;

    if (err != NULL && err_size > 0) {
        va_start(ap, fmt);
        vsnprintf(err, err_size, fmt, ap);
        va_end(ap);
    }
    return LEASH_EINVAL;
}

int leash_url_is_sentinel(const char *url) {
    return url != NULL && strncasecmp(url, SCHEME, sizeof(SCHEME) - 1) == 0;
}

/* s[0..len) with %XX decoded into out (cap bytes, NUL included). 0, or -1
 * for a bad escape, a NUL or no room. */
static int decode(const char *s, size_t len, char *out, size_t cap) {
    size_t i, n = 0;

    for (i = 0; i < len; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            char hex[3];
            if (i + 2 >= len || !isxdigit((unsigned char)s[i + 1]) ||
                !isxdigit((unsigned char)s[i + 2]))
                return -1;
            hex[0] = s[i + 1];
            hex[1] = s[i + 2];
            hex[2] = '\0';
            c = (int)strtol(hex, NULL, 16);
            i += 2;
        }
        if (c == 0 || n + 1 >= cap)
            return -1;
        out[n++] = (char)c;
    }
    out[n] = '\0';
    return 0;
}

/* One sentinel, "host[:port]", checked as a redis:// URL would be. */
static int add_sentinel(leash_sentinel_url *u, const char *s, size_t len, char *err,
                        size_t err_size) {
    char buf[LEASH_URL_HOST_MAX + 64];
    leash_url one;
    const char *bracket = memchr(s, ']', len);
    int has_port =
        bracket != NULL ? bracket + 1 < s + len && bracket[1] == ':' : memchr(s, ':', len) != NULL;
    char *at;

    if (len == 0)
        return refuse(err, err_size, "an empty sentinel address in the list");
    if (u->nsentinels == LEASH_URL_SENTINELS_MAX)
        return refuse(err, err_size, "more than %d sentinels", LEASH_URL_SENTINELS_MAX);
    if (len + 32 > sizeof(buf))
        return refuse(err, err_size, "a sentinel address is longer than %d bytes",
                      LEASH_URL_HOST_MAX);
    snprintf(buf, sizeof(buf), "redis://%.*s%s", (int)len, s, has_port ? "" : ":" SENTINEL_PORT);
    if (leash_url_parse(buf, &one, err, err_size) != LEASH_OK)
        return LEASH_EINVAL;
    at = u->sentinels[u->nsentinels];
    if (strchr(one.host, ':') != NULL)
        snprintf(at, sizeof(u->sentinels[0]), "[%s]:%d", one.host, one.port);
    else
        snprintf(at, sizeof(u->sentinels[0]), "%s:%d", one.host, one.port);
    if (u->nsentinels == 0) {
        memcpy(u->data.host, one.host, sizeof(one.host));
        u->data.port = one.port;
    }
    u->nsentinels++;
    return LEASH_OK;
}

/* ?pubsub=WORD of the query, read as redis:// reads it. */
static int parse_pubsub(leash_sentinel_url *u, const char *value, size_t len) {
    char buf[64];
    leash_url one;

    if (u->data.pubsub != -1 || len > 16)
        return -1;
    snprintf(buf, sizeof(buf), "redis://x?pubsub=%.*s", (int)len, value);
    if (leash_url_parse(buf, &one, NULL, 0) != LEASH_OK)
        return -1;
    u->data.pubsub = one.pubsub;
    return 0;
}

/* The query: db, sentinel_user, sentinel_password, pubsub. */
static int parse_query(leash_sentinel_url *u, const char *q, int db_given, char *err,
                       size_t err_size) {
    while (*q != '\0') {
        const char *amp = strchr(q, '&'), *eq;
        size_t len = amp != NULL ? (size_t)(amp - q) : strlen(q);

        eq = memchr(q, '=', len);
        if (eq == NULL)
            return refuse(err, err_size, "a query parameter without '=': \"%.*s\"", (int)len, q);
        if ((size_t)(eq - q) == 2 && strncmp(q, "db", 2) == 0) {
            char *end;
            long v = strtol(eq + 1, &end, 10);
            if (db_given || end != q + len || eq + 1 == q + len || v < 0 || v > 2147483647L)
                return refuse(err, err_size, "db must be given once, a number in 0..2147483647");
            u->data.db = (int)v;
            db_given = 1;
        } else if ((size_t)(eq - q) == 13 && strncmp(q, "sentinel_user", 13) == 0) {
            if (decode(eq + 1, (size_t)(q + len - eq - 1), u->sentinel_username,
                       sizeof(u->sentinel_username)) != 0 ||
                u->sentinel_username[0] == '\0')
                return refuse(err, err_size, "sentinel_user: empty, too long or a bad %%-escape");
        } else if ((size_t)(eq - q) == 17 && strncmp(q, "sentinel_password", 17) == 0) {
            if (decode(eq + 1, (size_t)(q + len - eq - 1), u->sentinel_password,
                       sizeof(u->sentinel_password)) != 0 ||
                u->sentinel_password[0] == '\0')
                return refuse(err, err_size,
                              "sentinel_password: empty, too long or a bad %%-escape");
        } else if ((size_t)(eq - q) == 6 && strncmp(q, "pubsub", 6) == 0) {
            if (parse_pubsub(u, eq + 1, (size_t)(q + len - eq - 1)) != 0)
                return refuse(err, err_size,
                              "pubsub must be given once: auto, classic, sharded or off");
        } else {
            return refuse(err, err_size,
                          "unknown query parameter \"%.*s\" (db, sentinel_user, "
                          "sentinel_password, pubsub)",
                          (int)(eq - q) > 40 ? 40 : (int)(eq - q), q);
        }
        q += len + (amp != NULL);
    }
    if (u->sentinel_username[0] != '\0' && u->sentinel_password[0] == '\0')
        return refuse(err, err_size, "sentinel_user needs a sentinel_password");
    return LEASH_OK;
}

int leash_sentinel_url_parse(const char *url, leash_sentinel_url *out, char *err, size_t err_size) {
    leash_sentinel_url *u;
    const char *rest, *path, *query, *end, *at = NULL, *p, *hosts, *slash;
    int db_given = 0, rc = LEASH_EINVAL;

    if (err != NULL && err_size > 0)
        err[0] = '\0';
    if (out == NULL || !leash_url_is_sentinel(url))
        return refuse(err, err_size, "expected redis+sentinel://host:port[,host:port...]/master");
    if (strchr(url, '#') != NULL)
        return refuse(err, err_size, "a fragment ('#...') has no meaning here");
    u = calloc(1, sizeof(*u));
    if (u == NULL)
        return refuse(err, err_size, "out of memory");
    u->data.pubsub = -1;
    rest = url + sizeof(SCHEME) - 1;
    query = strchr(rest, '?');
    end = query != NULL ? query : rest + strlen(rest);
    path = memchr(rest, '/', (size_t)(end - rest));
    if (path == NULL) {
        refuse(err, err_size, "the master's name is missing: redis+sentinel://hosts/master");
        goto out;
    }
    for (p = rest; p < path; p++)
        if (*p == '@')
            at = p;
    if (at != NULL) {
        /* The data nodes' credentials, as redis:// reads them. */
        char buf[2048];
        leash_url creds;
        if ((size_t)(at - rest) + 16 > sizeof(buf)) {
            refuse(err, err_size, "the credentials are too long");
            goto out;
        }
        snprintf(buf, sizeof(buf), "redis://%.*s@x", (int)(at - rest), rest);
        if (leash_url_parse(buf, &creds, err, err_size) != LEASH_OK)
            goto out;
        memcpy(u->data.username, creds.username, sizeof(creds.username));
        memcpy(u->data.password, creds.password, sizeof(creds.password));
        memset(creds.password, 0, sizeof(creds.password));
    }
    hosts = at != NULL ? at + 1 : rest;
    for (p = hosts; p <= path; p++) {
        if (p == path || *p == ',') {
            if (add_sentinel(u, hosts, (size_t)(p - hosts), err, err_size) != LEASH_OK)
                goto out;
            hosts = p + 1;
        }
    }
    slash = memchr(path + 1, '/', (size_t)(end - path - 1));
    if (decode(path + 1, (size_t)((slash != NULL ? slash : end) - path - 1), u->master,
               sizeof(u->master)) != 0 ||
        u->master[0] == '\0') {
        refuse(err, err_size, "the master's name must be 1..%d bytes (%%XX escapes allowed)",
               LEASH_SENTINEL_MASTER_MAX);
        goto out;
    }
    if (slash != NULL && slash + 1 < end) {
        char *stop;
        long v = strtol(slash + 1, &stop, 10);
        if (stop != end || !isdigit((unsigned char)slash[1]) || v > 2147483647L) {
            refuse(err, err_size, "only /db may follow the master's name, a number in 0..%ld",
                   2147483647L);
            goto out;
        }
        u->data.db = (int)v;
        db_given = 1;
    }
    if (query != NULL && parse_query(u, query + 1, db_given, err, err_size) != LEASH_OK)
        goto out;
    memcpy(out, u, sizeof(*u));
    rc = LEASH_OK;
out:
    memset(u, 0, sizeof(*u));
    free(u);
    return rc;
}

void leash_sentinel_url_apply(leash_sentinel_url *u, leash_options *o) {
    int i;

    if (u == NULL || o == NULL)
        return;
    for (i = 0; i < u->nsentinels; i++)
        u->nodes[i] = u->sentinels[i];
    o->topology = LEASH_TOPOLOGY_SENTINEL;
    o->nodes = u->nodes;
    o->nodes_count = u->nsentinels;
    o->sentinel_master = u->master;
    o->sentinel_username = u->sentinel_username[0] != '\0' ? u->sentinel_username : NULL;
    o->sentinel_password = u->sentinel_password[0] != '\0' ? u->sentinel_password : NULL;
    o->username = u->data.username[0] != '\0' ? u->data.username : NULL;
    o->password = u->data.password[0] != '\0' ? u->data.password : NULL;
    o->db = u->data.db;
    if (u->data.pubsub >= LEASH_PUBSUB_AUTO && u->data.pubsub <= LEASH_PUBSUB_OFF)
        o->pubsub = u->data.pubsub;
}
