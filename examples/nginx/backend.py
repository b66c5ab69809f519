#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A slow backend for the nginx module's example, benchmark and test
(scripts/demo --nginx, bench/nginx.sh, tests/test_nginx.sh): it records, per
key, how many requests it serves at once, when each one started and ended,
the X-Fence each one brought, and which ones nginx gave up on.

    backend.py PORT_FILE [PORT]

Listens on 127.0.0.1:PORT (default: a free port) and writes the port to
PORT_FILE once it listens. It speaks HTTP/1.1: a proxy may keep its
connections open (nginx's upstream keepalive, as bench/nginx.sh does). A
request is slow: it sleeps ms=N milliseconds (default 200) before it answers
"ok"; with stream=1 it sends its headers and all but the last 2 bytes of a
4 KB body first, then sleeps. Like most application servers it does not
notice a proxy that closes the connection meanwhile: the request works on
to its end, and is then counted as aborted (its proxy had gone), not
served. A request with the n=N of one in flight for its key is a proxy's
retry of it (proxy_next_upstream): it counts once at a time, and sleeps
retry=MS (default ms) instead. With xar=URI the answer carries
X-Accel-Redirect: URI. Its key is its key=K
argument, or else the first part of its path and its id argument:
/report?id=7 is "report:7", /fragile/x is "fragile" (the names the example's
locks give them). GET and DELETE (a test's limit_except) are served alike.
With size=N the body is N bytes of "x" and a Range: bytes=A-B header is
answered 206 with that part (nginx's slice module asks so).

    GET /stats            one line per key:
                          "K peak=P served=S fences=F1,F2,... order=N1,...
                          aborted=A" (fences and the requests' n=N
                          arguments in the order the requests started;
                          "none" for a request without X-Fence, "empty"
                          for an empty one)
    GET /analyse?key=K&slots=N
                          "handoffs=H p50_us=.. p99_us=.. overlaps=O busy=B":
                          the gaps from the end of one request (its answer
                          written) to the start of the next one (its request
                          line read; by start time), how many of them are
                          negative, and the share of N slots in use from the
                          first start to the last start (while requests were
                          still arriving)
    GET /reset            forgets everything
"""
import os
import select
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

# More than nginx's postpone_output (1460): the first part reaches the client.
STREAM_BYTES = 4096
lock = threading.Lock()
# key -> {"now", "peak", "served", "aborted", "fences": [], "order": [], "spans": [[start, end]],
#         "inflight": {n: count}}
keys = {}


def key_of(url, q):
    if "key" in q:
        return q["key"][0]
    first = url.path.strip("/").split("/")[0] or "-"
    return first + (":" + q["id"][0] if "id" in q else "")


def gone(conn):
    """True if the peer closed conn (asked after the work: during it, the
    request does not look)."""
    readable, _, _ = select.select([conn], [], [], 0)
    if not readable:
        return False
    try:
        return conn.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def percentile(sorted_values, p):
    if not sorted_values:
        return 0
    return sorted_values[min(len(sorted_values) - 1, int(p * len(sorted_values)))]


def analyse(k, slots):
    spans = sorted(s for s in k["spans"] if s[1] is not None)
    gaps = sorted(b[0] - a[1] for a, b in zip(spans, spans[1:]))
    busy = 0.0
    if len(spans) > 1:
        lo, hi = spans[0][0], spans[-1][0]
        used = sum(max(0, min(e, hi) - max(s, lo)) for s, e in spans)
        busy = used / (slots * (hi - lo)) if hi > lo else 0.0
    return "handoffs=%d p50_us=%d p99_us=%d overlaps=%d busy=%.3f\n" % (
        len(gaps),
        percentile(gaps, 0.50) // 1000,
        percentile(gaps, 0.99) // 1000,
        sum(1 for g in gaps if g < 0),
        busy,
    )


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # a burst of 64 and more must not be refused

    def handle_error(self, request, client_address):
        # nginx closes kept-alive connections when it stops or has too many
        # idle: not worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # An answer is two writes (head, body): with Nagle's algorithm the body
    # waits for the ACK of the head, which a kept-alive peer delays ~40 ms.
    disable_nagle_algorithm = True

    def parse_request(self):
        # A request's span at the backend runs from its request line's
        # arrival to its answer written: the Python server's own parsing and
        # writing keep a slot busy too.
        self.received = time.monotonic_ns()
        return super().parse_request()

    def log_message(self, *args):
        pass

    def answer(self, body, headers=()):
        data = body.encode()
        self.send_response(200)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # nginx gave up on the request (its client left): nothing to tell

    def answer_part(self, size):
        """size bytes of "x", or the part a Range header asks for (206)."""
        first, last = 0, size - 1
        rng = self.headers.get("Range", "")
        if rng.startswith("bytes="):
            a, _, b = rng[6:].partition("-")
            first, last = int(a), min(int(b) if b else size - 1, size - 1)
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (first, last, size))
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(last - first + 1))
        self.end_headers()
        try:
            self.wfile.write(b"x" * (last - first + 1))
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self):
        url = urlparse(self.path)
        q = parse_qs(url.query)
        if url.path == "/stats":
            with lock:
                lines = [
                    "%s peak=%d served=%d fences=%s order=%s aborted=%d\n"
                    % (
                        k,
                        v["peak"],
                        v["served"],
                        ",".join(v["fences"]),
                        ",".join(v["order"]),
                        v["aborted"],
                    )
                    for k, v in sorted(keys.items())
                ]
            self.answer("".join(lines))
            return
        if url.path == "/analyse":
            with lock:
                k = keys.get(q.get("key", ["-"])[0])
                text = analyse(k, int(q.get("slots", ["1"])[0])) if k else "no such key\n"
            self.answer(text)
            return
        if url.path == "/reset":
            with lock:
                keys.clear()
            self.answer("reset\n")
            return
        key = key_of(url, q)
        ms = int(q.get("ms", ["200"])[0])
        # A request without n= is one of its own.
        n = q.get("n", [None])[0] or object()
        span = [self.received, None]
        with lock:
            k = keys.setdefault(
                key,
                {"now": 0, "peak": 0, "served": 0, "aborted": 0, "fences": [], "order": [],
                 "spans": [], "inflight": {}},
            )
            retry = n in k["inflight"]
            if retry:
                ms = int(q.get("retry", [str(ms)])[0])
            else:
                k["now"] += 1
                k["peak"] = max(k["peak"], k["now"])
            k["inflight"][n] = k["inflight"].get(n, 0) + 1
            k["fences"].append(self.headers.get("X-Fence", "none") or "empty")
            k["order"].append(q.get("n", ["-"])[0])
            k["spans"].append(span)
        stream = q.get("stream", ["0"])[0] == "1"
        if stream:
            self.send_response(200)
            self.send_header("Content-Length", str(STREAM_BYTES))
            self.end_headers()
            self.wfile.write(b"x" * (STREAM_BYTES - 2))
            self.wfile.flush()
        time.sleep(ms / 1000.0)
        aborted = gone(self.connection)
        # The request ends for the lock's sake when its slot is free again:
        # count it out before the answer leaves, as a real backend would.
        with lock:
            k["inflight"][n] -= 1
            if k["inflight"][n] == 0:
                del k["inflight"][n]
                k["now"] -= 1
            k["aborted" if aborted else "served"] += 1
        if aborted:
            self.close_connection = True
            return
        if "size" in q:
            self.answer_part(int(q["size"][0]))
        elif "xar" in q:
            self.answer("", [("X-Accel-Redirect", q["xar"][0])])
        elif stream:
            try:
                self.wfile.write(b"!\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
        else:
            self.answer("ok\n")
        with lock:
            span[1] = time.monotonic_ns()

    # limit_except tests send other methods: served as GET.
    do_DELETE = do_GET


def main():
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    server = Server(("127.0.0.1", port), Handler)
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    server.serve_forever()


if __name__ == "__main__":
    main()
