/* SPDX-License-Identifier: MIT */
/*
 * `leash`: the command line (leash.1 says the same for people). Options
 * may come before or after the command; the first word that is not an
 * option is the command, the next its operand.
 */
#include "cli.h"

#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage_text[] =
    "usage: leash [CONNECTION] [--prefix P] [--json] COMMAND [ARGS]\n"
    "\n"
    "Look at and act on the locks of leash (and Redisson) in Redis.\n"
    "\n"
    "Commands:\n"
    "  ls [PATTERN]           list locks whose name matches PATTERN (a SCAN glob, default *)\n"
    "  show NAME              one lock in full: holders, fences, TTLs, waiters\n"
    "  watch NAME             follow a lock live: acquisitions, renewals, releases\n"
    "  release --force NAME   remove a lock whoever holds it (asks first on a terminal)\n"
    "  help [COMMAND]         this text, or a command's\n"
    "\n"
    "Connection (one of; default redis://127.0.0.1:6379, or $LEASH_URL):\n"
    "  -u, --url URL          redis://[[user]:password@]host[:port][/db],\n"
    "                         rediss://... (TLS, below) or\n"
    "                         unix://[[user]:password@]/path/to/socket[?db=N]\n"
    "                         redis+sentinel://[[user]:password@]host:port,.../master[/db]\n"
    "                         (the master the sentinels name; their own password in\n"
    "                         $LEASH_SENTINEL_PASSWORD, user in $LEASH_SENTINEL_USER)\n"
    "  --cluster NODES        a Redis Cluster: seed nodes host:port[,host:port...]\n"
    "  --redlock NODES        Redlock's independent servers: host:port,host:port,...\n"
    "                         (NODES entries may also be redis:// or unix:// URLs)\n"
    "  The password may come from $LEASH_PASSWORD instead of the command line (a\n"
    "  password in the URL wins), with an ACL user's name in $LEASH_USER.\n"
    "\n"
    "TLS (to every server; on with rediss:// or any of these):\n"
    "  --tls                  TLS, trusting the system's CA store\n"
    "  --tls-ca FILE          trusted CAs (PEM) instead of the system's store\n"
    "  --tls-cert FILE        client certificate (PEM), for tls-auth-clients ...\n"
    "  --tls-key FILE         ... and its private key\n"
    "  --tls-sni NAME         the name sent and verified (default: each host)\n"
    "  --insecure             no check of the server's certificate (warns)\n"
    "  A rediss:// URL may give the same as ?ca=&cert=&key=&sni=&verify=0; the\n"
    "  options win. An encrypted key's password comes from $LEASH_TLS_KEY_PASSWORD\n"
    "  (never prompted for).\n"
    "\n"
    "Options:\n"
    "  --prefix P             the key_prefix of the programs (default \"leash:\")\n"
    "  --pubsub MODE          auto (default: sharded in a cluster), classic or sharded,\n"
    "                         as the programs' leash_options.pubsub (watch, release)\n"
    "  --timeout MS           connect and command timeout, 1..600000 (default 2000)\n"
    "  --json                 JSON output (ls, show, release; watch: one object a line)\n"
    "  --full                 whole holder tokens in ls (show always has them)\n"
    "  -h, --help             help; `leash COMMAND --help` for a command's\n"
    "  --version              the version of leash\n"
    "\n"
    "Exit status: 0 found/done, 1 not found (no such lock, none matched, nobody\n"
    "held it), 2 usage (or a force release refused or not confirmed), 3 Redis\n"
    "unreachable (or refused the credentials).\n";

