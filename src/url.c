/* SPDX-License-Identifier: MIT */
/* Redis URLs (include/leash/url.h). A hand-written scanner rather than a
 * general URI parser: the forms are few, and each refusal can then say in
 * the user's terms what is wrong, without ever echoing the credentials. */
#include <leash/url.h>

#include "base/log.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* How much of a bad piece a message quotes: enough to recognise it, not
 * enough to flood a terminal. */
#define QUOTE_MAX 40

/* LEASH_EINVAL, with "redis URL: " and the message in err. */
static int refuse(char *err, size_t err_size, const char *fmt, ...) LEASH__PRINTF(3, 4);
static int refuse(char *err, size_t err_size, const char *fmt, ...) {
    va_list ap;
    int n;

    if (err == NULL || err_size == 0)
        return LEASH_EINVAL;
    n = snprintf(err, err_size, "redis URL: ");
    if (n > 0 && (size_t)n < err_size) {
        va_start(ap, fmt);
        vsnprintf(err + n, err_size - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return LEASH_EINVAL;
}

static int quote_len(size_t len) {
    return len > QUOTE_MAX ? QUOTE_MAX : (int)len;
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

enum {
    DECODE_OK = 0,
    DECODE_ESCAPE = -1,
    DECODE_LONG = -2,
    DECODE_NUL = -3
};

/* s[0..len) with %XX decoded into out (cap bytes, NUL included). A %00
 * would cut the C string short silently, so it is refused. */
static int decode(const char *s, size_t len, char *out, size_t cap) {
    size_t i, o = 0;

    for (i = 0; i < len; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            if (len - i < 3 || hex_value(s[i + 1]) < 0 || hex_value(s[i + 2]) < 0)
                return DECODE_ESCAPE;
            c = hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]);
            if (c == 0)
                return DECODE_NUL;
            i += 2;
        }
        if (o + 1 >= cap)
            return DECODE_LONG;
        out[o++] = (char)c;
    }
    out[o] = '\0';
    return DECODE_OK;
}

static int decode_field(const char *s, size_t len, char *out, size_t cap, const char *what,
                        char *err, size_t err_size) {
    switch (decode(s, len, out, cap)) {
    case DECODE_OK:
        return LEASH_OK;
    case DECODE_ESCAPE:
        return refuse(err, err_size, "a '%%' in the %s is not followed by two hex digits", what);
    case DECODE_NUL:
        return refuse(err, err_size, "the %s holds %%00, which a C string cannot", what);
    default:
        return refuse(err, err_size, "the %s is longer than %zu bytes", what, cap - 1);
    }
}

/* A decimal number of s[0..len) in 0..max into *v; -1 if it is not one. */
static int parse_uint(const char *s, size_t len, long max, long *v) {
    long n = 0;
    size_t i;

    if (len == 0)
        return -1;
    for (i = 0; i < len; i++) {
        int d = s[i] - '0';
        if (s[i] < '0' || s[i] > '9' || n > (max - d) / 10)
            return -1;
        n = n * 10 + d;
    }
    *v = n;
    return 0;
}

static int scheme_is(const char *s, size_t len, const char *name) {
    size_t i;

    if (strlen(name) != len)
        return 0;
    for (i = 0; i < len; i++) {
        char c = s[i] >= 'A' && s[i] <= 'Z' ? (char)(s[i] - 'A' + 'a') : s[i];
        if (c != name[i])
            return 0;
    }
    return 1;
}

/* "[user]:password" of s[0..len) into u. */
static int parse_userinfo(const char *s, size_t len, leash_url *u, char *err, size_t err_size) {
    const char *colon = memchr(s, ':', len);
    int rc;

    if (colon == NULL)
        return refuse(err, err_size, "credentials go as user:password@ or :password@");
    if ((rc = decode_field(s, (size_t)(colon - s), u->username, sizeof(u->username), "user", err,
                           err_size)) != LEASH_OK ||
        (rc = decode_field(colon + 1, (size_t)(s + len - colon - 1), u->password,
                           sizeof(u->password), "password", err, err_size)) != LEASH_OK)
        return rc;
    if (u->username[0] != '\0' && u->password[0] == '\0')
        return refuse(err, err_size, "a user needs a password (Redis AUTH takes both)");
    return LEASH_OK;
}

