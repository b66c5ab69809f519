/* SPDX-License-Identifier: MIT */
#include "hostile.h"

#include "tls_front.h"

#include <string.h>
#include <strings.h>

static int hook(fake_redis *f, fr_conn *c, int argc, const char **argv, const size_t *lens,
                void *arg) {
    hostile *h = arg;
    int script = fr_script_of(argc, argv, lens);
    size_t len;
    (void)f;

    if (h->times == 0)
        return 0;
    if (h->script != FR_NOT_A_SCRIPT ? script != h->script
                                     : (h->cmd == NULL || strcasecmp(argv[0], h->cmd) != 0))
        return 0;
    if (h->times > 0)
        h->times--;
    h->hits++;
    len = h->reply_len ? h->reply_len : (h->reply ? strlen(h->reply) : 0);
    if (h->reply != NULL)
        fr_send(c, h->reply, len);
    if (h->action == HOSTILE_AND_REPLY_2 && h->reply2 != NULL)
        fr_send_str(c, h->reply2);
    if (h->action == HOSTILE_SILENT)
        fr_mute(c);
    if (h->action == HOSTILE_CLOSE)
        fr_close(c);
    return 1;
}

int64_t hw_command_timeout_ms = 300;
int hw_tls;

void hw_up(hworld *w, int64_t lease_ms) {
    leash_options o;

    memset(w, 0, sizeof *w);
    w->loop = ev_loop_new(EVFLAG_AUTO);
    CHECK(w->loop != NULL);
    w->f = fr_start(w->loop);
    CHECK(w->f != NULL);
    w->h.script = FR_NOT_A_SCRIPT;
    fr_set_hook(w->f, hook, &w->h);
    fx_fault_options(&o, fr_port(w->f), lease_ms);
    if (hw_tls) {
        w->front = tls_front_start(fr_port(w->f));
        CHECK(w->front != NULL);
        o.port = tls_front_port(w->front);
        o.tls = 1;
        o.tls_ca_file = test_tls_file(0, "ca.pem");
    }
    o.command_timeout_ms = hw_command_timeout_ms;
    w->c = fx_client_opts(w->loop, &o);
    fx_wait_connected(w->loop, w->c, 3000);
    fx_log_clear();
}

void hw_down(hworld *w) {
    leash_client_free(w->c);
    test_run_for(w->loop, 5);
    tls_front_stop(w->front);
    fr_stop(w->f);
    ev_loop_destroy(w->loop);
}

void hw_set(hworld *w, int script, const char *cmd, int action, const char *reply, int times) {
    memset(&w->h, 0, sizeof w->h);
    w->h.script = script;
    w->h.cmd = cmd;
    w->h.action = action;
    w->h.reply = reply;
    w->h.times = times;
}

void hw_behave(hworld *w) {
    w->h.times = 0;
}

fr_conn *hw_sub_conn(hworld *w) {
    int i;
    fr_conn *c;
    /* The subscriber connection sends nothing but PING (its handshake)
     * before its first SUBSCRIBE; the command connection starts with INFO
     * and SCRIPT LOAD. */
    for (i = 0; (c = fr_conn_at(w->f, i)) != NULL; i++)
        if (fr_is_subscriber(c) || fr_conn_commands_but_ping(c) == 0)
            return c;
    return NULL;
}

fr_conn *hw_cmd_conn(hworld *w) {
    int i;
    fr_conn *c;
    for (i = 0; (c = fr_conn_at(w->f, i)) != NULL; i++)
        if (!fr_is_subscriber(c) && fr_conn_commands_but_ping(c) > 0)
            return c;
    return NULL;
}
