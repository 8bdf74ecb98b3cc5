#!/bin/bash
# instr-per-cmd.sh TESTBIN BENCH [N]: instructions per command of a benchmark
# of server's test binary (go test -c ./server), counted by callgrind as
# (Ir at 2N - Ir at N) / N, so that set-up cancels out. Repeatable on a
# shared machine where timings are not.
#   bench/scripts/instr-per-cmd.sh ./server.test 'BenchmarkDispatch$/throttle.check/gcra'
set -e
BIN=$1; B=$2; N=${3:-25600}
# CACHE=1 also simulates the caches (callgrind's model of this machine's
# L1 and last-level cache) and prints D1 and last-level data misses per
# command: the figure that separates layouts when the keys outgrow the
# cache (BenchmarkDispatchLive), where instructions do not.
if [ "${CACHE:-0}" = 1 ]; then SIM=--cache-sim=yes; else SIM=--cache-sim=no; fi
run() {
	GODEBUG=asyncpreemptoff=1 GOGC=off GOMAXPROCS=1 valgrind --tool=callgrind $SIM --callgrind-out-file=/dev/null \
		"$BIN" -test.run '^$' -test.bench "$B" -test.benchtime="${1}x" 2>&1 |
		awk '/Collected/{ir=$4} /D1  misses:/{gsub(",","",$4); d1=$4} /LLd misses:/{gsub(",","",$4); ll=$4} END{print ir, d1+0, ll+0}'
}
read -r a ad1 all <<<"$(run "$N")"
read -r b bd1 bll <<<"$(run $((2 * N)))"
if [ "${CACHE:-0}" = 1 ]; then
	awk -v n="$N" -v name="$(basename "$BIN") $B" -v ir=$((b - a)) -v d1=$((bd1 - ad1)) -v ll=$((bll - all)) \
		'BEGIN{printf "%s %d D1-misses=%.2f LLd-misses=%.2f\n", name, ir / n, d1 / n, ll / n}'
else
	echo "$(basename "$BIN") $B $(((b - a) / N))"
fi
