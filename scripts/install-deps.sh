#!/usr/bin/env bash
# Installs what `make test` needs and is missing: redis-cli, redis-server and
# python3 (Debian packages redis-tools, redis-server, python3; python3 drives
# redis-cli on a pseudo-terminal in tests/redis-cli.sh), PostgreSQL's server
# binaries (postgresql; scripts/start-postgres.sh runs them from the newest
# /usr/lib/postgresql/*/bin) and node with npm (nodejs, npm;
# scripts/start-dynalite.sh installs the DynamoDB emulator with npm, which
# this script then does once), redis-py (python3-redis, for tests/compat) and
# ioredis 5 and 6 (npm ci in tests/compat/node), and
# prometheus-redis-exporter (Debian package of the same name; the operator
# tools test scrapes the server with it). Does nothing when all are
# present. Go itself must already be installed.
set -euo pipefail

missing=()
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || missing+=(redis-server)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
if [ -n "${PG_BIN:-}" ]; then
	[ -x "$PG_BIN/initdb" ] || missing+=(postgresql)
else
	compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
fi
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
/usr/bin/python3 -c 'import redis' >/dev/null 2>&1 || missing+=(python3-redis)
command -v prometheus-redis-exporter >/dev/null 2>&1 || missing+=(prometheus-redis-exporter)

if [ ${#missing[@]} -gt 0 ]; then
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "install-deps: missing ${missing[*]} and no apt-get; install them by hand" >&2
		exit 1
	fi
	SUDO=""
	if [ "$(id -u)" -ne 0 ]; then
		SUDO="sudo"
	fi
	echo "install-deps: installing ${missing[*]}"
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The pinned DynamoDB emulator, into its cache (nothing to do when the cache
# matches the lockfile), so tests need no network later.
"$(dirname "${BASH_SOURCE[0]}")/start-dynalite.sh" install

# The Redis clients tests/compat drives: ioredis 5 and 6 as the lockfile pins
# them (skipped when both are installed at the pinned versions).
COMPAT_NODE="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tests/compat/node" && pwd)"
pinned() { node -p "require('$COMPAT_NODE/node_modules/$1/package.json').version" 2>/dev/null; }
if [ "$(pinned ioredis)" != "6.0.0" ] || [ "$(pinned ioredis5)" != "5.8.2" ]; then
	echo "install-deps: npm ci in tests/compat/node"
	npm ci --prefix "$COMPAT_NODE" --no-audit --no-fund --ignore-scripts >/dev/null
fi
