/*
 * The reply guard: hiredis's async layer asserts (aborts the process) on
 * some replies a broken or hostile server can send: a reply no callback
 * waits for, and pub/sub frames of the wrong shape. The guard wraps the
 * reader's object constructors and refuses such a reply while it is being
 * parsed; hiredis then reports a reader error and closes the connection
 * cleanly, which leash treats like any broken connection (reconnect, retry).
 */
#include "wire/guard.h"

#include <stdatomic.h>
#include <string.h>
#include <strings.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "wire/conn.h"

#if HIREDIS_MAJOR >= 1
typedef size_t guard_count;
#else
typedef int guard_count;
#endif

/* Our replies never hold more than one renew batch (100) per array. */
#define GUARD_MAX_ELEMENTS 4096

/* hiredis's own constructors: the same table for every reader. */
static _Atomic(redisReplyObjectFunctions *) hiredis_fns;

static redisAsyncContext *task_context(const redisReadTask *task) {
    return task->privdata;
}

/* A reply arriving with no regular callback pending: only a subscribed
 * connection may get those, as pub/sub frames. */
static int unsolicited(const redisAsyncContext *ac) {
    return ac->replies.head == NULL;
}

static int subscribed(const redisAsyncContext *ac) {
    return (ac->c.flags & REDIS_SUBSCRIBED) != 0;
}

static void *refuse(const redisReadTask *task, const char *why) {
    redisAsyncContext *ac = task_context(task);
    leash__conn *conn = ac ? ac->data : NULL;

    if (conn != NULL)
        leash__log(&conn->env->log, LEASH_LOG_ERROR,
                   "%s connection: protocol violation by the server (%s): reconnecting",
                   leash__conn_role_name(conn), why);
    return NULL;
}

/* Checks a child of a pub/sub frame: ["message"|"subscribe"|..., channel, x]. */
static int frame_child_ok(const redisReadTask *task, int type) {
    const redisReply *frame = task->parent->obj;

    if (task->parent->parent != NULL)
        return 0; /* nested deeper than a frame */
    if (task->idx <= 1)
        return type == REDIS_REPLY_STRING;
    if (task->idx == 2 && frame->element[0] != NULL) {
        const char *kind = frame->element[0]->str;
        if (strcasecmp(kind, "subscribe") == 0 || strcasecmp(kind, "unsubscribe") == 0 ||
            strcasecmp(kind, "psubscribe") == 0 || strcasecmp(kind, "punsubscribe") == 0)
            return type == REDIS_REPLY_INTEGER;
    }
    return 1;
}

/* Common checks for every object; `type` is what is being made. */
static const char *check(const redisReadTask *task, int type, long long elements) {
    redisAsyncContext *ac = task_context(task);

    if (ac == NULL)
        return NULL;
    if (type == REDIS_REPLY_ARRAY && elements > GUARD_MAX_ELEMENTS)
        return "array too large";
    if (task->parent == NULL) {
        if (!unsolicited(ac) || type == REDIS_REPLY_ERROR)
            return NULL; /* an answer, or an error hiredis handles itself */
        if (!subscribed(ac))
            return "a reply to no command";
        if (type != REDIS_REPLY_ARRAY || elements < 3)
            return "a pub/sub frame that is not an array of 3";
        return NULL;
    }
    if (unsolicited(ac) && subscribed(ac) && !frame_child_ok(task, type))
        return "a pub/sub frame of the wrong shape";
    return NULL;
}

static void *guard_string(const redisReadTask *task, char *str, size_t len) {
    const char *why = check(task, task->type, 0);
    return why ? refuse(task, why) : atomic_load(&hiredis_fns)->createString(task, str, len);
}

static void *guard_array(const redisReadTask *task, guard_count elements) {
    const char *why = check(task, REDIS_REPLY_ARRAY, (long long)elements);
    return why ? refuse(task, why) : atomic_load(&hiredis_fns)->createArray(task, elements);
}

static void *guard_integer(const redisReadTask *task, long long value) {
    const char *why = check(task, REDIS_REPLY_INTEGER, 0);
    return why ? refuse(task, why) : atomic_load(&hiredis_fns)->createInteger(task, value);
}

static void *guard_nil(const redisReadTask *task) {
    const char *why = check(task, REDIS_REPLY_NIL, 0);
    return why ? refuse(task, why) : atomic_load(&hiredis_fns)->createNil(task);
}

static void guard_free(void *reply) {
    atomic_load(&hiredis_fns)->freeObject(reply);
}

#if HIREDIS_MAJOR >= 1
static void *guard_double(const redisReadTask *task, double value, char *str, size_t len) {
    const char *why = check(task, REDIS_REPLY_DOUBLE, 0);
    return why ? refuse(task, why) : atomic_load(&hiredis_fns)->createDouble(task, value, str, len);
}

static void *guard_bool(const redisReadTask *task, int value) {
    const char *why = check(task, REDIS_REPLY_BOOL, 0);
    return why ? refuse(task, why) : atomic_load(&hiredis_fns)->createBool(task, value);
}
#endif

/* Static: a reader may outlive its client (hiredis frees the context after
 * the callback that freed the client returns). */
static redisReplyObjectFunctions guarded = {
    .createString = guard_string,
    .createArray = guard_array,
    .createInteger = guard_integer,
#if HIREDIS_MAJOR >= 1
    .createDouble = guard_double,
    .createBool = guard_bool,
#endif
    .createNil = guard_nil,
    .freeObject = guard_free,
};

void leash__guard_install(redisAsyncContext *ac) {
    redisReader *reader = ac->c.reader;

    if (reader == NULL || reader->fn == &guarded)
        return;
    /* Every reader starts with hiredis's one default table. */
    atomic_store(&hiredis_fns, reader->fn);
    reader->fn = &guarded;
    reader->privdata = ac;
}
