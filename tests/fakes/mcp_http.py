#!/usr/bin/env python3
"""A hostile remote MCP server on loopback for tests/integration/test_mcp_http.sh.

It speaks the legacy Streamable HTTP transport (2025-11-25) on one endpoint,
POST /mcp (GET for resumption, DELETE to end the session):
  server/discover   HTTP 400 with a JSON-RPC error without id, as the
                    TypeScript SDK's servers answer a request without session
  initialize        200 JSON, protocolVersion 2025-11-25, Mcp-Session-Id
  notifications     202
  tools/list        the tools below
  tools/call        what the tool's name asks for:
    ok          a text result "ok"
    ctype       200 text/html
    badjson     200 application/json that is not JSON
    otherid     a JSON result to another id
    batch       a JSON array of two results
    resume      an SSE stream: a priming event (id e1, retry: 100), then the
                connection closed; GET with Last-Event-ID e1 gets the result
    cut         an SSE stream closed after an event without id
    big         a 20 MiB JSON body
    bigsse      one 20 MiB SSE event
    gone        404: the session is over
    e500        500 with a text body
    redirect    302 to http://127.0.0.2:PORT/mcp, where the fake listens too
                (never to be followed: a request there is logged)
    echo        the request's headers as the result's text, then the
                Authorization header's value again with every character
                \\u-escaped in JSON (the client must see both redacted)
    slow        no answer for 30 s
    trickle     an SSE stream of comments every 200 ms for 30 s, no answer
GET without Last-Event-ID is the stream for the server's own messages: a
ping request on it, then 2 s of quiet.
Every request is logged as one JSON line to --log (the address it came to,
method, path, the JSON-RPC method or the id a response answers, and the MCP
headers).  --port 0 picks a port; the port is
written to --port-file.
"""
import argparse
import json
import socketserver
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

TOOLS = ["ok", "ctype", "badjson", "otherid", "batch", "resume", "cut", "big", "bigsse", "gone",
         "e500", "redirect", "echo", "slow", "trickle"]
SESSION = "fake-session-7f3a"
LOCK = threading.Lock()
STATE = {"pending": None, "port": 0}