/* host[:port] or [v6]:port of s[0..len) into u. */
static int parse_hostport(const char *s, size_t len, leash_url *u, char *err, size_t err_size) {
    const char *end = s + len, *host = s, *host_end, *port = NULL, *p;
    long v;

    if (len > 0 && s[0] == '[') {
        host = s + 1;
        host_end = memchr(host, ']', (size_t)(end - host));
        if (host_end == NULL)
            return refuse(err, err_size, "an IPv6 address needs its closing ']'");
        for (p = host; p < host_end; p++)
            if (hex_value(*p) < 0 && *p != ':' && *p != '.')
                return refuse(err, err_size, "\"%.*s\" is not an IPv6 address",
                              quote_len((size_t)(host_end - host)), host);
        if (host_end + 1 < end) {
            if (host_end[1] != ':')
                return refuse(err, err_size, "only ':port' may follow an IPv6 address's ']'");
            port = host_end + 2;
        }
    } else {
        host_end = memchr(s, ':', len);
        if (host_end != NULL)
            port = host_end + 1;
        else
            host_end = end;
        if (port != NULL && memchr(port, ':', (size_t)(end - port)) != NULL)
            return refuse(err, err_size, "an IPv6 address goes in brackets: redis://[::1]:6379");
        for (p = host; p < host_end; p++)
            if ((unsigned char)*p <= ' ' || *p == '[' || *p == ']' || *p == '%' || *p == 0x7f)
                return refuse(err, err_size, "\"%.*s\" is not a host name or address",
                              quote_len((size_t)(host_end - host)), host);
    }
    if (host_end == host)
        return refuse(err, err_size, "the host is missing");
    if ((size_t)(host_end - host) > LEASH_URL_HOST_MAX)
        return refuse(err, err_size, "the host is longer than %d bytes", LEASH_URL_HOST_MAX);
    memcpy(u->host, host, (size_t)(host_end - host));
    u->host[host_end - host] = '\0';
    u->port = 6379;
    if (port != NULL) {
        if (parse_uint(port, (size_t)(end - port), 65535, &v) != 0 || v < 1)
            return refuse(err, err_size, "the port must be a number in 1..65535 (got \"%.*s\")",
                          quote_len((size_t)(end - port)), port);
        u->port = (int)v;
    }
    return LEASH_OK;
}

/* The TLS parameters of a rediss:// query that name a file or a name. */
typedef struct tls_param {
    const char *name;
    size_t offset; /* of the field in leash_url */
    size_t cap;
} tls_param;

static const tls_param tls_params[] = {
    {"ca", offsetof(leash_url, tls_ca_file), LEASH_URL_FILE_MAX + 1},
    {"ca_dir", offsetof(leash_url, tls_ca_dir), LEASH_URL_FILE_MAX + 1},
    {"cert", offsetof(leash_url, tls_cert_file), LEASH_URL_FILE_MAX + 1},
    {"key", offsetof(leash_url, tls_key_file), LEASH_URL_FILE_MAX + 1},
    {"sni", offsetof(leash_url, tls_server_name), LEASH_URL_HOST_MAX + 1},
};
#define NTLS_PARAMS (sizeof(tls_params) / sizeof(tls_params[0]))

static int name_is(const char *s, size_t len, const char *name) {
    return strlen(name) == len && memcmp(s, name, len) == 0;
}

/* ?pubsub=: the words, in the order of enum leash_pubsub. */
static const char *const pubsub_words[] = {"auto", "classic", "sharded", "off"};
#define NPUBSUB_WORDS (sizeof(pubsub_words) / sizeof(pubsub_words[0]))

static int parse_pubsub(const char *value, size_t len, leash_url *u) {
    size_t i;

    for (i = 0; i < NPUBSUB_WORDS; i++)
        if (name_is(value, len, pubsub_words[i])) {
            u->pubsub = (int)i;
            return 0;
        }
    return -1;
}

