#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Closed-loop HTTP clients for the nginx module's test and benchmark
(tests/test_nginx.sh, bench/nginx.sh): how evenly a lock serves a fleet.

    fleet.py SECONDS CLIENTS PATH PORT...

Starts CLIENTS threads, client i on 127.0.0.1:PORT[i % len(PORT)], each
with one keep-alive connection that asks GET PATH again as soon as it is
answered, for SECONDS (a request in flight then is waited for). Prints one
line: per client "served/other", served = 200 answers, other = any other
status, space-separated in client order.
"""
import http.client
import sys
import threading
import time


def main():
    seconds, clients, path = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    ports = [int(p) for p in sys.argv[4:]]
    counts = [[0, 0] for _ in range(clients)]

    def client(i):
        conn = http.client.HTTPConnection("127.0.0.1", ports[i % len(ports)], timeout=30)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            conn.request("GET", path)
            answer = conn.getresponse()
            answer.read()
            counts[i][0 if answer.status == 200 else 1] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(" ".join("%d/%d" % (served, other) for served, other in counts))


if __name__ == "__main__":
    main()
