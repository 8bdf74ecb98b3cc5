#!/bin/bash
# net-rows.sh SERVERBIN [SERVERBIN2 ...]: the network path of each
# throttlekit-server binary and of redis-server, per request.
#
# Every server runs pinned to SCPU (default 1) with one event loop
# (--loops 1), redis-benchmark pinned to LG (default 0), 50 connections.
# Each throttlekit-server is warmed with 1M live 16-byte keys
# (THROTTLE.CHECK key:%012d 10 1h through redis-cli --pipe, as
# live-rows.sh); redis-server (/usr/bin/redis-server --save ''
# --appendonly no) with INCR of the same names. The rows, run ROUNDS times
# (default 3), each round visiting every server in turn (interleaved):
#
#   throttlekit: PING P=1, THROTTLE.CHECK P=1, PING P=16, THROTTLE.CHECK P=16
#   redis:       PING P=1, INCR P=1, PING P=16, INCR P=16
#
# with random keys of the warmed set (-r 1000000). For each row it prints
# one line per round:
#
#   rps        redis-benchmark's requests per second
#   p99_ms     redis-benchmark's 99th percentile latency (--csv)
#   cpu_s_M    server CPU seconds (utime+stime from /proc/PID/stat, before
#              and after) per million requests
#   srv_util   server CPU seconds / wall seconds of the row (1.0: its core
#              is saturated)
#   lg_util    redis-benchmark's CPU seconds / wall seconds (1.0: the load
#              generator is the bottleneck and rps cannot separate servers)
#   lg_s_M     redis-benchmark's CPU seconds per million requests: what a
#              request costs the generator, so 1e6 / lg_s_M is the most any
#              server can show on this row while the generator has one core
#   steal      the share of the two cores' time the hypervisor ran something
#              else (the steal column of /proc/stat): on a shared host, a
#              row with much steal is slower for reasons of its own
#   cs, ...    per request, counted by perf stat on the server's threads
#              during the row: context switches (cs), then system calls:
#              total, read, write(+writev), epoll_wait(+epoll_pwait),
#              epoll_ctl, futex, nanosleep, sched_yield, other; then the
#              generator's system calls (lg_calls) and context switches
#              (lg_cs) per request, counted the same way
#
# then the median of each figure over the rounds, and the issue's rows
# for the first binary as ratios to redis-server's (and to its own PING),
# round by round, with their median. Counting the system calls costs the
# server and the generator a little CPU per call, equally for every server; SYSCALLS=0
# leaves it out (and the counts with it). N1 and N16 are the requests of a P=1
# and a P=16 row (defaults 100000 and 800000); DEPTHS="1" runs only the
# P=1 rows. Ports from PORT (default 7390) upward. A binary may be a
# wrapper script that execs the server (for instance to set GOMAXPROCS):
# the script measures the process it starts.
set -e
SCPU=${SCPU:-1}; LG=${LG:-0}; ROUNDS=${ROUNDS:-3}; N1=${N1:-100000}; N16=${N16:-800000}
SYSCALLS=${SYSCALLS:-1}; PORT=${PORT:-7390}; DEPTHS=${DEPTHS:-1 16}
CMDS=${CMDS:-/tmp/pipe-rss-1m.resp}; RCMDS=${RCMDS:-/tmp/net-rows-incr-1m.resp}
[ $# -ge 1 ] || { echo "usage: $0 SERVERBIN [SERVERBIN2 ...]" >&2; exit 2; }
[ -s "$CMDS" ] || awk 'BEGIN{for(i=0;i<1000000;i++) printf "*4\r\n$14\r\nTHROTTLE.CHECK\r\n$16\r\nkey:%012d\r\n$2\r\n10\r\n$2\r\n1h\r\n", i}' > "$CMDS"
[ -s "$RCMDS" ] || awk 'BEGIN{for(i=0;i<1000000;i++) printf "*2\r\n$4\r\nINCR\r\n$16\r\nkey:%012d\r\n", i}' > "$RCMDS"
HZ=$(getconf CLK_TCK)
OUT=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill $p 2>/dev/null; done; rm -rf "$OUT"' EXIT

waitup() { for _ in $(seq 100); do redis-cli -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
cputicks() { awk '{print $14, $15}' "/proc/$1/stat"; }
# steal: the ticks the hypervisor gave to others on the two cores in use
# (the steal column of /proc/stat), summed.
steal() { awk -v a="cpu$SCPU" -v b="cpu$LG" '$1 == a || $1 == b { s += $9 } END { print s + 0 }' /proc/stat; }

NAMES=(); SPORTS=(); SPIDS=(); KINDS=()
p=$PORT
for bin in "$@"; do
	taskset -c "$SCPU" "$bin" --addr 127.0.0.1:$p --metrics-addr off --loops 1 >/dev/null 2>&1 &
	PIDS+=($!); SPIDS+=($!); SPORTS+=($p); NAMES+=("$(basename "$bin")"); KINDS+=(tk)
	waitup $p
	taskset -c "$LG" redis-cli -p $p --pipe < "$CMDS" >/dev/null
	p=$((p + 1))
done
taskset -c "$SCPU" /usr/bin/redis-server --port $p --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 &
PIDS+=($!); SPIDS+=($!); SPORTS+=($p); NAMES+=(redis); KINDS+=(redis)
waitup $p
taskset -c "$LG" redis-cli -p $p --pipe < "$RCMDS" >/dev/null

EVENTS=raw_syscalls:sys_enter,context-switches
for s in read write writev epoll_wait epoll_pwait epoll_ctl futex nanosleep sched_yield; do
	EVENTS=$EVENTS,syscalls:sys_enter_$s
done

# row SERVERINDEX LABEL P N ARGS...: one measured redis-benchmark run.
row() {
	local i=$1 label=$2 pl=$3 n=$4; shift 4
	local pid=${SPIDS[$i]} port=${SPORTS[$i]} perfpid=
	if [ "$SYSCALLS" = 1 ]; then
		perf stat -x, -e "$EVENTS" -p "$pid" -o "$OUT/perf" &
		perfpid=$!
		sleep 0.3
	fi
	local c0 t0 t1 c1 s0 s1 lgwrap=()
	[ "$SYSCALLS" = 1 ] && lgwrap=(perf stat -x, -e raw_syscalls:sys_enter,context-switches -o "$OUT/lgperf" --)
	c0=$(cputicks "$pid"); s0=$(steal); t0=$(date +%s.%N)
	/usr/bin/time -f '%U %S' -o "$OUT/lg" "${lgwrap[@]}" taskset -c "$LG" redis-benchmark -p "$port" -c 50 -P "$pl" -n "$n" --csv "$@" > "$OUT/csv" 2>/dev/null
	t1=$(date +%s.%N); c1=$(cputicks "$pid"); s1=$(steal)
	local sc="-"
	if [ -n "$perfpid" ]; then
		kill -INT $perfpid; wait $perfpid || true
		sc=$(awk -F, -v n="$n" '
			{ n2 = split($3, e, ":"); c[e[n2]] += $1 }
			END {
				t = c["sys_enter"]; r = c["sys_enter_read"]; w = c["sys_enter_write"] + c["sys_enter_writev"]
				ew = c["sys_enter_epoll_wait"] + c["sys_enter_epoll_pwait"]; ec = c["sys_enter_epoll_ctl"]
				f = c["sys_enter_futex"]; ns = c["sys_enter_nanosleep"]; y = c["sys_enter_sched_yield"]
				printf "cs=%.4f total=%.4f read=%.4f write=%.4f epoll_wait=%.4f epoll_ctl=%.4f futex=%.4f nanosleep=%.4f sched_yield=%.4f other=%.4f",
					c["context-switches"]/n, t/n, r/n, w/n, ew/n, ec/n, f/n, ns/n, y/n, (t-r-w-ew-ec-f-ns-y)/n
			}' "$OUT/perf")
		sc="$sc $(awk -F, -v n="$n" '{ n2 = split($3, e, ":"); c[e[n2]] += $1 }
			END { printf "lg_calls=%.3f lg_cs=%.4f", c["sys_enter"]/n, c["context-switches"]/n }' "$OUT/lgperf")"
	fi
	awk -F'"' -v name="${NAMES[$i]}" -v label="$label" -v pl="$pl" -v n="$n" -v c0="$c0" -v c1="$c1" \
		-v t0="$t0" -v t1="$t1" -v hz="$HZ" -v lg="$(cat "$OUT/lg")" -v sc="$sc" -v st=$((s1 - s0)) '
		NR == 2 {
			split(lg, u, " "); split(c0, a, " "); split(c1, b, " "); wall = t1 - t0
			us = (b[1] - a[1]) / hz; sy = (b[2] - a[2]) / hz; cpu = us + sy; lgc = u[1] + u[2]
			printf "%s %s P=%s rps=%s p99_ms=%s cpu_s_M=%.3f user_s_M=%.3f sys_s_M=%.3f srv_util=%.2f lg_util=%.2f lg_s_M=%.3f steal=%.2f %s\n",
				name, label, pl, $4, $14, cpu / n * 1e6, us / n * 1e6, sy / n * 1e6, cpu / wall, lgc / wall, lgc / n * 1e6, st / hz / (2 * wall), sc
		}' "$OUT/csv"
}

for r in $(seq "$ROUNDS"); do
	for i in "${!SPIDS[@]}"; do
		for pl in $DEPTHS; do
			n=$N16; [ "$pl" = 1 ] && n=$N1
			row "$i" PING "$pl" "$n" PING
			if [ "${KINDS[$i]}" = tk ]; then
				row "$i" THROTTLE.CHECK "$pl" "$n" -r 1000000 THROTTLE.CHECK key:__rand_int__ 10 1h
			else
				row "$i" INCR "$pl" "$n" -r 1000000 INCR key:__rand_int__
			fi
		done
	done
done | tee "$OUT/rows"

echo "# medians over $ROUNDS rounds"
awk '{
	k = $1 " " $2 " " $3; if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
	for (f = 4; f <= NF; f++) { split($f, kv, "="); if (kv[2] == "-") continue
		m = ++cnt[k, kv[1]]; v[k, kv[1], m] = kv[2]; if (!((k, kv[1]) in named)) { named[k, kv[1]] = 1; fields[k] = fields[k] " " kv[1] } }
}
END {
	for (o = 1; o <= nk; o++) {
		k = order[o]; line = k; nf = split(substr(fields[k], 2), fl, " ")
		for (j = 1; j <= nf; j++) {
			m = cnt[k, fl[j]]
			for (a = 1; a <= m; a++) x[a] = v[k, fl[j], a] + 0
			for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++) if (x[b] < x[a]) { t = x[a]; x[a] = x[b]; x[b] = t }
			med = (m % 2) ? x[(m + 1) / 2] : (x[m / 2] + x[m / 2 + 1]) / 2
			line = line " " fl[j] "=" med
		}
		print line
	}
}' "$OUT/rows"

# The issue's rows for the first binary against redis-server: the ratio of
# each pair within every round, and the median over the rounds.
echo "# ratios, $(basename "$1") against redis, per round (median)"
awk -v tk="$(basename "$1")" '
{
	k = $1 " " $2 " " $3
	for (f = 4; f <= NF; f++) { split($f, kv, "="); v[k, kv[1], ++c[k, kv[1]]] = kv[2] }
}
function ratio(label, a, b, fld,   i, n, x, y, t, j, out, med) {
	n = c[a, fld]
	if (n == 0 || c[b, fld] != n) return
	out = ""
	for (i = 1; i <= n; i++) { x[i] = v[a, fld, i] / v[b, fld, i]; out = out sprintf(" %.2f", x[i]) }
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
	med = (n % 2) ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2
	printf "%s %s:%s (%.2f)\n", label, fld, out, med
}
END {
	ck16 = tk " THROTTLE.CHECK P=16"; ck1 = tk " THROTTLE.CHECK P=1"
	ratio("THROTTLE.CHECK P=16 / redis PING P=16", ck16, "redis PING P=16", "rps")
	ratio("THROTTLE.CHECK P=16 / own PING P=16", ck16, tk " PING P=16", "rps")
	ratio("THROTTLE.CHECK P=16 / redis INCR P=16", ck16, "redis INCR P=16", "rps")
	ratio("THROTTLE.CHECK P=1 / redis INCR P=1", ck1, "redis INCR P=1", "rps")
	ratio("THROTTLE.CHECK P=1 / redis INCR P=1", ck1, "redis INCR P=1", "p99_ms")
	ratio("THROTTLE.CHECK P=1 / redis INCR P=1", ck1, "redis INCR P=1", "cpu_s_M")
	ratio("THROTTLE.CHECK P=16 / redis INCR P=16", ck16, "redis INCR P=16", "cpu_s_M")
	ratio("PING P=16 / redis PING P=16", tk " PING P=16", "redis PING P=16", "cpu_s_M")
	# What a request costs the generator: while it limits a row, a
	# check cannot be served faster than its PING divided by this.
	ratio("THROTTLE.CHECK P=16 / own PING P=16", ck16, tk " PING P=16", "lg_s_M")
	ratio("THROTTLE.CHECK P=1 / redis INCR P=1", ck1, "redis INCR P=1", "lg_s_M")
}' "$OUT/rows"
