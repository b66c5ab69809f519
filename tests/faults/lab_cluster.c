/* SPDX-License-Identifier: MIT */
/*
 * torture --lab --cluster: a Redis Cluster of 3 masters and 3 replicas in
 * the network lab. Not compiled on its own: torture.c includes it after
 * its lab section, and it uses torture's settings, supervisor and probe
 * (kept apart so that the cluster's faults do not interleave with the
 * other topologies' in one file).
 *
 * Every node runs in a lab node of its own (test_cluster_config.host and
 * .netns: it binds and announces the node's address, so CLUSTER SLOTS and
 * MOVED hand out lab addresses), node i on lab_srv[i]; the workers and the
 * probe in theirs. The clients use LEASH_TOPOLOGY_CLUSTER with the three
 * masters as seeds, by name (redisN.lab.test through the lab's DNS
 * servers), and WAIT 1 after every grant and renewal as --cluster does.
 *
 * The faults, each on the master of a name's slot picked at random (each
 * a function below, drawn from the printed seed):
 *   cut .. nxdomain  the lab's network faults (lab_net_fault) between some
 *                    workers (and the probe) and that master, or on its
 *                    name; isolate takes the master off the network for
 *                    up to two leases, long enough for its replica to be
 *                    promoted;
 *   failover         CLUSTER FAILOVER on its replica;
 *   kill-master      SIGKILL; once the replica was promoted and the
 *                    workers ran a while against a master without a
 *                    replica, a restart (empty: it rejoins as a replica);
 *   freeze-master    SIGSTOP for 0.7 to 3 s (node timeout 500 ms: mostly
 *                    long enough for a failover), then SIGCONT: it wakes
 *                    to a cluster that replaced it;
 *   master-minority  the master cut off from every other node, its own
 *                    replica included, while the clients still reach it,
 *                    until the majority promoted the replica, and a while
 *                    longer; then healed;
 *   bridge           two masters, each with its replica, cut off from
 *                    each other while the third master sees both: no
 *                    master sees a majority fail, nothing fails over, and
 *                    the clients see every node (a path open all along);
 *   sigstop          a worker that holds a lock frozen;
 *   migrate-cut      the name's slot migrated to another master step by
 *                    step (IMPORTING / MIGRATING, its keys moved, the
 *                    slot handed over) while some workers are cut off
 *                    from the new master: they get ASK and MOVED to a
 *                    node they cannot reach, the others go on there.
 *
 * What the checker expects: nothing unexpected. With WAIT 1 a grant or
 * renewal counts only once the replica has it, and a replica is promoted
 * only by the majority, which the minority master is not part of: the
 * promoted replica has every hold a holder counts on. The old master goes
 * on answering its clients for a node timeout, but its replica is cut off
 * (or gone to the new side), so every grant and renewal there is short of
 * its WAIT: the acquire ends LEASH_EREPLICAS and the hold is lost
 * (LEASH_LOST_REPLICAS) at its validity (docs/cluster.md "Redis Cluster", "What
 * WAIT buys": "too few acknowledgements fail the acquire with
 * LEASH_EREPLICAS ... or lose a held lock with LEASH_LOST_REPLICAS"). A
 * probe that ends LEASH_EREPLICAS while a master was short of replicas is
 * counted as documented by that sentence, as in Sentinel mode; every other
 * violation fails the run. A master is short of replicas from the start of
 * a fault that may fail it over or cuts its replication (failover,
 * kill-master, freeze-master, master-minority, isolate: the replication
 * link may resume only at its next TCP retransmission, up to seconds after
 * the heal; or any fault after which the master was replaced) until its
 * replica acknowledges again (REPLICA_ACK_MS after the cluster settled).
 *
 * After each fault the supervisor waits until the cluster has settled
 * (test_cluster_wait_settled) before the next one; the probe must be
 * granted within RECOVER_MS of the fault's end, which is when the network
 * was healed or the process thawed or restarted (the bridge: its start).
 */

enum {
    CL_FAILOVER = NF_COUNT, /* below it: the network faults, NF_* */
    CL_KILL,
    CL_FREEZE,
    CL_MINORITY,
    CL_BRIDGE,
    CL_SIGSTOP,
    CL_MIGRATE_CUT,
    CL_COUNT
};
static const char *const cluster_lab_fault_names[] = {
    NET_FAULT_NAMES,   "failover", "kill-master", "freeze-master",
    "master-minority", "bridge",   "sigstop",     "migrate-cut"};
_Static_assert(sizeof cluster_lab_fault_names / sizeof cluster_lab_fault_names[0] == CL_COUNT,
               "a name for every fault of the cluster lab");
static uint64_t cluster_lab_fault_count[CL_COUNT];

static int cluster_lab_fault_named(const char *name) {
    for (int f = 0; f < CL_COUNT; f++)
        if (strcmp(cluster_lab_fault_names[f], name) == 0)
            return f;
    return -1;
}

/* The slot of the name the current fault is on: the probe's lock lives
 * in the same shard (the range of slots the harness gave one master at the
 * start; migrate-cut moves single slots out of it, whose names the probe
 * then no longer shares a master with, so the probe crosses what happens
 * to the master the slot left), so that it crosses the fault. */
