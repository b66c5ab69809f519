/* SPDX-License-Identifier: MIT */
/*
 * A TLS front for a plain server of the test (the fake Redis), so that
 * hostile replies reach leash through TLS: it listens on a free port of
 * 127.0.0.1, accepts TLS with the test certificates (server.pem of
 * test_tls_certs()), and relays each connection, in a thread of its own,
 * to 127.0.0.1:target_port. A close on either side closes the other, so
 * that a connection the fake closes is closed to leash too.
 *
 *     tls_front *tf = tls_front_start(fr_port(f));
 *     ... leash with tls on 127.0.0.1:tls_front_port(tf) ...
 *     tls_front_stop(tf);
 */
#ifndef LEASH_TESTS_FAULTS_TLS_FRONT_H
#define LEASH_TESTS_FAULTS_TLS_FRONT_H

typedef struct tls_front tls_front;

/* NULL on failure (the reason on stderr). */
tls_front *tls_front_start(int target_port);
int tls_front_port(const tls_front *tf);
/* Closes every connection, waits for the threads, frees everything. */
void tls_front_stop(tls_front *tf);

#endif
