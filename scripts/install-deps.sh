#!/usr/bin/env bash
# Installs what `make test` needs and is missing: redis-cli, redis-server and
# python3 (Debian packages redis-tools, redis-server, python3; python3 drives
# redis-cli on a pseudo-terminal in tests/redis-cli.sh). Does nothing when all are
# present. Go itself must already be installed.
set -euo pipefail

missing=()
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || missing+=(redis-server)
command -v python3 >/dev/null 2>&1 || missing+=(python3)

if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi
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