static const char ls_text[] =
    "usage: leash ls [PATTERN] [--full] [--json]\n"
    "\n"
    "Lists the locks whose name (the key without --prefix) matches PATTERN, a\n"
    "Redis glob (* ? [abc]), sorted by name, one line each:\n"
    "  NAME     the lock name\n"
    "  KIND     mutex, fair, rwlock, semaphore, family (a family lock nobody is\n"
    "           in now), redisson (Redisson's RLock layout), redisson-rw\n"
    "           (Redisson's RReadWriteLock)\n"
    "  HOLDER   the holder's token (12 digits; --full for all), \"writer TOKEN\",\n"
    "           \"N readers\", \"N/P permits\", or - when free\n"
    "  HOLDS    reentrant holds, summed over the holders\n"
    "  TTL      lease left (the longest of the holders')\n"
    "  FENCE    the mutex's hold's fence; the family's last fence given\n"
    "  WAITING  the family's queue length; a mutex says \"marked\" once someone\n"
    "           found it busy (a mutex's waiters wait in their own processes)\n"
    "  AGREE    Redlock: servers that agree on the holder, of all; \"no majority\"\n"
    "Every server is scanned: the one, each cluster master, each Redlock server.\n"
    "Exit status 0 when a lock matched, 1 when none did.\n";

static const char show_text[] =
    "usage: leash show NAME [--json]\n"
    "\n"
    "Shows lock NAME: its kind, server, TTL, fence; each holder's full token,\n"
    "mode (f fair, r read, w write, s permit), holds, fence and lease left;\n"
    "the queue of a family lock in order; a mutex's queue (its starving\n"
    "waiters) and how many processes wait on its channel (waiting); a Redisson\n"
    "read-write lock's mode. With --redlock, every server's state\n"
    "and the holder a majority (N/2+1) agrees on. Exit status 1 when there is\n"
    "no lock of that name.\n";

static const char watch_text[] =
    "usage: leash watch NAME [--interval MS] [--events N] [--seconds S] [--json]\n"
    "\n"
    "Follows lock NAME until interrupted: one line per event, with a UTC\n"
    "timestamp; the first line is the state at the start. Events:\n"
    "  acquired, renewed, released, expired, count (reentrant holds changed),\n"
    "  queued, left (a family lock's queue), agree (Redlock: servers agreeing),\n"
    "  and, from the lock's channel (source \"channel\"), released, renewed\n"
    "  and forced messages.\n"
    "The state is read every --interval ms (10..60000, default 100): that is\n"
    "what sees every acquisition, renewal and release; a hold shorter than the\n"
    "interval can slip between two readings. A mutex's channel carries\n"
    "releases and renewals only while someone waits for it (its holder\n"
    "publishes once a waiter marked the key); they are shown as they arrive.\n"
    "\"expired\" means the holder was gone and its lease had run out by then.\n"
    "Through a redis+sentinel:// URL it follows a failover (a \"master\" event\n"
    "says where it reads from then), waiting up to 60 s for a new master.\n"
    "The watcher writes nothing to Redis.\n"
    "  --events N    stop after N events (1..1000000)\n"
    "  --seconds S   stop after S seconds (1..86400)\n"
    "Exit status 0 when stopped (a signal, --events, --seconds), 3 when Redis\n"
    "went away.\n";

static const char release_text[] =
    "usage: leash release --force NAME [--yes] [--json]\n"
    "\n"
    "Removes lock NAME whoever holds it, and wakes its waiters, through the\n"
    "library's leash_force_release(): its holder is not asked and finds out\n"
    "at its next renewal (lost, LEASH_LOST_EXPIRED). Storage that checks the\n"
    "fence stays safe: the next holder's fence is higher.\n"
    "On a terminal it shows the lock and asks first; --yes releases without\n"
    "asking. When standard input is not a terminal, --yes is required (exit 2\n"
    "without it). A Redisson lock is left to Redisson (exit 2). With\n"
    "--redlock it is done once every server answered.\n"
    "Exit status 0 released, 1 nobody held it, 2 refused, 3 unreachable.\n";

__attribute__((format(printf, 1, 2))) static int usage(const char *fmt, ...) {
    va_list ap;

    fprintf(stderr, "leash: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry `leash --help`.\n");
    return CLI_USAGE;
}

