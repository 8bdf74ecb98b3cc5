#!/bin/bash
# instr-per-request.sh SERVER [P] [N]: user-space instructions a server
# executes per request over real sockets, counted by callgrind, so that two
# servers can be compared on a shared machine where timings are not
# repeatable. SERVER is a throttlekit-server binary or "redis" (the system's
# redis-server, --save '' --appendonly no). redis-benchmark (50
# connections, pipeline P, default 1) sends N requests (default 20000) on
# 1000 random keys: THROTTLE.CHECK key 10 1h to throttlekit-server, INCR
# key to Redis, then PING to both. Each row runs twice; the counters are
# zeroed after the first (warm-up) and dumped after the second, so the
# figure is the second run's instructions over N. It counts every thread
# of the process (the runtime's background threads, Redis's cron), not the
# kernel: system calls count only their user-space wrappers. The load
# generator runs outside callgrind. Prints: server row P instructions/request.
# The Go runtime's share moves with thread scheduling from run to run (a
# few hundred instructions a request at P=1): compare medians of several runs.
#   bench/scripts/instr-per-request.sh ./throttlekit-server 1
#   bench/scripts/instr-per-request.sh redis 1
set -e
SRV=$1; P=${2:-1}; N=${3:-20000}; PORT=${PORT:-7497}
[ -n "$SRV" ] || { echo "usage: $0 SERVER|redis [P] [N]" >&2; exit 2; }
OUT=$(mktemp -d)
trap 'kill $VPID 2>/dev/null; wait $VPID 2>/dev/null; rm -rf "$OUT"' EXIT
if [ "$SRV" = redis ]; then
	valgrind --tool=callgrind --callgrind-out-file="$OUT/cg" /usr/bin/redis-server --port "$PORT" --save '' --appendonly no >"$OUT/log" 2>&1 &
	ROW=(INCR key:__rand_int__)
else
	GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file="$OUT/cg" "$SRV" --addr 127.0.0.1:$PORT --metrics-addr off --loops 1 >"$OUT/log" 2>&1 &
	ROW=(THROTTLE.CHECK key:__rand_int__ 10 1h)
fi
VPID=$!
for _ in $(seq 200); do redis-cli -p "$PORT" PING >/dev/null 2>&1 && break; sleep 0.2; done
count() {
	local after ir
	redis-benchmark -p "$PORT" -c 50 -n "$N" -r 1000 -P "$P" -q "$@" >/dev/null 2>&1
	callgrind_control -z "$VPID" >/dev/null 2>&1
	redis-benchmark -p "$PORT" -c 50 -n "$N" -r 1000 -P "$P" -q "$@" >/dev/null 2>&1
	callgrind_control -d "$VPID" >/dev/null 2>&1
	after=$OUT/$(ls "$OUT" | grep '^cg\.[0-9]' | sort -t. -k2 -n | tail -1) # the last dump (cg.1, cg.2, ...)
	ir=$(callgrind_annotate "$after" 2>/dev/null | awk '/PROGRAM TOTALS/{gsub(",","",$1); print $1}')
	echo "$(basename "$SRV") $1 P=$P $((ir / N))"
}
count "${ROW[@]}"
count PING
