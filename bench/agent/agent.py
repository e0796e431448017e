#!/usr/bin/env python3
"""The client half of bench/agent/run.sh: the fake's script, the runs, the
/proc sampling and the arithmetic.

  script FAKE N
      The fake (http://127.0.0.1:PORT) answers the next N requests with
      N-1 replies each calling read_file on README.md, then a final text.
  run BASE TOKEN PROJECT TEMPLATE REPO OUT [SUP_PID SANDBOX_EXE]
      Submits one run and waits for its end (GET /v1/runs/ID every 0.25 s).
      OUT gets "run status wall_s" (wall: POST sent -> terminal status seen).
      With SUP_PID, /proc is read every 20 ms meanwhile: the runner
      ("agrippad -P runner", a child of SUP_PID), the proxy ("agrippad -P
      proxy") and every process whose executable is SANDBOX_EXE and whose
      ancestors include SUP_PID; the largest VmHWM and VmRSS seen of each is
      written to OUT.mem, one line per process: "role pid hwm_kib rss_kib
      first_rss_kib".
  turns FAKE FAKELOG OUT
      Takes the fake's per-request timings (GET /_timing, see fake_timed.py)
      and its log, and writes OUT: one line per request n, "n messages
      time ms t0 l0 l1 t1 port" (the log's fields, then the stopwatch's).
  figures OUT LABEL
      Prints the per-turn figures of one pass from an OUT of "turns".
  cpu SUP_PID FAKE_PID PG_PID OUT
      CPU time so far, in clock ticks, of: the supervisor itself; what it
      has reaped (cutime+cstime: each run's runner, sandbox and git
      helper, once they have exited: it first waits up to 5 s for no runner
      to be left); the proxy, the engine and the httpd; the embedded
      PostgreSQL (the postmaster, its live processes and what it reaped);
      the fake.  OUT: one "group ticks" a line.
  cpudiff BEFORE AFTER N LABEL
      The CPU each group used between two "cpu" files, in ms per model call
      (N calls).
  replay FAKELOG FAKE N OUT
      The fake's cost seen by a client with no overhead of its own: the
      bodies of the first N requests of FAKELOG POSTed again, in order, to
      another fake (a fresh script of N replies), over one kept-alive
      http.client connection; OUT gets per request "client_ms fake_t1_t0_ms".

Any unexpected answer is fatal (status 1, the reason on stderr).
"""
import http.client
import json
import os
import socket
import sys
import time
import urllib.error
import urllib.request

TIMEOUT = 60
TERMINAL = ("succeeded", "failed", "cancelled")


def die(msg):
    sys.stderr.write("bench/agent/agent.py: %s\n" % msg)
    sys.exit(1)


