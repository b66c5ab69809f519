/* SPDX-License-Identifier: MIT */
/*
 * The network lab of netlab.h. Each namespace is held by a keeper: a child
 * that unshares its network namespace and sleeps, dying with the thread
 * that made it. `ip` and `nft` run in a namespace by a child that joins it
 * with setns() and execs them, so the lab links no netlink library.
 */
#define _GNU_SOURCE
#include "netlab.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define NETLAB_MAX_SPAWNED 256

typedef struct netlab_ns {
    pid_t keeper;
    int fd;        /* path, held open */
    char path[48]; /* /proc/<keeper>/ns/net */
} netlab_ns;

typedef struct netlab_node_info {
    netlab_ns ns;
    char name[32];
    char addr[40];
    char alt[40]; /* its other address (netlab_readdress) */
    int moved;    /* 1 while it has alt instead of addr */
} netlab_node_info;

struct netlab {
    char prefix[16];
    netlab_ns hub;
    netlab_node_info nodes[NETLAB_MAX_NODES];
    int n_nodes;
    pid_t spawned[NETLAB_MAX_SPAWNED];
    int n_spawned;
    int n_rules;
};

static const char *const netlab_tools[] = {"/usr/sbin/ip", "/usr/sbin/nft"};

int netlab_usable(char *why, size_t why_len) {
    char scratch[128];
    if (why == NULL) {
        why = scratch;
        why_len = sizeof scratch;
    }
    if (geteuid() != 0) {
        snprintf(why, why_len, "not root: network namespaces need CAP_SYS_ADMIN");
        return 0;
    }
    for (size_t i = 0; i < sizeof netlab_tools / sizeof netlab_tools[0]; i++) {
        if (access(netlab_tools[i], X_OK) != 0) {
            snprintf(why, why_len, "%s missing (packages iproute2, nftables)", netlab_tools[i]);
            return 0;
        }
    }
    return 1;
}

/* In a fresh child: die with the parent thread, and do not outlive a
 * parent that is already gone. */
static void netlab_bind_to_parent(pid_t parent) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
}

