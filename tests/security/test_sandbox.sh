#!/bin/sh
# Security tests of the per-run sandbox (DESIGN.md section 4): hostile
# programs run inside real sandboxes built by the real daemon, and every
# attempt to reach outside must fail while the daemon stays healthy.
# Commands run through `agrippactl sandbox run` and the file tools through
# tests/tools/sbxcall, which drives the tool server as a runner does; the
# syscall probe is a static try_syscall copied into the workspace (it
# refuses to run anywhere but in a sandbox).
. tests/integration/lib.sh
need_root sandbox

SBX_UID=2000000000
make_env
trap cleanup_env EXIT
cat >>"$CONF" <<EOC
sandbox:
  memory: 256M
  pids: 128
  tmp_size: 8M
  file_size: 16M
  output_max: 64K
  exec_timeout: 60
  max: 4
EOC
# The sandbox user must map to an id no account owns: the daemon refuses
# to start otherwise, and says which account.
sed "s/^  max: 4\$/  max: 4\n  uid: $(id -u _agrippa)/" "$CONF" >"$T/bad-uid.yaml"
chmod 0600 "$T/bad-uid.yaml"
timeout 60 "$AGRIPPAD" -d -f "$T/bad-uid.yaml" >"$T/bad-uid.out" 2>&1
rc=$?
if [ "$rc" = 1 ] && grep -q "sandbox.uid $(id -u _agrippa) belongs to user _agrippa" "$T/bad-uid.out"; then
	ok "a sandbox.uid that an account owns stops the daemon at start, named"
else notok "a sandbox.uid that an account owns stops the daemon at start" "exit $rc $(cat "$T/bad-uid.out")"; fi
if ! start_daemon; then
	notok "daemon starts" "$(tail -20 "$LOG")"
	cleanup_env
	finish sandbox
	exit 1
fi

WS=$T/ws
mkdir -p "$WS/src"
echo 'int main(void) { return 0; }' >"$WS/src/main.c"
cp "$ROOT/$BUILD/tests/probe/try_syscall" "$WS/try_syscall"
chown -R "$SBX_UID:$SBX_UID" "$WS"
echo "host secret" >"$T/outside"
chmod 0644 "$T/outside"
OUTSIDE_SUM=$(sha256sum "$T/outside")
PASSWD_SUM=$(sha256sum /etc/passwd)

# sbx ARGS...: agrippactl sandbox run ARGS; output in $T/out, $T/err; status in $RC.
sbx() {
	RC=0
	timeout 120 "$AGRIPPACTL" -s "$CTL" sandbox run "$@" >"$T/out" 2>"$T/err" || RC=$?
}
# sbxw CMDLINE: a shell command line in a sandbox over $WS.
sbxw() { sbx -w "$WS" -- sh -c "$1"; }
# call ARGS...: sbxcall over the control socket; its lines in $T/call.
call() { "$TOOLS/sbxcall" "$CTL" "$@" >"$T/call" 2>&1; }

