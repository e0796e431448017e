#!/usr/bin/env python3
# bench/mcp/direct.py MCPC NODE SERVER N MESSAGE: our own client without
# the sandbox, so that bench/mcp can tell what the sandbox and its relay
# add: agrippa-mcpc as agrippactl mcp test starts it (fd 3 its end of the
# server's stdin and stdout, a socket; fd 4 the server's stderr), the
# server a plain child of this script on the socket's other end, with the
# same environment as the SDK's server.  N calls of the server's echo
# tool; prints agrippa-mcpc's JSON answer.
import fcntl
import os
import socket
import subprocess
import sys

mcpc, node, server, n, message = sys.argv[1:6]
ours, theirs = socket.socketpair()
err_r, err_w = os.pipe()
env = {k: v for k, v in os.environ.items() if k in ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")}
env["API_TOKEN"] = os.environ.get("API_TOKEN", "")
srv = subprocess.Popen([node, server, "stdio"], stdin=theirs.fileno(), stdout=theirs.fileno(),
                       stderr=err_w, env=env)
theirs.close()
os.close(err_w)
# agrippa-mcpc's descriptors, 3 and 4 here too, kept open across the exec
hi_io = fcntl.fcntl(ours.fileno(), fcntl.F_DUPFD, 10)
hi_err = fcntl.fcntl(err_r, fcntl.F_DUPFD, 10)
ours.close()
os.close(err_r)
os.dup2(hi_io, 3)
os.dup2(hi_err, 4)
os.close(hi_io)
os.close(hi_err)
client = subprocess.run([mcpc, "bench", "60000", "echo", '{"message":"%s"}' % message, n, "60000"],
                        pass_fds=(3, 4), stdout=subprocess.PIPE, env={"PATH": "/usr/bin:/bin"})
os.close(3)
os.close(4)
try:
    srv.wait(timeout=10)
except subprocess.TimeoutExpired:
    srv.kill()
    srv.wait()
sys.stdout.write(client.stdout.decode())
sys.exit(client.returncode)
