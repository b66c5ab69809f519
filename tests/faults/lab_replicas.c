/* SPDX-License-Identifier: MIT */
/*
 * torture --lab --replicas: one server with two replicas and wait_replicas
 * (LEASH_TOPOLOGY_SINGLE), a part of torture.c that lives in a file of its
 * own; torture.c includes it where the lab's pieces and the checks are
 * defined (it is not compiled alone).
 *
 * The master (node redis0, the supervisor's R: the one-server faults act
 * on it, and "no lock left" is asked of it) and two replicas of it
 * (redis1, redis2), each in its node. The clients reach the master only.
 * Even workers ask for WAIT 2 (every replica), odd ones and the probe for
 * WAIT 1: so both the answer to "every replica or nothing" and to "one of
 * two is enough" are under the faults. On one master there is no
 * failover, so wait_replicas buys no safety here; what it must do is be
 * honest: a grant short of its WAIT fails LEASH_EREPLICAS (and is given
 * back), a hold whose renewals fall short is lost (REPLICAS, or
 * UNREACHABLE at its deadline), never kept by a renewal that did not
 * count.
 *
 * The faults, besides the one server's (lab_fault_names, on the master):
 *   replicas-cut-off  the master cut off from both replicas, the clients
 *                     still reaching it: every WAIT runs out;
 *   freeze-replica    one replica SIGSTOPped: WAIT 2 runs out, WAIT 1 is
 *                     answered by the other;
 *   replica-oneway    one replica's stream, or its acknowledgements, lost
 *                     (one direction of the master-replica path dropped).
 * Each holds 200 ms to three leases, then heals; the supervisor waits
 * until both replicas acknowledge a write again (WAIT 2 on its own
 * connection) before the next fault.
 *
 * The checks, beyond torture's (check_replica_windows): while fewer
 * replicas could acknowledge than a worker's wait_replicas (from the
 * fault's start to its heal), that worker is granted nothing that it
 * asked for and was answered in the window, and none of its holds is
 * valid later than the window's start + the longest lease (a renewal
 * sent in the window cannot have counted). The probe (WAIT 1) asks again
 * when it is refused LEASH_EREPLICAS (docs/cluster.md "What WAIT buys": grants
 * fail while too few replicas acknowledge), as a user would: started as
 * a one-replica fault begins, it must be granted within RECOVER_MS of
 * that start (the other replica answers); started as the replicas are
 * cut off, within RECOVER_MS of their acknowledging again; and one
 * started then, after any fault of this list, too.
 */

/* The replicas (the master is R). */
#define RP_N 2
static test_redis RPL[RP_N];

enum {
    RPF_CUT_OFF,
    RPF_FREEZE,
    RPF_ONEWAY,
    RPF_COUNT
};
static const char *const replicas_fault_names[RPF_COUNT] = {"replicas-cut-off", "freeze-replica",
                                                            "replica-oneway"};
static uint64_t replicas_fault_count[RPF_COUNT];

/* The windows in which at most `reachable` replicas could acknowledge. */
#define MAX_RWIN 1024
static struct {
    int64_t from, to;
    int reachable;
} rwin[MAX_RWIN];
static int nrwin;

static void replica_window(int64_t from, int64_t to, int reachable) {
    if (nrwin < MAX_RWIN) {
        rwin[nrwin].from = from;
        rwin[nrwin].to = to;
        rwin[nrwin].reachable = reachable;
        nrwin++;
    }
}

/* A worker's wait_replicas (the probe: W.proc -1). */
static int replicas_wait_of(int proc) {
    return proc >= 0 && proc % 2 == 0 ? RP_N : 1;
}

static int replicas_fault_named(const char *name) {
    for (int f = 0; f < RPF_COUNT; f++)
        if (strcmp(replicas_fault_names[f], name) == 0)
            return f;
    return -1;
}

/* 1 while the master has a child saving (a full resynchronization's
 * RDB, an AOF rewrite) or an AOF rewrite waits for one: the runs that
 * began as the replicas' first sync ended stalled every client for
 * 600-800 ms (try-once acquires ended ECONN past their bound). */
