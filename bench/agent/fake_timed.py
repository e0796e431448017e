#!/usr/bin/env python3
"""tests/fakes/fake_model.py, unchanged, with a stopwatch around each request.

The fake's own log has the wall-clock "time" of a request rounded to the
millisecond, and "ms" covers only its handling up to the log line: not the
writing of that line (the whole request body, which grows with the
conversation) nor the sending of the reply.  To measure an overhead below
2 ms this wrapper loads the fake as it is and records, per logged request,
on one monotonic clock (time.perf_counter, seconds):
    t0  the handler starts (request line and headers read, body not yet)
    l0  the log line is about to be written (the fake's "ms" ends here)
    l1  the log line is written
    t1  the handler returned: the reply's last byte was handed to the
        kernel (the fake writes unbuffered)
and the client's port (one port for every request = one kept-alive
connection).  GET /_timing answers those records, one JSON object a line
("n", "t0", "l0", "l1", "t1", "port"), and forgets them.  Recording happens
in memory: nothing is written between two requests.

Arguments are the fake's (--script, --log, --port-file, --key).
"""
import importlib.util
import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "..", "..", "tests", "fakes", "fake_model.py")

spec = importlib.util.spec_from_file_location("fake_model", FAKE)
fm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fm)

_tl = threading.local()
_lock = threading.Lock()
_records = []

_orig_log = fm.Server.log
_orig_handle = fm.Handler._handle


def _log(self, entry):
    _tl.n = entry.get("n")
    _tl.l0 = time.perf_counter()
    _orig_log(self, entry)
    _tl.l1 = time.perf_counter()


def _handle(self):
    if self.path.split("?", 1)[0] == "/_timing":
        with _lock:
            out = "".join(json.dumps(r) + "\n" for r in _records).encode()
            _records.clear()
        # the request's body (none expected) is not read: close after
        self.close_connection = True
        self._send(200, "application/x-ndjson", out)
        return
    _tl.n = None
    t0 = time.perf_counter()
    _orig_handle(self)
    t1 = time.perf_counter()
    if _tl.n is not None:
        with _lock:
            _records.append({"n": _tl.n, "t0": t0, "l0": _tl.l0, "l1": _tl.l1, "t1": t1,
                             "port": self.client_address[1]})


fm.Server.log = _log
fm.Handler._handle = _handle
for m in ("do_GET", "do_POST", "do_PUT", "do_DELETE", "do_PATCH", "do_HEAD"):
    setattr(fm.Handler, m, _handle)

if __name__ == "__main__":
    sys.exit(fm.main())
