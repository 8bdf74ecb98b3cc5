#!/bin/bash
# pipe-rss.sh SERVERBIN PORT: a fresh throttlekit-server on CPU 1, 1M
# THROTTLE.CHECK on 16-byte keys (10 per hour: all stay live) piped on one
# connection (redis-cli --pipe, CPU 0); RSS before the load, growth per key
# 1 s and 10 s after it, total RSS per key and used_memory per key.
set -e
BIN=$1; PORT=$2; CMDS=${CMDS:-/tmp/pipe-rss-1m.resp}
[ -s "$CMDS" ] || awk 'BEGIN{for(i=0;i<1000000;i++) printf "*4\r\n$14\r\nTHROTTLE.CHECK\r\n$16\r\nkey:%012d\r\n$2\r\n10\r\n$2\r\n1h\r\n", i}' > "$CMDS"
taskset -c 1 "$BIN" --addr 127.0.0.1:$PORT --metrics-addr off --loops 1 >/dev/null 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null' EXIT
for i in $(seq 50); do redis-cli -p $PORT PING >/dev/null 2>&1 && break; sleep 0.1; done
rss() { awk '/VmRSS/{print $2}' /proc/$PID/status; }
rss0=$(rss)
taskset -c 0 redis-cli -p $PORT --pipe < "$CMDS" >/dev/null
sleep 1; rss1=$(rss)
sleep 9; rss10=$(rss)
keys=$(redis-cli -p $PORT DBSIZE)
used=$(redis-cli -p $PORT INFO memory | awk -F: '/^used_memory:/{print $2}' | tr -d '\r')
echo "$(basename "$BIN") keys=$keys rss0=${rss0}kB grow1s/key=$(((rss1 - rss0) * 1024 / keys)) grow10s/key=$(((rss10 - rss0) * 1024 / keys)) rss10s/key=$((rss10 * 1024 / keys)) used_memory/key=$((used / keys))"
