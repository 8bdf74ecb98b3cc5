#!/bin/bash
# instr-per-cmd.sh TESTBIN BENCH [N]: instructions per command of a benchmark
# of server's test binary (go test -c ./server), counted by callgrind as
# (Ir at 2N - Ir at N) / N, so that set-up cancels out. Repeatable on a
# shared machine where timings are not.
#   bench/scripts/instr-per-cmd.sh ./server.test 'BenchmarkDispatch$/throttle.check/gcra'
set -e
BIN=$1; B=$2; N=${3:-25600}
ir() {
	GODEBUG=asyncpreemptoff=1 GOGC=off GOMAXPROCS=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
		"$BIN" -test.run '^$' -test.bench "$B" -test.benchtime="${1}x" 2>&1 | awk '/Collected/{print $4}'
}
a=$(ir "$N"); b=$(ir $((2 * N)))
echo "$(basename "$BIN") $B $(((b - a) / N))"