/* The query s[0..len), after '?': db=N, pubsub=WORD, and for rediss://
 * the TLS parameters (leash/url.h); each once. */
static int parse_query(const char *s, size_t len, int db_given, leash_url *u, char *err,
                       size_t err_size) {
    const char *end = s + len;
    int verify_given = 0;
    unsigned seen = 0;

    while (s <= end) {
        const char *amp = memchr(s, '&', (size_t)(end - s));
        const char *param_end = amp != NULL ? amp : end;
        const char *eq = memchr(s, '=', (size_t)(param_end - s));
        const char *value = eq != NULL ? eq + 1 : param_end;
        size_t name_len = (size_t)((eq != NULL ? eq : param_end) - s), i;
        size_t value_len = (size_t)(param_end - value);
        long v;
        int rc;

        if (param_end == s)
            return refuse(err, err_size, "an empty query parameter (a stray '?' or '&')");
        for (i = 0; i < NTLS_PARAMS && !name_is(s, name_len, tls_params[i].name); i++)
            ;
        /* Only names are quoted: a value may be a secret (?password=). */
        if (name_is(s, name_len, "db")) {
            if (db_given)
                return refuse(err, err_size, "the db is given twice");
            if (eq == NULL || parse_uint(value, value_len, INT_MAX, &v) != 0)
                return refuse(err, err_size, "db must be a number in 0..%d (as ?db=N)", INT_MAX);
            u->db = (int)v;
            db_given = 1;
        } else if (name_is(s, name_len, "pubsub")) {
            if (u->pubsub != -1)
                return refuse(err, err_size, "pubsub is given twice");
            if (eq == NULL || parse_pubsub(value, value_len, u) != 0)
                return refuse(err, err_size, "pubsub must be auto, classic, sharded or off");
        } else if (i == NTLS_PARAMS && !name_is(s, name_len, "verify")) {
            return refuse(err, err_size,
                          "unknown query parameter \"%.*s\" (db=N, pubsub=WORD; with rediss:// "
                          "also ca, ca_dir, cert, key, sni, verify)",
                          quote_len(name_len), s);
        } else if (!u->tls) {
            return refuse(err, err_size, "%.*s= is a TLS parameter: the URL must be rediss://",
                          quote_len(name_len), s);
        } else if (i == NTLS_PARAMS) {
            if (verify_given)
                return refuse(err, err_size, "verify is given twice");
            if (eq == NULL || value_len != 1 || (value[0] != '0' && value[0] != '1'))
                return refuse(err, err_size, "verify must be 0 or 1");
            u->tls_verify = value[0] - '0';
            verify_given = 1;
        } else {
            if (seen & (1u << i))
                return refuse(err, err_size, "%s is given twice", tls_params[i].name);
            if (value_len == 0)
                return refuse(err, err_size, "%s needs a value (%s=...)", tls_params[i].name,
                              tls_params[i].name);
            if ((rc = decode_field(value, value_len, (char *)u + tls_params[i].offset,
                                   tls_params[i].cap, tls_params[i].name, err, err_size)) !=
                LEASH_OK)
                return rc;
            seen |= 1u << i;
        }
        if (amp == NULL)
            break;
        s = amp + 1;
    }
    if ((u->tls_cert_file[0] != '\0') != (u->tls_key_file[0] != '\0'))
        return refuse(err, err_size, "cert= and key= go together");
    return LEASH_OK;
}

