/* SPDX-License-Identifier: MIT */
/*
 * What operators do to a running lab: a part of torture.c in a file of its
 * own (included after the lab's pieces; not compiled alone).
 *
 * One server (and the master with replicas):
 *   name-moves  the server's node leaves its address for another
 *               (netlab_readdress; the server listens on every address)
 *               and its name is changed to the new one at once: the
 *               clients' connections to the old address go silent, and
 *               they must find the server by its name again. After a
 *               while it moves back, the same way. A path is open all
 *               along (by the name), so the probe must be granted within
 *               RECOVER_MS of the move.
 *   maxmemory   `maxmemory` set below what the server uses, with
 *               `noeviction`: every write is refused (-OOM) for a while.
 *               docs/how-it-works.md "What Redis must be and do", "No eviction": a full
 *               Redis refuses the acquire (LEASH_EREDIS). A probe that
 *               ends so while it is full is counted as documented; the
 *               holders lose their holds by their deadlines at the
 *               latest (the checks of every hold), nobody is granted a
 *               lock that is held, and once memory is back a fresh
 *               client is granted within RECOVER_MS.
 * Sentinel:
 *   sentinels-down  every sentinel gone from the network (isolated, its
 *               process running: a restart would rewrite its config)
 *               for 1 to 4 s, and, one time in two, every client
 *               connection of the master closed meanwhile, so that the
 *               workers must connect again while no sentinel answers.
 *               The probe, a fresh client that has no master yet, must
 *               be granted within RECOVER_MS of the sentinels' return.
 */

/* When the server was full (maxmemory): documented EREDIS endings. */
#define MAX_FULL 256
static int64_t full[MAX_FULL][2];
static int nfull;

/* 1 if the server was full at some moment of [from, to]. */
static int full_during(int64_t from, int64_t to) {
    for (int i = 0; i < nfull; i++)
        if (full[i][0] <= to && full[i][1] >= from)
            return 1;
    return 0;
}

/* The one server's node moves to its other address and back. */
static int64_t name_moves(char *said, size_t cap) {
    int node = lab_srv[0];
    int64_t ms = s_between(RECOVER_MS + 1000, RECOVER_MS + 3000);

    lab_rule(netlab_readdress(LAB, node, 1));
    lab_name_set(0, netlab_alt_addr(LAB, node));
    sleep_ms(ms);
    lab_rule(netlab_readdress(LAB, node, 0));
    lab_name_set(0, netlab_addr(LAB, node));
    snprintf(said, cap, " (to %s and back)", netlab_alt_addr(LAB, node));
    return ms;
}

/* The one server full for a while. */
static int64_t maxmemory_full(char *said, size_t cap) {
    redisReply *r = test_redis_cmd(&R, "INFO memory");
    long long used = 0;
    int64_t ms = s_between(200, 3 * cfg.lease_max);
    const char *p;

    if (r != NULL && r->type == REDIS_REPLY_STRING && (p = strstr(r->str, "used_memory:")) != NULL)
        used = atoll(p + strlen("used_memory:"));
    if (r)
        freeReplyObject(r);
    if (used <= 0) {
        fprintf(stderr, "torture: no used_memory from the server\n");
        kill_workers();
        exit(2);
    }
    admin("CONFIG SET maxmemory-policy noeviction");
    if (nfull < MAX_FULL)
        full[nfull][0] = now_ms(), full[nfull][1] = INT64_MAX;
    {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "CONFIG SET maxmemory %lld", used / 2);
        admin(cmd);
    }
    sleep_ms(ms);
    admin("CONFIG SET maxmemory 0");
    if (nfull < MAX_FULL)
        full[nfull++][1] = now_ms();
    snprintf(said, cap, " (maxmemory %lld of %lld used)", used / 2, used);
    return ms;
}

/* A fresh client asks once the fault is over: granted within RECOVER_MS. */
static void ops_recovery_probe(const char *fault) {
    probe pr;
    int64_t over = now_ms();
    probe_start(&pr);
    probe_check(&pr, over, fault);
}

/* Every sentinel isolated for a while (see the top); returns when they
 * name the master again, in *back. */
static void sentinels_down(int master, int64_t *back, char *said, size_t cap) {
    int first = lab_nsrv - TS.nsentinels, kill_them = s_between(0, 1);
    int64_t ms = s_between(1000, 4000);

    for (int i = 0; i < TS.nsentinels; i++)
        lab_rule(netlab_isolate(LAB, lab_srv[first + i]));
    if (kill_them)
        lab_kill_connections(&TS.data[master]);
    sleep_ms(ms);
    lab_rule(netlab_heal(LAB));
    *back = now_ms();
    if (test_sentinel_wait_master(&TS, -1, 30000) < 0)
        sentinel_harness_failed("no master named after every sentinel was back");
    snprintf(said, cap, " (for %lld ms%s)", (long long)ms,
             kill_them ? ", the master's clients cut meanwhile" : "");
}
