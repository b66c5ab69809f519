/* SPDX-License-Identifier: MIT */
/*
 * A network lab for fault tests: nodes, each in a network namespace of its
 * own, on one bridge, with addresses of a private range that exists only
 * inside namespaces the lab made; nftables rules on the bridge cut, half-cut
 * and black-hole the paths between them.
 *
 * Nothing of the lab touches the host's own network: the bridge lives in a
 * namespace of its own (the hub), every node's veth pair runs from the hub
 * to the node, no namespace has a route out, and the host's interfaces and
 * rule sets are never changed. Traffic between nodes cannot leave the lab.
 *
 * Cleanup needs nothing to run: a namespace lives as long as a process is
 * in it, and every process the lab starts (the namespaces' keepers and what
 * netlab_spawn runs) dies with the thread that made the lab
 * (PR_SET_PDEATHSIG), so a test that is killed, even by SIGKILL, leaves no
 * namespace, link or rule behind. netlab_free ends them at once.
 *
 * Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN), `ip` (iproute2) and `nft`
 * (nftables); netlab_usable says whether this machine has them.
 *
 *     netlab *lab = netlab_new(NULL);
 *     int srv = netlab_node(lab, "redis"), cli = netlab_node(lab, "client");
 *     char *argv[] = {"redis-server", "--bind", (char *)netlab_addr(lab, srv), NULL};
 *     pid_t pid = netlab_spawn(lab, srv, argv);
 *     ... a child process that called netlab_enter(lab, cli) connects to
 *         netlab_addr(lab, srv) ...
 *     netlab_cut(lab, srv, cli);        both directions
 *     netlab_heal(lab);
 *     netlab_free(lab);                 every process the lab started ends
 *
 * Not thread-safe: one thread makes and drives a lab.
 */
#ifndef LEASH_TESTS_NETLAB_H
#define LEASH_TESTS_NETLAB_H

#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Nodes in one lab, at most; their addresses are <prefix>.1 to .NETLAB_MAX_NODES. */
#define NETLAB_MAX_NODES 64
/* Rules in force at once, at most. */
#define NETLAB_MAX_RULES 256

typedef struct netlab netlab;

/* 1 when this process can make a lab (root, `ip` and `nft` present), else 0
 * with the reason in why (at least 128 bytes; may be NULL). */
int netlab_usable(char *why, size_t why_len);

/* A lab with no node yet. prefix is the first three octets of the nodes'
 * addresses ("10.213.7"); NULL picks one of 10.213.x from the pid, so that
 * labs of concurrent runs differ (they could not meet anyway: each has its
 * own bridge). NULL on failure, with the reason on stderr. */
netlab *netlab_new(const char *prefix);

/* A new node named `name` (for messages; at most 31 bytes): a namespace
 * with lo up and one interface to the bridge. Returns its index (0, 1,
 * ...) or -1. */
int netlab_node(netlab *lab, const char *name);

/* The node's address as text ("10.213.7.2"), owned by the lab. */
const char *netlab_addr(const netlab *lab, int node);

/* The node's other address, owned by the lab: <prefix>.(129 + node),
 * which it has only after netlab_readdress(lab, node, 1). */
const char *netlab_alt_addr(const netlab *lab, int node);

/* Moves the node to its other address (alt 1) or back to its own (alt
 * 0): the old address is removed, then the new one added, so that
 * connections to the old one go silent (their packets are dropped where
 * they arrive), as to a host that left; a process listening on every
 * address (0.0.0.0) takes connects at the new one. Rules name addresses
 * as they were when made: they do not follow a node that moved.
 * netlab_addr still says the node's own address. 0 or -1. */
int netlab_readdress(netlab *lab, int node, int alt);

/* The node's namespace as a path ("/proc/PID/ns/net"), owned by the lab:
 * for test_redis_config.netns, setns(2), nsenter(1). */
const char *netlab_ns_path(const netlab *lab, int node);

/* Runs argv (argv[0] looked up in PATH) inside the node's namespace, with
 * stdin from /dev/null; the process dies with the calling thread. Returns
 * its pid or -1. The caller waits for it (netlab_free kills it). */
pid_t netlab_spawn(netlab *lab, int node, char *const argv[]);

/* Moves the calling process (it should be a fresh child) into the node's
 * namespace: sockets it opens from then on are the node's. 0 or -1. */
int netlab_enter(const netlab *lab, int node);

/* Partitions. Each adds rules on the bridge and returns 0, or -1 when nft
 * refused (told on stderr). Rules add up until netlab_heal. */
/* Nothing passes between a and b, either way. */
int netlab_cut(netlab *lab, int a, int b);
/* Packets from `from` to `to` are dropped; the other way passes (a one-way
 * partition: requests arrive, replies are lost, or the reverse). */
int netlab_cut_oneway(netlab *lab, int from, int to);
/* Connection attempts (TCP SYN without ACK) to `to`'s port are dropped,
 * from every node; established connections go on (a black hole for new
 * connects: the address looks dead to a client that has none open). port 0:
 * every port. */
int netlab_drop_syn(netlab *lab, int to, int port);
/* Every packet from or to `node`, on every path: the node is gone from the
 * network but its processes run on. */
int netlab_isolate(netlab *lab, int node);
/* Removes every rule: the network is whole again. */
int netlab_heal(netlab *lab);

/* Ends every process the lab started and so every namespace, link and
 * rule. NULL is fine. */
void netlab_free(netlab *lab);

#ifdef __cplusplus
}
#endif

#endif