class Server(socketserver.ThreadingMixIn, HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, fmt, *args):
        pass

    def record(self, rpc=None, answers=None):
        hdrs = {k.lower(): v for k, v in self.headers.items()
                if k.lower().startswith("mcp-") or k.lower() in ("authorization", "last-event-id",
                                                                  "accept", "content-type")}
        entry = {"host": self.server.server_address[0], "method": self.command,
                 "path": self.path, "rpc": rpc, "answers": answers, "headers": hdrs}
        with LOCK:
            with open(ARGS.log, "a") as f:
                f.write(json.dumps(entry) + "\n")

    def send(self, status, ctype, body, extra=None):
        try:
            self.send_response(status)
            if ctype:
                self.send_header("Content-Type", ctype)
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def json(self, status, obj, extra=None):
        self.send(status, "application/json", json.dumps(obj).encode(), extra)

    def sse_begin(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Mcp-Session-Id", SESSION)
        self.end_headers()

    def do_GET(self):
        self.record()
        last = self.headers.get("Last-Event-ID")
        with LOCK:
            pending = STATE["pending"]
        if last is None:
            # the stream for the server's own messages: a ping, then quiet
            self.sse_begin()
            ping = {"jsonrpc": "2.0", "id": "srv-ping-1", "method": "ping"}
            try:
                self.wfile.write(b"data: " + json.dumps(ping).encode() + b"\n\n")
                self.wfile.flush()
                time.sleep(2)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        if last != "e1" or pending is None:
            self.send(405, "text/plain", b"no stream here")
            return
        with LOCK:
            STATE["pending"] = None
        self.sse_begin()
        msg = {"jsonrpc": "2.0", "id": pending, "result": {"content": [
            {"type": "text", "text": "resumed after the stream was cut"}]}}
        self.wfile.write(b"id: e2\ndata: " + json.dumps(msg).encode() + b"\n\n")
        self.wfile.flush()

    def do_DELETE(self):
        self.record()
        self.send(200, None, b"")

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        try:
            msg = json.loads(self.rfile.read(n))
        except ValueError:
            self.record()
            self.json(400, {"jsonrpc": "2.0", "id": None,
                            "error": {"code": -32700, "message": "Parse error"}})
            return
        method = msg.get("method") if isinstance(msg, dict) else None
        self.record(method, msg.get("id") if isinstance(msg, dict) and method is None else None)
        rid = msg.get("id")
        if method == "server/discover":
            self.json(400, {"jsonrpc": "2.0", "id": None, "error": {
                "code": -32000, "message": "Bad Request: No valid session ID provided"}})
        elif method == "initialize":
            self.json(200, {"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1"}}},
                {"Mcp-Session-Id": SESSION})
        elif rid is None:
            self.send(202, None, b"")
        elif method == "tools/list":
            self.json(200, {"jsonrpc": "2.0", "id": rid, "result": {"tools": [
                {"name": t, "inputSchema": {"type": "object"}} for t in TOOLS]}})
        elif method == "tools/call":
            self.call(rid, msg.get("params", {}).get("name"))
        else:
            self.json(200, {"jsonrpc": "2.0", "id": rid, "result": {}})

    def result(self, rid, text):
        return {"jsonrpc": "2.0", "id": rid,
                "result": {"content": [{"type": "text", "text": text}]}}

    def call(self, rid, name):
        if name == "ok":
            self.json(200, self.result(rid, "ok"))
        elif name == "ctype":
            self.send(200, "text/html", b"<html><body>hello</body></html>")
        elif name == "badjson":
            self.send(200, "application/json", b'{"jsonrpc": "2.0", "id": ')
        elif name == "otherid":
            self.json(200, self.result(99999, "for someone else"))
        elif name == "batch":
            self.json(200, [self.result(rid, "one"), self.result(rid, "two")])
        elif name == "resume":
            with LOCK:
                STATE["pending"] = rid
            self.sse_begin()
            self.wfile.write(b"id: e1\nretry: 100\ndata: \n\n")
            self.wfile.flush()
        elif name == "cut":
            self.sse_begin()
            note = {"jsonrpc": "2.0", "method": "notifications/message",
                    "params": {"level": "info", "data": "working"}}
            self.wfile.write(b"data: " + json.dumps(note).encode() + b"\n\n")
            self.wfile.flush()
        elif name == "big":
            body = json.dumps(self.result(rid, "x" * (20 << 20))).encode()
            self.send(200, "application/json", body)
        elif name == "bigsse":
            self.sse_begin()
            try:
                self.wfile.write(b"data: " + json.dumps(self.result(rid, "y" * (20 << 20))).encode())
                self.wfile.write(b"\n\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
        elif name == "gone":
            self.send(404, "text/plain", b"session not found")
        elif name == "e500":
            self.send(500, "text/plain", b"internal trouble\x01 in the server")
        elif name == "redirect":
            self.send(302, "text/plain", b"moved",
                      {"Location": "http://127.0.0.2:%d/mcp" % STATE["port"]})
        elif name == "echo":
            auth = self.headers.get("Authorization", "")
            text = "headers: " + "; ".join("%s=%s" % (k, v) for k, v in self.headers.items())
            body = json.dumps(self.result(rid, text + " again: AUTHVALUE"))
            esc = "".join("\\u%04x" % ord(c) for c in auth)
            self.send(200, "application/json", body.replace("AUTHVALUE", esc).encode())
        elif name == "trickle":
            # busy but never answering: a comment every 200 ms
            self.sse_begin()
            try:
                for _ in range(150):
                    self.wfile.write(b": still working\n\n")
                    self.wfile.flush()
                    time.sleep(0.2)
            except (BrokenPipeError, ConnectionResetError):
                pass
        elif name == "slow":
            time.sleep(30)
            self.json(200, self.result(rid, "too late"))
        else:
            self.json(200, {"jsonrpc": "2.0", "id": rid,
                            "error": {"code": -32602, "message": "no such tool"}})


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file", required=True)
    p.add_argument("--log", required=True)
    ARGS = p.parse_args()
    srv = Server(("127.0.0.1", ARGS.port), Handler)
    STATE["port"] = srv.server_address[1]
    # where the redirect points: a request arriving here followed it
    other = Server(("127.0.0.2", STATE["port"]), Handler)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    with open(ARGS.port_file + ".tmp", "w") as f:
        f.write("%d\n" % STATE["port"])
    import os
    os.rename(ARGS.port_file + ".tmp", ARGS.port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
