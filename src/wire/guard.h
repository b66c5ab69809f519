/* The reply guard (see guard.c): keeps a hostile server from making hiredis
 * abort the process. */
#ifndef LEASH_GUARD_H
#define LEASH_GUARD_H

struct redisAsyncContext;

/* Wraps the context's reply constructors; call right after connecting. */
void leash__guard_install(struct redisAsyncContext *ac);

#endif
