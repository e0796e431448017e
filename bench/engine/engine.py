#!/usr/bin/env python3
"""The client half of bench/engine/run.sh: HTTP calls and client-side clocks.

  latency BASE TOKEN PROJECT TEMPLATE REPO N OUT
      N runs one after the other: submit, take time.time() as soon as the
      POST's response is read, follow the run's event stream until it ends
      (after the terminal event), and take the first stdout text of the
      first command step (the sandbox's "date +%s.%N").  One line per run
      in OUT: "run t_post t_cmd terminal_event".  With TURN_IN and TURN_OUT
      (environment: two FIFOs) the runs go in turns of TURN_EVERY (1): a
      turn waits for a byte on TURN_IN first and writes one to TURN_OUT
      when it is over.  bench/engine/compare.sh takes turns with another
      daemon this way.
  throughput BASE TOKEN PROJECT TEMPLATE REPO N THREADS OUT
      N submissions from THREADS threads as fast as they go.  OUT gets one
      run id per line; stdout "t_first_submit t_last_submit" (the clock
      before the first POST is sent, after the last one is answered).
  sandbox AGRIPPACTL SOCK N OUT
      N times "agrippactl sandbox run -- date +%s.%N": one line per sample
      in OUT, "t_spawn t_cmd t_exit" (clock before the spawn, the command's
      clock, clock after agrippactl exited), or "fail STATUS STDERR" when
      agrippactl failed.

Any unexpected answer is fatal (status 1, the reason on stderr).
"""
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

TIMEOUT = 60


def die(msg):
    sys.stderr.write("bench/engine/engine.py: %s\n" % msg)
    sys.exit(1)


def submit(base, token, project, template, repo):
    """POST one run; returns (run id, client clock after the answer)."""
    body = json.dumps({"template": template, "params": {"repo": repo}}).encode()
    req = urllib.request.Request(
        "%s/v1/projects/%s/runs" % (base, project), data=body, method="POST",
        headers={"Authorization": "Bearer " + token,
                 "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
            data = r.read()
            t = time.time()
            code = r.status
    except urllib.error.HTTPError as e:
        die("submit: %d %s" % (e.code, e.read()[:200]))
    if code != 201:
        die("submit: %d %s" % (code, data[:200]))
    return json.loads(data)["id"], t


def stream(base, token, run):
    """The run's events from its SSE stream, which ends after the terminal
    event: a list of (type, payload dict)."""
    req = urllib.request.Request(
        "%s/v1/runs/%s/events/stream" % (base, run),
        headers={"Authorization": "Bearer " + token})
    events, etype = [], None
    with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
        if r.status != 200:
            die("stream of %s: %d" % (run, r.status))
        for raw in r:
            line = raw.decode().rstrip("\r\n")
            if line.startswith("event: "):
                etype = line[7:]
            elif line.startswith("data: "):
                events.append((etype, json.loads(line[6:])))
    return events


def first_output(events):
    """The command's clock: the first stdout text of the first step."""
    first = None
    for etype, p in events:
        if etype == "step.started" and first is None:
            first = p.get("step_id")
        if etype == "step.output" and p.get("step_id") == first and p.get("stream") == "stdout":
            return float(p["text"].split()[0])
    return None


def turns():
    """The turn-taking FIFOs (read end, write end), or (None, None).  Opened
    read-write, so that neither open waits for the other side."""
    tin, tout = os.environ.get("TURN_IN"), os.environ.get("TURN_OUT")
    if not tin or not tout:
        return None, None
    return os.open(tin, os.O_RDWR), os.open(tout, os.O_RDWR)


def latency(base, token, project, template, repo, n, out):
    tin, tout = turns()
    every = max(1, int(os.environ.get("TURN_EVERY", "1")))
    with open(out, "w") as f:
        for i in range(n):
            if tin is not None and i % every == 0 and os.read(tin, 1) != b"t":
                die("turn: a bad token")
            run, t_post = submit(base, token, project, template, repo)
            events = stream(base, token, run)
            if not events or not events[-1][0].startswith("run."):
                die("stream of %s ended without a terminal event" % run)
            t_cmd = first_output(events)
            if t_cmd is None:
                die("run %s: no output of its first step (%s)" %
                    (run, " ".join(e for e, _ in events)))
            f.write("%s %.6f %.9f %s\n" % (run, t_post, t_cmd, events[-1][0]))
            f.flush()
            if tout is not None and (i % every == every - 1 or i == n - 1):
                os.write(tout, b"t")


def throughput(base, token, project, template, repo, n, threads, out):
    ids, lock, left = [], threading.Lock(), [n]
    errors = []

    def worker():
        while True:
            with lock:
                if left[0] == 0:
                    return
                left[0] -= 1
            try:
                run, _ = submit(base, token, project, template, repo)
            except BaseException as e:  # die() in a thread: keep the reason
                errors.append(repr(e))
                return
            with lock:
                ids.append(run)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    t_first = time.time()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    t_last = time.time()
    if errors or len(ids) != n:
        die("throughput: %d of %d submitted: %s" % (len(ids), n, "; ".join(errors[:3])))
    with open(out, "w") as f:
        f.write("".join(r + "\n" for r in ids))
    print("%.6f %.6f" % (t_first, t_last))


def sandbox(ctl, sock, n, out):
    with open(out, "w") as f:
        for _ in range(n):
            t0 = time.time()
            p = subprocess.run([ctl, "-s", sock, "sandbox", "run", "--", "date", "+%s.%N"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT)
            t1 = time.time()
            if p.returncode != 0:
                # the daemon's failure is a figure too: counted, and its
                # reason kept for the report
                f.write("fail %d %s\n" % (p.returncode, p.stderr.decode().strip().replace("\n", " ")))
                continue
            f.write("%.6f %.9f %.6f\n" % (t0, float(p.stdout.split()[0]), t1))


def main(a):
    if len(a) == 9 and a[1] == "latency":
        latency(a[2], a[3], a[4], a[5], a[6], int(a[7]), a[8])
    elif len(a) == 10 and a[1] == "throughput":
        throughput(a[2], a[3], a[4], a[5], a[6], int(a[7]), int(a[8]), a[9])
    elif len(a) == 6 and a[1] == "sandbox":
        sandbox(a[2], a[3], int(a[4]), a[5])
    else:
        die("usage: latency BASE TOKEN PROJECT TEMPLATE REPO N OUT | "
            "throughput BASE TOKEN PROJECT TEMPLATE REPO N THREADS OUT | "
            "sandbox AGRIPPACTL SOCK N OUT")


if __name__ == "__main__":
    main(sys.argv)