static int master_forked(void) {
    redisReply *r = test_redis_cmd(&R, "INFO persistence");
    int busy = r == NULL || r->type != REDIS_REPLY_STRING ||
               strstr(r->str, "rdb_bgsave_in_progress:1") != NULL ||
               strstr(r->str, "aof_rewrite_in_progress:1") != NULL ||
               strstr(r->str, "aof_rewrite_scheduled:1") != NULL;
    if (r)
        freeReplyObject(r);
    return busy;
}

/* Blocks until both replicas acknowledge a write of the supervisor's own
 * (a key outside the workers' prefix, with a TTL). Returns when. */
static int64_t replicas_synced(void) {
    int64_t until = now_ms() + 60000;
    for (;;) {
        redisReply *r = test_redis_cmd(&R, "SET lab:sync %lld PX 10000", (long long)now_ms());
        if (r != NULL)
            freeReplyObject(r);
        if (test_redis_int(&R, "WAIT %d 200", RP_N) == RP_N && !master_forked())
            return now_ms();
        if (now_ms() > until) {
            fprintf(stderr, "torture: the replicas did not acknowledge again\n");
            kill_workers();
            exit(2);
        }
        sleep_ms(20);
    }
}

/* A probe started now, once the replicas acknowledge: the lock is free
 * again within RECOVER_MS. */
static void replicas_recovery_probe(int64_t synced, const char *fault) {
    probe pr;
    probe_start(&pr);
    probe_check(&pr, synced, fault);
}

/* After one of the one server's faults (f, from t0) in this topology:
 * the replicas in sync again; a master isolated or restarted had none
 * that acknowledged meanwhile. */
static void replicas_after_lab_fault(int f, int64_t t0) {
    int64_t synced = replicas_synced();
    /* A full master (maxmemory): the WAIT 2 clients' commands were seen
     * held up 500-700 ms, the WAIT 1 ones' not (not understood yet). */
    if (f == NF_ISOLATE || f == LF_RESTART || f == LF_RESTART_EMPTY || f == LF_NAME_MOVES ||
        f == LF_MAXMEMORY)
        note_short_of_replicas(t0, synced + REPLICA_ACK_MS);
}

/* 1 when it fired one of this topology's faults; 0: fire one of the one
 * server's instead. */
static int replicas_fault(void) {
    int f = s_between(0, 2 * RPF_COUNT - 1), k = s_between(0, RP_N - 1), dir = s_between(0, 1);
    int master = lab_srv[0], node = lab_srv[1 + k], reachable;
    int64_t t0 = now_ms(), from, to, ms, synced;
    char said[96] = "";
    probe pr;

    if (cfg.only != NULL)
        f = replicas_fault_named(cfg.only);
    if (f < 0 || f >= RPF_COUNT) /* half the time, and what --only names */
        return 0;
    replicas_fault_count[f]++;
    switch (f) {
    case RPF_CUT_OFF:
        for (int i = 0; i < RP_N; i++)
            lab_rule(netlab_cut(LAB, master, lab_srv[1 + i]));
        reachable = 0;
        break;
    case RPF_FREEZE:
        test_redis_freeze(&RPL[k]);
        snprintf(said, sizeof said, " (replica %d)", k + 1);
        reachable = RP_N - 1;
        break;
    default:
        lab_rule(dir ? netlab_cut_oneway(LAB, master, node) : netlab_cut_oneway(LAB, node, master));
        snprintf(said, sizeof said, " (replica %d's %s lost)", k + 1,
                 dir ? "stream" : "acknowledgements");
        reachable = RP_N - 1;
        break;
    }
    from = now_ms();
    probe_start(&pr);
    sleep_ms(ms = s_between(200, 3 * cfg.lease_max));
    to = now_ms();
    if (f == RPF_FREEZE)
        test_redis_thaw(&RPL[k]);
    else
        lab_rule(netlab_heal(LAB));
    replica_window(from, to, reachable);
    synced = replicas_synced();
    /* The WAIT 2 clients are short in any case; the WAIT 1 probe only
     * without a replica (with one, the other answers all along). */
    note_short_of_replicas(t0, synced + REPLICA_ACK_MS);
    fprintf(stderr, "torture: t=%lld fault %s for %lld ms%s, in sync again at t=%lld\n",
            (long long)t0, replicas_fault_names[f], (long long)ms, said, (long long)synced);
    probe_check(&pr, reachable > 0 ? from : synced, replicas_fault_names[f]);
    replicas_recovery_probe(synced, replicas_fault_names[f]);
    return 1;
}