static int help(const char *cmd) {
    const char *t = usage_text;
    if (cmd == NULL || strcmp(cmd, "help") == 0)
        t = usage_text;
    else if (strcmp(cmd, "ls") == 0)
        t = ls_text;
    else if (strcmp(cmd, "show") == 0)
        t = show_text;
    else if (strcmp(cmd, "watch") == 0)
        t = watch_text;
    else if (strcmp(cmd, "release") == 0)
        t = release_text;
    else
        return usage("no command %s: ls, show, watch, release", cmd);
    fputs(t, stdout);
    return CLI_OK;
}

static int number(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (s[0] == '\0' || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* What a rediss:// URL's query gives, unless an option gave it. */
static void take_tls(cli_conn *c, const leash_url *u) {
    static leash_url first; /* the strings must last: the first URL's */

    if (!u->tls)
        return;
    c->tls = 1;
    if (first.tls)
        return;
    first = *u;
    if (!first.tls_verify)
        c->tls_verify = 0;
    if (c->tls_ca_file == NULL && first.tls_ca_file[0] != '\0')
        c->tls_ca_file = first.tls_ca_file;
    if (c->tls_ca_dir == NULL && first.tls_ca_dir[0] != '\0')
        c->tls_ca_dir = first.tls_ca_dir;
    if (c->tls_cert_file == NULL && first.tls_cert_file[0] != '\0') {
        c->tls_cert_file = first.tls_cert_file;
        c->tls_key_file = first.tls_key_file;
    }
    if (c->tls_server_name == NULL && first.tls_server_name[0] != '\0')
        c->tls_server_name = first.tls_server_name;
}

/* One URL, or host:port (redis:// is put in front). */
static int add_url(cli_conn *c, const char *s, size_t len) {
    char buf[1200], err[LEASH_URL_ERR_MAX];
    leash_url u;
    int has_scheme = len >= 3 && memmem(s, len, "://", 3) != NULL;

    if (len + 9 >= sizeof(buf))
        return usage("address too long: %s", s);
    snprintf(buf, sizeof(buf), "%s%.*s", has_scheme ? "" : "redis://", (int)len, s);
    if (leash_url_is_sentinel(buf)) {
        /* Read as one server: the master the sentinels name now. */
        if (c->topology != LEASH_TOPOLOGY_SINGLE)
            return usage("%s", "a redis+sentinel:// URL goes with -u only");
        if (cli_sentinel_master(buf, c->timeout_ms, &u, err, sizeof(err)) != 0) {
            fprintf(stderr, "leash: %s\n", err);
            return CLI_UNREACHABLE;
        }
        if ((c->sentinel_url = strdup(buf)) == NULL)
            return CLI_UNREACHABLE;
    } else if (leash_url_parse(buf, &u, err, sizeof(err)) != LEASH_OK) {
        return usage("%s", err);
    }
    if (c->nnodes == 0 || c->topology == LEASH_TOPOLOGY_SINGLE) {
        c->db = u.db;
        if (u.password[0] != '\0') {
            c->username = u.username[0] ? strdup(u.username) : NULL;
            c->password = strdup(u.password);
        }
    } else if (u.db != c->db) {
        return usage("every server needs the same db: %s", s);
    }
    take_tls(c, &u);
    if (c->nnodes >= LEASH_NODES_MAX || cli_node_add(c, &u) < 0)
        return usage("too many servers (at most 64): %s", s);
    return CLI_OK;
}

static int add_list(cli_conn *c, const char *list) {
    const char *p = list;
    int rc;

    while (*p) {
        size_t n = strcspn(p, ",");
        if (n > 0 && (rc = add_url(c, p, n)) != CLI_OK)
            return rc;
        p += n + (p[n] == ',');
    }
    return c->nnodes ? CLI_OK : usage("no servers in \"%s\"", list);
}

int main(int argc, char **argv) {
    static cli_conn conn;
    cli_conn *c = &conn;
    cli_args a;
    const char *cmd = NULL, *url = NULL, *list = NULL, *operand = NULL;
    int i, rc, want_help = 0;
    int64_t v;

    memset(&a, 0, sizeof(a));
    a.interval_ms = 100;
    a.pattern = "*";
    c->prefix = "leash:";
    c->timeout_ms = 2000;
    c->topology = LEASH_TOPOLOGY_SINGLE;
    c->tls_verify = 1;
    for (i = 1; i < argc; i++) {
        const char *o = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = 1;

        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) {
            want_help = 1;
            takes = 0;
        } else if (strcmp(o, "--version") == 0) {
            printf("leash %s\n", leash_version());
            return CLI_OK;
        } else if (strcmp(o, "--json") == 0) {
            a.json = 1;
            takes = 0;
        } else if (strcmp(o, "--full") == 0) {
            a.full = 1;
            takes = 0;
        } else if (strcmp(o, "--yes") == 0) {
            a.yes = 1;
            takes = 0;
        } else if (strcmp(o, "--force") == 0) {
            a.force = 1;
            takes = 0;
        } else if (strcmp(o, "--tls") == 0) {
            c->tls = 1;
            takes = 0;
        } else if (strcmp(o, "--insecure") == 0) {
            c->tls = 1;
            c->tls_verify = 0;
            takes = 0;
        } else if (o[0] == '-' && o[1] != '\0' && val == NULL) {
            return usage("%s needs a value, or is unknown", o);
        } else if (strcmp(o, "-u") == 0 || strcmp(o, "--url") == 0) {
            url = val;
        } else if (strcmp(o, "--cluster") == 0 || strcmp(o, "--redlock") == 0) {
            if (list != NULL)
                return usage("%s: give one of -u, --cluster, --redlock", o);
            list = val;
            c->topology = o[2] == 'c' ? LEASH_TOPOLOGY_CLUSTER : LEASH_TOPOLOGY_REDLOCK;
        } else if (strcmp(o, "--tls-ca") == 0 || strcmp(o, "--tls-cert") == 0 ||
                   strcmp(o, "--tls-key") == 0 || strcmp(o, "--tls-sni") == 0) {
            const char **field = strcmp(o, "--tls-ca") == 0     ? &c->tls_ca_file
                                 : strcmp(o, "--tls-cert") == 0 ? &c->tls_cert_file
                                 : strcmp(o, "--tls-key") == 0  ? &c->tls_key_file
                                                                : &c->tls_server_name;
            if (strlen(val) > LEASH_PATH_MAX)
                return usage("%s: at most %d bytes", o, LEASH_PATH_MAX);
            *field = val;
            c->tls = 1;
        } else if (strcmp(o, "--prefix") == 0) {
            if (strlen(val) > LEASH_PREFIX_MAX)
                return usage("--prefix: at most 128 bytes: %s", val);
            c->prefix = val;
        } else if (strcmp(o, "--pubsub") == 0) {
            c->pubsub = strcmp(val, "auto") == 0      ? LEASH_PUBSUB_AUTO
                        : strcmp(val, "classic") == 0 ? LEASH_PUBSUB_CLASSIC
                        : strcmp(val, "sharded") == 0 ? LEASH_PUBSUB_SHARDED
                                                      : -1;
            if (c->pubsub < 0)
                return usage("--pubsub: auto, classic or sharded, not %s", val);
        } else if (strcmp(o, "--timeout") == 0) {
            if (number(val, 1, CLI_TIMEOUT_MAX_MS, &v) != 0)
                return usage("--timeout: 1..600000 ms, not %s", val);
            c->timeout_ms = (int)v;
        } else if (strcmp(o, "--interval") == 0) {
            if (number(val, 10, 60000, &a.interval_ms) != 0)
                return usage("--interval: 10..60000 ms, not %s", val);
        } else if (strcmp(o, "--events") == 0) {
            if (number(val, 1, 1000000, &a.events) != 0)
                return usage("--events: 1..1000000, not %s", val);
        } else if (strcmp(o, "--seconds") == 0) {
            if (number(val, 1, 86400, &a.seconds) != 0)
                return usage("--seconds: 1..86400, not %s", val);
        } else if (o[0] == '-' && o[1] != '\0') {
            return usage("unknown option %s", o);
        } else if (cmd == NULL) {
            cmd = o;
            takes = 0;
        } else if (operand == NULL) {
            operand = o;
            takes = 0;
        } else {
            return usage("one operand too many: %s", o);
        }
        i += takes;
    }
    if (cmd != NULL && strcmp(cmd, "help") == 0)
        return help(operand);
    if (want_help)
        return help(cmd);
    if (cmd == NULL)
        return usage("%s", "no command");
    if (strcmp(cmd, "ls") == 0) {
        if (operand)
            a.pattern = operand;
    } else if (strcmp(cmd, "show") == 0 || strcmp(cmd, "watch") == 0 ||
               strcmp(cmd, "release") == 0) {
        if (operand == NULL || operand[0] == '\0')
            return usage("%s needs a lock NAME", cmd);
        if (strlen(operand) > LEASH_NAME_MAX)
            return usage("a lock name is at most 512 bytes: %.40s...", operand);
        a.name = operand;
    } else {
        return usage("unknown command %s", cmd);
    }
    if (url != NULL && list != NULL)
        return usage("%s", "give one of -u, --cluster, --redlock");
    if (list != NULL) {
        rc = add_list(c, list);
    } else {
        if (url == NULL)
            url = getenv("LEASH_URL") ? getenv("LEASH_URL") : "redis://127.0.0.1:6379";
        rc = add_url(c, url, strlen(url));
    }
    if (rc != CLI_OK)
        return rc;
    if ((c->tls_cert_file == NULL) != (c->tls_key_file == NULL))
        return usage("%s", "--tls-cert and --tls-key go together");
    if (c->tls && c->nodes[0].url.unix_path[0] != '\0')
        return usage("%s", "TLS is for TCP servers, not a unix socket");
    if (c->topology == LEASH_TOPOLOGY_CLUSTER && c->db != 0)
        return usage("%s", "a Redis Cluster has db 0 only");
    /* Refused before any server is asked, so that the exit status is 2
     * whether Redis is up or not, and nothing is read. */
    if (cmd[0] == 'r' && !a.force) {
        fprintf(stderr, "leash: release needs --force (it removes another's hold)\n");
        return CLI_USAGE;
    }
    if (cmd[0] == 'r' && !a.yes && !isatty(0)) {
        fprintf(stderr, "leash: not a terminal: pass --yes to release without asking\n");
        return CLI_USAGE;
    }
    if (c->password == NULL && getenv("LEASH_PASSWORD") != NULL &&
        getenv("LEASH_PASSWORD")[0] != '\0') {
        c->password = getenv("LEASH_PASSWORD");
        /* An ACL user's, when the URL names none (a URL's user comes
         * with its password: leash/url.h). */
        if (c->username == NULL && getenv("LEASH_USER") != NULL && getenv("LEASH_USER")[0] != '\0')
            c->username = getenv("LEASH_USER");
    }
    if (getenv("LEASH_TLS_KEY_PASSWORD") != NULL && getenv("LEASH_TLS_KEY_PASSWORD")[0] != '\0')
        c->tls_key_password = getenv("LEASH_TLS_KEY_PASSWORD");

    /* A server that closes the connection makes a write fail, not the
     * process die (the library asks the same of its programs). */
    signal(SIGPIPE, SIG_IGN);
    if (cli_conn_open(c) != 0) {
        fprintf(stderr, "leash: %s\n", c->err);
        cli_conn_close(c);
        return CLI_UNREACHABLE;
    }
    switch (cmd[0]) {
    case 'l':
        rc = cli_ls(c, &a);
        break;
    case 's':
        rc = cli_show(c, &a);
        break;
    case 'w':
        rc = cli_watch(c, &a);
        break;
    default:
        rc = cli_release(c, &a);
        break;
    }
    cli_conn_close(c);
    return rc;
}
