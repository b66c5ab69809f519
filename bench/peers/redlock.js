// SPDX-License-Identifier: MIT
// node-redlock's uncontended Redlock cycle, counted the way
// leash-bench-throughput --redlock counts leash's: W workers in flight, each
// on a key of its own, each looping acquire (one attempt, no retry) ->
// release; cycles counted over a window after a warm-up; Redis calls per
// cycle from INFO commandstats deltas summed over the servers (the
// harness's own INFO left out); the client's CPU from process.cpuUsage()
// and each server's from INFO cpu over the window.
//
//   node bench/peers/redlock.js --ports P1,P2,P3,P4,P5 [--inflight 1,64]
//        [--seconds 3] [--warmup 0.5] [--lease 30000]
//
// Needs node-redlock 5 and ioredis 5 where bench/peers/install.sh puts
// them (LEASH_PEERS_DIR, default /var/cache/leash-peers). The servers are
// started (and pinned) by the caller: bench/peers/run.sh. Prints one
// markdown row per in-flight count, and a note line of the calls.
"use strict";

const path = require("path");
const dir = process.env.LEASH_PEERS_DIR || "/var/cache/leash-peers";
const Redis = require(path.join(dir, "node_modules", "ioredis"));
const RedlockModule = require(path.join(dir, "node_modules", "redlock"));
const Redlock = RedlockModule.default || RedlockModule;

function args() {
    const o = { ports: [], inflight: [1, 64], seconds: 3, warmup: 0.5, lease: 30000, host: "127.0.0.1" };
    const a = process.argv.slice(2);
    for (let i = 0; i < a.length; i++) {
        const v = a[i + 1];
        switch (a[i]) {
            case "--ports": o.ports = v.split(",").map(Number); i++; break;
            case "--inflight": o.inflight = v.split(",").map(Number); i++; break;
            case "--seconds": o.seconds = Number(v); i++; break;
            case "--warmup": o.warmup = Number(v); i++; break;
            case "--lease": o.lease = Number(v); i++; break;
            case "--host": o.host = v; i++; break;
            default: throw new Error("unknown argument " + a[i]);
        }
    }
    if (o.ports.length === 0) throw new Error("--ports is required");
    return o;
}

// INFO's "cmdstat_x:calls=N,..." and used_cpu_sys/user of one server.
function parseInfo(text) {
    const calls = {}, usec = {};
    let cpu = 0;
    for (const line of text.split("\r\n")) {
        let m = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line);
        if (m) {
            calls[m[1]] = Number(m[2]);
            usec[m[1]] = Number(m[3]);
        }
        m = /^used_cpu_(sys|user):([\d.]+)/.exec(line);
        if (m) cpu += Number(m[2]);
    }
    return { calls, usec, cpu };
}

function median(v) {
    if (v.length === 0) return 0;
    const s = v.slice().sort((a, b) => a - b);
    return s[Math.floor(s.length / 2)];
}

async function snapshot(admins) {
    const infos = await Promise.all(admins.map((r) => r.info("all")));
    return infos.map(parseInfo);
}

// Calls by command over the window, summed over the servers; each
// server's INFO of this snapshot is left out (one per server per snapshot).
function delta(before, after) {
    const sum = {}, perServer = [];
    let cpu = 0, evalUs = 0;
    for (let i = 0; i < before.length; i++) {
        for (const [k, v] of Object.entries(after[i].calls)) sum[k] = (sum[k] || 0) + v - (before[i].calls[k] || 0);
        cpu += after[i].cpu - before[i].cpu;
        perServer.push(after[i].cpu - before[i].cpu);
        evalUs += (after[i].usec.evalsha || 0) - (before[i].usec.evalsha || 0);
    }
    if (sum.info !== undefined) sum.info -= before.length;
    for (const k of Object.keys(sum)) if (sum[k] <= 0) delete sum[k];
    return { sum, cpu, perServer, evalUs };
}

