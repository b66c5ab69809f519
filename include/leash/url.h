/* SPDX-License-Identifier: MIT */
/*
 * Redis addresses as users write them, for command lines, environment
 * variables and config files:
 *
 *     redis://[[user]:password@]host[:port][/db][?db=N][&pubsub=WORD]
 *     rediss://[[user]:password@]host[:port][/db][?db=N][&ca=FILE][&ca_dir=DIR]
 *              [&cert=FILE&key=FILE][&sni=NAME][&verify=0][&pubsub=WORD]
 *     unix://[[user]:password@]/path/to/redis.sock[?db=N][&pubsub=WORD]
 *
 * host is a name, an IPv4 address or an IPv6 address in brackets
 * ("redis://[::1]:6380"). The port defaults to 6379 and the db to 0. In
 * user, password and the socket path, %XX stands for the byte XX, so a
 * password with '@', ':' or '/' in it is written %40, %3A, %2F. The query
 * takes db (the place unix:// URLs have for it); a redis:// URL gives the
 * db once, after '/' or as ?db=. Every scheme takes pubsub= once (0.4):
 * auto, classic, sharded or off, leash_options.pubsub's LEASH_PUBSUB_AUTO,
 * _CLASSIC, _SHARDED or _OFF (off: waiters poll, docs/how-it-works.md "Waiting without
 * pub/sub"); without it the option is left as it was.
 *
 * rediss:// is TLS (docs/tls-and-names.md; the leash_options fields tls_*), to the
 * same default port 6379 (managed services often use 6380: give it). Its
 * query parameters, each at most once, values %-decoded (a path with '&'
 * writes it %26):
 *     ca=FILE      trusted CAs, PEM (tls_ca_file; none: the system's store)
 *     ca_dir=DIR   a hashed CA directory (tls_ca_dir)
 *     cert=FILE    client certificate, PEM (tls_cert_file), with
 *     key=FILE     its private key (tls_key_file)
 *     sni=NAME     the name sent and verified (tls_server_name; none: host)
 *     verify=0     no check of the server's certificate (tls_verify = 0;
 *                  a warning in the log); verify=1 is the default
 *
 * Refused: TLS parameters in a redis:// or unix:// URL, cert without key
 * (or the other way round), any other scheme, a port outside 1..65535, a db
 * outside 0..INT_MAX, an empty host or socket path, a field longer than its
 * LEASH_URL_*_MAX below, a user without a password (Redis AUTH needs one),
 * a fragment, an unknown query parameter or pubsub word, and anything
 * after the parts above.
 *
 * Threads and memory: these functions keep no state, allocate nothing and
 * may run on any thread at once.
 *
 *     leash_url u;
 *     char err[LEASH_URL_ERR_MAX];
 *     if (leash_url_parse(getenv("REDIS_URL"), &u, err, sizeof(err)) != LEASH_OK)
 *         die(err);
 *     leash_options_init(&opts);
 *     leash_url_apply(&u, &opts);
 *     leash_client_new(&client, &opts); // copies the strings: u may go now
 */
#ifndef LEASH_URL_H
#define LEASH_URL_H

#include <leash/leash.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The longest host, socket path, user and password, in bytes once decoded
 * (the buffers below hold one more, for the NUL). The path is what a
 * sockaddr_un can hold. */
#define LEASH_URL_HOST_MAX 255
#define LEASH_URL_PATH_MAX 107
#define LEASH_URL_USER_MAX 255
#define LEASH_URL_PASSWORD_MAX 511
/* The longest file path of a rediss:// URL's query, once decoded. */
#define LEASH_URL_FILE_MAX 1023
/* An err buffer of this size holds every message of leash_url_parse whole. */
#define LEASH_URL_ERR_MAX 256

/*
 * A parsed URL: a plain struct the caller owns, every string inside it.
 * Exactly one of host and unix_path is non-empty; an absent user or password
 * is "". It holds the password in clear: wipe it when that matters.
 *
 * Its layout is part of the ABI: it changes only with the soname (leash.h,
 * "Structs that grow"), never within one. 0.3 added the TLS fields, 0.4
 * pubsub.
 */
typedef struct leash_url {
    char host[LEASH_URL_HOST_MAX + 1];          /* without the brackets of an IPv6 address */
    int port;                                   /* 1..65535; 6379 unless given; 0 with unix_path */
    char unix_path[LEASH_URL_PATH_MAX + 1];     /* decoded */
    char username[LEASH_URL_USER_MAX + 1];      /* decoded */
    char password[LEASH_URL_PASSWORD_MAX + 1];  /* decoded */
    int db;                                     /* 0..INT_MAX; 0 unless given */
    int tls;                                    /* 1 for rediss://, else 0 */
    int tls_verify;                             /* 0 with ?verify=0, else 1 */
    char tls_ca_file[LEASH_URL_FILE_MAX + 1];   /* ?ca=, decoded; "" when absent */
    char tls_ca_dir[LEASH_URL_FILE_MAX + 1];    /* ?ca_dir= */
    char tls_cert_file[LEASH_URL_FILE_MAX + 1]; /* ?cert= */
    char tls_key_file[LEASH_URL_FILE_MAX + 1];  /* ?key= */
    char tls_server_name[LEASH_URL_HOST_MAX + 1]; /* ?sni= */
    int pubsub;                                   /* ?pubsub=: LEASH_PUBSUB_*; -1 when absent */
} leash_url;

