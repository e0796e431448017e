#!/usr/bin/env python3
"""http_flood.py PORT N PATH [HEADER...]: open N connections to 127.0.0.1:PORT,
send one GET PATH on each (with the given "Name: value" headers) and print
one line per status "STATUS COUNT" once every connection has answered or
closed, plus "retry-after N" for the replies carrying that header, and
"closed N" for connections that ended without a reply.  Then the timing:
"sent S", the seconds from the first connect until every request was sent,
and per status "span-STATUS S", the seconds from its first answer to its
last, and "peak-STATUS N", the most of its answers received within any
3 s (WINDOW).  Standard library only; one selector loop.  Exits 2 after 60 s
without every answer."""
import resource
import selectors
import socket
import sys
import time

port, n, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
headers = "".join(h + "\r\n" for h in sys.argv[4:])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, n + 64)), hard))
WINDOW = 3.0
req = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s\r\n"
       % (path, headers)).encode()
sel = selectors.DefaultSelector()
bufs = {}
socks = []
t0 = time.monotonic()
for i in range(n):
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex(("127.0.0.1", port))
    sel.register(s, selectors.EVENT_WRITE)
    bufs[s] = b""
    socks.append(s)
    if i % 400 == 399:  # stay under the listen backlog
        time.sleep(0.05)
statuses, retry, closed, done = {}, 0, 0, 0
sent = t0  # when the last request went out
first = {}  # socket -> when its answer began to come
answered = {}  # status -> when each of its answers began to come
deadline = time.time() + 60
while done < n and time.time() < deadline:
    for key, ev in sel.select(timeout=1):
        s = key.fileobj
        if ev & selectors.EVENT_WRITE:
            try:
                s.send(req)
                sel.modify(s, selectors.EVENT_READ)
                sent = time.monotonic()
            except OSError:
                sel.unregister(s)
                s.close()
                closed += 1
                done += 1
            continue
        try:
            d = s.recv(65536)
        except OSError:
            d = b""
        if d:
            if not bufs[s]:
                first[s] = time.monotonic()
            bufs[s] += d
            continue
        sel.unregister(s)
        s.close()
        done += 1
        head = bufs[s].split(b"\r\n\r\n", 1)[0].decode("latin-1")
        if not head.startswith("HTTP/1.1 "):
            closed += 1
            continue
        st = head.split(" ")[1]
        statuses[st] = statuses.get(st, 0) + 1
        answered.setdefault(st, []).append(first[s])
        if "\r\nretry-after: 1" in head.lower():
            retry += 1
for st in sorted(statuses):
    print(st, statuses[st])
print("retry-after", retry)
print("closed", closed)
print("sent %.3f" % (sent - t0))
for st in sorted(answered):
    ts = sorted(answered[st])
    peak, lo = 0, 0
    for hi in range(len(ts)):
        while ts[hi] - ts[lo] > WINDOW:
            lo += 1
        peak = max(peak, hi - lo + 1)
    print("span-%s %.3f" % (st, ts[-1] - ts[0]))
    print("peak-%s %d" % (st, peak))
sys.exit(0 if done == n else 2)
