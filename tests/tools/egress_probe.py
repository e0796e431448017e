#!/usr/bin/env python3
"""Attacks on the egress proxy, run inside a sandbox by
tests/integration/test_egress_proxy.sh (never on the host).

    raw HEAD [MORE]   send HEAD (backslash escapes decoded) to the proxy at
                      127.0.0.1:3128; with MORE, read the answer's head and
                      send MORE after it; print the answer's status line and
                      "closed" when the proxy closed the connection
    flood N DIR       open N connections, each sending a CONNECT to
                      allowed.test:8080; print how many were answered 200
                      and how many were refused, create DIR/held and hold
                      them until DIR/release exists (two minutes at most)
    loris             trickle a head a header a second; print the answer and
                      how many seconds the proxy took to close
    loris-hello       CONNECT allowed.test:443, then trickle a ClientHello a
                      byte a second; print how many seconds the proxy took
                      to close
    dns               a name lookup and a UDP query to a DNS port must fail
    idle HOST:PORT    CONNECT HOST:PORT, then send nothing; print the answer's
                      status line and how many seconds the proxy took to close
                      the idle tunnel (a minute at most)
"""
import codecs
import os
import socket
import sys
import time

PROXY = ("127.0.0.1", 3128)


def unesc(s):
    return codecs.decode(s, "unicode_escape").encode("latin-1")


def read_head(s):
    data = b""
    while b"\r\n\r\n" not in data:
        got = s.recv(4096)
        if not got:
            break
        data += got
    return data


def read_all(s, timeout=15):
    s.settimeout(timeout)
    data = b""
    try:
        while True:
            got = s.recv(4096)
            if not got:
                return data, True
            data += got
    except OSError:
        return data, False


def raw(head, more=None):
    s = socket.create_connection(PROXY, timeout=15)
    try:
        s.sendall(unesc(head))
        if more is not None:
            ans = read_head(s)
            print(ans.split(b"\r\n", 1)[0].decode("latin-1"))
            s.sendall(unesc(more))
        data, closed = read_all(s)
    except OSError as e:
        print("error:", e)
        return
    if data:
        print(data.split(b"\r\n", 1)[0].decode("latin-1"))
        print(data.decode("latin-1").rstrip().splitlines()[-1])
    print("closed" if closed else "open")


def flood(n, where):
    conns, ok, refused = [], 0, 0
    for _ in range(n):
        s = socket.create_connection(PROXY, timeout=15)
        s.sendall(b"CONNECT allowed.test:8080 HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n")
        conns.append(s)
    for s in conns:
        try:
            ans = read_head(s)
        except OSError:
            ans = b""
        if ans.startswith(b"HTTP/1.1 200"):
            ok += 1
        else:
            refused += 1
    print(f"ok={ok} refused={refused}", flush=True)
    open(os.path.join(where, "held"), "w", encoding="utf-8").close()
    deadline = time.monotonic() + 120
    while not os.path.exists(os.path.join(where, "release")) and time.monotonic() < deadline:
        time.sleep(0.1)


def loris():
    s = socket.create_connection(PROXY, timeout=30)
    t0 = time.monotonic()
    s.sendall(b"CONNECT allowed.test:8080 HTTP/1.1\r\n")
    data = b""
    try:
        for i in range(30):
            s.sendall(b"X-Slow-%d: 1\r\n" % i)
            time.sleep(1)
    except OSError:
        pass
    data, _ = read_all(s, 30)
    print(data.split(b"\r\n", 1)[0].decode("latin-1"))
    print(f"closed after {int(time.monotonic() - t0)}s")


def idle(target):
    s = socket.create_connection(PROXY, timeout=60)
    s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target.encode(), target.encode()))
    print(read_head(s).split(b"\r\n", 1)[0].decode("latin-1"))
    t0 = time.monotonic()
    _, closed = read_all(s, 60)
    # rounded: the proxy's timer starts as it writes the 200, a little
    # before this side has read it
    print(f"closed after {round(time.monotonic() - t0)}s" if closed else "still open")


def loris_hello():
    s = socket.create_connection(PROXY, timeout=30)
    s.sendall(b"CONNECT allowed.test:443 HTTP/1.0\r\n\r\n")
    print(read_head(s).split(b"\r\n", 1)[0].decode("latin-1"))
    t0 = time.monotonic()
    try:
        for b in b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(30):
            s.sendall(bytes([b]))
            time.sleep(1)
    except OSError:
        pass
    read_all(s, 30)
    print(f"closed after {int(time.monotonic() - t0)}s")


def dns():
    try:
        socket.getaddrinfo("nothere.test", 443)
        print("lookup: resolved")
    except OSError as e:
        print("lookup: failed:", e)
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07allowed\x04test\x00\x00\x01\x00\x01"
    try:
        u.sendto(q, ("10.77.0.1", 53))
        u.settimeout(3)
        u.recv(512)
        print("udp: answered")
    except OSError as e:
        print("udp: failed:", e)


def main():
    cmd = sys.argv[1]
    if cmd == "raw":
        raw(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
    elif cmd == "flood":
        flood(int(sys.argv[2]), sys.argv[3])
    elif cmd == "loris":
        loris()
    elif cmd == "loris-hello":
        loris_hello()
    elif cmd == "dns":
        dns()
    elif cmd == "idle":
        idle(sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