out_has() { grep -q -- "$1" "$T/out"; }
err_has() { grep -q -- "$1" "$T/err"; }
call_has() { grep -qF -- "$1" "$T/call"; }
expect_rc() { # expect_rc DESC WANT
	if [ "$RC" = "$2" ]; then ok "$1"; else
		notok "$1" "exit $RC, wanted $2; stdout: $(head -c 300 "$T/out"); stderr: $(head -c 300 "$T/err")"
	fi
}
expect_out() { # expect_out DESC PATTERN
	if out_has "$2"; then ok "$1"; else
		notok "$1" "no '$2' in: $(head -c 400 "$T/out") / $(head -c 300 "$T/err")"
	fi
}
expect_no_out() {
	if out_has "$2"; then notok "$1" "$(grep -- "$2" "$T/out" | head -5)"; else ok "$1"; fi
}
expect_call() { # expect_call DESC LINE-PREFIX
	if call_has "$2"; then ok "$1"; else notok "$1" "no '$2' in: $(cat "$T/call")"; fi
}
# Processes of the sandbox uid left on the host.
sandbox_procs() {
	for d in /proc/[0-9]*; do
		awk -v u="$SBX_UID" '$1 == "Uid:" && $2 == u { f = 1 } END { exit !f }' \
			"$d/status" 2>/dev/null && echo "${d#/proc/}"
	done
	return 0
}
no_sandbox_procs() { [ -z "$(sandbox_procs)" ]; }
have_sandbox_procs() { [ -n "$(sandbox_procs)" ]; }
# The sandbox cgroups of this daemon's children (running and prepared ones):
# other daemons on the host (concurrent test runs) have their own.
our_sandbox_cgroups() {
	for d in /proc/[0-9]*; do
		[ "$(awk '/^PPid:/ { print $2 }' "$d/status" 2>/dev/null)" = "$SUP_PID" ] || continue
		awk -F: '$2 == "pids" && $3 ~ /\/sbx-[0-9a-f]+$/ { print "/sys/fs/cgroup/pids" $3 }' \
			"$d/cgroup" 2>/dev/null
	done
	return 0
}

# ---- identity -----------------------------------------------------------

sbxw 'id -u; id -g; cat /proc/self/uid_map /proc/self/gid_map; grep -E "^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):" /proc/self/status; hostname'
expect_rc "a command runs in the sandbox" 0
expect_out "it runs as uid 1000 inside" '^1000$'
expect_out "uid 1000 maps to sandbox.uid" "1000 *$SBX_UID *1"
if [ "$(grep -c '^Cap.*0000000000000000$' "$T/out")" = 5 ]; then
	ok "no capability in any set (incl. bounding and ambient)"
else
	notok "no capability in any set" "$(grep ^Cap "$T/out")"
fi
expect_out "no_new_privs is set" 'NoNewPrivs:[[:space:]]*1'
expect_out "a seccomp filter is installed" 'Seccomp:[[:space:]]*2'
expect_out "its own host name" '^sandbox$'

sbx -- env
names=$(cut -d= -f1 "$T/out" | LC_ALL=C sort | tr '\n' ' ')
if [ "$names" = "AGRIPPA_SANDBOX HOME LANG LOGNAME PATH SHELL TERM TMPDIR USER " ]; then
	ok "the environment is exactly the allow-list"
else
	notok "the environment is exactly the allow-list" "$names"
fi

# ---- the host's processes, files and network ---------------------------

sbxw "ls /proc | grep -c '^[0-9]'; cat /proc/1/environ; cat /proc/$SUP_PID/environ; cat /proc/$SUP_PID/mem; echo END"
n=$(head -1 "$T/out")
if [ "$n" -le 4 ] 2>/dev/null; then ok "only the sandbox's own processes are visible ($n)"; else
	notok "only the sandbox's own processes are visible" "$n"
fi
if err_has '/proc/1/environ: Permission denied'; then
	ok "pid 1 (the tool server) is not readable by commands"
else notok "pid 1 (the tool server) is not readable by commands" "$(cat "$T/err")"; fi
if err_has "/proc/$SUP_PID/environ: No such file" && err_has "/proc/$SUP_PID/mem: No such file"; then
	ok "the supervisor's environ and memory do not exist in the sandbox"
else notok "the supervisor's environ and memory do not exist in the sandbox" "$(cat "$T/err")"; fi

paths="$T/keys/master.key $CONF $T/state $T/state/pgrun $T/state/db.password $CTL $T/agrippad.pid $T /var/agrippa $ROOT $ROOT/$BUILD/agrippad"
sbxw "for p in $paths; do test -e \"\$p\" && echo VISIBLE \"\$p\"; done; ls /; echo END"
expect_out "the sandbox ran the file checks" '^END$'
expect_no_out "no daemon file is visible: key, config, state, database socket, control socket, binary" VISIBLE
sbxw "cat $T/keys/master.key; ls $T/state/pgrun/; exec 3<>$T/state/pgrun/.s.PGSQL.5432"
expect_no_out "the master key cannot be read" .

