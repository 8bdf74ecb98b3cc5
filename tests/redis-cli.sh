#!/usr/bin/env bash
# End-to-end test of throttlekit-server with the stock redis-cli.
#
# Builds cmd/throttlekit-server, starts it on a free loopback port, drives it
# with redis-cli (raw output, --no-raw, RESP3 with -3, commands from stdin,
# --pipe, -r) and with inline commands written straight to a TCP socket, and
# compares every output with the expected text. Stops the server with
# SIGTERM and expects a clean exit. Prints "N passed, M failed" last and
# exits non-zero if anything failed.
#
# No assertion depends on how fast the script runs: the server is started
# with --enable-debug-command local and its clock frozen with DEBUG
# SET-CLOCK at a fixed instant (T0) before the first check, so every time
# in a reply is known exactly and no window rolls over between two calls;
# where a check needs time to pass, DEBUG ADVANCE-CLOCK moves the clock.
#
# Usage: tests/redis-cli.sh            (from any directory)
# Needs: go, bash; installs redis-cli (Debian redis-tools) with apt-get if
# it is missing.
set -u

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/throttlekit-cli.XXXXXX")
SERVER_PID=""
PASS=0
FAIL=0

cleanup() {
	if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
		kill -TERM "$SERVER_PID" 2>/dev/null
		wait "$SERVER_PID" 2>/dev/null
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT

pass() {
	PASS=$((PASS + 1))
	echo "ok   - $1"
}

fail() {
	FAIL=$((FAIL + 1))
	echo "FAIL - $1"
	shift
	local line
	for line in "$@"; do
		printf '       %s\n' "$line"
	done
}

# show makes control characters visible for failure messages.
show() { printf '%s' "$1" | sed -e 's/\r/\\r/g' | sed -e ':a;N;$!ba;s/\n/\\n/g'; }

# expect_eq NAME EXPECTED ACTUAL
expect_eq() {
	if [ "$2" == "$3" ]; then
		pass "$1"
	else
		fail "$1" "expected: $(show "$2")" "got:      $(show "$3")"
	fi
}

# expect_re NAME REGEX ACTUAL (bash ERE over the whole, multi-line output)
expect_re() {
	if [[ "$3" =~ $2 ]]; then
		pass "$1"
	else
		fail "$1" "expected to match: $(show "$2")" "got:               $(show "$3")"
	fi
}

# expect_in NAME LO HI VALUE
expect_in() {
	if [[ "$4" =~ ^-?[0-9]+$ ]] && [ "$4" -ge "$2" ] && [ "$4" -le "$3" ]; then
		pass "$1"
	else
		fail "$1" "expected an integer in [$2, $3]" "got: $(show "$4")"
	fi
}

# T0 is the instant (Unix ms) the server's clock is frozen at:
# 2026-11-24T00:33:55.141Z, 33 min 55.141 s into an hour.
T0=1795480435141
HOUR_END=1795482000000 # the end of T0's clock hour, where 1h fixed windows end

# ---------------------------------------------------------------------------
# Tools.

if ! command -v redis-cli >/dev/null 2>&1; then
	echo "redis-cli not found: installing Debian redis-tools" >&2
	SUDO=""
	if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=sudo; fi
	$SUDO apt-get update -qq >&2 &&
		DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-tools >&2
fi
CLI=$(command -v redis-cli) || {
	echo "FATAL: redis-cli is not available and could not be installed"
	echo "0 passed, 1 failed"
	exit 1
}
echo "# using $("$CLI" --version)"

BIN="$WORK/throttlekit-server"
if ! (cd "$ROOT" && go build -o "$BIN" ./cmd/throttlekit-server); then
	echo "FATAL: go build ./cmd/throttlekit-server failed"
	echo "0 passed, 1 failed"
	exit 1
fi

# free_port prints a loopback port nobody listens on.
free_port() {
	local i p
	for i in $(seq 1 200); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	return 1
}


# ---------------------------------------------------------------------------
# --help lists every flag of the contract.

HELP=$("$BIN" --help 2>&1)
for flag in addr loops maxkeys maxclients proto-max-bulk-len max-args timeout client-output-buffer-limit; do
	expect_re "--help lists --$flag" "(^|[^a-z-])--?${flag}([^a-z-]|$)" "$HELP"
done

# ---------------------------------------------------------------------------
# Start the server.

# start_server picks a free port and starts the server on it. Another
# program may take the port between the pick and the server's bind, so a
# server that exits before answering is retried on another port.
start_server() {
	local attempt
	for attempt in 1 2 3 4 5; do
		PORT=$(free_port) || return 1
		local args=(--addr "127.0.0.1:$PORT" --enable-debug-command local)
		if [[ "$HELP" == *metrics-addr* ]]; then
			args+=(--metrics-addr=) # no HTTP listener: it could collide with other runs
		fi
		"$BIN" "${args[@]}" >"$WORK/server.log" 2>&1 &
		SERVER_PID=$!
		for _ in $(seq 1 300); do
			if ! kill -0 "$SERVER_PID" 2>/dev/null; then break; fi
			if [ "$("$CLI" -h 127.0.0.1 -p "$PORT" PING 2>/dev/null)" == "PONG" ]; then
				return 0
			fi
			sleep 0.1
		done
		if kill -0 "$SERVER_PID" 2>/dev/null; then
			return 1 # running but not answering: no retry
		fi
		wait "$SERVER_PID" 2>/dev/null
		SERVER_PID=""
	done
	return 1
}

if ! start_server; then
	echo "FATAL: server did not answer PING on port ${PORT:-?}; its log:"
	sed 's/^/  | /' "$WORK/server.log"
	echo "0 passed, 1 failed"
	exit 1
fi
echo "# server pid $SERVER_PID on 127.0.0.1:$PORT"

cli() { "$CLI" -h 127.0.0.1 -p "$PORT" "$@" 2>&1; }

# inline SENDS: writes raw bytes (a printf format) to a fresh TCP connection
# and stores in INLINE_OUT everything the server sends until it closes the
# connection (end the input with QUIT, or send a protocol violation). Marks
# the output if the server did not close within 5 s.
INLINE_OUT=""
inline() {
	INLINE_OUT=$(
		exec 3<>"/dev/tcp/127.0.0.1/$PORT" || exit 1
		printf "$1" >&3
		timeout 5 cat <&3
		if [ $? -eq 124 ]; then printf '<not closed within 5s>'; fi
		printf '.' # keeps trailing newlines through $(...)
	)
	INLINE_OUT=${INLINE_OUT%.}
}

# ---------------------------------------------------------------------------
# The clock: frozen at T0 for every check below, moved only by DEBUG.

expect_eq "DEBUG SET-CLOCK freezes the clock at T0" "OK" "$(cli DEBUG SET-CLOCK "$T0")"
expect_eq "CONFIG GET enable-debug-command" $'enable-debug-command\nlocal' "$(cli CONFIG GET enable-debug-command)"
expect_re "DEBUG HELP" $'SET-CLOCK <unix-time-milliseconds>\\|REAL\n.*ADVANCE-CLOCK <milliseconds>' "$(cli DEBUG HELP)"
expect_eq "DEBUG ADVANCE-CLOCK negative" "ERR milliseconds must not be negative" "$(cli DEBUG ADVANCE-CLOCK -1)"
expect_eq "TIME is the frozen instant" $'1795480435\n141000' "$(cli TIME)"

# ---------------------------------------------------------------------------
# Normal (raw output) mode: what scripts see.

expect_eq "PING" "PONG" "$(cli PING)"
expect_eq "PING message" "hello there" "$(cli PING "hello there")"
expect_eq "ECHO" "hello world" "$(cli ECHO "hello world")"

expect_eq "THROTTLE.CHECK first call: reset_at = T0 + 1h/10" $'1\n10\n9\n'$((T0 + 360000))$'\n0' "$(cli THROTTLE.CHECK cli:k 10 1h)"

expect_re "THROTTLE.CHECK --no-raw" \
	$'^1\\) \\(integer\\) 1\n2\\) \\(integer\\) 10\n3\\) \\(integer\\) 8\n4\\) \\(integer\\) [0-9]{13}\n5\\) \\(integer\\) 0$' \
	"$(cli --no-raw THROTTLE.CHECK cli:k 10 1h)"
expect_re "THROTTLE.CHECK RESP3 map (-3 --no-raw)" \
	$'^1# "allowed" => \\(integer\\) 1\n2# "limit" => \\(integer\\) 10\n3# "remaining" => \\(integer\\) 7\n4# "reset_at_ms" => \\(integer\\) [0-9]{13}\n5# "retry_after_ms" => \\(integer\\) 0$' \
	"$(cli -3 --no-raw THROTTLE.CHECK cli:k 10 1h)"
expect_re "THROTTLE.CHECK RESP3 map (-3 raw)" \
	$'^allowed 1\nlimit 10\nremaining 6\nreset_at_ms [0-9]{13}\nretry_after_ms 0$' \
	"$(cli -3 THROTTLE.CHECK cli:k 10 1h)"
expect_re "THROTTLE.PEEK consumes nothing" $'^1\n10\n6\n[0-9]{13}\n0$' "$(cli THROTTLE.PEEK cli:k 10 1h)"
expect_re "THROTTLE.PEEK again" $'^1\n10\n6\n[0-9]{13}\n0$' "$(cli THROTTLE.PEEK cli:k 10 1h)"
expect_re "THROTTLE.CHECK ALGO fixed COST 3" $'^1\n5\n2\n[0-9]{13}\n0$' "$(cli THROTTLE.CHECK cli:f 5 1m ALGO fixed COST 3)"
expect_re "THROTTLE.CHECK cost above limit" $'^0\n5\n5\n[0-9]{13}\n-1$' "$(cli THROTTLE.CHECK cli:g 5 1m COST 6)"
expect_re "THROTTLE.CHECK -r 3 (repeat) on limit 2" \
	$'^1\n2\n1\n[0-9]{13}\n0\n1\n2\n0\n[0-9]{13}\n0\n0\n2\n0\n[0-9]{13}\n[0-9]+$' \
	"$(cli -r 3 THROTTLE.CHECK cli:rep 2 1h)"

# redis-cell's README example, then a 2880 s emission interval: with the
# clock frozen, reset_after is exact.
expect_eq "CL.THROTTLE README example" $'0\n16\n15\n-1\n2' "$(cli CL.THROTTLE user123 15 30 60 1)"
cli THROTTLE.RESET user123 >/dev/null
expect_eq "CL.THROTTLE first call" $'0\n16\n15\n-1\n2880' "$(cli CL.THROTTLE cli:cell 15 30 86400 1)"
expect_eq "CL.THROTTLE --no-raw default quantity" \
	$'1) (integer) 0\n2) (integer) 16\n3) (integer) 14\n4) (integer) -1\n5) (integer) 5760' \
	"$(cli --no-raw CL.THROTTLE cli:cell 15 30 86400)"
expect_eq "CL.THROTTLE quantity 0 peeks" $'0\n16\n14\n-1\n5760' "$(cli CL.THROTTLE cli:cell 15 30 86400 0)"
expect_eq "CL.THROTTLE quantity above burst" $'1\n16\n14\n-1\n5760' "$(cli CL.THROTTLE cli:cell 15 30 86400 20)"
expect_eq "CL.THROTTLE parse error" "Cell error: Store error: Couldn't parse as integer: abc" "$(cli CL.THROTTLE user123 abc 30 60)"

R=$HOUR_END
expect_eq "THROTTLE.LEASE: the window ends with T0's clock hour" $'4\n10\n6\n'$R$'\n0' "$(cli THROTTLE.LEASE cli:lease 10 1h BATCH 4)"
expect_eq "THROTTLE.RETURN to the current window" "2" "$(cli THROTTLE.RETURN cli:lease 2 "$R")"
expect_eq "THROTTLE.RETURN to an old window" "0" "$(cli THROTTLE.RETURN cli:lease 1 $((R - 3600000)))"
expect_eq "THROTTLE.LEASE after RETURN" $'6\n10\n2\n'$R$'\n0' "$(cli THROTTLE.LEASE cli:lease 10 1h BATCH 6)"
expect_eq "WRONGTYPE" "WRONGTYPE Operation against a key holding the wrong kind of value" \
	"$(cli THROTTLE.CHECK cli:lease 10 1h ALGO gcra)"

# The clock is frozen, so no key expires while the script runs; the keys
# not counted below are reset first.
cli THROTTLE.RESET cli:g cli:f cli:lease >/dev/null
expect_eq "DBSIZE" "3" "$(cli DBSIZE)"
expect_eq "THROTTLE.RESET counts keys with state" "2" "$(cli THROTTLE.RESET cli:k cli:cell cli:none)"
expect_eq "DBSIZE after RESET" "1" "$(cli DBSIZE)"
expect_eq "--no-raw integer" "(integer) 1" "$(cli --no-raw DBSIZE)"

# Errors: raw mode prints the text, --no-raw prefixes "(error)".
expect_eq "unknown command" "ERR unknown command 'FOO', with args beginning with: 'bar' 'baz' " "$(cli FOO bar baz)"
expect_eq "unknown command --no-raw" "(error) ERR unknown command 'FOO', with args beginning with: 'bar' " "$(cli --no-raw FOO bar)"
expect_re "non-integer limit" $'^ERR [^\n]+$' "$(cli THROTTLE.CHECK cli:x ten 1s)"
expect_re "unknown period unit" $'^ERR [^\n]+$' "$(cli THROTTLE.CHECK cli:x 10 1w)"
expect_re "unknown option" $'^ERR [^\n]+$' "$(cli THROTTLE.CHECK cli:x 10 1s COLOR red)"
expect_re "wrong arity" "^ERR wrong number of arguments" "$(cli THROTTLE.CHECK cli:x)"
expect_eq "rejected commands create no key" "1" "$(cli DBSIZE)"

# Admin commands.
expect_eq "SELECT 0" "OK" "$(cli SELECT 0)"
expect_re "SELECT 1 is an error" '^ERR ' "$(cli SELECT 1)"
expect_re "INFO has redis_version and loading:0" $'redis_version:[^\r\n]+.*\nloading:0(\r|\n|$)' "$(cli INFO)"
expect_re "INFO server" $'# Server\r?\n.*redis_version:' "$(cli INFO server)"
expect_eq "TIME" $'1795480435\n141000' "$(cli TIME)"
expect_re "COMMAND COUNT" '^[1-9][0-9]*$' "$(cli COMMAND COUNT)"
expect_re "COMMAND INFO throttle.check" '^throttle\.check' "$(cli COMMAND INFO THROTTLE.CHECK)"
expect_re "CLIENT ID" '^[1-9][0-9]*$' "$(cli CLIENT ID)"
expect_eq "HELLO 3 via -3, then PING" "PONG" "$(cli -3 PING)"
expect_re "HELLO 3 reply" $'(^|\n)proto 3(\n|$)' "$(cli -3 HELLO 3)"
expect_re "HELLO 2 reply" $'(^|\n)proto\n2(\n|$)' "$(cli HELLO 2)"
expect_eq "RESET" "RESET" "$(cli RESET)"

# Commands read from stdin (one connection, state kept between lines).
expect_re "commands from stdin" \
	$'^PONG\na b\nOK\ncli-name\n1\n2\n1\n[0-9]{13}\n0\nERR unknown command \'NOPE\', with args beginning with: \n*$' \
	"$(printf 'PING\nECHO "a b"\nCLIENT SETNAME cli-name\nCLIENT GETNAME\nTHROTTLE.CHECK cli:stdin 2 1h\nNOPE\n' | cli)"

# Mass insertion with --pipe (raw protocol; redis-cli appends an ECHO).
{
	for i in $(seq 1 1000); do
		printf '*4\r\n$14\r\nTHROTTLE.CHECK\r\n$8\r\ncli:pipe\r\n$3\r\n500\r\n$2\r\n1h\r\n'
	done
} >"$WORK/pipe.txt"
out=$(cli --pipe <"$WORK/pipe.txt")
expect_re "--pipe of 1000 THROTTLE.CHECK" 'errors: 0, replies: 1000' "$out"
expect_eq "--pipe consumed exactly 500" $'0\n500\n0\n'$((T0 + 3600000))$'\n7200' "$(cli THROTTLE.PEEK cli:pipe 500 1h)"

# ---------------------------------------------------------------------------
# Time passes only when DEBUG ADVANCE-CLOCK says so.

# 500/h regains one unit every 7.2 s.
expect_eq "DEBUG ADVANCE-CLOCK 7199" "OK" "$(cli DEBUG ADVANCE-CLOCK 7199)"
expect_eq "1 ms short of 7.2 s: nothing regained" $'0\n500\n0\n'$((T0 + 3600000))$'\n1' "$(cli THROTTLE.PEEK cli:pipe 500 1h)"
expect_eq "DEBUG ADVANCE-CLOCK 1" "OK" "$(cli DEBUG ADVANCE-CLOCK 1)"
expect_eq "7.2 s later: one unit regained" $'1\n500\n1\n'$((T0 + 3600000))$'\n0' "$(cli THROTTLE.PEEK cli:pipe 500 1h)"
# A 1h fixed window ends at the clock hour: move to it exactly.
expect_eq "THROTTLE.LEASE in T0's hour" $'4\n10\n6\n'$HOUR_END$'\n0' "$(cli THROTTLE.LEASE cli:lease2 10 1h BATCH 4)"
expect_eq "DEBUG ADVANCE-CLOCK to the end of the hour" "OK" "$(cli DEBUG ADVANCE-CLOCK $((HOUR_END - T0 - 7200)))"
expect_eq "TIME at the end of the hour" $((HOUR_END / 1000))$'\n0' "$(cli TIME)"
expect_eq "THROTTLE.LEASE in the next window" $'4\n10\n6\n'$((HOUR_END + 3600000))$'\n0' "$(cli THROTTLE.LEASE cli:lease2 10 1h BATCH 4)"
expect_eq "THROTTLE.RETURN to the window just ended" "0" "$(cli THROTTLE.RETURN cli:lease2 4 "$HOUR_END")"

# ---------------------------------------------------------------------------
# Inline commands on a raw socket (telnet style).

inline 'PING\r\nECHO "hello world"\r\nTHROTTLE.CHECK inl 5 1h\r\nQUIT\r\n'
expect_eq "inline PING/ECHO/THROTTLE.CHECK/QUIT" \
	$'+PONG\r\n$11\r\nhello world\r\n*5\r\n:1\r\n:5\r\n:4\r\n:'$((HOUR_END + 720000))$'\r\n:0\r\n+OK\r\n' "$INLINE_OUT"
inline 'CL.THROTTLE inlcell 15 30 60 1\r\nQUIT\r\n'
expect_eq "inline CL.THROTTLE" $'*5\r\n:0\r\n:16\r\n:15\r\n:-1\r\n:2\r\n+OK\r\n' "$INLINE_OUT"
inline "ECHO 'a b'\nECHO \"c\"\nQUIT\n"
expect_eq "inline with LF only and quotes" $'$3\r\na b\r\n$1\r\nc\r\n+OK\r\n' "$INLINE_OUT"
inline 'NOPE 1 2\r\nQUIT\r\n'
expect_eq "inline unknown command" $'-ERR unknown command \'NOPE\', with args beginning with: \'1\' \'2\' \r\n+OK\r\n' "$INLINE_OUT"
inline 'THROTTLE.CHECK k x 1s\r\nQUIT\r\n'
expect_re "inline bad argument then QUIT" $'^-ERR [^\r\n]+\r\n\\+OK\r\n$' "$INLINE_OUT"
inline 'ECHO "abc\r\n'
expect_eq "inline unbalanced quotes closes the connection" \
	$'-ERR Protocol error: unbalanced quotes in request\r\n' "$INLINE_OUT"
inline '*abc\r\n'
expect_eq "invalid multibulk length closes the connection" \
	$'-ERR Protocol error: invalid multibulk length\r\n' "$INLINE_OUT"
inline '*1\r\n$-5\r\n'
expect_eq "invalid bulk length closes the connection" \
	$'-ERR Protocol error: invalid bulk length\r\n' "$INLINE_OUT"
expect_eq "server still serves others" "PONG" "$(cli PING)"

# ---------------------------------------------------------------------------
# CONFIG GET, and interactive mode on a pseudo-terminal: redis-cli asks for
# COMMAND DOCS first and shows argument hints while typing.

expect_eq "CONFIG GET maxclients" "$(printf 'maxclients\n10000')" "$(cli CONFIG GET maxclients)"
if command -v python3 >/dev/null 2>&1; then
	TTY_OUT=$("$ROOT/tests/cli-interactive.py" "$PORT" "THROTTLE.CHECK cli:tty 5 1s" "CL.THROTTLE cli:ttycell 15 30 60" 2>&1)
	expect_re "interactive hint from COMMAND DOCS" 'THROTTLE\.CHECK key limit period\|POLICY policy \[ALGO algo\]' "$TTY_OUT"
	expect_re "interactive THROTTLE.CHECK reply" '1\) \(integer\) 1' "$TTY_OUT"
	expect_re "interactive CL.THROTTLE reply" '2\) \(integer\) 16' "$TTY_OUT"
else
	fail "interactive redis-cli" "python3 is needed for a pseudo-terminal: install it (scripts/install-deps.sh does)"
fi

# ---------------------------------------------------------------------------
# Back to the real clock: REAL never moves the clock back.

frozen_s=$((HOUR_END / 1000))
expect_eq "DEBUG SET-CLOCK REAL" "OK" "$(cli DEBUG SET-CLOCK REAL)"
expect_in "TIME after REAL is not before the frozen instant" "$frozen_s" 9999999999 "$(cli TIME | head -1)"

# ---------------------------------------------------------------------------
# Graceful stop: SIGTERM -> exit status 0, port closed.

kill -TERM "$SERVER_PID"
rc=0
for _ in $(seq 1 100); do
	kill -0 "$SERVER_PID" 2>/dev/null || break
	sleep 0.1
done
if kill -0 "$SERVER_PID" 2>/dev/null; then
	fail "SIGTERM stops the server within 10s" "still running; killing it"
	kill -KILL "$SERVER_PID" 2>/dev/null
	wait "$SERVER_PID" 2>/dev/null
else
	wait "$SERVER_PID"
	rc=$?
	expect_eq "exit status after SIGTERM" "0" "$rc"
fi
SERVER_PID=""
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
	fail "port closed after stop" "127.0.0.1:$PORT still accepts connections"
else
	pass "port closed after stop"
fi

if [ "$FAIL" -ne 0 ]; then
	echo "# server log:"
	sed 's/^/  | /' "$WORK/server.log" | tail -n 40
fi
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
