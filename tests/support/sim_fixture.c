/* SPDX-License-Identifier: MIT */
/* The fixture of the sim-based tests: sim_fixture.h. */
#include "sim_fixture.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

int simfx_in_call;

static void record(simfx_rec *r, int status) {
    r->calls++;
    r->status = status;
    r->at = sim_now();
    r->inside_call |= simfx_in_call;
}

void simfx_on_acquired(leash_lock *l, int status, void *arg) {
    (void)l;
    CHECK_MSG(!simfx_in_call, "acquire callback inside the call that started it");
    record(arg, status);
}

void simfx_on_released(leash_lock *l, int status, void *arg) {
    (void)l;
    CHECK_MSG(!simfx_in_call, "release callback inside the call that started it");
    record(arg, status);
}

void simfx_on_lost(leash_lock *l, int reason, void *arg) {
    (void)l;
    record(arg, reason);
}

void simfx_on_closed(int status, void *arg) {
    CHECK_MSG(!simfx_in_call, "close callback inside the call that started it");
    record(arg, status);
}

leash_client *simfx_client(sim *s, const leash_options *o) {
    leash_options defaults;
    leash_client *c = NULL;

    if (o == NULL) {
        sim_options(s, &defaults);
        o = &defaults;
    }
    CHECK_EQ_INT(leash_client_new(&c, o), LEASH_OK);
    CHECK_EQ_INT(sim_attach(s, c), LEASH_OK);
    return c;
}

void simfx_publish_release(sim *s) {
    sim_conn *sub = sim_sub_conn(s);
    const char *chan;
    size_t len;

    CHECK(sub != NULL);
    chan = sim_conn_subscription(sub, 0, &len, NULL);
    CHECK(chan != NULL);
    CHECK_EQ_INT(sim_publish(s, chan, len, "0123456789abcdef0123456789abcdef", 32), 1);
    sim_run(s);
}

int simfx_script_of(const sim_cmd *cmd) {
    return leash_script_of(cmd->argc, (const char *const *)cmd->argv, cmd->argvlen);
}

long long simfx_server_ms(void) {
    return SIM_WALL_S * 1000 + sim_now();
}

sim_cmd *simfx_pending(const sim *s, int script) {
    sim_conn *c = sim_cmd_conn(s);
    sim_cmd *cmd;
    int i;

    for (i = 0; c != NULL && (cmd = sim_conn_cmd(c, i)) != NULL; i++)
        if (simfx_script_of(cmd) == script)
            return cmd;
    return NULL;
}

int simfx_count_pending(const sim *s, int script) {
    sim_conn *c = sim_cmd_conn(s);
    sim_cmd *cmd;
    int i, n = 0;

    for (i = 0; c != NULL && (cmd = sim_conn_cmd(c, i)) != NULL; i++)
        n += simfx_script_of(cmd) == script;
    return n;
}

int simfx_count_unanswered(const sim *s, int script, const char *token) {
    int i, j, n = 0;

    for (i = 0; i < sim_conn_count(s); i++) {
        sim_conn *c = sim_conn_at(s, i);
        sim_cmd *cmd;
        for (j = 0; (cmd = sim_conn_cmd(c, j)) != NULL; j++)
            if (simfx_script_of(cmd) == script &&
                (token == NULL || strcmp(sim_cmd_arg(cmd, 4), token) == 0))
                n++;
    }
    return n;
}

sim_cmd *simfx_oldest(const sim *s, int script) {
    sim_conn *c = sim_cmd_conn(s);
    sim_cmd *cmd = c != NULL ? sim_conn_cmd(c, 0) : NULL;

    CHECK_MSG(cmd != NULL && simfx_script_of(cmd) == script,
              "the oldest pending command does not run script %d", script);
    return cmd;
}

void simfx_answer(sim *s, int script, const char *fmt, ...) {
    sim_cmd *cmd = simfx_oldest(s, script);
    char buf[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    CHECK_EQ_INT(sim_reply(cmd->conn, buf), 0);
    sim_run(s);
}

/* The hold count an acquire asks for: argument 6 of the mutex's command,
 * 10 of the family's (the dialect's acquire and the family's). Below 1: a
 * new hold from a mutex waiter that asks with its age, granted count 1 (as
 * the script does). */
static int count_asked(const sim_cmd *cmd) {
    int script = simfx_script_of(cmd), count;

    CHECK_MSG(script == LS_ACQUIRE || script == LS_FAMILY_ACQUIRE, "not an acquire: script %d",
              script);
    count = atoi(cmd->argv[script == LS_ACQUIRE ? 6 : 10]);
    return count < 1 ? 1 : count;
}

void simfx_grant(sim_cmd *cmd) {
    CHECK(cmd != NULL);
    CHECK_MSG(sim_conn_cmd(cmd->conn, 0) == cmd, "the acquire to grant is not the oldest pending");
    CHECK_EQ_INT(sim_replyf(cmd->conn, "*4\r\n:1\r\n:77\r\n:%d\r\n:%lld\r\n", count_asked(cmd),
                            simfx_server_ms()),
                 0);
}

void simfx_busy(sim_cmd *cmd, long long pttl) {
    CHECK(cmd != NULL);
    CHECK_MSG(sim_conn_cmd(cmd->conn, 0) == cmd, "the acquire to refuse is not the oldest pending");
    count_asked(cmd);
    /* The fifth element is the family's mark of the place written (1:
     * below every fence the tests let in by message); the mutex's answer
     * has four, and the parser takes either. */
    CHECK_EQ_INT(sim_replyf(cmd->conn, "*5\r\n:0\r\n:%lld\r\n:0\r\n:%lld\r\n:1\r\n", pttl,
                            simfx_server_ms()),
                 0);
}