sbxw "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '; wc -l </proc/net/unix"
if [ "$(head -1 "$T/out")" = lo ] && [ "$(sed -n 2p "$T/out")" = 1 ]; then
	ok "the network namespace has only lo and no Unix socket of the host"
else notok "the network namespace has only lo and no Unix socket of the host" "$(cat "$T/out")"; fi
sbx -w "$WS" -- bash -c "echo GET >/dev/tcp/127.0.0.1/$PORT && echo CONNECTED"
expect_no_out "TCP to the daemon's own port on loopback fails" CONNECTED
if err_has 'Address family not supported'; then ok "an IPv4 socket cannot even be created"; else
	notok "an IPv4 socket cannot even be created" "$(cat "$T/err")"; fi

# Another run's workspace, while that run is alive.
OTHER=$T/other
mkdir -p "$OTHER"
echo "other run's secret" >"$OTHER/secret-other"
chown -R "$SBX_UID:$SBX_UID" "$OTHER"
timeout 60 "$AGRIPPACTL" -s "$CTL" sandbox run -w "$OTHER" -- sleep 20 >/dev/null 2>&1 &
OTHER_PID=$!
wait_for 10 have_sandbox_procs
check "agrippactl status counts the running sandbox" \
	sh -c "'$AGRIPPACTL' -s '$CTL' status | grep -qx 'sandboxes: 1 running'"
sbxw "ls $OTHER; find / -xdev -maxdepth 4 -name 'secret-*' 2>/dev/null; ls /proc | grep -c '^[0-9]'; echo END"
expect_no_out "another run's workspace is invisible" secret-other
expect_out "the check ran" '^END$'
kill "$OTHER_PID" 2>/dev/null
wait "$OTHER_PID" 2>/dev/null

# ---- writes outside the workspace ---------------------------------------

sbxw 'cd /workspace
for p in /x /usr/x /etc/passwd /tmp/../x ../x /workspace/../x /workspace-evil /workspace-evil/x /proc/self/root/x /proc/self/root/etc/passwd /proc/1/root/x; do
	if (echo pwn >"$p") 2>/dev/null; then echo "WROTE $p"; fi
done
mkdir /workspace-evil 2>/dev/null && echo "WROTE mkdir"
ln -s /etc/passwd l && (echo pwn >>l) 2>/dev/null && echo WROTE-symlink
ln /usr/bin/true h 2>/dev/null && echo LINKED
echo END'
expect_out "the write attempts ran" '^END$'
expect_no_out "no write outside the workspace (.., absolute, sibling prefix, symlink, /proc/self/root)" WROTE
expect_no_out "no hard link to a file outside the workspace" LINKED
ln "$T/outside" "$WS/hardlink"
sbxw 'echo pwn >>/workspace/hardlink; echo pwn >/workspace/hardlink; echo END'
call -w "$WS" write hardlink pwn :: edit hardlink host pwn :: write ../outside pwn :: \
	write /workspace-evil/x pwn :: mkwrite ../../x/y pwn
if [ "$(sha256sum "$T/outside")" = "$OUTSIDE_SUM" ] && [ "$(sha256sum /etc/passwd)" = "$PASSWD_SUM" ]; then
	ok "a host file hard-linked into the workspace and /etc/passwd are unchanged"
