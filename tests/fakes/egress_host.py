#!/usr/bin/env python3
"""The TLS test host of tests/integration/test_egress_proxy.sh.

Listens on --bind:443 (inside the test's own network namespace) with the
certificate the test makes and serves the files under --root; /slow
trickles 1 KiB every 100 ms for a minute, so that a test can keep a
transfer in flight.  A path without a dot whose NAME.json is a file under
--root is answered with that file as application/json, as an npm registry
answers /NAME with the package's packument.  Every TCP connection it accepts is logged before the
handshake, so a test can tell that nothing reached it:
    ACCEPT<TAB>PEER
    HANDSHAKE-FAILED<TAB>PEER
    GET<TAB>PATH<TAB>SNI
--ready is created once it listens.
"""
import argparse
import os
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fakehttp  # noqa: E402  (beside this file)

LOCK = threading.Lock()


def log_line(path, *fields):
    with LOCK, open(path, "a", encoding="utf-8") as f:
        f.write("\t".join(fields) + "\n")


class Handler(SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        sni = getattr(self.request, "sni", "-") or "-"
        log_line(self.server.log_path, "GET", self.path, sni)
        packument = self.packument()
        if packument is not None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(packument)))
            self.end_headers()
            self.wfile.write(packument)
            return None
        if self.path != "/slow":
            return super().do_GET()
        self.send_response(200)
        self.send_header("Content-Length", str(600 * 1024))
        self.end_headers()
        try:
            for _ in range(600):
                self.wfile.write(b"x" * 1024)
                self.wfile.flush()
                time.sleep(0.1)
        except OSError:
            log_line(self.server.log_path, "SLOW-BROKEN", self.path, sni)
        return None


    def packument(self):
        name = self.path.split("?", 1)[0].lstrip("/")
        if not name or "." in name or "/" in name:
            return None
        try:
            with open(name + ".json", "rb") as f:
                return f.read()
        except OSError:
            return None


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, args):
        self.log_path = args.log
        self.ctx = fakehttp.tls_server_context(args.cert, args.key)
        self.ctx.sni_callback = self._sni
        super().__init__((args.bind, 443), Handler)

    @staticmethod
    def _sni(sock, name, _ctx):
        sock.sni = name

    def finish_request(self, request, client_address):
        log_line(self.log_path, "ACCEPT", client_address[0])
        tls = fakehttp.tls_accept(self.ctx, request, 10)
        if tls is None:
            log_line(self.log_path, "HANDSHAKE-FAILED", client_address[0])
            return
        super().finish_request(tls, client_address)

    def handle_error(self, request, client_address):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bind", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--ready", required=True)
    args = ap.parse_args()
    os.chdir(args.root)
    srv = Server(args)
    open(args.ready, "w", encoding="utf-8").close()
    srv.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