static int netlab_ns_make(netlab_ns *ns) {
    int ready[2];
    pid_t parent = getpid();
    if (pipe2(ready, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(ready[0]);
        close(ready[1]);
        return -1;
    }
    if (pid == 0) {
        netlab_bind_to_parent(parent);
        char ok = unshare(CLONE_NEWNET) == 0 ? 'y' : 'n';
        if (write(ready[1], &ok, 1) != 1 || ok != 'y')
            _exit(1);
        for (;;)
            pause();
    }
    close(ready[1]);
    char ok = 'n';
    ssize_t got;
    do
        got = read(ready[0], &ok, 1);
    while (got < 0 && errno == EINTR);
    close(ready[0]);
    snprintf(ns->path, sizeof ns->path, "/proc/%d/ns/net", (int)pid);
    ns->keeper = pid;
    ns->fd = got == 1 && ok == 'y' ? open(ns->path, O_RDONLY | O_CLOEXEC) : -1;
    if (ns->fd < 0) {
        fprintf(stderr, "netlab: cannot make a network namespace: %s\n", strerror(errno));
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        ns->keeper = 0;
        return -1;
    }
    return 0;
}

static void netlab_ns_end(netlab_ns *ns) {
    if (ns->fd >= 0)
        close(ns->fd);
    ns->fd = -1;
    if (ns->keeper > 0) {
        kill(ns->keeper, SIGKILL);
        waitpid(ns->keeper, NULL, 0);
    }
    ns->keeper = 0;
}

/* Runs a tool in ns with input (may be NULL) on its stdin; 0 when it exited 0. */
static int netlab_run(const netlab_ns *ns, const char *input, char *const argv[]) {
    int in[2] = {-1, -1};
    pid_t parent = getpid();
    if (input != NULL && pipe2(in, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        netlab_bind_to_parent(parent);
        if (setns(ns->fd, CLONE_NEWNET) != 0)
            _exit(126);
        int fd = input != NULL ? in[0] : open("/dev/null", O_RDONLY);
        if (fd < 0 || dup2(fd, STDIN_FILENO) < 0)
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    if (input != NULL) {
        close(in[0]);
        size_t len = strlen(input), off = 0;
        while (off < len) {
            ssize_t n = write(in[1], input + off, len - off);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            off += (size_t)n;
        }
        close(in[1]);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    fprintf(stderr, "netlab: `%s %s ...` failed (status %d)%s%s\n", argv[0], argv[1], status,
            input != NULL ? " on: " : "", input != NULL ? input : "");
    return -1;
}

/* `ip` with its arguments as one space-separated line, in ns. */
static int netlab_ip(const netlab_ns *ns, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int netlab_ip(const netlab_ns *ns, const char *fmt, ...) {
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line)
        return -1;
    char *argv[24];
    int argc = 0;
    argv[argc++] = (char *)netlab_tools[0];
    for (char *save = NULL, *tok = strtok_r(line, " ", &save); tok != NULL && argc < 23;
         tok = strtok_r(NULL, " ", &save))
        argv[argc++] = tok;
    argv[argc] = NULL;
    return netlab_run(ns, NULL, argv);
}

/* An nft script, in the hub. */
static int netlab_nft(netlab *lab, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int netlab_nft(netlab *lab, const char *fmt, ...) {
    char script[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(script, sizeof script, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof script)
        return -1;
    char *argv[] = {(char *)netlab_tools[1], "-f", "-", NULL};
    return netlab_run(&lab->hub, script, argv);
}

netlab *netlab_new(const char *prefix) {
    netlab *lab = calloc(1, sizeof *lab);
    if (lab == NULL)
        return NULL;
    lab->hub.fd = -1;
    if (prefix != NULL)
        snprintf(lab->prefix, sizeof lab->prefix, "%s", prefix);
    else
        snprintf(lab->prefix, sizeof lab->prefix, "10.213.%d", (int)(getpid() % 250) + 1);
    if (netlab_ns_make(&lab->hub) != 0 || netlab_ip(&lab->hub, "link set lo up") != 0 ||
        netlab_ip(&lab->hub, "link add br0 type bridge") != 0 ||
        netlab_ip(&lab->hub, "link set br0 up") != 0 ||
        netlab_nft(lab,
                   "add table bridge netlab\n"
                   "add chain bridge netlab cut { type filter hook forward priority 0; }\n") != 0) {
        netlab_free(lab);
        return NULL;
    }
    return lab;
}

int netlab_node(netlab *lab, const char *name) {
    if (lab->n_nodes >= NETLAB_MAX_NODES)
        return -1;
    int idx = lab->n_nodes;
    netlab_node_info *node = &lab->nodes[idx];
    node->ns.fd = -1;
    snprintf(node->name, sizeof node->name, "%s", name != NULL ? name : "node");
    char addr[sizeof node->addr];
    snprintf(addr, sizeof addr, "%s.%d", lab->prefix, idx + 1);
    memcpy(node->addr, addr, sizeof addr);
    snprintf(addr, sizeof addr, "%s.%d", lab->prefix, idx + 129);
    memcpy(node->alt, addr, sizeof addr);
    node->moved = 0;
    if (netlab_ns_make(&node->ns) != 0)
        return -1;
    /* The pair is made in the hub with its far end already in the node: no
     * link ever exists in the host's namespace. */
    if (netlab_ip(&lab->hub, "link add v%d type veth peer name eth0 netns %d", idx,
                  (int)node->ns.keeper) != 0 ||
        netlab_ip(&lab->hub, "link set v%d master br0", idx) != 0 ||
        netlab_ip(&lab->hub, "link set v%d up", idx) != 0 ||
        netlab_ip(&node->ns, "link set lo up") != 0 ||
        netlab_ip(&node->ns, "addr add %s/24 dev eth0", node->addr) != 0 ||
        netlab_ip(&node->ns, "link set eth0 up") != 0) {
        netlab_ns_end(&node->ns);
        return -1;
    }
    lab->n_nodes++;
    return idx;
}

const char *netlab_addr(const netlab *lab, int node) {
    return node >= 0 && node < lab->n_nodes ? lab->nodes[node].addr : NULL;
}

const char *netlab_alt_addr(const netlab *lab, int node) {
    return node >= 0 && node < lab->n_nodes ? lab->nodes[node].alt : NULL;
}

int netlab_readdress(netlab *lab, int node, int alt) {
    if (node < 0 || node >= lab->n_nodes || (alt != 0 && alt != 1))
        return -1;
    netlab_node_info *n = &lab->nodes[node];
    if (n->moved == alt)
        return 0;
    const char *to = alt ? n->alt : n->addr, *from = alt ? n->addr : n->alt;
    /* The old one first: an address added beside it would be its
     * secondary, and go with it. */
    if (netlab_ip(&n->ns, "addr del %s/24 dev eth0", from) != 0 ||
        netlab_ip(&n->ns, "addr add %s/24 dev eth0", to) != 0)
        return -1;
    n->moved = alt;
    return 0;
}

const char *netlab_ns_path(const netlab *lab, int node) {
    return node >= 0 && node < lab->n_nodes ? lab->nodes[node].ns.path : NULL;
}

pid_t netlab_spawn(netlab *lab, int node, char *const argv[]) {
    if (node < 0 || node >= lab->n_nodes || lab->n_spawned >= NETLAB_MAX_SPAWNED)
        return -1;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        netlab_bind_to_parent(parent);
        int fd = open("/dev/null", O_RDONLY);
        if (netlab_enter(lab, node) != 0 || fd < 0 || dup2(fd, STDIN_FILENO) < 0)
            _exit(126);
        execvp(argv[0], argv);
        fprintf(stderr, "netlab: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    lab->spawned[lab->n_spawned++] = pid;
    return pid;
}

int netlab_enter(const netlab *lab, int node) {
    if (node < 0 || node >= lab->n_nodes)
        return -1;
    return setns(lab->nodes[node].ns.fd, CLONE_NEWNET);
}

static int netlab_valid_pair(const netlab *lab, int a, int b) {
    return a >= 0 && a < lab->n_nodes && b >= 0 && b < lab->n_nodes && a != b;
}

static int netlab_room(netlab *lab, int rules) {
    if (lab->n_rules + rules > NETLAB_MAX_RULES)
        return 0;
    lab->n_rules += rules;
    return 1;
}

int netlab_cut_oneway(netlab *lab, int from, int to) {
    if (!netlab_valid_pair(lab, from, to) || !netlab_room(lab, 1))
        return -1;
    return netlab_nft(lab, "add rule bridge netlab cut ip saddr %s ip daddr %s drop\n",
                      lab->nodes[from].addr, lab->nodes[to].addr);
}

int netlab_cut(netlab *lab, int a, int b) {
    if (netlab_cut_oneway(lab, a, b) != 0)
        return -1;
    return netlab_cut_oneway(lab, b, a);
}

int netlab_drop_syn(netlab *lab, int to, int port) {
    if (to < 0 || to >= lab->n_nodes || port < 0 || port > 65535 || !netlab_room(lab, 1))
        return -1;
    char dport[32] = "";
    if (port > 0)
        snprintf(dport, sizeof dport, "tcp dport %d ", port);
    return netlab_nft(
        lab, "add rule bridge netlab cut ip daddr %s %stcp flags & (syn | ack) == syn drop\n",
        lab->nodes[to].addr, dport);
}

int netlab_isolate(netlab *lab, int node) {
    if (node < 0 || node >= lab->n_nodes || !netlab_room(lab, 2))
        return -1;
    const char *addr = lab->nodes[node].addr;
    return netlab_nft(lab,
                      "add rule bridge netlab cut ip saddr %s drop\n"
                      "add rule bridge netlab cut ip daddr %s drop\n",
                      addr, addr);
}

int netlab_heal(netlab *lab) {
    lab->n_rules = 0;
    return netlab_nft(lab, "flush chain bridge netlab cut\n");
}

/* A spawned pid is ours to kill only while it is still our unreaped child:
 * once the caller reaped it, the number may belong to someone else. */
static int netlab_still_ours(pid_t pid) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    return waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0;
}

void netlab_free(netlab *lab) {
    if (lab == NULL)
        return;
    for (int i = 0; i < lab->n_spawned; i++) {
        if (netlab_still_ours(lab->spawned[i])) {
            kill(lab->spawned[i], SIGKILL);
            waitpid(lab->spawned[i], NULL, 0);
        }
    }
    for (int i = 0; i < lab->n_nodes; i++)
        netlab_ns_end(&lab->nodes[i].ns);
    netlab_ns_end(&lab->hub);
    free(lab);
}
