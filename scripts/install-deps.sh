#!/usr/bin/env bash
# Installs what `make test` needs and is missing: redis-cli and redis-server
# (Debian packages redis-tools and redis-server). Does nothing when both are
# present. Go itself must already be installed.
set -euo pipefail

missing=()
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || missing+=(redis-server)

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
