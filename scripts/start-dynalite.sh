#!/usr/bin/env bash
# Runs dynalite, a DynamoDB emulator, in the foreground for tests.
#
#   scripts/start-dynalite.sh [PORT]    print http://127.0.0.1:PORT on stdout, then run
#                                       dynalite on it until killed; without PORT, on a port
#                                       the kernel picks as it binds (printed once bound)
#   scripts/start-dynalite.sh install   only install it
#
# The version is pinned by scripts/dynalite/package.json and its lockfile and
# installed with `npm ci` from the npm registry into a cache outside the
# repository (DYNALITE_CACHE, default ~/.cache/throttlekit/dynalite), once per
# lockfile. Install scripts are not run: the native LevelDB binding ships
# prebuilt inside its npm package, and dynalite runs in memory (no --path), so
# nothing is fetched from anywhere but the registry. Tables vanish when the
# process ends.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${DYNALITE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/throttlekit/dynalite}

die() { echo "start-dynalite: $*" >&2; exit 1; }

command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
	die "node and npm are needed (scripts/install-deps.sh installs them)"

install() {
	if [ -x "$cache/node_modules/.bin/dynalite" ] && cmp -s "$here/dynalite/package-lock.json" "$cache/package-lock.json"; then
		return
	fi
	mkdir -p "$cache"
	cp "$here/dynalite/package.json" "$here/dynalite/package-lock.json" "$cache/"
	npm ci --prefix "$cache" --ignore-scripts --no-audit --no-fund --loglevel=error >&2 ||
		die "npm ci failed in $cache"
}

if [ "${1:-}" = install ]; then
	install
	exit 0
fi
install
if [ -z "${1:-}" ]; then
	# A free port, bound by the server itself before it prints the endpoint.
	exec node "$here/dynalite/serve.js" "$cache/node_modules/dynalite"
fi
echo "http://127.0.0.1:$1"
exec node "$cache/node_modules/dynalite/cli.js" --host 127.0.0.1 --port "$1" >&2
