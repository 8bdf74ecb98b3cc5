#!/usr/bin/env bash
# Starts a throw-away PostgreSQL server for tests and benchmarks, or stops it.
#
#   scripts/start-postgres.sh [start] [DIR]   create a cluster in DIR (a new temp dir
#                                             when omitted) unless one is there, start it
#                                             and print its URL on stdout
#   scripts/start-postgres.sh stop DIR        stop the server of DIR (fast shutdown)
#   scripts/start-postgres.sh url DIR         print the URL of DIR's cluster again
#
# A restarted cluster keeps its port (saved in DIR/port), so a URL stays valid
# across stop/start. The server listens on 127.0.0.1 only, trusts local
# connections (user postgres, no password) and runs with fsync off: it is for
# tests, never for data that matters. Debian's binaries are used by full path
# (PG_BIN, default the newest /usr/lib/postgresql/*/bin), since another pg_ctl may come
# first on PATH. PostgreSQL refuses to run as root, so as root the cluster is
# owned by and run as PG_USER (default nobody) through runuser. The first
# start on a machine runs initdb into a template directory (PG_TEMPLATE,
# default /tmp/throttlekit-pg-template-VERSION-USER); later clusters are
# copies of it.
set -euo pipefail

# The newest of Debian's installed major versions (15 on bookworm, 17 on trixie).
PG_BIN=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
PG_USER=${PG_USER:-nobody}

die() { echo "start-postgres: $*" >&2; exit 1; }

[ -x "$PG_BIN/initdb" ] && [ -x "$PG_BIN/pg_ctl" ] ||
	die "no PostgreSQL binaries in $PG_BIN (scripts/install-deps.sh installs postgresql)"

as_owner() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u "$PG_USER" -- "$@"
	else
		"$@"
	fi
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

url_of() {
	echo "postgres://postgres@127.0.0.1:$(cat "$1/port")/postgres?sslmode=disable"
}

cmd=start
case "${1:-}" in
start | stop | url) cmd=$1; shift ;;
esac
dir=${1:-}

case $cmd in
stop)
	[ -n "$dir" ] || die "usage: $0 stop DIR"
	as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
	exit 0
	;;
url)
	[ -n "$dir" ] || die "usage: $0 url DIR"
	url_of "$dir"
	exit 0
	;;
esac

if [ -z "$dir" ]; then
	dir=$(mktemp -d /tmp/throttlekit-pg.XXXXXX)
fi
mkdir -p "$dir"
if [ "$(id -u)" -eq 0 ]; then
	chown "$PG_USER" "$dir"
	chmod 0755 "$dir"
fi
if [ ! -f "$dir/data/PG_VERSION" ]; then
	# initdb costs seconds of CPU; run it once per machine into a template
	# and copy that (moved into place atomically, so concurrent first runs
	# are safe).
	version=$("$PG_BIN/postgres" -V | awk '{print $3}')
	template=${PG_TEMPLATE:-${TMPDIR:-/tmp}/throttlekit-pg-template-$version-$PG_USER}
	if [ ! -f "$template/PG_VERSION" ]; then
		tmp=$(mktemp -d "$template.XXXXXX")
		[ "$(id -u)" -ne 0 ] || chown "$PG_USER" "$tmp"
		as_owner "$PG_BIN/initdb" -D "$tmp/data" -U postgres --auth=trust -E UTF8 --no-locale --no-sync >"$tmp/initdb.log" 2>&1 ||
			die "initdb failed: $(tail -5 "$tmp/initdb.log")"
		mv -T "$tmp/data" "$template" 2>/dev/null || true
		rm -rf "$tmp"
	fi
	cp -a "$template" "$dir/data"
fi
start() {
	as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
		-o "-p $(cat "$dir/port") -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off" start >/dev/null
}
if [ -s "$dir/port" ]; then
	start || die "pg_ctl start failed: $(tail -5 "$dir/server.log")"
else
	# A new cluster's port was free a moment ago; another process may bind
	# it first, and the postmaster then fails to: try another, twice.
	for try in 1 2 3; do
		free_port >"$dir/port"
		start && break
		grep -q "Address already in use" "$dir/server.log" && [ "$try" -lt 3 ] ||
			die "pg_ctl start failed: $(tail -5 "$dir/server.log")"
	done
fi
echo "start-postgres: data in $dir (stop: $0 stop $dir)" >&2
url_of "$dir"