/* The master and its replicas in the lab, each on its node, synced; the
 * rest of the lab. *port: the master's port for clients. */
static int replicas_start(const test_redis_config *rc, int *port) {
    char extra[512];

    if (lab_make(1 + RP_N) != 0)
        return -1;
    test_redis_config c = lab_place(0, rc);
    if (test_redis_start(&R, &c) != 0)
        return -1;
    for (int i = 0; i < RP_N; i++) {
        /* Over the plain port: the harness' TLS certificates name
         * localhost, and the stream is not what is under test. */
        snprintf(extra, sizeof extra, "replicaof %s %d\nreplica-read-only yes",
                 netlab_addr(LAB, lab_srv[0]), R.port);
        test_redis_config rcr = *rc;
        rcr.extra = extra;
        c = lab_place(1 + i, &rcr);
        if (test_redis_start(&RPL[i], &c) != 0)
            return -1;
    }
    if (lab_finish() != 0)
        return -1;
    replicas_synced();
    *port = cfg.tls ? R.tls_port : R.port;
    return 0;
}

static void replicas_stop(void) {
    for (int i = 0; i < RP_N; i++)
        test_redis_stop(&RPL[i]);
}

/* The "cell" lines of this topology's own faults. */
static void replicas_print(void) {
    printf("\nreplicas' faults:");
    for (int i = 0; i < RPF_COUNT; i++)
        printf(" %s=%" PRIu64, replicas_fault_names[i], replicas_fault_count[i]);
    for (int i = 0; i < RPF_COUNT; i++) {
        const struct cell *c = cell_of(replicas_fault_names[i]);
        printf("\ncell %s fired=%" PRIu64 " probes=%" PRIu64 " failed=%" PRIu64
               " documented=%" PRIu64 " expected=%" PRIu64,
               replicas_fault_names[i], replicas_fault_count[i], c->probes, c->failed,
               c->documented, c->expected);
    }
}

/*
 * While at most rwin[].reachable replicas could acknowledge (from the
 * fault in place to its heal), a worker that asks for more:
 *   - is granted nothing it asked for in the window and was answered in
 *     it (its WAIT ran in the window: nobody could acknowledge);
 *   - holds nothing valid at a moment of the window later than the
 *     window's start + the longest lease: validity comes from a grant or
 *     a renewal sent no earlier than a lease before, so from one sent in
 *     the window, whose WAIT ran, and was answered, in it.
 */
static void check_replica_windows(void) {
    uint64_t n = S->nrec < S->cap ? S->nrec : S->cap, i;

    for (int w = 0; w < nrwin; w++) {
        int64_t from = rwin[w].from, to = rwin[w].to;
        for (i = 0; i < n; i++) {
            const rec *x = &S->recs[i];
            if (replicas_wait_of(x->proc) <= rwin[w].reachable)
                continue;
            if (x->type == REC_ACQ && x->status == LEASH_OK && x->a >= from && x->b <= to)
                sv_violation("proc %d handle %d: n%d granted at t=%lld (fence %" PRIu64
                             ", asked at t=%lld) with WAIT %d while at most %d replicas could "
                             "acknowledge (t=%lld to t=%lld)",
                             x->proc, x->handle, x->name, (long long)x->b, x->fence,
                             (long long)x->a, replicas_wait_of(x->proc), rwin[w].reachable,
                             (long long)from, (long long)to);
            else if (x->type == REC_UNIT && x->a < to && x->b <= to && x->b > from + cfg.lease_max)
                sv_violation("proc %d handle %d: n%d fence %" PRIu64 " valid on [%lld, %lld] "
                             "with WAIT %d, past a lease after at most %d replicas could "
                             "acknowledge (t=%lld to t=%lld)",
                             x->proc, x->handle, x->name, x->fence, (long long)x->a,
                             (long long)x->b, replicas_wait_of(x->proc), rwin[w].reachable,
                             (long long)from, (long long)to);
        }
    }
}
