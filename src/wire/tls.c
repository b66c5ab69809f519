/* SPDX-License-Identifier: MIT */
#include "wire/tls.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

struct leash__tls {
    SSL_CTX *ctx;
    BIO_METHOD *bio; /* the fd with MSG_NOSIGNAL */
    int verify;
    /* While the client key is read (and only then: it is not kept): its
     * password, and whether OpenSSL asked for one. */
    const char *key_password;
    int key_asked;
};

/* A session is OpenSSL's SSL object; the name verified stays in it. */
struct leash__tls_session {
    SSL *ssl;
};

/* ---- the fd, as a BIO: OpenSSL's own socket BIO writes with write(2),
 * which raises SIGPIPE on a closed peer ---- */

static int fd_of(BIO *b) {
    return (int)(intptr_t)BIO_get_data(b);
}

static int bio_write(BIO *b, const char *buf, int len) {
    ssize_t n;

    BIO_clear_retry_flags(b);
    do
        n = send(fd_of(b), buf, (size_t)len, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        BIO_set_retry_write(b);
    return (int)n;
}

static int bio_read(BIO *b, char *buf, int len) {
    ssize_t n;

    BIO_clear_retry_flags(b);
    do
        n = recv(fd_of(b), buf, (size_t)len, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        BIO_set_retry_read(b);
    return (int)n;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr) {
    (void)b;
    (void)num;
    (void)ptr;
    /* Nothing is buffered here: a flush is done at once. */
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static int bio_create(BIO *b) {
    BIO_set_init(b, 1);
    return 1;
}

static BIO_METHOD *bio_method_new(void) {
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "leash socket");

    if (m != NULL && (!BIO_meth_set_write(m, bio_write) || !BIO_meth_set_read(m, bio_read) ||
                      !BIO_meth_set_ctrl(m, bio_ctrl) || !BIO_meth_set_create(m, bio_create))) {
        BIO_meth_free(m);
        m = NULL;
    }
    return m;
}

/* ---- the context ---- */

/* OpenSSL's reason for the oldest error queued (and the queue emptied);
 * a system error (a file that cannot be opened) is errno's text. */
static const char *queued_reason(void) {
    unsigned long e = ERR_peek_error();
    const char *r = NULL;

    if (e != 0 && ERR_GET_LIB(e) == ERR_LIB_SYS)
        r = strerror(ERR_GET_REASON(e));
    else if (e != 0)
        r = ERR_reason_error_string(e);
    ERR_clear_error();
    return r != NULL ? r : "unknown error";
}

static int refuse_file(const leash__logger *log, const char *what, const char *path) {
    leash__log(log, LEASH_LOG_ERROR, "leash_client_new: TLS: cannot use %s%s%s: %s", what,
               path[0] != '\0' ? " " : "", path, queued_reason());
    return LEASH_ETLS;
}

/* OpenSSL's password callback: without it, reading an encrypted key asks
 * on the terminal (or reads stdin) and blocks. The key's password, or a
 * refusal: the library never prompts. */
static int give_key_password(char *buf, int size, int rwflag, void *arg) {
    leash__tls *t = arg;
    size_t n;

    (void)rwflag;
    t->key_asked = 1;
    if (t->key_password == NULL || size <= 0 || (n = strlen(t->key_password)) > (size_t)size)
        return -1;
    memcpy(buf, t->key_password, n);
    return (int)n;
}

static int refuse_key(const leash__tls *t, const leash__tls_cfg *cfg, const leash__logger *log) {
    const char *path = cfg->key_file;

    if (!t->key_asked)
        return refuse_file(log, "the client key", path);
    ERR_clear_error();
    if (cfg->key_password == NULL)
        leash__log(log, LEASH_LOG_ERROR,
                   "leash_client_new: TLS: cannot use the client key %s: the client key is "
                   "encrypted: give its password (tls_key_password)",
                   path);
    else
        leash__log(log, LEASH_LOG_ERROR,
                   "leash_client_new: TLS: cannot use the client key %s: the client key is "
                   "encrypted and tls_key_password does not decrypt it",
                   path);
    return LEASH_ETLS;
}

static int load_files(leash__tls *t, const leash__tls_cfg *cfg, const leash__logger *log) {
    SSL_CTX *ctx = t->ctx;
    int ok;

    if (cfg->ca_file != NULL || cfg->ca_dir != NULL) {
        if (SSL_CTX_load_verify_locations(ctx, cfg->ca_file, cfg->ca_dir) != 1)
            return refuse_file(log, cfg->ca_file != NULL ? "the CA file" : "the CA directory",
                               cfg->ca_file != NULL ? cfg->ca_file : cfg->ca_dir);
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        return refuse_file(log, "the system's CA store", "");
    }
    if (cfg->cert_file != NULL) {
        if (SSL_CTX_use_certificate_chain_file(ctx, cfg->cert_file) != 1)
            return refuse_file(log, "the client certificate", cfg->cert_file);
        t->key_password = cfg->key_password;
        t->key_asked = 0;
        ok = SSL_CTX_use_PrivateKey_file(ctx, cfg->key_file, SSL_FILETYPE_PEM) == 1;
        t->key_password = NULL;
        if (!ok)
            return refuse_key(t, cfg, log);
        if (SSL_CTX_check_private_key(ctx) != 1)
            return refuse_file(log, "the client key (it does not match the certificate)",
                               cfg->key_file);
    }
    return LEASH_OK;
}

int leash__tls_new(leash__tls **out, const leash__tls_cfg *cfg, const leash__logger *log) {
    leash__tls *t = calloc(1, sizeof(*t));
    int rc = LEASH_ENOMEM;

    ERR_clear_error();
    if (t == NULL || (t->bio = bio_method_new()) == NULL ||
        (t->ctx = SSL_CTX_new(TLS_client_method())) == NULL)
        goto fail;
    t->verify = cfg->verify;
    SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
    /* A write returns after each record it sent (the rest goes at the
     * next write event), and the buffer may move between the tries: the
     * output buffer grows by realloc while a record waits. */
    SSL_CTX_set_mode(t->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_verify(t->ctx, cfg->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    /* Before any file is read: OpenSSL's own default prompts. */
    SSL_CTX_set_default_passwd_cb(t->ctx, give_key_password);
    SSL_CTX_set_default_passwd_cb_userdata(t->ctx, t);
    if ((rc = load_files(t, cfg, log)) != LEASH_OK)
        goto fail;
    if (!cfg->verify)
        leash__log(log, LEASH_LOG_WARN,
                   "TLS without verification (tls_verify = 0): the server's certificate and "
                   "name are not checked, anyone in the middle can read and change the traffic");
    *out = t;
    return LEASH_OK;
fail:
    if (rc == LEASH_ENOMEM)
        leash__log(log, LEASH_LOG_ERROR, "leash_client_new: TLS: out of memory (%s)",
                   queued_reason());
    leash__tls_free(t);
    return rc;
}

void leash__tls_free(leash__tls *t) {
    if (t == NULL)
        return;
    SSL_CTX_free(t->ctx);
    BIO_meth_free(t->bio);
    free(t);
}

/* ---- a session ---- */

/* A host name goes out as SNI and is matched against the certificate's
 * DNS names (its SANs only: a certificate that names its host in the
 * subject's CN alone is refused, as RFC 9525 and modern clients do); an IP
 * address is matched against its IP addresses (RFC 6066 has no SNI for
 * addresses). A name in its absolute form ("a.svc.test.", common in
 * Kubernetes) is the same name: SNI and certificates carry it without its
 * trailing dot. */
static int set_name(SSL *ssl, const char *name, int verify) {
    X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
    char relative[256];
    size_t n = strlen(name);

    if (n > 1 && name[n - 1] == '.' && n - 1 < sizeof(relative)) {
        memcpy(relative, name, n - 1);
        relative[n - 1] = '\0';
        name = relative;
    }
    if (X509_VERIFY_PARAM_set1_ip_asc(param, name) == 1)
        return 1;
    if (SSL_set_tlsext_host_name(ssl, name) != 1)
        return 0;
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS |
                                               X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
    return !verify || X509_VERIFY_PARAM_set1_host(param, name, 0) == 1;
}

leash__tls_session *leash__tls_session_new(leash__tls *t, int fd, const char *name, char *err,
                                           size_t errlen) {
    leash__tls_session *ts = calloc(1, sizeof(*ts));
    BIO *bio = NULL;

    ERR_clear_error();
    if (ts == NULL || (ts->ssl = SSL_new(t->ctx)) == NULL || (bio = BIO_new(t->bio)) == NULL)
        goto fail;
    BIO_set_data(bio, (void *)(intptr_t)fd);
    SSL_set_bio(ts->ssl, bio, bio);
    if (!set_name(ts->ssl, name, t->verify))
        goto fail;
    SSL_set_connect_state(ts->ssl);
    return ts;
fail:
    snprintf(err, errlen, "TLS session: %s", queued_reason());
    if (ts != NULL && ts->ssl == NULL)
        BIO_free(bio);
    leash__tls_session_free(ts);
    return NULL;
}

void leash__tls_session_free(leash__tls_session *ts) {
    if (ts == NULL)
        return;
    SSL_free(ts->ssl);
    free(ts);
}

/* What a reason means for a user, when it is one they can act on. */
static const char *hint(unsigned long e, long verify) {
    switch (verify) {
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
        return "; the certificate is not for this host: set tls_server_name (sni= in the URL) "
               "to a name it has";
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
        return "; the server's certificate is not signed by a CA this client trusts: "
               "tls_ca_file (ca= in the URL)";
    case X509_V_ERR_CERT_HAS_EXPIRED:
    case X509_V_ERR_CERT_NOT_YET_VALID:
        return "; renew the server's certificate (or check this host's clock)";
    default:
        break;
    }
    switch (ERR_GET_REASON(e)) {
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
        return "; is this port TLS? (the server answered in plain text)";
#ifdef SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
#endif
    case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
        return "; the server refused this client: it wants a client certificate its CA "
               "signed (tls_cert_file and tls_key_file, cert= and key= in the URL)";
    default:
        return "";
    }
}

/* Turns the outcome of an SSL call that returned n <= 0 into LEASH__TLS_*;
 * why says what failed. */
static int outcome(leash__tls_session *ts, int n, int handshake, char *why, size_t whylen) {
    const char *doing = handshake ? " handshake" : "";
    const char *during = handshake ? " during the TLS handshake" : " (no TLS close_notify)";
    int err = SSL_get_error(ts->ssl, n);
    unsigned long e;
    long verify;

    switch (err) {
    case SSL_ERROR_WANT_READ:
        return LEASH__TLS_WANT_READ;
    case SSL_ERROR_WANT_WRITE:
        return LEASH__TLS_WANT_WRITE;
    case SSL_ERROR_ZERO_RETURN:
        snprintf(why, whylen, "closed by the server (TLS close_notify)");
        return LEASH__TLS_CLOSED;
    case SSL_ERROR_SYSCALL: {
        int sys = errno;
        ERR_clear_error();
        if (sys == 0) {
            /* OpenSSL 1.1: an EOF without close_notify. */
            snprintf(why, whylen, "closed by the server%s", during);
            return LEASH__TLS_CLOSED;
        }
        snprintf(why, whylen, "TLS%s: connection failed: %s", doing, strerror(sys));
        return LEASH__TLS_BROKEN;
    }
    default:
        break;
    }
    e = ERR_peek_error();
    ERR_clear_error();
#ifdef SSL_R_UNEXPECTED_EOF_WHILE_READING
    if (ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
        snprintf(why, whylen, "closed by the server%s", during);
        return LEASH__TLS_CLOSED;
    }
#endif
    verify = SSL_get_verify_result(ts->ssl);
    if (e != 0 && ERR_GET_REASON(e) == SSL_R_CERTIFICATE_VERIFY_FAILED && verify != X509_V_OK)
        snprintf(why, whylen, "TLS%s failed: certificate verify failed: %s%s", doing,
                 X509_verify_cert_error_string(verify), hint(e, verify));
    else
        snprintf(why, whylen, "TLS%s failed: %s%s", doing,
                 e != 0 && ERR_reason_error_string(e) != NULL ? ERR_reason_error_string(e)
                                                              : "protocol error",
                 hint(e, X509_V_OK));
    return LEASH__TLS_FAILED;
}

int leash__tls_handshake(leash__tls_session *ts, char *why, size_t whylen) {
    int n;

    ERR_clear_error();
    errno = 0;
    n = SSL_do_handshake(ts->ssl);
    return n == 1 ? LEASH__TLS_DONE : outcome(ts, n, 1, why, whylen);
}

long leash__tls_read(leash__tls_session *ts, char *buf, size_t len, char *why, size_t whylen) {
    int n;

    ERR_clear_error();
    errno = 0;
    n = SSL_read(ts->ssl, buf, len > INT_MAX ? INT_MAX : (int)len);
    return n > 0 ? n : outcome(ts, n, 0, why, whylen);
}

long leash__tls_write(leash__tls_session *ts, const char *buf, size_t len, char *why,
                      size_t whylen) {
    int n;

    /* Capped at a constant, so a retry is never shorter than the try. */
    ERR_clear_error();
    errno = 0;
    n = SSL_write(ts->ssl, buf, len > (1u << 30) ? (int)(1u << 30) : (int)len);
    return n > 0 ? n : outcome(ts, n, 0, why, whylen);
}

void leash__tls_seen(const leash__tls_session *ts, char *out, size_t len) {
    uint64_t n = BIO_number_read(SSL_get_rbio(ts->ssl));

    if (n == 0)
        snprintf(out, len, "no byte from the server");
    else
        snprintf(out, len,
                 "%llu byte%s from the server, then nothing; the handshake's last step: %s",
                 (unsigned long long)n, n == 1 ? "" : "s", SSL_state_string_long(ts->ssl));
}

int leash__tls_pending(const leash__tls_session *ts) {
    /* Decrypted bytes only: part of a record waiting for its rest is not
     * an answer (SSL_has_pending counts it), and a server that stops in
     * the middle of a record is silent. */
    return SSL_pending(ts->ssl) > 0;
}