else notok "host files unchanged" "$(cat "$T/outside")"; fi
expect_call "the write tool refuses a hard-linked file" "write hardlink: error 31 (EMLINK)"
expect_call "the edit tool refuses a hard-linked file" "edit hardlink: error 31 (EMLINK)"
expect_call "the write tool refuses .." "write ../outside: error 18 (EXDEV)"
expect_call "the write tool refuses a sibling prefix" "write /workspace-evil/x: error 18 (EXDEV)"
expect_call "mkdirs cannot climb out" "mkwrite ../../x/y: error 18 (EXDEV)"
rm -f "$WS/hardlink" "$WS/l" "$WS/h"
ln -s "$T/outside" "$WS/link-out"
ln -s /proc/self/root "$WS/procroot"
call -w "$WS" write link-out pwn :: read link-out :: read procroot/etc/passwd :: \
	write procroot/x pwn :: read /proc/self/environ :: stat link-out
expect_call "the write tool does not follow a symlink out" "write link-out: error"
expect_call "the read tool does not follow a symlink out" "read link-out: error"
expect_call "the read tool does not follow a magic link" "read procroot/etc/passwd: error"
expect_call "an absolute path outside /workspace is refused" "read /proc/self/environ: error 18 (EXDEV)"
expect_call "stat reports the symlink itself" 'stat link-out: ok ["symlink"'
[ "$(sha256sum "$T/outside")" = "$OUTSIDE_SUM" ] && ok "the outside file is still unchanged" ||
	notok "the outside file is still unchanged" "$(cat "$T/outside")"
rm -f "$WS/link-out" "$WS/procroot"

# ---- commands through the tool server ------------------------------------

call -w "$WS" sh pwd src :: sh pwd ../ :: sh pwd /workspace/../.. :: sh pwd /tmp :: \
	busykill 'sleep 100'
expect_call "a command runs in a working directory inside the workspace" "sh pwd: ok status=0"
if grep -qx /workspace/src "$T/call"; then ok "... and starts there"; else
	notok "... and starts there" "$(cat "$T/call")"; fi
if [ "$(grep -c '^sh pwd: error 18 (EXDEV)' "$T/call")" = 3 ]; then
	ok "a working directory outside the workspace is refused (.., absolute)"
else notok "a working directory outside the workspace is refused" "$(cat "$T/call")"; fi
expect_call "a second command while one runs is refused, and SBX_KILL ends the first" \
	"busykill sleep 100: second=EBUSY killed signal=9 status=-1 error=killed"
printf x >"$WS/one"
chown "$SBX_UID:$SBX_UID" "$WS/one"
call -w "$WS" list src :: glob '**/*.c' :: grep 'int main' :: grep x one :: list ../ :: \
	glob '*' /workspace/.. :: grep '(' src
expect_call "list answers over the channel" 'list src: ok [false [["main.c" "file" 29]]]'
expect_call "glob answers over the channel" 'glob **/*.c: ok [false [["src/main.c" "file" 29]]]'
expect_call "grep answers with file, line and text" \
	'grep int main: ok [false [["src/main.c" 1 "int main(void) { return 0; }"]]]'
expect_call "grep reads a one-byte file (no read past its end)" 'grep x: ok [false [["one" 1 "x"]]]'
expect_call "list cannot leave the workspace" 'list ../: error 18 (EXDEV)'
expect_call "glob cannot leave the workspace" 'glob *: error 18 (EXDEV)'
expect_call "a bad regex is a clear error" 'grep (: error 22 (EINVAL)'
rm -f "$WS/one"

# ---- read-only workspaces -------------------------------------------------

sbx -r -w "$WS" -- touch /workspace/ro-x
expect_rc "a read-only workspace runs no command" 125
if err_has "read-only workspace" && [ ! -e "$WS/ro-x" ]; then ok "it says why, and nothing was created"; else
	notok "it says why, and nothing was created" "$(cat "$T/err")"; fi
call -r -w "$WS" write ro-x pwn :: mkwrite sub/ro-x pwn :: edit src/main.c main MAIN :: \
	mkwrite .agrippa/artifacts/report.md findings :: write .agrippa/artifacts/../../ro-y pwn :: \
	read src/main.c :: sh 'touch /workspace/ro-z'
