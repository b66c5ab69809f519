/* SPDX-License-Identifier: MIT */
/*
 * redis+sentinel:// for the tool: the sentinels are asked in turn for the
 * master (SENTINEL get-master-addr-by-name), which must say ROLE master;
 * the tool then reads it as one server. The sentinels' credentials come
 * from the URL, else $LEASH_SENTINEL_USER / $LEASH_SENTINEL_PASSWORD.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* A blocking connection with the tool's timeout, authenticated when a
 * password is given. NULL with err set. */
static redisContext *dial(const char *host, int port, const char *user, const char *pass,
                          int timeout_ms, char *err, size_t cap) {
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    redisContext *rc = redisConnectWithTimeout(host, port, tv);
    redisReply *r;

    if (rc == NULL || rc->err) {
        snprintf(err, cap, "%s:%d: %s", host, port, rc != NULL ? rc->errstr : "out of memory");
        redisFree(rc);
        return NULL;
    }
    redisSetTimeout(rc, tv);
    if (pass == NULL || pass[0] == '\0')
        return rc;
    r = user != NULL && user[0] != '\0' ? redisCommand(rc, "AUTH %s %s", user, pass)
                                        : redisCommand(rc, "AUTH %s", pass);
    if (r == NULL || r->type == REDIS_REPLY_ERROR) {
        snprintf(err, cap, "%s:%d: AUTH refused: %s", host, port, r != NULL ? r->str : rc->errstr);
        freeReplyObject(r);
        redisFree(rc);
        return NULL;
    }
    freeReplyObject(r);
    return rc;
}

/* Whether host:port says ROLE master. */
static int is_master(const leash_url *m, int timeout_ms, char *err, size_t cap) {
    redisContext *rc = dial(m->host, m->port, m->username, m->password, timeout_ms, err, cap);
    redisReply *r;
    int yes;

    if (rc == NULL)
        return 0;
    r = redisCommand(rc, "ROLE");
    yes = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
          r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, "master") == 0;
    if (!yes)
        snprintf(err, cap, "%s:%d is not a master (ROLE)", m->host, m->port);
    freeReplyObject(r);
    redisFree(rc);
    return yes;
}

/* A connection to sentinel i of su, with the sentinels' credentials
 * (the URL's, else the environment's). NULL with err. */
static redisContext *dial_sentinel(const leash_sentinel_url *su, int i, int timeout_ms, char *err,
                                   size_t cap) {
    const char *user =
        su->sentinel_username[0] ? su->sentinel_username : getenv("LEASH_SENTINEL_USER");
    const char *pass =
        su->sentinel_password[0] ? su->sentinel_password : getenv("LEASH_SENTINEL_PASSWORD");
    char host[LEASH_URL_HOST_MAX + 9];
    char *colon;

    snprintf(host, sizeof(host), "%s", su->sentinels[i]);
    colon = strrchr(host, ':');
    *colon = '\0';
    if (host[0] == '[') {
        memmove(host, host + 1, strlen(host));
        host[strlen(host) - 1] = '\0';
    }
    return dial(host, atoi(colon + 1), user, pass, timeout_ms, err, cap);
}

/* Sends argv to the sentinels of su in turn, from *next on, until one
 * answers as `good` says: its connection, its reply in *out, and *next
 * the sentinel after it. NULL with err when none did. */
static redisContext *first_answer(const leash_sentinel_url *su, int *next, int timeout_ms, int argc,
                                  const char **argv, int (*good)(const redisReply *r),
                                  redisReply **out, char *err, size_t cap) {
    int i;

    if (*next == 0)
        snprintf(err, cap, "no sentinel answered");
    for (i = *next; i < su->nsentinels; i++) {
        redisContext *rc = dial_sentinel(su, i, timeout_ms, err, cap);
        redisReply *r;

        if (rc == NULL)
            continue;
        r = redisCommandArgv(rc, argc, argv, NULL);
        if (r != NULL && good(r)) {
            *out = r;
            *next = i + 1;
            return rc;
        }
        snprintf(err, cap, "sentinel %s: %s: %s", su->sentinels[i], argv[0],
                 r == NULL                      ? rc->errstr
                 : r->type == REDIS_REPLY_ERROR ? r->str
                                                : "not the answer expected");
        freeReplyObject(r);
        redisFree(rc);
    }
    *next = su->nsentinels;
    return NULL;
}

/* get-master-addr-by-name's: [host, port], or nil for a name unknown. */
static int is_address(const redisReply *r) {
    return r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
           r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING &&
           r->element[0]->len <= LEASH_URL_HOST_MAX;
}

static int is_subscribed(const redisReply *r) {
    return r->type == REDIS_REPLY_ARRAY;
}

/* Every sentinel is asked until one names a server that says it is the
 * master: one that names a replica or a dead address (a liar, or one cut
 * off with the old master) does not hide the others' answer. */
int cli_sentinel_master(const char *url, int timeout_ms, leash_url *out, char *err, size_t cap) {
    leash_sentinel_url su;
    const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", NULL};
    redisContext *rc;
    redisReply *r;
    int next = 0;

    if (leash_sentinel_url_parse(url, &su, err, cap) != LEASH_OK)
        return -1;
    argv[2] = su.master;
    while ((rc = first_answer(&su, &next, timeout_ms, 3, argv, is_address, &r, err, cap)) != NULL) {
        *out = su.data;
        snprintf(out->host, sizeof(out->host), "%s", r->element[0]->str);
        out->port = atoi(r->element[1]->str);
        freeReplyObject(r);
        redisFree(rc);
        if (is_master(out, timeout_ms, err, cap))
            return 0;
    }
    return -1;
}

redisContext *cli_sentinel_subscribe(const char *url, int timeout_ms, char *err, size_t cap) {
    leash_sentinel_url su;
    const char *argv[3] = {"SUBSCRIBE", "+switch-master", "+promoted-slave"};
    redisContext *rc;
    redisReply *r;
    int next = 0;

    if (leash_sentinel_url_parse(url, &su, err, cap) != LEASH_OK)
        return NULL;
    rc = first_answer(&su, &next, timeout_ms, 3, argv, is_subscribed, &r, err, cap);
    if (rc != NULL)
        freeReplyObject(r);
    return rc;
}

int cli_sentinel_switched(const char *url, const redisReply *r, leash_url *out) {
    leash_sentinel_url su;
    char name[LEASH_SENTINEL_MASTER_MAX + 1], ip[LEASH_URL_HOST_MAX + 1], err[LEASH_URL_ERR_MAX];
    int port;

    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING ||
        r->element[2]->type != REDIS_REPLY_STRING || strcmp(r->element[0]->str, "message") != 0 ||
        leash_sentinel_url_parse(url, &su, err, sizeof(err)) != LEASH_OK)
        return 0;
    /* +switch-master "name oldip oldport newip newport" (the failover's
     * end); +promoted-slave "slave ip:port ip port @ name masterip
     * masterport" (the promotion, a second or more before). */
    if (strcmp(r->element[1]->str, "+switch-master") == 0) {
        if (sscanf(r->element[2]->str, "%255s %*s %*s %255s %d", name, ip, &port) != 3)
            return 0;
    } else if (strcmp(r->element[1]->str, "+promoted-slave") == 0) {
        if (sscanf(r->element[2]->str, "slave %*s %255s %d @ %255s", ip, &port, name) != 3)
            return 0;
    } else {
        return 0;
    }
    if (strcmp(name, su.master) != 0 || port < 1 || port > 65535)
        return 0;
    *out = su.data;
    snprintf(out->host, sizeof(out->host), "%s", ip);
    out->port = port;
    return 1;
}