int leash_url_parse(const char *url, leash_url *out, char *err, size_t err_size) {
    leash_url u;
    const char *sep, *rest, *body_end, *auth_end, *at = NULL, *p, *query;
    int unix_scheme, db_given = 0, rc;

    if (err != NULL && err_size > 0)
        err[0] = '\0';
    if (url == NULL || out == NULL)
        return refuse(err, err_size, "no URL given");
    memset(&u, 0, sizeof(u));

    sep = strstr(url, "://");
    if (sep == NULL)
        return refuse(err, err_size,
                      "expected redis://[[user]:password@]host[:port][/db] or unix:///path");
    u.tls = scheme_is(url, (size_t)(sep - url), "rediss");
    u.tls_verify = 1;
    u.pubsub = -1;
    /* Only a word is quoted as a scheme: "user:secret@host://" is not one. */
    for (p = url; p < sep; p++)
        if (!isalnum((unsigned char)*p) && *p != '+' && *p != '-' && *p != '.')
            return refuse(err, err_size,
                          "expected redis://[[user]:password@]host[:port][/db] or unix:///path");
    unix_scheme = scheme_is(url, (size_t)(sep - url), "unix");
    if (!unix_scheme && !u.tls && !scheme_is(url, (size_t)(sep - url), "redis"))
        return refuse(err, err_size, "unknown scheme \"%.*s://\" (redis://, rediss:// or unix://)",
                      quote_len((size_t)(sep - url)), url);
    rest = sep + 3;
    if (strchr(rest, '#') != NULL)
        return refuse(err, err_size, "a fragment ('#...') has no meaning here");
    query = strchr(rest, '?');
    body_end = query != NULL ? query : rest + strlen(rest);

    /* The credentials end at the last '@' before the first '/', so that an
     * unescaped '@' in a password still works. */
    auth_end = memchr(rest, '/', (size_t)(body_end - rest));
    if (auth_end == NULL)
        auth_end = body_end;
    for (p = rest; p < auth_end; p++)
        if (*p == '@')
            at = p;
    /* An '@' past the host in a redis:// URL can only be the end of
     * credentials that held a raw '/' or '?': the pieces the messages below
     * would quote are then pieces of the password. */
    if (!unix_scheme && strchr(auth_end, '@') != NULL)
        return refuse(err, err_size,
                      "a '/' or '?' in a user or password must be written %%2F or %%3F");
    if (at != NULL && (rc = parse_userinfo(rest, (size_t)(at - rest), &u, err, err_size)) != 0)
        return rc;

    if (unix_scheme) {
        if (auth_end != (at != NULL ? at + 1 : rest))
            return refuse(err, err_size,
                          "unix:// takes no host, only an absolute path: unix:///path/to/sock");
        if (auth_end == body_end || auth_end + 1 == body_end)
            return refuse(err, err_size, "the socket path is missing");
        if ((rc = decode_field(auth_end, (size_t)(body_end - auth_end), u.unix_path,
                               sizeof(u.unix_path), "socket path", err, err_size)) != LEASH_OK)
            return rc;
    } else {
        const char *hp = at != NULL ? at + 1 : rest;
        long v;

        if ((rc = parse_hostport(hp, (size_t)(auth_end - hp), &u, err, err_size)) != LEASH_OK)
            return rc;
        /* "/" alone is how many URLs end; "/N" is the db. */
        if (auth_end + 1 < body_end) {
            if (parse_uint(auth_end + 1, (size_t)(body_end - auth_end - 1), INT_MAX, &v) != 0)
                return refuse(err, err_size,
                              "only /db may follow the host, db a number in 0..%d (got "
                              "\"%.*s\")",
                              INT_MAX, quote_len((size_t)(body_end - auth_end - 1)), auth_end + 1);
            u.db = (int)v;
            db_given = 1;
        }
    }
    if (query != NULL &&
        (rc = parse_query(query + 1, strlen(query + 1), db_given, &u, err, err_size)) != 0)
        return rc;
    *out = u;
    memset(u.password, 0, sizeof(u.password));
    return LEASH_OK;
}

void leash_url_apply(const leash_url *u, leash_options *o) {
    if (u == NULL || o == NULL)
        return;
    if (u->unix_path[0] != '\0') {
        o->unix_path = u->unix_path;
    } else {
        o->host = u->host;
        o->port = u->port;
        o->unix_path = NULL;
    }
    o->username = u->username[0] != '\0' ? u->username : NULL;
    o->password = u->password[0] != '\0' ? u->password : NULL;
    o->db = u->db;
    if (u->pubsub >= 0 && (size_t)u->pubsub < NPUBSUB_WORDS)
        o->pubsub = u->pubsub;
    o->tls = u->tls;
    if (!u->tls)
        return;
    if (!u->tls_verify)
        o->tls_verify = 0;
    if (u->tls_ca_file[0] != '\0')
        o->tls_ca_file = u->tls_ca_file;
    if (u->tls_ca_dir[0] != '\0')
        o->tls_ca_dir = u->tls_ca_dir;
    if (u->tls_cert_file[0] != '\0')
        o->tls_cert_file = u->tls_cert_file;
    if (u->tls_key_file[0] != '\0')
        o->tls_key_file = u->tls_key_file;
    if (u->tls_server_name[0] != '\0')
        o->tls_server_name = u->tls_server_name;
}

