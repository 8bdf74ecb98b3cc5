#!/bin/bash
# live-rows.sh SERVERBIN PORT LOOPS [SERVERCPUS] [LOADCPUS]: a fresh
# throttlekit-server (--loops LOOPS, pinned to SERVERCPUS, default 1),
# warmed with 1M live 16-byte keys (as pipe-rss.sh), then redis-benchmark
# rows at 50 connections on uniform random keys of that set (pinned to
# LOADCPUS, default 0): THROTTLE.CHECK P=16, PING P=16, THROTTLE.CHECK
# P=1, CL.THROTTLE P=16, in requests per second.
set -e
BIN=$1; PORT=$2; LOOPS=$3; CPUS=${4:-1}; LG=${5:-0}; CMDS=${CMDS:-/tmp/pipe-rss-1m.resp}
[ -s "$CMDS" ] || awk 'BEGIN{for(i=0;i<1000000;i++) printf "*4\r\n$14\r\nTHROTTLE.CHECK\r\n$16\r\nkey:%012d\r\n$2\r\n10\r\n$2\r\n1h\r\n", i}' > "$CMDS"
taskset -c "$CPUS" "$BIN" --addr 127.0.0.1:$PORT --metrics-addr off --loops "$LOOPS" >/dev/null 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null' EXIT
for i in $(seq 50); do redis-cli -p $PORT PING >/dev/null 2>&1 && break; sleep 0.1; done
taskset -c "$LG" redis-cli -p $PORT --pipe < "$CMDS" >/dev/null
rb() { taskset -c "$LG" redis-benchmark -p $PORT -c 50 --csv "$@" 2>/dev/null | awk -F'"' 'NR==2{print $4}'; }
c16=$(rb -P 16 -n 400000 -r 1000000 THROTTLE.CHECK key:__rand_int__ 10 1h)
p16=$(rb -P 16 -n 400000 PING)
c1=$(rb -P 1 -n 50000 -r 1000000 THROTTLE.CHECK key:__rand_int__ 10 1h)
cl16=$(rb -P 16 -n 400000 -r 1000000 CL.THROTTLE key:__rand_int__ 9 10 3600)
echo "$(basename "$BIN") loops=$LOOPS cpus=$CPUS keys=$(redis-cli -p $PORT DBSIZE) check_p16=$c16 ping_p16=$p16 check_p1=$c1 cl_p16=$cl16"
