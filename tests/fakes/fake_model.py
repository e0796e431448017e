#!/usr/bin/env python3
"""A fake model provider on loopback for the integration tests.

It speaks the real wire formats of two providers, HTTP/1.1 with keep-alive
(Content-Length on plain replies, chunked transfer encoding on streams):

  Anthropic Messages   POST /v1/messages           (base URL http://127.0.0.1:PORT)
      credential: x-api-key.  Plain reply: a "message" object with text and
      tool_use content blocks, stop_reason, usage (input/output/cache counts).
      With "stream": true, text/event-stream, each event
      "event: NAME\\ndata: JSON\\n\\n": message_start, then per block
      content_block_start / content_block_delta (text_delta, or
      input_json_delta with pieces of the compact JSON input, after an empty
      first piece) / content_block_stop, a ping after the first block's start,
      message_delta (stop_reason, output_tokens), message_stop.
  OpenAI Chat Completions   POST /v1/chat/completions   (base URL .../v1)
      credential: "authorization: Bearer KEY".  Plain reply: a
      "chat.completion" with one choice (content or null, tool_calls with
      JSON-string arguments), finish_reason stop/tool_calls/length, usage
      where prompt_tokens counts the cached tokens too.  With "stream": true,
      "data: CHUNK\\n\\n" chat.completion.chunk lines: role first, text in
      pieces, each tool call's index/id/type/name then its arguments in
      pieces, the finish_reason chunk, a usage chunk with "choices": [] when
      stream_options.include_usage, then "data: [DONE]\\n\\n".

What each request gets comes from a script, a JSON array of steps used in
order, one per request, shared by both endpoints (--script FILE, re-read and
restarted from its first step whenever the file changes; or replaced with
POST /_script):
  {"reply": {"text": "..", "tool_calls": [{"name": "read_file", "input": {..}}],
             "stop": "end_turn"|"tool_use"|"max_tokens",
             "usage": {"input": 10, "output": 5, "cache_read": 0, "cache_write": 0}}}
      every key optional; stop defaults to tool_use when there are tool calls,
      else end_turn.  Tool-call ids are toolu_NNNN / call_NNNN from one counter
      (a call may also give its own "id").
  {"status": 429, "headers": {"retry-after": "1"}, "body": {..} or "text"}
      that status (default 200) and body (default: the provider's own error
      shape for that status; a string body is sent as text/plain, or as the
      step's "content_type").
  {"malformed": true}   200 whose JSON body is not JSON (streamed: one SSE
      data line that is not JSON, in an otherwise complete stream).
  {"cut": true}         streamed: the stream's start and part of the first
      block, then the connection is closed (no message_stop / [DONE], no last
      chunk); plain: a Content-Length larger than the bytes sent, then close.
  {"delay": 2.5, ..}    sleep that long before answering (after logging).
  {"interval": 0.5, ..} streamed: sleep that long between events.
  {"repeat": N, ..}     this step is used N times before the next one.
A step without reply/status/body/malformed answers {"text": "ok"}.  When the
script is exhausted (or the file is not a JSON array of objects) the reply is
500 with the provider's error shape saying so.  --key FILE: a request whose
credential differs from the file's content (stripped) gets the provider's
real 401 and uses no step.  Other paths get 404, other methods 405.

Control requests, never logged and never counted: GET /_health (200),
GET /_log (the log's contents), POST /_script (body: a JSON array of steps,
replaces the script and restarts it).

Every other request is logged to --log, one JSON object a line, appended and
flushed before any byte of the reply is sent:
    {"n": 1.., "time": wall-clock seconds, "method", "path", "headers": {lower-cased name: value},
     "body": parsed JSON or the raw text, "stream": bool,
     "messages": len(body.messages) or null, "step": index or null,
     "status": the HTTP status being sent, "error": why (only on errors),
     "ms": handling time so far (before any delay or reply)}
The port is written to --port-file (via FILE.tmp and a rename) once it
listens on 127.0.0.1.  SIGTERM ends it cleanly.
"""
import argparse
import hmac
import json
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fakehttp  # noqa: E402  (beside this file)

ANTHROPIC = "/v1/messages"
OPENAI = "/v1/chat/completions"
CONTROL = ("/_health", "/_log", "/_script")


