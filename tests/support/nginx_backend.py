#!/usr/bin/env python3
"""A slow backend for the nginx tests: records how many requests it serves
at once per key and the X-Fence each one brought.

    nginx_backend.py PORT_FILE

Listens on a free loopback port and writes it to PORT_FILE. A request for
/<anything>?key=K&ms=N&n=I sleeps N ms (default 200) and answers "ok";
with &stream=1 it sends its headers and all but the last 2 bytes of a
4 KB body first, then sleeps. A request whose client (nginx) goes away during the sleep is
counted as aborted, not served. GET /stats answers one line per key:
"K peak=P served=S fences=F1,... order=I1,... aborted=A" with the fences and
the n of the requests in the order they started; /reset forgets
everything.
"""
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
keys = {}  # key -> {"now": n, "peak": n, "served": n, "fences": [], "order": [], "aborted": n}


def gone_within(conn, seconds):
    """Waits up to seconds; True as soon as the peer closed conn."""
    end = time.monotonic() + seconds
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return False
        readable, _, _ = select.select([conn], [], [], left)
        if readable:
            try:
                if conn.recv(1, socket.MSG_PEEK) == b"":
                    return True
            except OSError:
                return True
            time.sleep(min(0.01, left))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def answer(self, body):
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urlparse(self.path)
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
        if url.path == "/reset":
            with lock:
                keys.clear()
            self.answer("reset\n")
            return
        q = parse_qs(url.query)
        key = q.get("key", ["-"])[0]
        ms = int(q.get("ms", ["200"])[0])
        with lock:
            k = keys.setdefault(
                key, {"now": 0, "peak": 0, "served": 0, "fences": [], "order": [], "aborted": 0}
            )
            k["now"] += 1
            k["peak"] = max(k["peak"], k["now"])
            k["fences"].append(self.headers.get("X-Fence", "none") or "empty")
            k["order"].append(q.get("n", ["-"])[0])
        stream = q.get("stream", ["0"])[0] == "1"
        if stream:
            self.send_response(200)
            self.send_header("Content-Length", str(STREAM_BYTES))
            self.end_headers()
            self.wfile.write(b"x" * (STREAM_BYTES - 2))
            self.wfile.flush()
        aborted = gone_within(self.connection, ms / 1000.0)
        with lock:
            k["now"] -= 1
            k["aborted" if aborted else "served"] += 1
        if aborted:
            return
        if stream:
            self.wfile.write(b"!\n")
        else:
            self.answer("ok\n")

    # limit_except tests send other methods: served as GET.
    do_DELETE = do_GET


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write("%d\n" % server.server_address[1])
    import os

    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    server.serve_forever()


if __name__ == "__main__":
    main()