expect_call "read-only: a write outside the artifacts is refused" "write ro-x: error 30 (EROFS)"
expect_call "read-only: creating directories outside is refused" "mkwrite sub/ro-x: error 30 (EROFS)"
expect_call "read-only: an edit is refused" "edit src/main.c: error 30 (EROFS)"
expect_call "read-only: the artifacts directory is writable" "mkwrite .agrippa/artifacts/report.md: ok"
expect_call "read-only: .. out of the artifacts is refused" "write .agrippa/artifacts/../../ro-y: error"
expect_call "read-only: reading works" "read src/main.c: ok"
expect_call "read-only: exec is refused by the tool server" "sh touch /workspace/ro-z: error 30 (EROFS)"
if [ ! -e "$WS/ro-x" ] && [ ! -e "$WS/ro-y" ] && [ ! -e "$WS/ro-z" ] && [ ! -e "$WS/sub" ] &&
	grep -q 'int main' "$WS/src/main.c" && [ "$(cat "$WS/.agrippa/artifacts/report.md")" = findings ]; then
	ok "read-only: the workspace is unchanged except the artifact"
else notok "read-only: the workspace is unchanged except the artifact" "$(ls -la "$WS")"; fi
# The mount is read-only too, under the tool server's checks.
sbx -w "$WS" -- sh -c 'echo x >/workspace/.agrippa/artifacts/rw-ok && echo RW'
expect_out "read-write: the artifacts directory is writable by commands" '^RW$'

# ---- artifacts ------------------------------------------------------------

printf 'report body\n' >"$WS/.agrippa/artifacts/good.md"
: >"$WS/.agrippa/artifacts/empty.md"
head -c 2000 /dev/zero >"$WS/.agrippa/artifacts/big.bin"
ln -s ../../src/main.c "$WS/.agrippa/artifacts/link.md"
mkfifo "$WS/.agrippa/artifacts/fifo.md"
chown -R "$SBX_UID:$SBX_UID" "$WS/.agrippa"
call -w "$WS" artifact good.md :: artifact empty.md :: artifact big.bin 1000 :: artifact link.md :: \
	artifact fifo.md :: artifact ../src/main.c :: artifact missing.md
want=$(sha256sum "$WS/.agrippa/artifacts/good.md" | cut -d' ' -f1)
expect_call "an artifact streams with its sha256" "artifact good.md: ok streamed=12 [12 $want]"
expect_call "an empty artifact is refused" "artifact empty.md: error 61 (ENODATA)"
expect_call "an artifact over the cap is refused" "artifact big.bin: error 27 (EFBIG)"
expect_call "a symlinked artifact is refused, even one pointing inside" "artifact link.md: error 40 (ELOOP)"
expect_call "a FIFO artifact is refused without blocking" "artifact fifo.md: error 22 (EINVAL)"
expect_call "an artifact name with a path is refused" "artifact ../src/main.c: error 22 (EINVAL)"
expect_call "a missing artifact is reported" "artifact missing.md: error 2 (ENOENT)"
rm -rf "$WS/.agrippa"

# ---- the syscall probe ------------------------------------------------------

sbx -w "$WS" -- /workspace/try_syscall ptrace unshare clone3 mount chroot bpf keyctl \
	perf_event_open userfaultfd io_uring_setup ioctl_tiocsti ioctl_tiocsetd socket_inet socket_inet6 \
	socket_packet socket_netlink sethostname setuid socket_unix getpid x32
for p in ptrace unshare mount chroot bpf keyctl perf_event_open userfaultfd io_uring_setup \
	ioctl_tiocsti ioctl_tiocsetd sethostname; do
	expect_out "probe: $p fails with EPERM" "^$p: errno=1 "
done
for p in socket_inet socket_inet6 socket_packet socket_netlink; do
	expect_out "probe: $p fails with EAFNOSUPPORT" "^$p: errno=97 "
