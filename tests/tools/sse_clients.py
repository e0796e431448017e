#!/usr/bin/env python3
"""Clients of GET /v1/runs/{id}/events/stream for tests/integration/test_sse.sh.

Python 3 standard library only.  Each client speaks HTTP/1.1 over a plain
socket, decodes the chunked body itself and parses the Server-Sent Events
(id:, event:, data:, retry:, ":" comments).  Every wait has a timeout and
every mode an overall deadline, so a daemon that hangs fails the test
instead of blocking it.

Modes (all take --port --token --run):
  stress    N clients that read the stream, hang up at random points
            (dropping whatever they had received but not yet parsed),
            reconnect with Last-Event-ID = the last id they got and stop
            after the terminal event; each must see 1..--expect exactly
            once and in order.  One line per client, then "summary: ...".
            Exit status 1 on any failure.
  get       one request (optional Last-Event-ID / ?after=), reads until the
            stream ends or --timeout; prints one JSON object.  --rate B
            reads at most B bytes a second, --pause S stops reading for S
            seconds after the first event; both through a small receive
            buffer, so that the server holds what the client has not read
            yet: a client that reads, slowly or after a while.
  watch     opens a stream, reads up to --caught-up SEQ, then runs --cmd
            (sh -c) and waits for an event of type --want-type; prints one
            JSON object with the ids received after the catch-up and how
            long the event took.
  latency   opens a stream, reads up to --caught-up SEQ, then --rounds
            times: runs --cmd (which appends an event and prints its seq)
            and measures the time from its return (the event committed)
            to receiving that seq, 0 when it came first; prints one JSON
            object.
  heartbeat opens a stream and waits for a ":" comment line; prints one
            JSON object with the time it took.
  idle      --clients connections with a small receive buffer, each sends
            the stream's request and then reads nothing for --hold
            seconds; prints one JSON object: how many were accepted and
            how many the server closed meanwhile.
"""

import argparse
import json
import random
import socket
import subprocess
import sys
import threading
import time


class StreamError(Exception):
    pass


