#!/usr/bin/env python3
"""A small stdio MCP server (JSON-RPC 2.0, one message a line) for the
hostile cases of the agent's MCP servers (tests/integration/test_agent_mcp.sh),
which the real servers cannot be made to show.  It speaks the legacy era
(initialize with 2025-11-25); server/discover, which the 2026-07-28 clients
send first, gets -32601 as a legacy server answers it.

  fake_mcp.py ok              tools "say" (echoes "said: TEXT"), "whoami" and
                              "fetch" (GET of its url through the proxy the
                              environment names, or with direct: true around
                              it: "STATUS BODY" or an error), and "probe"
                              (what its sandbox shows: the command lines of
                              every process it sees, /workspace's entries)
  fake_mcp.py crash-on-call   as ok, but a tools/call makes it write
                              "crashing on purpose" to stderr and exit 1
  fake_mcp.py many N          N tools (t0 .. tN-1), 1000 a page, each "say"
  fake_mcp.py exit            "bad config: FAKE_MCP_NEEDS is not set" on
                              stderr, exit 2 before reading anything
  fake_mcp.py silent          reads and never answers
  fake_mcp.py linger          as ok, but a tools/call makes it close its
                              stdout and live on, deaf to SIGTERM, until
                              it is killed
  fake_mcp.py named T...      tools named T..., each answering "T: TEXT"
  fake_mcp.py churn N         tools "churn", which writes N
                              notifications/tools/list_changed before its
                              answer, and "lists", which answers "lists K":
                              the tools/list requests it read since churn

It refuses to run outside a sandbox (AGRIPPA_SANDBOX unset): it is started
only by the daemon under test.
"""
import json
import os
import signal
import sys
import time
import urllib.request


def send(msg):
    sys.stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def tool(name):
    return {"name": name, "description": "Say something back.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}


def probe():
    procs = []
    for pid in sorted(os.listdir("/proc")):
        if pid.isdigit():
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    procs.append(f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip())
            except OSError:
                pass
    try:
        ws = sorted(os.listdir("/workspace"))
    except OSError as e:
        ws = "error: %s" % e
    return {"procs": procs, "workspace": ws}


def fetch(url, direct):
    handlers = [urllib.request.ProxyHandler({})] if direct else []
    try:
        with urllib.request.build_opener(*handlers).open(url, timeout=5) as r:
            return "%d %s" % (r.status, r.read(200).decode("utf-8", "replace")), False
    except Exception as e:  # the model sees why
        return "error: %s" % e, True


def main():
    if os.environ.get("AGRIPPA_SANDBOX") is None:
        sys.stderr.write("fake_mcp.py: only inside an Agrippa sandbox\n")
        return 2
    mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
    if mode == "exit":
        sys.stderr.write("bad config: FAKE_MCP_NEEDS is not set\n")
        sys.stderr.flush()
        return 2
    if mode == "many":
        names = ["t%d" % i for i in range(int(sys.argv[2]))]
    elif mode == "churn":
        names = ["churn", "lists"]
    elif mode == "named":
        names = sys.argv[2:]
    else:
        names = ["say", "whoami", "fetch", "probe"]
    lists = None  # tools/list requests since churn
    for line in sys.stdin:
        if mode == "silent":
            continue
        try:
            req = json.loads(line)
        except ValueError:
            continue
        method, rid = req.get("method"), req.get("id")
        if rid is None:
            continue  # a notification
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "fake-mcp", "version": "1.0"}}})
        elif method == "tools/list":
            if lists is not None:
                lists += 1
            start = int((req.get("params") or {}).get("cursor") or 0)
            page = names[start:start + 1000]
            res = {"tools": [tool(n) for n in page]}
            if start + 1000 < len(names):
                res["nextCursor"] = str(start + 1000)
            send({"jsonrpc": "2.0", "id": rid, "result": res})
        elif method == "tools/call":
            if mode == "linger":
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                sys.stdout.close()
                os.close(1)
                time.sleep(120)  # SIGKILL ends it
                return 1
            if mode == "crash-on-call":
                sys.stderr.write("crashing on purpose\n")
                sys.stderr.flush()
                return 1
            p = req.get("params") or {}
            args = p.get("arguments") or {}
            failed = False
            if mode == "churn" and p.get("name") == "churn":
                lists = 0
                for _ in range(int(sys.argv[2])):
                    send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
                text = "churned"
            elif mode == "churn" and p.get("name") == "lists":
                text = "lists %d" % (lists or 0)
            elif mode == "named":
                text = "%s: %s" % (p.get("name"), args.get("text", ""))
            elif p.get("name") == "whoami":
                text = "uid=%d" % os.getuid()
            elif p.get("name") == "probe":
                text = json.dumps(probe())
            elif p.get("name") == "fetch":
                text, failed = fetch(str(args.get("url", "")), bool(args.get("direct")))
            else:
                text = "said: " + str(args.get("text", ""))
            send({"jsonrpc": "2.0", "id": rid,
                  "result": {"content": [{"type": "text", "text": text}], "isError": failed}})
        else:
            send({"jsonrpc": "2.0", "id": rid,
                  "error": {"code": -32601, "message": "Method not found: %s" % method}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