def call(method, url, body=None, token=None):
    hdrs = {"Content-Type": "application/json"}
    if token:
        hdrs["Authorization"] = "Bearer " + token
    req = urllib.request.Request(url, data=body, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def script(fake, n):
    steps = []
    if n > 1:
        steps.append({"repeat": n - 1, "reply": {
            "tool_calls": [{"name": "read_file", "input": {"path": "README.md"}}]}})
    steps.append({"reply": {"text": "Done: read README.md %d times." % (n - 1)}})
    code, data = call("POST", fake + "/_script", json.dumps(steps).encode())
    if code != 200:
        die("the fake refused the script: %d %s" % (code, data[:200]))


# ---- /proc -----------------------------------------------------------------

def status_kib(pid):
    """(VmHWM, VmRSS) in KiB, or None when the process is gone."""
    hwm = rss = None
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
                elif line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
    except OSError:
        return None
    return (hwm or 0, rss or 0)


def proc_table():
    """{pid: (ppid, exe, argv0.. as a string)} of every process."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        pid = int(d)
        try:
            with open("/proc/%d/stat" % pid) as f:
                st = f.read()
            ppid = int(st[st.rindex(")") + 2:].split()[1])
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            try:
                exe = os.readlink("/proc/%d/exe" % pid)
            except OSError:
                exe = ""
        except (OSError, ValueError):
            continue
        out[pid] = (ppid, exe, cmd)
    return out


def ours(table, pid, sup):
    seen = 0
    while pid in table and seen < 64:
        if pid == sup:
            return True
        pid = table[pid][0]
        seen += 1
    return False


class Sampler:
    def __init__(self, sup, sbx_exe):
        self.sup, self.sbx_exe = sup, sbx_exe
        self.procs = {}          # pid -> [role, hwm, rss, first_rss]
        self.known = {}          # pid -> role (None: not ours)
        self.last_scan = 0.0

    def scan(self):
        table = proc_table()
        for pid, (ppid, exe, cmd) in table.items():
            if pid in self.known:
                continue
            if not ours(table, pid, self.sup):
                self.known[pid] = None  # never ours
                continue
            # the supervisor's children are clones of it until their
            # execve: one not yet known is looked at again next time
            if ppid == self.sup and cmd.startswith("agrippad -P runner "):
                self.known[pid] = "runner"
            elif ppid == self.sup and cmd.startswith("agrippad -P proxy "):
                self.known[pid] = "proxy"
            elif exe == self.sbx_exe:
                self.known[pid] = "sandbox"
        self.last_scan = time.monotonic()

    def sample(self):
        # new processes: a full /proc scan every 100 ms is enough (the
        # runner and the sandbox live for the whole run)
        if time.monotonic() - self.last_scan > 0.1:
            self.scan()
        for pid, role in self.known.items():
            if role is None:
                continue
            v = status_kib(pid)
            if v is None:
                continue
            p = self.procs.setdefault(pid, [role, 0, 0, v[1]])
            p[1] = max(p[1], v[0], v[1])
            p[2] = max(p[2], v[1])

    def write(self, path):
        with open(path, "w") as f:
            for pid, (role, hwm, rss, first) in sorted(self.procs.items()):
                f.write("%s %d %d %d %d\n" % (role, pid, hwm, rss, first))


def run(base, token, project, template, repo, out, sup=None, sbx_exe=None):
    sampler = Sampler(sup, sbx_exe) if sup else None
    if sampler:
        sampler.scan()
        sampler.sample()
    body = json.dumps({"template": template, "params": {"repo": repo}}).encode()
    t0 = time.time()
    code, data = call("POST", "%s/v1/projects/%s/runs" % (base, project), body, token)
    if code != 201:
        die("submit: %d %s" % (code, data[:200]))
    rid = json.loads(data)["id"]
    status, next_poll = None, 0.0
    while True:
        now = time.monotonic()
        if now >= next_poll:
            code, data = call("GET", "%s/v1/runs/%s" % (base, rid), None, token)
            if code != 200:
                die("run %s: %d %s" % (rid, code, data[:200]))
            status = json.loads(data)["status"]
            if status in TERMINAL:
                break
            next_poll = now + 0.25
            if time.time() - t0 > 1800:
                die("run %s: not finished after 30 min (%s)" % (rid, status))
        if sampler:
            sampler.sample()
            time.sleep(0.02)
        else:
            time.sleep(max(0.0, next_poll - time.monotonic()))
    wall = time.time() - t0
    with open(out, "w") as f:
        f.write("%s %s %.3f\n" % (rid, status, wall))
    if sampler:
        sampler.write(out + ".mem")


# ---- CPU -------------------------------------------------------------------

def stat_ticks(pid):
    """(utime+stime, cutime+cstime) of pid, or (0, 0) when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return (0, 0)
    a = st[st.rindex(")") + 2:].split()
    return (int(a[11]) + int(a[12]), int(a[13]) + int(a[14]))


def cpu(sup, fake, pg, out):
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        table = proc_table()
        if not any(pp == sup and cmd.startswith("agrippad -P runner ")
                   for pp, _, cmd in table.values()):
            break
        time.sleep(0.05)
    g = {}
    own, reaped = stat_ticks(sup)
    g["supervisor"] = own
    g["reaped (runner, sandbox, git)"] = reaped
    for pid, (pp, _, cmd) in table.items():
        for role in ("proxy", "engine", "httpd"):
            if pp == sup and cmd.startswith("agrippad -P %s " % role):
                g[role] = g.get(role, 0) + stat_ticks(pid)[0]
    own, reaped = stat_ticks(pg)
    g["postgres"] = own + reaped + sum(stat_ticks(pid)[0] for pid, (pp, _, _) in table.items()
                                       if pp == pg)
    g["fake"] = stat_ticks(fake)[0]
    with open(out, "w") as f:
        for k, v in g.items():
            f.write("%s\t%d\n" % (k, v))


def cpudiff(before, after, n, label):
    def load(path):
        with open(path) as f:
            return dict((l.rstrip("\n").split("\t")[0], int(l.rstrip("\n").split("\t")[1]))
                        for l in f if l.strip())
    a, b = load(before), load(after)
    tick = 1000.0 / os.sysconf("SC_CLK_TCK")
    parts, total = [], 0.0
    for k in b:
        d = (b[k] - a.get(k, 0)) * tick / n
        if k != "fake":
            total += d
        parts.append("%s %.2f" % (k, d))
    print("agent[%s]:   CPU per model call (ms, mean over the run, from /proc): %s; "
          "the daemon and its database together %.2f" % (label, ", ".join(parts), total))


# ---- the turns -------------------------------------------------------------

def turns(fake, fakelog, out):
    code, data = call("GET", fake + "/_timing")
    if code != 200:
        die("GET /_timing: %d" % code)
    timing = {}
    for line in data.decode().splitlines():
        r = json.loads(line)
        timing[r["n"]] = r
    rows = []
    with open(fakelog, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            e = json.loads(line)
            t = timing.get(e["n"])
            if t is None:
                die("request %d of the log has no timing" % e["n"])
            if e.get("status") != 200:
                die("request %d was answered %s (%s)" % (e["n"], e.get("status"), e.get("error")))
            rows.append("%d %d %.3f %.3f %.6f %.6f %.6f %.6f %d\n" % (
                e["n"], e["messages"] or 0, e["time"], e["ms"], t["t0"], t["l0"], t["l1"],
                t["t1"], t["port"]))
    with open(out, "w") as f:
        f.writelines(rows)


def pct(v, p):
    """Nearest rank (the lower middle for the median of an even count)."""
    if not v:
        return float("nan")
    s = sorted(v)
    k = max(1, -(-len(s) * p // 100))
    return s[int(k) - 1]


def mpm(v):
    return "%.3f %.3f %.3f" % (pct(v, 50), pct(v, 90), max(v) if v else float("nan"))


def figures(out, label):
    R = []
    with open(out) as f:
        for line in f:
            a = line.split()
            R.append({"n": int(a[0]), "msgs": int(a[1]), "time": float(a[2]),
                      "ms": float(a[3]), "t0": float(a[4]), "l0": float(a[5]),
                      "l1": float(a[6]), "t1": float(a[7]), "port": int(a[8])})
    R.sort(key=lambda r: r["n"])
    K = len(R) - 1  # turns with a next request
    ms = lambda x: x * 1000.0
    over = [ms(R[k + 1]["t0"] - R[k]["t1"]) for k in range(K)]
    e2e = [ms(R[k + 1]["t0"] - R[k]["t0"]) for k in range(K)]
    fake = [ms(R[k]["t1"] - R[k]["t0"]) for k in range(K)]
    parse = [ms(R[k]["l0"] - R[k]["t0"]) for k in range(K)]
    logw = [ms(R[k]["l1"] - R[k]["l0"]) for k in range(K)]
    reply = [ms(R[k]["t1"] - R[k]["l1"]) for k in range(K)]
    # the brief's arithmetic on the fake's own log alone
    logm = [(R[k + 1]["time"] - R[k]["time"]) * 1000.0 - R[k]["ms"] for k in range(K)]
    logms = [R[k]["ms"] for k in range(K)]
    ports = len(set(r["port"] for r in R))
    total = R[-1]["t1"] - R[0]["t0"]
    p = "agent[%s]" % label
    print("%s: requests %d, turns measured %d (turn k: reply k sent -> request k+1 "
          "arrives), connections %d, first -> last request %.2f s" % (p, len(R), K, ports, total))
    print("%s: messages in the last request: %d" % (p, R[-1]["msgs"]))
    print("%s: overhead_per_turn_ms (median p90 max): %s  (target: median < 2)" % (p, mpm(over)))
    print("%s:   end_to_end_per_turn_ms (request k -> k+1, nothing subtracted): %s" % (p, mpm(e2e)))
    print("%s:   fake_own_ms (handler start -> reply's last byte written): %s" % (p, mpm(fake)))
    print("%s:     of which read+parse (the log's \"ms\"): %s; writing its log line: %s; "
          "the reply: %s  (medians)" % (p, "%.3f" % pct(parse, 50), "%.3f" % pct(logw, 50),
                                        "%.3f" % pct(reply, 50)))
    print("%s:   from the fake's log alone, time(k+1) - time(k) - ms(k) (time has 1 ms "
          "resolution; includes the fake's log write and reply): %s" % (p, mpm(logm)))
    print("%s:   the log's ms alone: %s" % (p, mpm(logms)))
    # how the overhead grows with the conversation
    if K >= 10:
        parts = []
        step = K / 10.0
        for i in range(10):
            a, b = int(round(i * step)), int(round((i + 1) * step))
            parts.append("%d-%d: %.2f" % (a + 1, b, pct(over[a:b], 50)))
        print("%s:   overhead median by turns (ms): %s" % (p, ", ".join(parts)))
        parts = []
        for i in range(10):
            a, b = int(round(i * step)), int(round((i + 1) * step))
            parts.append("%.2f" % pct(fake[a:b], 50))
        print("%s:   fake_own median by the same tenths (ms): %s" % (p, ", ".join(parts)))


def replay(fakelog, fake, n, out):
    bodies = []
    with open(fakelog, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            e = json.loads(line)
            bodies.append((e["path"], json.dumps(e["body"], ensure_ascii=False,
                                                 separators=(",", ":")).encode("utf-8")))
            if len(bodies) >= n:
                break
    script(fake, len(bodies))
    host, port = fake.split("//", 1)[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT)
    conn.connect()
    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    client = []
    for path, body in bodies:
        t0 = time.perf_counter()
        conn.request("POST", path, body, {"content-type": "application/json",
                                          "anthropic-version": "2023-06-01",
                                          "x-api-key": "replay"})
        r = conn.getresponse()
        r.read()
        t1 = time.perf_counter()
        if r.status != 200:
            die("replay: %d" % r.status)
        client.append((t1 - t0) * 1000.0)
    conn.close()
    code, data = call("GET", fake + "/_timing")
    inner = [(json.loads(l)["t1"] - json.loads(l)["t0"]) * 1000.0
             for l in data.decode().splitlines()]
    with open(out, "w") as f:
        for i, c in enumerate(client):
            f.write("%.3f %.3f\n" % (c, inner[i] if i < len(inner) else float("nan")))
    print("agent: fake_replay: %d request bodies of the last pass, one client, keep-alive: "
          "client round trip_ms %s; the fake's own (stopwatch)_ms %s  (median p90 max)"
          % (len(client), mpm(client), mpm(inner)))


def main(a):
    if len(a) == 4 and a[1] == "script":
        script(a[2], int(a[3]))
    elif len(a) in (8, 10) and a[1] == "run":
        run(a[2], a[3], a[4], a[5], a[6], a[7],
            int(a[8]) if len(a) == 10 else None, a[9] if len(a) == 10 else None)
    elif len(a) == 5 and a[1] == "turns":
        turns(a[2], a[3], a[4])
    elif len(a) == 4 and a[1] == "figures":
        figures(a[2], a[3])
    elif len(a) == 6 and a[1] == "cpu":
        cpu(int(a[2]), int(a[3]), int(a[4]), a[5])
    elif len(a) == 6 and a[1] == "cpudiff":
        cpudiff(a[2], a[3], int(a[4]), a[5])
    elif len(a) == 6 and a[1] == "replay":
        replay(a[2], a[3], int(a[4]), a[5])
    else:
        die("usage: script FAKE N | run BASE TOKEN PROJECT TEMPLATE REPO OUT [SUP_PID EXE] | "
            "turns FAKE FAKELOG OUT | figures OUT LABEL | cpu SUP FAKE PG OUT | "
            "cpudiff BEFORE AFTER N LABEL | replay FAKELOG FAKE N OUT")


if __name__ == "__main__":
    main(sys.argv)