done
expect_out "probe: clone3 fails with ENOSYS (glibc falls back to the checked clone)" '^clone3: errno=38 '
expect_out "probe: an x32 system call kills the process" '^x32: killed by signal 31'
expect_out "probe: Unix sockets work" '^socket_unix: ok'
expect_out "probe: setuid to itself works (nothing to gain)" '^setuid: ok'
sbx -- /bin/sh -c 'unshare -U true && echo UNSHARED; bwrap --version >/dev/null 2>&1; true'
expect_no_out "unshare(1) cannot make a user namespace" UNSHARED
# The probe refuses to run on the host.
if "$ROOT/$BUILD/tests/probe/try_syscall" mount >/dev/null 2>&1; then
	notok "the probe refuses to run on the host"
else ok "the probe refuses to run on the host"; fi

# A setuid-root program gains nothing.
cp /usr/bin/id "$WS/suid-id"
chown root:root "$WS/suid-id"
chmod 4755 "$WS/suid-id"
sbxw '/workspace/suid-id -u; /workspace/suid-id -ru; su -c id root </dev/null 2>&1 | head -1; echo END'
if [ "$(sed -n 1p "$T/out")" = 1000 ] && [ "$(sed -n 2p "$T/out")" = 1000 ]; then
	ok "a setuid-root binary in the workspace runs as the sandbox user"
else notok "a setuid-root binary runs as the sandbox user" "$(cat "$T/out")"; fi
expect_no_out "su gains nothing" 'uid=0'
rm -f "$WS/suid-id"

# ---- resource abuse ---------------------------------------------------------

# Fork bomb beside a healthy run: the bomb hits its pids limit, the other runs.
timeout 120 "$AGRIPPACTL" -s "$CTL" sandbox run -t 8 -- bash -c 'f() { f | f & }; f; sleep 30' \
	>"$T/bomb.out" 2>"$T/bomb.err" &
BOMB=$!
sleep 3
sbx -- sh -c 'echo alive'
expect_out "another sandbox runs while a fork bomb runs" '^alive$'
wait "$BOMB"
BOMB_RC=$?
[ "$BOMB_RC" = 124 ] && ok "the fork bomb is stopped by its timeout" ||
	notok "the fork bomb is stopped by its timeout" "exit $BOMB_RC $(head -c 300 "$T/bomb.err")"
sbx -- sh -c 'i=0; while [ $i -lt 300 ]; do sleep 30 & i=$((i + 1)); done; echo STARTED-ALL'
expect_no_out "a sandbox cannot start more processes than sandbox.pids" STARTED-ALL

sbx -- sh -c 'head -c 1G /dev/zero | tail -n 1 >/dev/null'
expect_rc "a memory hog is killed by the memory limit (SIGKILL)" 137
sbx -- sh -c 'dd if=/dev/zero of=/tmp/fill bs=1M count=100 2>&1; df -k /tmp | tail -1'
expect_out "filling /tmp stops at tmp_size" 'No space left on device'
sbxw 'dd if=/dev/zero of=/workspace/fill bs=1M count=100'
size=$(stat -c %s "$WS/fill" 2>/dev/null || echo 0)
if [ "$RC" -ne 0 ] && [ "$size" -le 16777216 ]; then
	ok "a file in the workspace stops at file_size ($size bytes, exit $RC)"
else notok "a file in the workspace stops at file_size" "size $size exit $RC"; fi
rm -f "$WS/fill"

sbx -t 3 -- yes flood
bytes=$(wc -c <"$T/out")
if [ "$RC" = 124 ] && [ "$bytes" -le 65536 ] && [ "$bytes" -gt 60000 ] && err_has 'output truncated'; then
	ok "an output flood is cut at output_max ($bytes bytes) and stopped by its timeout"
else notok "an output flood is cut at output_max" "exit $RC, $bytes bytes, $(cat "$T/err")"; fi