static int cluster_lab_fault_slot = -1;

static int cluster_lab_shard(int slot) {
    int k = 0;
    while (k + 1 < C.cfg.masters && slot >= (k + 1) * TEST_CLUSTER_SLOTS / C.cfg.masters)
        k++;
    return k;
}

/* probe_name_fn: probe<n>.<k>, the first k whose key is in that shard. */
static void cluster_lab_probe_name(char *name, size_t cap, int n) {
    char key[64];
    for (int k = 0; k < 100000; k++) {
        snprintf(name, cap, "probe%d.%d", n, k);
        snprintf(key, sizeof key, PREFIX "%s", name);
        if (cluster_lab_fault_slot < 0 || cluster_lab_shard(test_cluster_slot_of_key(key)) ==
                                              cluster_lab_shard(cluster_lab_fault_slot))
            return;
    }
}

/* The lab with a node per cluster node (node i on lab_srv[i]), the
 * cluster placed on them, the rest of the lab, and the seeds by name.
 * Returns the port the probe's options name (unused in a cluster: the
 * seeds are), or -1. */
static int cluster_lab_start(void) {
    test_cluster_config cc;
    test_redis_config none;
    int i, n = 6; /* the harness' default: 3 masters, one replica each */

    memset(&cc, 0, sizeof cc);
    memset(&none, 0, sizeof none);
    if (lab_make(n) != 0)
        return -1;
    for (i = 0; i < n; i++) {
        test_redis_config c = lab_place(i, &none);
        cc.host[i] = c.host;
        cc.netns[i] = c.netns;
        cc.tls_dir = c.tls_dir;
    }
    if (test_cluster_start(&C, &cc) != 0 || lab_finish() != 0)
        return -1;
    for (i = 0; i < C.cfg.masters; i++) {
        const test_redis *s = &C.node[i].server;
        snprintf(seed_text[i], sizeof seed_text[i], "%s:%d", lab_names[i],
                 cfg.tls ? s->tls_port : s->port);
        seeds[i] = seed_text[i];
    }
    nseeds = C.cfg.masters;
    probe_name_fn = cluster_lab_probe_name;
    return cfg.tls ? C.node[0].server.tls_port : C.node[0].server.port;
}

/* Until node replica says it is a master (it won an election); 0, or -1
 * after the settle timeout. Asks the replica only: the cluster as a whole
 * does not agree while a partition lasts. */
static int cluster_lab_wait_master(int replica) {
    int64_t until = now_ms() + C.cfg.settle_timeout_ms;
    while (now_ms() < until) {
        if (test_cluster_role(&C, replica) == TEST_CLUSTER_MASTER)
            return 0;
        sleep_ms(20);
    }
    return -1;
}

/* master-minority: master cut off from every other node while the
 * clients reach it, until its replica was promoted, and 0.1 to 2 s more
 * (the old master answers meanwhile, its WAITs short); then healed.
 * Returns when it was healed; *promoted: when the replica said master. */
static int64_t cluster_lab_minority(int master, int replica, int64_t *promoted) {
    int i;

    for (i = 0; i < C.count; i++)
        if (i != master)
            lab_rule(netlab_cut(LAB, lab_srv[master], lab_srv[i]));
    if (cluster_lab_wait_master(replica) != 0)
        harness_failed("master-minority: the replica was not promoted");
    *promoted = now_ms();
    sleep_ms(s_between(100, 2000));
    lab_rule(netlab_heal(LAB));
    return now_ms();
}

/* bridge: masters a and b, each with its replica, cut off from each
 * other; the third master sees both. For 0.5 s to two leases. */
static void cluster_lab_bridge(int a, int b, char *said, size_t cap) {
    int side[2][2] = {{a, test_cluster_replica_of(&C, a)}, {b, test_cluster_replica_of(&C, b)}};
    int i, j;
    int64_t ms;

    for (i = 0; i < 2; i++)
        for (j = 0; j < 2; j++)
            if (side[0][i] >= 0 && side[1][j] >= 0)
                lab_rule(netlab_cut(LAB, lab_srv[side[0][i]], lab_srv[side[1][j]]));
    sleep_ms(ms = s_between(500, 2 * cfg.lease_max));
    lab_rule(netlab_heal(LAB));
    snprintf(said, cap, " (%d,%d cut off from %d,%d for %lld ms)", side[0][0], side[0][1],
             side[1][0], side[1][1], (long long)ms);
}

/* freeze-master: SIGSTOP for 0.7 to 3 s, then SIGCONT. */
static void cluster_lab_freeze(int master, char *said, size_t cap) {
    int64_t ms = s_between(C.cfg.node_timeout_ms + 200, 3000);
    test_redis_freeze(&C.node[master].server);
    sleep_ms(ms);
    test_redis_thaw(&C.node[master].server);
    snprintf(said, cap, " for %lld ms", (long long)ms);
}

/* kill-master: SIGKILL, the replica promoted, the workers on against a
 * master without a replica for 0.1 to 2 s, then the restart. */