def dumps(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def pieces(s, k=3):
    """s split into about k non-empty pieces (none for an empty string)."""
    if not s:
        return []
    size = max(1, -(-len(s) // k))
    return [s[i:i + size] for i in range(0, len(s), size)]


ANTHROPIC_ERRORS = {400: "invalid_request_error", 401: "authentication_error",
                    402: "billing_error", 403: "permission_error", 404: "not_found_error",
                    413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
                    529: "overloaded_error"}


def error_body(provider, status, message=None):
    """The provider's own error shape for STATUS."""
    if provider == "openai":
        if status == 429:
            typ, code = "requests", "rate_limit_exceeded"
        elif status == 401:
            typ, code = "invalid_request_error", "invalid_api_key"
        elif status >= 500:
            typ, code = "server_error", None
        else:
            typ, code = "invalid_request_error", None
        return {"error": {"message": message or f"fake error {status}", "type": typ,
                          "param": None, "code": code}}
    typ = ANTHROPIC_ERRORS.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": typ, "message": message or f"fake error {status}"}}


def check_steps(steps):
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        raise ValueError("the script must be a JSON array of objects")
    for s in steps:
        r = s.get("repeat", 1)
        if not isinstance(r, int) or isinstance(r, bool) or r < 0:
            raise ValueError(f"bad repeat: {r!r}")
    return steps


class Reply:
    """A scripted reply, normalized, with its tool-call ids allocated."""

    def __init__(self, r, new_id):
        r = r if isinstance(r, dict) else {}
        self.text = r.get("text")
        self.calls = []
        for c in r.get("tool_calls") or []:
            self.calls.append({"id": c.get("id"), "seq": new_id(), "name": c.get("name", "tool"),
                               "input": c.get("input", {})})
        self.stop = r.get("stop") or ("tool_use" if self.calls else "end_turn")
        u = r.get("usage") or {}
        self.input = u.get("input", 10)
        self.output = u.get("output", 5)
        self.cache_read = u.get("cache_read", 0)
        self.cache_write = u.get("cache_write", 0)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-model/1"
    sys_version = ""

    def log_message(self, fmt, *args):  # keep the test's output quiet
        pass

    def setup(self):
        super().setup()
        # Several small writes per reply: no Nagle / delayed-ACK stalls.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _body(self):
        """The request body (Content-Length or chunked)."""
        return fakehttp.request_body(self)

    # -- writing ------------------------------------------------------------

    def _send(self, status, ctype, body, headers=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        for k, v in headers:
            if k.lower() not in ("content-length", "content-type", "transfer-encoding"):
                self.send_header(k, str(v))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _send_json(self, status, obj, headers=()):
        self._send(status, "application/json", dumps(obj), headers)

    def _start_stream(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for k, v in self.extra_headers:
            self.send_header(k, v)
        self.end_headers()

    def _chunk(self, data):
        if self.interval and self.chunks_sent:
            time.sleep(self.interval)
        self.chunks_sent += 1
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _event(self, name, obj):
        self._chunk(b"event: " + name.encode() + b"\ndata: " + dumps(obj) + b"\n\n")

    def _data(self, obj):
        self._chunk(b"data: " + (obj if isinstance(obj, bytes) else dumps(obj)) + b"\n\n")

    def _end_stream(self):
        self.wfile.write(b"0\r\n\r\n")

    def _cut(self):
        """Close the connection now, mid-reply."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # -- dispatch -----------------------------------------------------------

    def _handle(self):
        t0 = time.monotonic()
        raw = self._body()
        path = self.path.split("?", 1)[0]
        if path in CONTROL:
            self._control(path, raw)
            return
        srv = self.server
        headers = {}
        for k, v in self.headers.items():
            k = k.lower()
            headers[k] = headers[k] + ", " + v if k in headers else v
        try:
            body = json.loads(raw.decode("utf-8"))
        except ValueError:
            body = raw.decode("utf-8", "replace")
        stream = isinstance(body, dict) and body.get("stream") is True
        msgs = body.get("messages") if isinstance(body, dict) else None
        provider = {ANTHROPIC: "anthropic", OPENAI: "openai"}.get(path)

        step_idx, step, error, status, reply = None, None, None, 200, None
        with srv.lock:
            srv.count += 1
            n = srv.count
            if provider is None:
                status, error = 404, f"not found: {path}"
            elif self.command != "POST":
                status, error = 405, f"method not allowed: {self.command}"
            elif not self._authorized(provider, headers):
                status = 401
                if provider == "openai":
                    error = "Incorrect API key provided."
                elif "x-api-key" not in headers:
                    error = "x-api-key header is required"
                else:
                    error = "invalid x-api-key"
            elif provider == "anthropic" and not (
                    isinstance(body, dict) and type(body.get("max_tokens")) is int
                    and body["max_tokens"] >= 1):
                # as the Messages API: the output limit is required
                status, error = 400, "max_tokens: Field required"
            else:
                step_idx, step, error = srv.take_step()
                if step is None:
                    status = 500
                elif "status" in step or "body" in step:
                    status = int(step.get("status", 200))
                elif not step.get("malformed") and not step.get("cut"):
                    reply = Reply(step.get("reply", {"text": "ok"}), srv.new_tool_id)
                elif step.get("cut"):
                    reply = Reply(step.get("reply", {"text": "a reply that never ends"}),
                                  srv.new_tool_id)
            entry = {"n": n, "method": self.command, "path": self.path, "headers": headers,
                     "body": body, "stream": stream,
                     "messages": len(msgs) if isinstance(msgs, list) else None,
                     "step": step_idx, "status": status, "time": round(time.time(), 3)}
            if error:
                entry["error"] = error
            entry["ms"] = round((time.monotonic() - t0) * 1000, 3)
            srv.log(entry)

        if step is None:
            if status == 405:
                self._send_json(405, error_body(provider, 405, error), [("Allow", "POST")])
            elif provider is None:
                self._send_json(404, error_body("anthropic", 404, error))
            else:
                self._send_json(status, error_body(provider, status, error))
            return

        delay = step.get("delay")
        if delay:
            time.sleep(float(delay))
        self.interval = float(step.get("interval") or 0)
        self.chunks_sent = 0
        rid = "req_fake%06d" % n
        self.extra_headers = [("request-id" if provider == "anthropic" else "x-request-id", rid)]
        self.model = body.get("model", "fake-model") if isinstance(body, dict) else "fake-model"
        self.msg_id = ("msg_fake%06d" if provider == "anthropic" else "chatcmpl-fake%06d") % n
        self.include_usage = bool(
            isinstance(body, dict) and isinstance(body.get("stream_options"), dict)
            and body["stream_options"].get("include_usage"))

        if "status" in step or "body" in step:
            b = step.get("body")
            if b is None:
                b = error_body(provider, status)
            hdrs = list(self.extra_headers) + list((step.get("headers") or {}).items())
            if isinstance(b, str):
                self._send(status, step.get("content_type", "text/plain; charset=utf-8"),
                           b.encode("utf-8"), hdrs)
            else:
                self._send(status, step.get("content_type", "application/json"), dumps(b), hdrs)
        elif step.get("cut"):
            if stream:
                getattr(self, provider + "_stream")(reply, cut=True)
            else:
                full = dumps(getattr(self, provider + "_message")(reply))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                for k, v in self.extra_headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(full)))
                self.end_headers()
                self.wfile.write(full[:len(full) // 2])
            self._cut()
        elif step.get("malformed"):
            if stream:
                getattr(self, provider + "_stream")(Reply({"text": "ok"}, srv.new_tool_id),
                                                    malformed=True)
            else:
                self._send(200, "application/json", b'{"id": "broken", "content": [{"type": "te',
                           self.extra_headers)
        elif stream:
            getattr(self, provider + "_stream")(reply)
        else:
            self._send_json(200, getattr(self, provider + "_message")(reply), self.extra_headers)

    def _authorized(self, provider, headers):
        key = self.server.current_key()
        if key is None:
            return True
        if provider == "openai":
            got = headers.get("authorization", "")
            want = "Bearer " + key
        else:
            got = headers.get("x-api-key", "")
            want = key
        return hmac.compare_digest(got.encode(), want.encode())

    def _control(self, path, raw):
        srv = self.server
        if path == "/_health" and self.command in ("GET", "HEAD"):
            self._send(200, "text/plain", b"ok\n")
        elif path == "/_log" and self.command == "GET":
            self._send(200, "application/x-ndjson", srv.read_log())
        elif path == "/_script" and self.command in ("POST", "PUT"):
            try:
                steps = check_steps(json.loads(raw.decode("utf-8")))
            except ValueError as e:
                self._send_json(400, {"error": str(e)})
                return
            srv.set_script(steps)
            self._send_json(200, {"ok": True, "steps": len(steps)})
        else:
            self._send_json(405, {"error": "method not allowed"})

    # -- Anthropic ----------------------------------------------------------

    def anthropic_blocks(self, r):
        blocks = []
        if r.text or not r.calls:
            blocks.append({"type": "text", "text": r.text or ""})
        for c in r.calls:
            blocks.append({"type": "tool_use", "id": c["id"] or "toolu_%04d" % c["seq"],
                           "name": c["name"], "input": c["input"]})
        return blocks

    def anthropic_message(self, r):
        return {"id": self.msg_id, "type": "message", "role": "assistant", "model": self.model,
                "content": self.anthropic_blocks(r), "stop_reason": r.stop,
                "stop_sequence": None,
                "usage": {"input_tokens": r.input, "output_tokens": r.output,
                          "cache_read_input_tokens": r.cache_read,
                          "cache_creation_input_tokens": r.cache_write}}

    def anthropic_stream(self, r, cut=False, malformed=False):
        self._start_stream()
        self._event("message_start", {"type": "message_start", "message": {
            "id": self.msg_id, "type": "message", "role": "assistant", "model": self.model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": r.input, "cache_creation_input_tokens": r.cache_write,
                      "cache_read_input_tokens": r.cache_read, "output_tokens": 1}}})
        if malformed:
            self._chunk(b"event: content_block_start\ndata: {\"type\": \"content_block_st\n\n")
        pinged = False
        for i, b in enumerate(self.anthropic_blocks(r)):
            if b["type"] == "text":
                start = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": p} for p in pieces(b["text"])]
            else:
                start = dict(b, input={})
                js = json.dumps(b["input"], ensure_ascii=False, separators=(",", ":"))
                deltas = [{"type": "input_json_delta", "partial_json": p}
                          for p in [""] + pieces(js)]
            self._event("content_block_start",
                        {"type": "content_block_start", "index": i, "content_block": start})
            if not pinged:
                self._event("ping", {"type": "ping"})
                pinged = True
            for d in deltas:
                self._event("content_block_delta",
                            {"type": "content_block_delta", "index": i, "delta": d})
                if cut:
                    return
            if cut:
                return
            self._event("content_block_stop", {"type": "content_block_stop", "index": i})
        if not pinged:
            self._event("ping", {"type": "ping"})
        self._event("message_delta", {"type": "message_delta",
                                      "delta": {"stop_reason": r.stop, "stop_sequence": None},
                                      "usage": {"output_tokens": r.output}})
        self._event("message_stop", {"type": "message_stop"})
        self._end_stream()

    # -- OpenAI -------------------------------------------------------------

    FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls",
              "max_tokens": "length"}

    def openai_usage(self, r):
        return {"prompt_tokens": r.input + r.cache_read, "completion_tokens": r.output,
                "total_tokens": r.input + r.cache_read + r.output,
                "prompt_tokens_details": {"cached_tokens": r.cache_read}}

    def openai_calls(self, r):
        return [{"id": c["id"] or "call_%04d" % c["seq"], "type": "function",
                 "function": {"name": c["name"],
                              "arguments": json.dumps(c["input"], ensure_ascii=False,
                                                      separators=(",", ":"))}}
                for c in r.calls]

    def openai_message(self, r):
        msg = {"role": "assistant", "content": r.text or None}
        if r.calls:
            msg["tool_calls"] = self.openai_calls(r)
        return {"id": self.msg_id, "object": "chat.completion", "created": int(time.time()),
                "model": self.model, "system_fingerprint": "fp_fake",
                "choices": [{"index": 0, "message": msg, "logprobs": None,
                             "finish_reason": self.FINISH.get(r.stop, r.stop)}],
                "usage": self.openai_usage(r)}

    def openai_stream(self, r, cut=False, malformed=False):
        created = int(time.time())

        def chunk(delta, finish=None, choices=True):
            c = {"id": self.msg_id, "object": "chat.completion.chunk", "created": created,
                 "model": self.model, "system_fingerprint": "fp_fake",
                 "choices": [{"index": 0, "delta": delta, "logprobs": None,
                              "finish_reason": finish}] if choices else []}
            if self.include_usage:
                c["usage"] = None
            return c

        self._start_stream()
        self._data(chunk({"role": "assistant", "content": ""}))
        if malformed:
            self._data(b'{"id": "broken", "choices": [{"delta": {"content": "o')
        for p in pieces(r.text or ""):
            self._data(chunk({"content": p}))
            if cut:
                return
        for i, c in enumerate(self.openai_calls(r)):
            fn = c["function"]
            self._data(chunk({"tool_calls": [{"index": i, "id": c["id"], "type": "function",
                                              "function": {"name": fn["name"],
                                                           "arguments": ""}}]}))
            if cut:
                return
            for p in pieces(fn["arguments"]):
                self._data(chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]}))
        if cut:
            return
        self._data(chunk({}, self.FINISH.get(r.stop, r.stop)))
        if self.include_usage:
            u = chunk(None, choices=False)
            u["usage"] = self.openai_usage(r)
            self._data(u)
        self._data(b"[DONE]")
        self._end_stream()

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, args):
        self.lock = threading.Lock()
        self.count = 0
        self.tool_ids = 0
        self.log_path = args.log
        self.mem_log = []
        self.script_path = args.script
        self.script_sig = None
        self.script_text = None
        self.script_error = None
        self.steps, self.pos, self.used = [], 0, 0
        self.key_path = args.key
        self.key_sig, self.key = None, None
        if self.script_path:
            self._reload_script(startup=True)
        super().__init__(("127.0.0.1", 0), Handler)

    def handle_error(self, request, client_address):
        pass  # a client that goes away is not the server's problem

    # -- the log --------------------------------------------------------------

    def log(self, entry):
        line = json.dumps(entry, ensure_ascii=False) + "\n"
        if self.log_path:
            # Opened per line (append): a test may truncate or remove the file.
            with open(self.log_path, "a", encoding="utf-8") as f:
                f.write(line)
        else:
            self.mem_log.append(line)

    def read_log(self):
        if not self.log_path:
            with self.lock:
                return "".join(self.mem_log).encode("utf-8")
        try:
            with open(self.log_path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return b""

    # -- the key --------------------------------------------------------------

    def current_key(self):
        """The expected credential (re-read when the file changes), or None."""
        if not self.key_path:
            return None
        st = os.stat(self.key_path)
        sig = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
        if sig != self.key_sig:
            with open(self.key_path, encoding="utf-8") as f:
                self.key = f.read().strip()
            self.key_sig = sig
        return self.key

    # -- the script -----------------------------------------------------------

    def _reload_script(self, startup=False):
        """Re-read --script when it changed: new stat or new content (the
        stat alone can miss a rewrite within one clock tick)."""
        for attempt in range(10):
            try:
                st = os.stat(self.script_path)
                with open(self.script_path, "rb") as f:
                    text = f.read()
            except OSError as e:
                if startup:
                    raise
                self.script_error = f"cannot read the script: {e}"
                return
            sig = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
            if sig == self.script_sig and text == self.script_text:
                return
            try:
                steps = check_steps(json.loads(text.decode("utf-8")))
            except ValueError as e:
                if startup:
                    raise SystemExit(f"fake_model: bad script {self.script_path}: {e}")
                # Maybe half-written by the test: give it a moment.
                self.script_error = f"bad script: {e}"
                time.sleep(0.02)
                continue
            self.steps, self.pos, self.used = steps, 0, 0
            self.script_sig, self.script_text, self.script_error = sig, text, None
            return

    def set_script(self, steps):
        with self.lock:
            self.steps, self.pos, self.used = steps, 0, 0
            self.script_error = None
            if self.script_path:
                # The file as it is now is superseded until it changes again.
                try:
                    st = os.stat(self.script_path)
                    with open(self.script_path, "rb") as f:
                        self.script_text = f.read()
                    self.script_sig = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
                except OSError:
                    pass

    def new_tool_id(self):
        self.tool_ids += 1
        return self.tool_ids

    def take_step(self):
        """(index, step, None) for the next step, or (None, None, why).
        Called with the lock held."""
        if self.script_path:
            self._reload_script()
        if self.script_error:
            return None, None, "fake_model: " + self.script_error
        while self.pos < len(self.steps):
            step = self.steps[self.pos]
            rep = step.get("repeat", 1)
            if self.used < rep:
                idx = self.pos
                self.used += 1
                if self.used >= rep:
                    self.pos, self.used = self.pos + 1, 0
                return idx, step, None
            self.pos, self.used = self.pos + 1, 0
        return None, None, "fake_model: script exhausted"


def main():
    ap = argparse.ArgumentParser(description="fake model provider for tests")
    ap.add_argument("--script", help="JSON array of steps (re-read when it changes)")
    ap.add_argument("--log", help="JSON-lines request log")
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--key", help="file with the expected API key")
    args = ap.parse_args()
    srv = Server(args)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    t.start()
    tmp = args.port_file + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(f"{srv.server_address[1]}\n")
    os.rename(tmp, args.port_file)
    # A test killed before its clean-up must not leave the fake behind:
    # it goes when the process that started it does.
    parent = os.getppid()
    while not stop.wait(1):
        if os.getppid() != parent:
            break
    srv.shutdown()
    srv.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