/*
 * Parses url into *out.
 * Returns LEASH_OK, or LEASH_EINVAL when url or out is NULL or url is not
 * one of the forms above. On failure *out is left alone and err (when
 * err_size > 0) holds one line saying what is wrong, never the password nor
 * the user; on success err holds "". err may be NULL when err_size is 0; a
 * message longer than err_size - 1 is cut.
 */
LEASH_EXPORT int leash_url_parse(const char *url, leash_url *out, char *err, size_t err_size);

/*
 * Points the connection fields of *o at *u: host and port, or unix_path
 * (host is then left alone, and unix_path set to NULL for a TCP URL, so that
 * one options struct can take either); username and password (NULL when
 * empty), and db; pubsub when the URL gives it; tls (0 or 1), and for
 * rediss:// tls_verify = 0 when the URL says verify=0, and each TLS file or
 * name the URL gives (one it does not give is left as it was: a command
 * line's --tls-ca may add it). The other fields are left alone.
 * leash_client_new() copies the strings, so *u must last until that call
 * has returned, not longer. Nothing happens when u or o is NULL.
 */
LEASH_EXPORT void leash_url_apply(const leash_url *u, leash_options *o);

/*
 * Writes *u back as a URL for logs and messages, with the password shown as
 * "***" (and the user as given; pubsub= last, when given):
 * "redis://alice:***@[::1]:6380/2",
 * "unix:///run/redis.sock?db=2", "rediss://h:6380/0?ca=/etc/ca.pem&verify=0".
 * Reserved bytes in the user, the paths and the query values
 * are %-escaped again, so the result parses back (to *u but for the
 * password). Like snprintf: writes at most size bytes, NUL included, and
 * returns the length the whole URL has; -1 when u is NULL, or buf NULL with
 * size > 0.
 */
LEASH_EXPORT int leash_url_format(const leash_url *u, char *buf, size_t size);

/*
 * Redis Sentinel (docs/sentinel.md), as users write it:
 *
 *     redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/master[/db]
 *         [?db=N][&sentinel_user=U][&sentinel_password=P][&pubsub=WORD]
 *
 * The hosts are the sentinels (1..LEASH_URL_SENTINELS_MAX; the port
 * defaults to 26379, Sentinel's), master is the name they watch
 * (1..LEASH_SENTINEL_MASTER_MAX bytes, %XX escapes allowed). user,
 * password and db are the data nodes', with the rules of redis:// above;
 * the sentinels' own credentials (requirepass on the sentinels) go in
 * sentinel_user and sentinel_password, %-escaped, or come from elsewhere
 * (the leash tool reads $LEASH_SENTINEL_PASSWORD and $LEASH_SENTINEL_USER).
 * pubsub= as in redis:// (0.4; data.pubsub, -1 when absent).
 * A URL is often logged: prefer the environment for a password.
 */
#define LEASH_URL_SENTINELS_MAX 16

typedef struct leash_sentinel_url {
    /* host and port: the first sentinel; username, password, db: the data
     * nodes'. */
    leash_url data;
    char master[LEASH_SENTINEL_MASTER_MAX + 1];
    char sentinel_username[LEASH_URL_USER_MAX + 1];
    char sentinel_password[LEASH_URL_PASSWORD_MAX + 1];
    int nsentinels;
    /* "host:port" or "[v6]:port" each; nodes points at them. */
    char sentinels[LEASH_URL_SENTINELS_MAX][LEASH_URL_HOST_MAX + 9];
    const char *nodes[LEASH_URL_SENTINELS_MAX];
} leash_sentinel_url;

/* 1 when url starts with redis+sentinel:// (any case), else 0. */
LEASH_EXPORT int leash_url_is_sentinel(const char *url);

/*
 * Parses a redis+sentinel:// URL into *out. LEASH_OK, or LEASH_EINVAL with
 * err as leash_url_parse gives it (never a password); *out is left alone
 * on failure.
 */
LEASH_EXPORT int leash_sentinel_url_parse(const char *url, leash_sentinel_url *out, char *err,
                                          size_t err_size);

/*
 * Sets *o for Sentinel from *u: topology LEASH_TOPOLOGY_SENTINEL, nodes
 * (the sentinels), sentinel_master, sentinel_username and
 * sentinel_password (NULL when empty), username, password, db and pubsub
 * when the URL gives it (and
 * points u->nodes at u->sentinels). *u must last until leash_client_new()
 * has returned. Nothing happens when u or o
 * is NULL.
 */
LEASH_EXPORT void leash_sentinel_url_apply(leash_sentinel_url *u, leash_options *o);

#ifdef __cplusplus
}
#endif

#endif
