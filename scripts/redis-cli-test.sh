#!/usr/bin/env bash
# Drives a freshly built throttlekit-server with the stock redis-cli (normal
# use, RESP3 with -3, commands on stdin) and with inline commands written to
# a raw TCP socket, comparing each answer with the expected text. The server
# is stopped with SIGTERM and must exit with status 0.
# Usage: scripts/redis-cli-test.sh   (needs go and redis-cli; see install-deps.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

command -v redis-cli >/dev/null || { echo "redis-cli missing: run scripts/install-deps.sh" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tk-cli.XXXXXX")
PID=""
cleanup() {
	if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then kill -TERM "$PID"; wait "$PID" || true; fi
	rm -rf "$WORK"
}
trap cleanup EXIT

go build -o "$WORK/throttlekit-server" ./cmd/throttlekit-server
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 16399)
"$WORK/throttlekit-server" --addr "127.0.0.1:$PORT" --metrics-addr "" --log-level warn 2>"$WORK/server.log" &
PID=$!
for _ in $(seq 1 200); do
	redis-cli -p "$PORT" PING >/dev/null 2>&1 && break
	sleep 0.05
done

failures=0
check() { # name expected actual
	if [ "$2" == "$3" ]; then
		echo "ok   - $1"
	else
		echo "FAIL - $1"
		printf '  want: %q\n  got:  %q\n' "$2" "$3"
		failures=$((failures + 1))
	fi
}
cli() { redis-cli -p "$PORT" "$@"; }

check "PING" "PONG" "$(cli PING)"
check "ECHO" "hello world" "$(cli ECHO 'hello world')"
check "CHECK allowed" "1" "$(cli THROTTLE.CHECK cli:a 2 1h | head -1)"
check "CHECK remaining" "0" "$(cli THROTTLE.CHECK cli:a 2 1h | sed -n 3p)"
check "CHECK denied" "0" "$(cli THROTTLE.CHECK cli:a 2 1h | head -1)"
check "CHECK 5 fields" "5" "$(cli THROTTLE.CHECK cli:b 10 1s | wc -l | tr -d ' ')"
before=$(cli DBSIZE)
check "PEEK on a fresh key" "1" "$(cli THROTTLE.PEEK cli:none 10 1s | head -1)"
check "PEEK creates nothing" "$before" "$(cli DBSIZE)"
check "RESET" "1" "$(cli THROTTLE.RESET cli:a cli:nothing)"
check "WRONGTYPE" "WRONGTYPE Operation against a key holding the wrong kind of value" \
	"$(cli THROTTLE.CHECK cli:b 10 1s ALGO fixed)"
check "CL.THROTTLE first" "0 16 15" "$(cli CL.THROTTLE cli:cell 15 30 60 | head -3 | tr '\n' ' ' | sed 's/ $//')"
check "CL.THROTTLE usage" "Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]" \
	"$(cli CL.THROTTLE cli:cell 15)"
check "unknown command" "ERR unknown command 'NOPE', with args beginning with: 'x' " "$(cli NOPE x)"
check "RESP3 map" "allowed 1" "$(redis-cli -3 -p "$PORT" THROTTLE.CHECK cli:r3 5 1s | head -1)"
check "stdin commands" "$(printf 'PONG\n1')" "$(printf 'PING\nTHROTTLE.CHECK cli:stdin 5 1s\n' | cli | head -2)"
check "INFO server" "redis_version:7.2.0" "$(cli INFO server | tr -d '\r' | grep '^redis_version:')"
check "CONFIG GET" "$(printf 'maxclients\n10000')" "$(cli CONFIG GET maxclients)"

# Inline commands over a raw socket (as telnet sends them).
inline() { # prints the raw reply to the given lines
	exec 3<>"/dev/tcp/127.0.0.1/$PORT"
	printf '%s' "$1" >&3
	timeout 2 head -c "$2" <&3 || true
	exec 3<&-
}
check "inline PING" "+PONG" "$(inline $'PING\r\n' 7 | tr -d '\r\n')"
check "inline quoted key" "*5" "$(inline $'THROTTLE.CHECK "inline key" 5 1m\r\n' 4 | tr -d '\r\n')"
check "inline LF only" "\$2hi" "$(inline $'ECHO hi\n' 8 | tr -d '\r\n')"
check "inline unbalanced quotes" "-ERR Protocol error: unbalanced quotes in request" \
	"$(inline $'ECHO "abc\r\n' 52 | tr -d '\r\n')"

# Interactive mode (on a pseudo-terminal): COMMAND DOCS feeds the hints.
if command -v python3 >/dev/null; then
	out=$(scripts/cli-interactive.py "$PORT" "THROTTLE.CHECK cli:tty 5 1s" "CL.THROTTLE cli:ttycell 15 30 60")
	check "interactive hint" "yes" "$(grep -q 'THROTTLE.CHECK key limit period \[ALGO algo\]' <<<"$out" && echo yes || echo no)"
	check "interactive reply" "yes" "$(grep -q '1) (integer) 1' <<<"$out" && echo yes || echo no)"
	check "interactive CL.THROTTLE" "yes" "$(grep -q '2) (integer) 16' <<<"$out" && echo yes || echo no)"
else
	echo "SKIP - interactive redis-cli: python3 not found (needed for a pseudo-terminal)"
fi

kill -TERM "$PID"
status=0
wait "$PID" || status=$?
PID=""
check "SIGTERM exit status" "0" "$status"

if [ "$failures" -ne 0 ]; then
	echo "redis-cli tests: $failures failed"; cat "$WORK/server.log"; exit 1
fi
echo "redis-cli tests: all passed"