class SSEConn:
    """One HTTP/1.1 request to the stream and an incremental SSE parser."""

    def __init__(self, port, token, run, last_id=None, after=None, io_timeout=30.0,
                 extra_headers=(), rate=0, small_rcvbuf=False):
        self.port = port
        self.rate = rate        # bytes a second at most, 0: as fast as they come
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rate or small_rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        self.sock.settimeout(io_timeout)
        self.sock.connect(("127.0.0.1", port))
        self.t0 = time.monotonic()
        self.nread = 0
        path = "/v1/runs/%s/events/stream" % run
        if after is not None:
            path += "?after=%s" % after
        hdrs = ["GET %s HTTP/1.1" % path, "Host: 127.0.0.1:%d" % port,
                "Accept: text/event-stream"]
        if token:
            hdrs.append("Authorization: Bearer %s" % token)
        if last_id is not None:
            hdrs.append("Last-Event-ID: %s" % last_id)
        hdrs.extend(extra_headers)
        self.sock.sendall(("\r\n".join(hdrs) + "\r\n\r\n").encode())
        self.raw = b""          # bytes received, not yet decoded
        self.chunked = False
        self.clen = None        # Content-Length of a non-stream answer
        self.chunk_left = -1    # -1: a chunk-size line is next
        self.body = b""         # decoded body, not yet parsed into events
        self.ended = False      # the terminating zero chunk arrived
        self.closed = False     # the server closed the connection
        self.status = None
        self.headers = {}
        self.retry = None
        self.comments = 0
        self.comment_times = []
        self.yield_comments = False  # events() yields (None, ":", text) too
        self._read_head()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def _recv(self):
        if self.rate:
            ahead = self.nread / self.rate - (time.monotonic() - self.t0)
            if ahead > 0:
                time.sleep(ahead)
        try:
            d = self.sock.recv(8192 if self.rate else 262144)
        except socket.timeout:
            raise StreamError("read timed out")
        except ConnectionResetError:
            d = b""
        if not d:
            self.closed = True
        self.nread += len(d)
        return d

    def _read_head(self):
        while b"\r\n\r\n" not in self.raw:
            d = self._recv()
            if not d:
                raise StreamError("connection closed before the response head")
            self.raw += d
        head, self.raw = self.raw.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        self.status = int(parts[1])
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            self.headers[k.strip().lower()] = v.strip()
        self.chunked = self.headers.get("transfer-encoding", "").lower() == "chunked"
        if "content-length" in self.headers:
            self.clen = int(self.headers["content-length"])
        if self.chunked:
            rest, self.raw = self.raw, b""
            self._feed(rest)

    def read_plain_body(self):
        """The whole body of a non-stream answer (204, 400, 404...)."""
        if self.chunked:
            while not self.ended and not self.closed:
                self._feed(self._recv())
            return self.body
        n = self.clen if self.clen is not None else (0 if self.status == 204 else None)
        while (n is None or len(self.raw) < n) and not self.closed:
            self.raw += self._recv()
        return self.raw if n is None else self.raw[:n]

    def _feed(self, data):
        """Decode the chunked transfer coding of self.raw + data into
        self.body.  State: chunk_left -1 = a size line is next, > 0 = data
        bytes of the chunk, 0 = the CRLF after a chunk's data."""
        if not self.chunked:
            self.body += data
            return
        raw = self.raw + data if self.raw else data
        pos = 0
        out = []
        while not self.ended:
            if self.chunk_left < 0:
                nl = raw.find(b"\r\n", pos)
                if nl < 0:
                    break
                size = raw[pos:nl].split(b";", 1)[0].strip()
                try:
                    n = int(size, 16)
                except ValueError:
                    raise StreamError("bad chunk size %r" % size[:20])
                pos = nl + 2
                if n == 0:
                    self.ended = True  # (trailers, if any, are ignored)
                    break
                self.chunk_left = n
            elif self.chunk_left > 0:
                take = min(self.chunk_left, len(raw) - pos)
                if take == 0:
                    break
                out.append(raw[pos:pos + take])
                pos += take
                self.chunk_left -= take
            else:
                if len(raw) - pos < 2:
                    break
                if raw[pos:pos + 2] != b"\r\n":
                    raise StreamError("chunk data not followed by CRLF")
                pos += 2
                self.chunk_left = -1
        self.raw = raw[pos:]
        if out:
            self.body += b"".join(out)

    def _parse_events(self):
        """Complete events in self.body: list of (id, event, data)."""
        evs = []
        body = self.body
        start = 0
        while True:
            end = body.find(b"\n\n", start)
            if end < 0:
                break
            block = body[start:end].decode("utf-8")
            start = end + 2
            eid = etype = None
            data = []
            for ln in block.split("\n"):
                if ln.startswith(":"):
                    self.comments += 1
                    self.comment_times.append(time.monotonic())
                    if self.yield_comments:
                        evs.append((None, ":", ln[1:]))
                    continue
                k, _, v = ln.partition(":")
                if v.startswith(" "):
                    v = v[1:]
                if k == "id":
                    eid = v
                elif k == "event":
                    etype = v
                elif k == "data":
                    data.append(v)
                elif k == "retry":
                    self.retry = int(v)
                else:
                    raise StreamError("unexpected field %r" % ln[:80])
            if eid is not None or etype is not None or data:
                evs.append((eid, etype, "\n".join(data)))
        self.body = body[start:]
        return evs

    def events(self, deadline):
        """Yield (id, type, data) until the stream ends (then return);
        StreamError on a timeout, a closed connection or garbage."""
        while True:
            for ev in self._parse_events():
                yield ev
            if self.ended:
                if self.body.strip(b"\n"):
                    raise StreamError("stream ended inside an event")
                return
            if self.closed:
                raise StreamError("connection closed without the end of the stream")
            if time.monotonic() > deadline:
                raise StreamError("deadline passed")
            d = self._recv()
            if d:
                self._feed(d)


# --- stress ---------------------------------------------------------------------