/* What leash_url_format has written so far: like snprintf, it counts all
 * and writes what fits. */
typedef struct sink {
    char *buf;
    size_t size;
    size_t len;
} sink;

static void put(sink *s, const char *text, size_t n) {
    size_t i;

    for (i = 0; i < n; i++, s->len++)
        if (s->len + 1 < s->size)
            s->buf[s->len] = text[i];
}

static void put_str(sink *s, const char *text) {
    put(s, text, strlen(text));
}

/* text with every byte that could end its part of the URL %-escaped. */
static void put_escaped(sink *s, const char *text, const char *keep) {
    static const char hex[] = "0123456789ABCDEF";

    for (; *text != '\0'; text++) {
        unsigned char c = (unsigned char)*text;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            strchr("-._~", c) != NULL || strchr(keep, c) != NULL) {
            put(s, text, 1);
        } else {
            char esc[3] = {'%', hex[c >> 4], hex[c & 15]};
            put(s, esc, 3);
        }
    }
}

/* One parameter of the query: '?' before the first, '&' before the others. */
static void put_param(sink *s, const char **sep, const char *name, const char *value) {
    put_str(s, *sep);
    put_str(s, name);
    put_str(s, "=");
    put_str(s, value);
    *sep = "&";
}

/* The TLS parameters that differ from their defaults, as a query. */
static void put_tls_query(sink *s, const leash_url *u, const char **sepp) {
    const char *sep = *sepp;
    size_t i;

    for (i = 0; i < NTLS_PARAMS; i++) {
        const char *value = (const char *)u + tls_params[i].offset;
        if (value[0] == '\0')
            continue;
        put_str(s, sep);
        put_str(s, tls_params[i].name);
        put_str(s, "=");
        put_escaped(s, value, "/");
        sep = "&";
    }
    if (!u->tls_verify)
        put_param(s, &sep, "verify", "0");
    *sepp = sep;
}

int leash_url_format(const leash_url *u, char *buf, size_t size) {
    sink s = {buf, size, 0};
    const char *sep = "?";
    char num[16];

    if (u == NULL || (buf == NULL && size > 0))
        return -1;
    put_str(&s, u->unix_path[0] != '\0' ? "unix://" : u->tls ? "rediss://" : "redis://");
    if (u->username[0] != '\0' || u->password[0] != '\0') {
        put_escaped(&s, u->username, "");
        put_str(&s, u->password[0] != '\0' ? ":***@" : ":@");
    }
    if (u->unix_path[0] != '\0') {
        put_escaped(&s, u->unix_path, "/");
        if (u->db != 0) {
            snprintf(num, sizeof(num), "%d", u->db);
            put_param(&s, &sep, "db", num);
        }
    } else {
        int v6 = strchr(u->host, ':') != NULL;
        put_str(&s, v6 ? "[" : "");
        put_str(&s, u->host);
        put_str(&s, v6 ? "]" : "");
        snprintf(num, sizeof(num), ":%d/", u->port);
        put_str(&s, num);
        snprintf(num, sizeof(num), "%d", u->db);
        put_str(&s, num);
        if (u->tls)
            put_tls_query(&s, u, &sep);
    }
    if (u->pubsub >= 0 && (size_t)u->pubsub < NPUBSUB_WORDS)
        put_param(&s, &sep, "pubsub", pubsub_words[u->pubsub]);
    if (size > 0)
        buf[s.len < size ? s.len : size - 1] = '\0';
    return (int)s.len;
}
