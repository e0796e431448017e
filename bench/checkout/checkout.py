#!/usr/bin/env python3
"""The client half of bench/checkout/run.sh: HTTP calls and client clocks.

  submit BASE TOKEN PROJECT TEMPLATE REPO TIMEOUT
      Submits one run and follows it until its workspace.ready event (or a
      terminal event, or TIMEOUT seconds).  Prints one line:
          RUN T_SENT T_SEEN OUTCOME
      T_SENT is time.time() just before the POST's first byte is written,
      T_SEEN when a poll of GET /v1/runs/RUN/events first showed the event;
      OUTCOME is "ready", or the terminal event's type, or "timeout".  The
      poll is only the detector: it runs every 50 ms for the first 5 s,
      then every 250 ms, so as not to load the 2 cores the checkout needs;
      the figure itself is taken from the event's own timestamp in the
      database (run.sh).
  cancel BASE TOKEN RUN TIMEOUT
      Cancels the run and waits until GET /v1/runs/RUN says it has ended.
      Prints its final status.

Any unexpected answer is fatal (status 1, the reason on stderr).
"""
import json
import sys
import time
import urllib.error
import urllib.request

TERMINAL = ("run.succeeded", "run.failed", "run.cancelled")


def die(msg):
    sys.stderr.write("bench/checkout/checkout.py: %s\n" % msg)
    sys.exit(1)


def call(base, token, method, path, body=None, ok=(200,)):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Authorization": "Bearer " + token,
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            code, out = r.status, r.read()
    except urllib.error.HTTPError as e:
        code, out = e.code, e.read()
    if code not in ok:
        die("%s %s: %d %s" % (method, path, code, out[:300]))
    return json.loads(out) if out else {}


def submit(base, token, project, template, repo, timeout):
    body = {"template": template, "params": {"repo": repo}}
    t_sent = time.time()
    run = call(base, token, "POST", "/v1/projects/%s/runs" % project, body, ok=(201,))["id"]
    after, outcome = 0, "timeout"
    while time.time() - t_sent < timeout:
        ev = call(base, token, "GET", "/v1/runs/%s/events?after=%d&limit=1000" % (run, after))
        for e in ev["events"]:
            after = e["seq"]
            if e["type"] == "workspace.ready" or e["type"] in TERMINAL:
                outcome = "ready" if e["type"] == "workspace.ready" else e["type"]
                break
        if outcome != "timeout":
            break
        time.sleep(0.05 if time.time() - t_sent < 5 else 0.25)
    print("%s %.6f %.6f %s" % (run, t_sent, time.time(), outcome))


def cancel(base, token, run, timeout):
    call(base, token, "POST", "/v1/runs/%s/cancel" % run, ok=(200, 202, 409))
    t0 = time.time()
    while True:
        st = call(base, token, "GET", "/v1/runs/%s" % run)["status"]
        if st in ("succeeded", "failed", "cancelled"):
            print(st)
            return
        if time.time() - t0 > timeout:
            die("run %s still %s %d s after its cancel" % (run, st, timeout))
        time.sleep(0.1)


def main(a):
    if len(a) == 8 and a[1] == "submit":
        submit(a[2], a[3], a[4], a[5], a[6], float(a[7]))
    elif len(a) == 6 and a[1] == "cancel":
        cancel(a[2], a[3], a[4], float(a[5]))
    else:
        die("usage: submit BASE TOKEN PROJECT TEMPLATE REPO TIMEOUT | cancel BASE TOKEN RUN TIMEOUT")


if __name__ == "__main__":
    main(sys.argv)