class Client(threading.Thread):
    def __init__(self, n, args, deadline, seed):
        super().__init__(daemon=True)
        self.n = n
        self.args = args
        self.deadline = deadline
        self.rnd = random.Random(seed)
        self.count = 0
        self.last = 0
        self.reconnects = 0
        self.connects = 0
        self.error = None
        self.done = False
        self.writers = {}   # writer -> its last event number seen
        self.wcount = {}    # writer -> how many of its events were seen
        self.final_type = None
        self.faults = 0
        self.errors = []
        self.gaps = self.missing = self.dups = 0
        self.midstream = 0  # gaps not at the start of a connection
        self.fresh = False  # no event yet on this connection

    def where(self):
        if self.fresh:
            return " (first event after connect %d)" % self.connects
        return " (mid-stream, connect %d)" % self.connects

    def fault(self, msg):
        self.faults += 1
        if len(self.errors) < 3:
            self.errors.append(msg)

    def check(self, eid, etype, data):
        """Check one event; a duplicate or a gap is recorded (the client
        reads on, to report how many there are) and fails the client."""
        seq = int(eid)
        if seq <= self.last:
            self.dups += 1
            self.fault("duplicate: id %d after %d%s" % (seq, self.last, self.where()))
            self.fresh = False
            return
        if seq != self.last + 1:
            self.gaps += 1
            self.missing += seq - self.last - 1
            self.fault("gap: id %d after %d%s" % (seq, self.last, self.where()))
            if not self.fresh:
                self.midstream += 1
        self.fresh = False
        self.last = seq
        self.count += 1
        try:
            payload = json.loads(data)
        except ValueError:
            self.fault("id %d: data is not JSON: %r" % (seq, data[:80]))
            return
        if seq == 1:
            if etype != "run.queued":
                self.fault("id 1 is %s, not run.queued" % etype)
        elif seq == self.args.expect:
            if etype != self.args.final:
                self.fault("id %d is %s, not %s" % (seq, etype, self.args.final))
        elif etype == "test.tick":
            w, i = payload.get("w"), payload.get("i")
            if not isinstance(i, int) or i <= self.writers.get(w, 0):
                self.fault("id %d: writer %r event %r after %r" % (seq, w, i, self.writers.get(w)))
                return
            self.writers[w] = i
            self.wcount[w] = self.wcount.get(w, 0) + 1
        else:
            self.fault("id %d: unexpected type %s" % (seq, etype))

    def run(self):
        try:
            time.sleep(self.rnd.uniform(0, self.args.stagger))
            while not self.done:
                if time.monotonic() > self.deadline:
                    raise StreamError("deadline passed")
                # hang up after a random number of events: about
                # --reconnects times over the whole stream
                mean = max(1, self.args.expect // (self.args.reconnects + 1))
                budget = self.rnd.randint(1, 2 * mean)
                c = SSEConn(self.args.port, self.args.token, self.args.run,
                            last_id=str(self.last) if self.connects > 0 else None,
                            io_timeout=self.args.io_timeout)
                self.connects += 1
                self.fresh = True
                try:
                    if c.status != 200:
                        raise StreamError("status %d on connect %d (Last-Event-ID %d)"
                                          % (c.status, self.connects, self.last))
                    if c.headers.get("content-type") != "text/event-stream":
                        raise StreamError("content-type %r" % c.headers.get("content-type"))
                    got = 0
                    hangup = False
                    for eid, etype, data in c.events(self.deadline):
                        self.check(eid, etype, data)
                        if self.last == self.args.expect:
                            self.final_type = etype
                            continue  # read on: the stream must end now
                        got += 1
                        if got >= budget:
                            hangup = True
                            break
                    if c.retry != 2000:
                        raise StreamError("retry field %r, not 2000" % c.retry)
                    if not hangup:
                        if self.last != self.args.expect:
                            raise StreamError("stream ended at id %d" % self.last)
                        self.done = True
                finally:
                    c.close()
                if not self.done:
                    self.reconnects += 1
                    if self.rnd.random() < 0.3:
                        time.sleep(self.rnd.uniform(0, 0.2))
        except Exception as e:  # noqa: BLE001 - reported as the client's failure
            self.error = "%s: %s" % (type(e).__name__, e)


def mode_stress(args):
    t0 = time.monotonic()
    deadline = t0 + args.deadline
    rnd = random.Random(args.seed)
    clients = [Client(i + 1, args, deadline, rnd.random()) for i in range(args.clients)]
    for c in clients:
        c.start()
    for c in clients:
        c.join(max(0.0, deadline + 5 - time.monotonic()))
    elapsed = time.monotonic() - t0
    fails = 0
    complete = 0
    for c in clients:
        if c.is_alive() and c.error is None:
            c.error = "still running at the deadline"
        ok = (c.done and c.error is None and c.faults == 0 and c.count == args.expect and
              c.last == args.expect and len(c.writers) == args.writers and
              all(c.writers[w] == args.per_writer and c.wcount[w] == args.per_writer
                  for w in c.writers))
        if c.done:
            complete += 1
        if not ok:
            fails += 1
        print("client %d: events=%d last=%d in_order=%d gaps=%d missing=%d dups=%d "
              "reconnects=%d complete=%d%s%s"
              % (c.n, c.count, c.last, 1 if ok else 0, c.gaps, c.missing, c.dups, c.reconnects,
                 1 if c.done else 0, " error=" + c.error if c.error else "",
                 " faults=" + "; ".join(c.errors) if c.errors else ""))
    counts = sorted(set(c.count for c in clients))
    print("summary: clients=%d complete=%d failed=%d events=%s reconnects=%d "
          "gaps=%d midstream_gaps=%d dups=%d elapsed=%.1f"
          % (len(clients), complete, fails, ",".join(map(str, counts)),
             sum(c.reconnects for c in clients), sum(c.gaps for c in clients),
             sum(c.midstream for c in clients), sum(c.dups for c in clients), elapsed))
    sys.stdout.flush()
    return 1 if fails else 0


# --- single streams ---------------------------------------------------------------


def mode_get(args):
    t0 = time.monotonic()
    res = {"status": None, "ids": [], "types": [], "ended": False, "error": None}
    try:
        c = SSEConn(args.port, args.token, args.run, last_id=args.last_id, after=args.after,
                    io_timeout=args.timeout, rate=args.rate, small_rcvbuf=args.pause > 0)
        res["status"] = c.status
        res["content_type"] = c.headers.get("content-type")
        if c.status != 200:
            body = c.read_plain_body()
            res["body"] = body.decode("utf-8", "replace")
        else:
            try:
                for eid, etype, data in c.events(t0 + args.timeout):
                    if args.pause > 0 and not res["ids"]:
                        time.sleep(args.pause)
                    res["ids"].append(int(eid))
                    res["types"].append(etype)
                    json.loads(data)
                res["ended"] = True
            except StreamError as e:
                res["error"] = str(e)
            res["retry"] = c.retry
        c.close()
    except Exception as e:  # noqa: BLE001
        res["error"] = "%s: %s" % (type(e).__name__, e)
    res["elapsed"] = round(time.monotonic() - t0, 3)
    print(json.dumps(res))
    return 0


def catch_up(c, seq, deadline, res):
    """Read events until id seq; the ids go to res['before']."""
    if seq == 0:
        return iter(())
    it = c.events(deadline)
    for eid, etype, data in it:
        res["before"].append(int(eid))
        if int(eid) >= seq:
            return it
    raise StreamError("the stream ended before id %d" % seq)


def mode_watch(args):
    t0 = time.monotonic()
    deadline = t0 + args.timeout
    res = {"status": None, "before": [], "ids": [], "types": [], "elapsed": None,
           "error": None, "cmd_rc": None}
    try:
        c = SSEConn(args.port, args.token, args.run, last_id=args.last_id,
                    io_timeout=args.timeout)
        res["status"] = c.status
        if c.status != 200:
            raise StreamError("status %d" % c.status)
        it = catch_up(c, args.caught_up, deadline, res)
        if args.settle:
            time.sleep(args.settle)  # the join's replay is surely over
        t1 = time.monotonic()
        p = subprocess.run(["sh", "-c", args.cmd], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=30)
        res["cmd_rc"] = p.returncode
        res["cmd_out"] = p.stdout.decode().strip()
        res["cmd_err"] = p.stderr.decode().strip()[-300:]
        if args.caught_up == 0:
            it = c.events(deadline)
        for eid, etype, data in it:
            res["ids"].append(int(eid))
            res["types"].append(etype)
            if etype == args.want_type:
                res["elapsed"] = round(time.monotonic() - t1, 3)
                break
        c.close()
    except Exception as e:  # noqa: BLE001
        res["error"] = "%s: %s" % (type(e).__name__, e)
    print(json.dumps(res))
    return 0


def mode_latency(args):
    t0 = time.monotonic()
    deadline = t0 + args.timeout
    res = {"status": None, "before": [], "latencies": [], "error": None}
    got = {}
    lock = threading.Condition()
    try:
        c = SSEConn(args.port, args.token, args.run, io_timeout=args.timeout)
        res["status"] = c.status
        if c.status != 200:
            raise StreamError("status %d" % c.status)
        it = catch_up(c, args.caught_up, deadline, res)
        time.sleep(0.3)

        def reader():
            try:
                for eid, etype, data in it:
                    with lock:
                        got[int(eid)] = time.monotonic()
                        lock.notify_all()
            except Exception as e:  # noqa: BLE001
                with lock:
                    res["error"] = "reader: %s" % e
                    lock.notify_all()

        th = threading.Thread(target=reader, daemon=True)
        th.start()
        for _ in range(args.rounds):
            t1 = time.monotonic()
            p = subprocess.run(["sh", "-c", args.cmd], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=30)
            if p.returncode != 0:
                raise StreamError("append failed: %s" % p.stderr.decode()[-300:])
            # from the append's commit, which the command has made by the
            # time it returns: its own start-up (a psql on a loaded machine)
            # is no latency of the stream's; an event already there is 0
            t2 = time.monotonic()
            seq = int(p.stdout.decode().split()[0])
            with lock:
                while seq not in got and res["error"] is None and \
                        time.monotonic() < t1 + args.wait:
                    lock.wait(0.05)
                if seq not in got:
                    res["latencies"].append(None)
                else:
                    res["latencies"].append(round(max(0.0, got[seq] - t2), 3))
            time.sleep(0.2)
        c.close()
    except Exception as e:  # noqa: BLE001
        res["error"] = "%s: %s" % (type(e).__name__, e)
    lat = [x for x in res["latencies"] if x is not None]
    res["max"] = max(lat) if len(lat) == args.rounds and lat else None
    print(json.dumps(res))
    return 0


def mode_heartbeat(args):
    t0 = time.monotonic()
    res = {"status": None, "elapsed": None, "events": 0, "error": None}
    try:
        c = SSEConn(args.port, args.token, args.run, last_id=args.last_id,
                    io_timeout=args.timeout)
        res["status"] = c.status
        if c.status != 200:
            raise StreamError("status %d" % c.status)
        c.yield_comments = True
        for eid, etype, data in c.events(t0 + args.timeout):
            if etype == ":":
                break
            res["events"] += 1
        else:
            raise StreamError("the stream ended")
        res["elapsed"] = round(c.comment_times[0] - t0, 3)
        c.close()
    except Exception as e:  # noqa: BLE001
        res["error"] = "%s: %s" % (type(e).__name__, e)
    print(json.dumps(res))
    return 0


def mode_idle(args):
    path = "/v1/runs/%s/events/stream" % args.run
    req = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept: text/event-stream\r\n"
           "Authorization: Bearer %s\r\n\r\n" % (path, args.port, args.token)).encode()
    socks, failed = [], 0
    for i in range(args.clients):
        try:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.settimeout(10)
            s.connect(("127.0.0.1", args.port))
            s.sendall(req)
            socks.append(s)
        except OSError:
            failed += 1
        if i % 200 == 199:
            time.sleep(0.05)
    if args.ready:
        with open(args.ready, "w") as f:
            f.write("%d\n" % len(socks))
    time.sleep(args.hold)
    closed = 0
    for s in socks:
        s.setblocking(False)
        try:
            # a peek: nothing was read so far, so a closed connection reads
            # its bytes first; count the ones reset or at EOF behind them
            if s.recv(1, socket.MSG_PEEK) == b"":
                closed += 1
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
        s.close()
    print(json.dumps({"connected": len(socks), "failed": failed, "closed": closed}))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["stress", "get", "watch", "latency", "heartbeat", "idle"])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--token", default="")
    ap.add_argument("--run", required=True)
    ap.add_argument("--last-id")
    ap.add_argument("--after")
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--rate", type=int, default=0)
    ap.add_argument("--pause", type=float, default=0.0)
    # stress
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--expect", type=int, default=16002)
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--per-writer", type=int, default=2000)
    ap.add_argument("--final", default="run.succeeded")
    ap.add_argument("--reconnects", type=int, default=6,
                    help="about how many times each client hangs up")
    ap.add_argument("--stagger", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--deadline", type=float, default=120.0)
    ap.add_argument("--io-timeout", type=float, default=30.0)
    # watch / latency
    ap.add_argument("--caught-up", type=int, default=0)
    ap.add_argument("--cmd")
    ap.add_argument("--want-type")
    ap.add_argument("--settle", type=float, default=0.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--wait", type=float, default=8.0)
    # idle
    ap.add_argument("--hold", type=float, default=10.0)
    ap.add_argument("--ready")
    args = ap.parse_args()
    if args.seed is None:
        args.seed = random.randrange(1 << 30)
    if args.mode == "stress":
        print("seed: %d" % args.seed)
    return {"stress": mode_stress, "get": mode_get, "watch": mode_watch,
            "latency": mode_latency, "heartbeat": mode_heartbeat,
            "idle": mode_idle}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
