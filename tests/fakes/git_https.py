#!/usr/bin/env python3
"""A small git server on loopback for tests/integration/test_git_https.sh.

It speaks git's real smart-HTTP protocol by handing every request to
`git http-backend` (CGI), over TLS with a certificate the test makes, and
asks for HTTP Basic credentials (user x-access-token and the test's token)
on every request: 401 with `WWW-Authenticate: Basic realm="x"` otherwise.

A second listener speaks plain HTTP on another loopback port and answers
every request with 401 the same way, so that a client that would ever send
the token without TLS is seen doing it.

Every request is logged, one line each, to --log:
    SCHEME<TAB>METHOD<TAB>PATH<TAB>AUTHORIZATION ("-" when absent)
a TLS handshake that fails (plain HTTP on the TLS port) as
    https<TAB>HANDSHAKE-FAILED<TAB>-<TAB>-
and a connection that ends without any request (a client that refused the
certificate after the handshake) as
    SCHEME<TAB>NO-REQUEST<TAB>-<TAB>-
The two ports are written to --ports as "TLS_PORT PLAIN_PORT" once both
listen.  The token is read from --token-file, never from argv.

With --hold FILE, a git-upload-pack POST (the request that carries the
pack) waits while FILE exists (at most 120 s), so that a test can keep a
fetch in flight; its log line is written when it arrives.  --hold-push
FILE does the same for a git-receive-pack POST (a push's pack).

Pushes (git-receive-pack, which git http-backend enables only for a
REMOTE_USER) are served like fetches: the body, which git and libgit2 send
chunked, is de-chunked for the CGI, and REMOTE_USER is set only once the
credentials matched.
"""
import argparse
import base64
import hmac
import os
import ssl
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fakehttp  # noqa: E402  (beside this file)

USER = "x-access-token"
LOG_LOCK = threading.Lock()


def log_line(path, *fields):
    with LOG_LOCK, open(path, "a", encoding="utf-8") as f:
        f.write("\t".join(fields) + "\n")
        f.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-git-https/1"

    def log_message(self, fmt, *args):  # keep the test's output quiet
        pass

    def setup(self):
        super().setup()
        self.requests = 0

    def finish(self):
        # A connection that ends without a request (a client that dropped
        # it after the handshake, e.g. because it refused the certificate).
        if self.requests == 0:
            log_line(self.server.log_path, self.server.scheme, "NO-REQUEST", "-", "-")
        super().finish()

    def _body(self):
        """The request body (Content-Length or chunked)."""
        return fakehttp.request_body(self)

    def _send(self, status, headers, body):
        self.send_response(status)
        for k, v in headers:
            if k.lower() not in ("content-length", "status"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _authorized(self):
        got = self.headers.get("Authorization", "")
        return hmac.compare_digest(got.encode(), self.server.expected_auth.encode())

    def _handle(self):
        self.requests += 1
        auth = self.headers.get("Authorization") or "-"
        log_line(self.server.log_path, self.server.scheme, self.command, self.path, auth)
        body = self._body()
        for hold, service in ((self.server.hold, "/git-upload-pack"),
                              (self.server.hold_push, "/git-receive-pack")):
            if (hold and self.command == "POST" and self.path.endswith(service)
                    and self._authorized()):
                deadline = time.monotonic() + 120
                while os.path.exists(hold) and time.monotonic() < deadline:
                    time.sleep(0.05)
        if self.server.scheme != "https" or not self._authorized():
            self._send(401, [("WWW-Authenticate", 'Basic realm="x"'),
                             ("Content-Type", "text/plain")], b"authentication required\n")
            return
        self._cgi(body)

    def _cgi(self, body):
        path, _, query = self.path.partition("?")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": self.server.root,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_PROJECT_ROOT": self.server.root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": USER,
            "REMOTE_ADDR": self.client_address[0],
        }
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        p = subprocess.run(["git", "http-backend"], input=body, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
        head, sep, out = p.stdout.partition(b"\r\n\r\n")
        if not sep:
            head, sep, out = p.stdout.partition(b"\n\n")
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            k, _, v = line.partition(":")
            v = v.strip()
            if k.lower() == "status":
                status = int(v.split()[0])
            elif k:
                headers.append((k, v))
        if p.returncode != 0 and not sep:
            status, headers, out = 500, [("Content-Type", "text/plain")], p.stderr
        self._send(status, headers, out)

    do_GET = do_POST = do_HEAD = _handle


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, scheme, ctx, args, expected_auth):
        self.scheme = scheme
        self.ctx = ctx
        self.log_path = args.log
        self.root = args.root
        self.hold = args.hold
        self.hold_push = args.hold_push
        self.expected_auth = expected_auth
        port = args.port if scheme == "https" else 0
        super().__init__((args.bind, port), Handler)

    def finish_request(self, request, client_address):
        # The handshake in the request's own thread, so that a client that
        # never completes it cannot stall the others.
        if self.ctx is not None:
            try:
                request.settimeout(10)
                request = self.ctx.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                log_line(self.log_path, self.scheme, "HANDSHAKE-FAILED", "-", "-")
                return
        super().finish_request(request, client_address)

    def handle_error(self, request, client_address):
        pass  # a client that goes away is not the server's problem


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True, help="GIT_PROJECT_ROOT")
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--ports", required=True)
    ap.add_argument("--bind", default="127.0.0.1", help="the address to listen on")
    ap.add_argument("--port", type=int, default=0, help="the TLS port (0: any)")
    ap.add_argument("--hold", default=None,
                    help="while this file exists, upload-pack requests wait")
    ap.add_argument("--hold-push", default=None,
                    help="while this file exists, receive-pack requests wait")
    args = ap.parse_args()
    with open(args.token_file, encoding="utf-8") as f:
        token = f.read().strip()
    expected = "Basic " + base64.b64encode(f"{USER}:{token}".encode()).decode()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    tls = Server("https", ctx, args, expected)
    plain = Server("http", None, args, expected)
    for s in (tls, plain):
        threading.Thread(target=s.serve_forever, daemon=True).start()
    tmp = args.ports + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(f"{tls.server_address[1]} {plain.server_address[1]}\n")
    os.rename(tmp, args.ports)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