static void cluster_lab_kill(int master, int64_t *promoted, int64_t *restarted) {
    if (test_cluster_kill(&C, master) != 0)
        settle_again("kill");
    if (test_cluster_wait_promoted(&C, master) < 0)
        settle_again("wait_promoted");
    *promoted = now_ms();
    sleep_ms(s_between(100, 2000));
    *restarted = now_ms();
    if (test_cluster_restart(&C, master) != 0)
        settle_again("restart");
}

/* migrate-cut: slot migrated from its master to `to` while some workers
 * (one to all but one) are cut off from `to`, for 0.2 s to a lease before
 * the keys move and as long again after. Returns when it was healed. */
static int64_t cluster_lab_migrate_cut(int slot, int to, char *said, size_t cap) {
    int i, cut = 0, want = s_between(1, cfg.procs > 1 ? cfg.procs - 1 : 1);
    int64_t healed;

    if (test_cluster_migrate_begin(&C, slot, to) != 0)
        settle_again("migrate_begin");
    for (i = 0; i < cfg.procs && cut < want; i++)
        if (s_between(0, cfg.procs - i - 1) < want - cut) {
            lab_rule(netlab_cut(LAB, lab_srv[to], lab_cli[i]));
            cut++;
        }
    sleep_ms(s_between(200, cfg.lease_max));
    if (test_cluster_migrate_move_keys(&C, slot, to, 0) < 0)
        settle_again("migrate_move_keys");
    sleep_ms(s_between(200, cfg.lease_max));
    lab_rule(netlab_heal(LAB));
    healed = now_ms();
    if (test_cluster_migrate_finish(&C, slot, to) != 0)
        settle_again("migrate_finish");
    snprintf(said, cap, " to master %d, %d workers cut off from it", to, cut);
    return healed;
}

static void one_cluster_lab_fault(void) {
    int f = cfg.only != NULL ? cluster_lab_fault_named(cfg.only) : s_between(0, CL_COUNT - 1);
    int name = s_between(0, cfg.names - 1), slot = name_slot(name);
    int master = test_cluster_master_of_slot(&C, slot), replica = -1, other = -1;
    int64_t t0 = now_ms(), t1 = 0, t2 = 0, over = 0;
    char said[160] = "";
    probe pr;

    cluster_lab_fault_count[f]++;
    cluster_lab_fault_slot = slot;
    if (master < 0 || (replica = test_cluster_replica_of(&C, master)) < 0)
        harness_failed("no master with a replica for a name's slot");
    if (f >= NF_COUNT)
        probe_start(&pr);
    switch (f) {
    case CL_FAILOVER:
        if (test_cluster_failover(&C, replica) != 0) {
            failovers_refused++;
            settle_again("failover");
        }
        break;
    case CL_KILL:
        cluster_lab_kill(master, &t1, &t2);
        break;
    case CL_FREEZE:
        cluster_lab_freeze(master, said, sizeof said);
        break;
    case CL_MINORITY:
        over = cluster_lab_minority(master, replica, &t1);
        break;
    case CL_BRIDGE:
        other = other_master(master);
        if (other < 0)
            harness_failed("bridge: no other master");
        cluster_lab_bridge(master, other, said, sizeof said);
        over = t0;
        break;
    case CL_SIGSTOP:
        sigstop_one(s_between(50, cfg.lease_max + 1000));
        break;
    case CL_MIGRATE_CUT:
        other = other_master(master);
        if (other < 0)
            harness_failed("migrate-cut: no other master");
        over = cluster_lab_migrate_cut(slot, other, said, sizeof said);
        break;
    default: /* NF_*: between some workers and the master, or on its name */
        lab_net_fault(f, &master, (test_redis *const[]){&C.node[master].server}, 1, &pr, said,
                      sizeof said);
        over = NF_LEAVES_A_PATH(f) ? t0 : now_ms();
        break;
    }
    if (over == 0)
        over = now_ms();
    if (test_cluster_wait_settled(&C) != 0)
        settle_again(cluster_lab_fault_names[f]);
    if (f == CL_FAILOVER || f == CL_KILL || f == CL_FREEZE || f == CL_MINORITY || f == NF_ISOLATE ||
        test_cluster_role(&C, master) != TEST_CLUSTER_MASTER)
        note_short_of_replicas(t0, now_ms() + REPLICA_ACK_MS);
    fprintf(stderr, "torture: t=%lld fault %s: n%d slot %d master %d (replica %d)", (long long)t0,
            cluster_lab_fault_names[f], name, slot, master, replica);
    if (f == CL_KILL)
        fprintf(stderr, ", promoted at t=%lld, restarted at t=%lld", (long long)t1, (long long)t2);
    if (f == CL_MINORITY)
        fprintf(stderr, ", replica promoted at t=%lld, healed at t=%lld", (long long)t1,
                (long long)over);
    fprintf(stderr, "%s, now %s, done at t=%lld\n", said,
            test_cluster_role(&C, master) == TEST_CLUSTER_MASTER ? "master" : "replica",
            (long long)now_ms());
    probe_check(&pr, over, cluster_lab_fault_names[f]);
}