start=$(date +%s)
sbx -t 1 -- sh -c 'trap "" TERM; sleep 100'
took=$(($(date +%s) - start))
if [ "$RC" = 124 ] && [ "$took" -lt 15 ]; then
	ok "a command that ignores SIGTERM is killed after the grace period (${took}s)"
else notok "a command that ignores SIGTERM is killed" "exit $RC after ${took}s"; fi

start=$(date +%s)
sbx -- sh -c 'sleep 1000 & setsid sleep 1000 & echo bg'
took=$(($(date +%s) - start))
if [ "$RC" = 0 ] && [ "$took" -lt 15 ] && out_has '^bg$'; then
	ok "background jobs do not hold a finished command (${took}s)"
else notok "background jobs do not hold a finished command" "exit $RC after ${took}s"; fi

# ---- teardown ---------------------------------------------------------------

"$AGRIPPACTL" -s "$CTL" sandbox run -- sh -c 'sleep 1000 & sleep 1000' >/dev/null 2>&1 &
CLIENT=$!
wait_for 10 have_sandbox_procs
sleep 1
CG=$(awk -F: '$2 == "pids" { print $3 }' "/proc/$(sandbox_procs | head -1)/cgroup")
kill -KILL "$CLIENT"
wait "$CLIENT" 2>/dev/null
if wait_for 10 no_sandbox_procs; then ok "killing agrippactl kills every process of its sandbox"; else
	notok "killing agrippactl kills every process of its sandbox" "$(sandbox_procs)"; fi
if [ -z "$CG" ] || [ "${CG##*/}" = "${CG##*/sbx-}" ]; then
	notok "the sandbox had its own pids cgroup" "$CG"
elif wait_for 10 test ! -d "/sys/fs/cgroup/pids$CG"; then
	ok "its cgroup is removed (${CG##*/})"
else notok "its cgroup is removed" "/sys/fs/cgroup/pids$CG"; fi
if [ -z "$(ls -A "$T/state/sandboxes" 2>/dev/null)" ]; then ok "no fresh workspace is left"; else
	notok "no fresh workspace is left" "$(ls "$T/state/sandboxes")"; fi

# ---- limits follow a reload ---------------------------------------------------

limits="awk '/^Max (processes|open files|file size|core file size)/ { print \$(NF - 2) }' /proc/self/limits"
sbx -- sh -c "$limits"
if [ "$(tr '\n' ' ' <"$T/out")" = "16777216 0 128 1024 " ]; then
	ok "a sandbox has the configured rlimits (core 0, file size, processes, open files)"
else
	notok "a sandbox has the configured rlimits" "$(cat "$T/out")"; fi
sed -i 's/^  pids: 128$/  pids: 96/' "$CONF"
"$AGRIPPACTL" -s "$CTL" reload >/dev/null
sbx -- sh -c "$limits"
# The sandbox prepared before the reload must not be the one used after it.
expect_out "after a reload, new sandboxes get the new limits" '^96$'

# ---- sandbox.max ----------------------------------------------------------------

sed -i 's/^  max: 4$/  max: 1/' "$CONF"
"$AGRIPPACTL" -s "$CTL" reload >/dev/null
"$AGRIPPACTL" -s "$CTL" sandbox run -- sleep 30 >/dev/null 2>&1 &
HOLDER=$!
wait_for 10 have_sandbox_procs
sbx -- true
if [ "$RC" = 125 ] && err_has 'too many sandboxes (sandbox.max is 1)'; then
	ok "a sandbox beyond sandbox.max is refused, named"
else notok "a sandbox beyond sandbox.max is refused" "exit $RC $(cat "$T/err")"; fi
kill "$HOLDER" 2>/dev/null
wait "$HOLDER" 2>/dev/null
wait_for 10 no_sandbox_procs
sbx -- true
expect_rc "once it ended, a new sandbox is built again" 0

# ---- bad requests -------------------------------------------------------------

