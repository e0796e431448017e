#!/bin/sh
# bench/egress/sandbox.sh N K HOLD BYTES: the egress benchmark's half that
# runs inside a run's sandbox (its command step), in step with
# bench/egress/run.sh through files in the workspace: sample I starts when
# go.I appears, leaves tput.I (one 1 GiB transfer through the proxy) and
# got.I, then, once pings.I appears (run.sh reads egress's CPU in between),
# ping.I (K new tunnels, CONNECT to the first byte) and done.I, then, once
# hgo.I appears, http.I (the same transfer as plain HTTP, an absolute-form
# GET: no tunnel) and hgot.I; then, on go.hold, HOLD idle tunnels are held open until release appears
# (hold.out, done.hold), and the step ends on bye.
# The proxy is the sandbox's own 127.0.0.1:3128; ebench was built static by
# run.sh (bench/egress/ebench.c).
set -u
N=$1 K=$2 HOLD=$3 BYTES=$4
P="127.0.0.1 3128 bench.test"
# wait_file FILE: until it exists (an hour at most)
wait_file() {
	w=0
	while [ ! -e "$1" ] && [ "$w" -lt 180000 ]; do
		sleep 0.02
		w=$((w + 1))
	done
}
i=1
while [ "$i" -le "$N" ]; do
	wait_file "go.$i"
	# shellcheck disable=SC2086 # P: three words
	./ebench get 10.79.0.1 9000 "$BYTES" $P >"tput.$i" 2>&1 || echo "fail $(cat "tput.$i")" >"tput.$i"
	# run.sh reads egress's CPU between the transfer and the tunnels
	touch "got.$i"
	wait_file "pings.$i"
	# shellcheck disable=SC2086
	./ebench ping 10.79.0.1 9000 "$K" $P >"ping.$i" 2>&1 || echo "fail $(tail -n 1 "ping.$i")" >"ping.$i"
	touch "done.$i"
	wait_file "hgo.$i"
	# shellcheck disable=SC2086
	./ebench hget 10.79.0.1 9000 "$BYTES" $P >"http.$i" 2>&1 || echo "fail $(cat "http.$i")" >"http.$i"
	touch "hgot.$i"
	i=$((i + 1))
done
wait_file go.hold
# shellcheck disable=SC2086
./ebench hold 10.79.0.1 9000 "$HOLD" held release $P >hold.out 2>&1 || echo "fail $(cat hold.out)" >hold.out
touch done.hold
wait_file bye # the workspace goes with the run: run.sh reads hold.out first