async function run(o, redlock, admins, w) {
    let counting = false, stop = false, cycles = 0, failures = 0;
    const acqUs = [], relUs = []; // per cycle, at 1 in flight

    async function worker(i) {
        const key = "peer:rl:" + w + ":" + i;
        while (!stop) {
            try {
                const t0 = process.hrtime.bigint();
                const lock = await redlock.acquire([key], o.lease, { retryCount: 0 });
                const t1 = process.hrtime.bigint();
                await lock.release();
                if (counting) {
                    cycles++;
                    if (w === 1) {
                        acqUs.push(Number(t1 - t0) / 1e3);
                        relUs.push(Number(process.hrtime.bigint() - t1) / 1e3);
                    }
                }
            } catch (e) {
                failures++;
            }
        }
    }
    const workers = [];
    for (let i = 0; i < w; i++) workers.push(worker(i));
    await new Promise((r) => setTimeout(r, o.warmup * 1000));
    const before = await snapshot(admins);
    const cpu0 = process.cpuUsage(), t0 = process.hrtime.bigint();
    counting = true;
    await new Promise((r) => setTimeout(r, o.seconds * 1000));
    counting = false;
    const t1 = process.hrtime.bigint(), cpu1 = process.cpuUsage(cpu0);
    const after = await snapshot(admins);
    stop = true;
    await Promise.all(workers);
    const secs = Number(t1 - t0) / 1e9;
    const d = delta(before, after);
    const total = Object.values(d.sum).reduce((a, b) => a + b, 0);
    return {
        w, secs, cycles, failures,
        rate: cycles / secs,
        clientUs: ((cpu1.user + cpu1.system) / Math.max(cycles, 1)),
        serverUs: (d.cpu * 1e6) / Math.max(cycles, 1),
        calls: total / Math.max(cycles, 1),
        p50: w === 1 ? `; acquire p50 ${median(acqUs).toFixed(0)} µs, release p50 ${median(relUs).toFixed(0)} µs` : "",
        perServerUs: d.perServer.map((c) => ((c * 1e6) / Math.max(cycles, 1)).toFixed(1)).join(" / "),
        evalUsPerCycle: d.evalUs / Math.max(cycles, 1),
        byCmd: Object.entries(d.sum).sort((a, b) => b[1] - a[1])
            .map(([k, v]) => k + " " + (v / Math.max(cycles, 1)).toFixed(2)).join(", "),
    };
}

async function main() {
    const o = args();
    const clients = o.ports.map((p) => new Redis({ host: o.host, port: p, lazyConnect: false }));
    const admins = o.ports.map((p) => new Redis({ host: o.host, port: p }));
    // No retries, no automatic extension: one attempt per acquire, as
    // leash's try-once acquire.
    const redlock = new Redlock(clients, { retryCount: 0, automaticExtensionThreshold: 0 });
    redlock.on("error", () => {});
    console.log("| peer | servers | operations in flight | cycles/s | client CPU µs/cycle | server CPU µs/cycle (all servers) | Redis calls/cycle (all servers) |");
    console.log("|---|---:|---:|---:|---:|---:|---:|");
    const notes = [];
    for (const w of o.inflight) {
        const r = await run(o, redlock, admins, w);
        console.log(`| node-redlock 5 | ${o.ports.length} | ${w} | ${Math.round(r.rate)} | ${r.clientUs.toFixed(1)} | ${r.serverUs.toFixed(1)} | ${r.calls.toFixed(2)} |`);
        notes.push(`- node-redlock, ${w} in flight: ${r.secs.toFixed(2)} s, ${r.cycles} cycles, ${r.failures} failed attempts; Redis calls per cycle: ${r.byCmd}; server CPU µs per cycle by server ${r.perServerUs}; server time inside EVALSHA (commandstats) ${r.evalUsPerCycle.toFixed(1)} µs per cycle${r.p50}`);
    }
    for (const n of notes) console.log(n);
    await Promise.all(clients.concat(admins).map((c) => c.quit()));
}

main().catch((e) => {
    console.error("redlock.js:", e && e.stack ? e.stack : e);
    process.exit(1);
});