for bad in / "$T" "$T/state" "$T/keys" "$ROOT/$BUILD"; do
	sbx -w "$bad" -- true
	if [ "$RC" = 125 ] && err_has "overlaps the daemon's own files"; then
		ok "a workspace over the daemon's files is refused ($bad)"
	else notok "a workspace over the daemon's files is refused ($bad)" "exit $RC $(cat "$T/err")"; fi
done
sbx -w "$T/outside" -- true
[ "$RC" = 125 ] && err_has "not a directory" && ok "a workspace that is a file is refused" ||
	notok "a workspace that is a file is refused" "exit $RC $(cat "$T/err")"
sbx -- /nonexistent/cmd
expect_rc "a missing command exits 127" 127
sbx -t 100000 -- true
expect_rc "a bad timeout is a usage error" 2
sbx -t 100 -- true
if [ "$RC" = 125 ] && err_has "above sandbox.exec_timeout"; then ok "a timeout above the limit is refused"; else
	notok "a timeout above the limit is refused" "exit $RC $(cat "$T/err")"; fi

# ---- the daemon is unharmed ---------------------------------------------------

check "the daemon still answers /healthz" [ "$(healthz_code)" = 200 ]
check "agrippactl status works" "$AGRIPPACTL" -s "$CTL" status
if grep -q 'restarting' "$LOG"; then notok "no daemon process was restarted" "$(grep restarting "$LOG")"; else
	ok "no daemon process was restarted"; fi
if grep -q 'ERROR: AddressSanitizer\|runtime error' "$LOG"; then
	notok "no sanitizer report in the daemon's log" "$(grep -A5 'ERROR\|runtime error' "$LOG" | head -20)"
else ok "no sanitizer report in the daemon's log"; fi

OURS=$(our_sandbox_cgroups)
check "the daemon keeps one sandbox prepared, in a cgroup of its own" [ -n "$OURS" ]
stop_daemon
check "the daemon stops cleanly" [ "$DAEMON_STATUS" = 0 ]
check "no sandbox process outlives the daemon" no_sandbox_procs
left=""
for d in $OURS; do [ -d "$d" ] && left="$left $d"; done
if [ -z "$left" ]; then ok "no sandbox cgroup outlives the daemon (the prepared one included)"; else
	notok "no sandbox cgroup outlives the daemon" "$left"; fi

# What a daemon killed outright leaves: empty cgroups named after its host
# id, which it removes when it starts again; another daemon's on the same
# host (empty too while their first process has not joined) it leaves.
TAG=$(cut -c1-8 "$T/state/host-id")
OTHER=$(printf '%s' "$TAG" | tr '0-9a-f' '1-9a-f0')
BASE=$(dirname "$(printf '%s\n' $OURS | head -n 1)")
case $TAG:$BASE in
????????:/sys/fs/cgroup/pids*) mkdir "$BASE/sbx-${TAG}0badf00d" "$BASE/sbx-${OTHER}0badf00d" ;;
*) notok "the daemon has a host id and its sandboxes a pids cgroup" "$TAG $BASE" ;;
esac
start_daemon_or_finish sandbox
i=0
while [ -z "$(our_sandbox_cgroups)" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
check "a restarted daemon removes the empty cgroups its sandboxes left (sbx-${TAG}…)" \
	[ ! -d "$BASE/sbx-${TAG}0badf00d" ]
check "... and leaves another daemon's (sbx-${OTHER}…)" [ -d "$BASE/sbx-${OTHER}0badf00d" ]
check "... its sandboxes are named after it: $(our_sandbox_cgroups | sed 's|.*/||' | head -n 1)" \
	sh -c "our_cg=\$1; case \${our_cg##*/} in sbx-${TAG}????????????????) exit 0 ;; esac; exit 1" - "$(our_sandbox_cgroups | head -n 1)"
rmdir "$BASE/sbx-${OTHER}0badf00d" 2>/dev/null
stop_daemon
cleanup_env
finish sandbox
