#!/usr/bin/env bash
# Runs every Go fuzz target of the repository for a bounded time each, in
# the module that holds it (bench/ and other nested modules included).
# Usage: scripts/fuzz.sh [duration]   (default 15s; env FUZZTIME also works)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
FUZZTIME=${1:-${FUZZTIME:-15s}}

found=0
while IFS= read -r file; do
	dir=$(dirname "$file")
	mod=$dir
	while [ "$mod" != "." ] && [ ! -f "$mod/go.mod" ]; do mod=$(dirname "$mod"); done
	rel=${dir#"$mod"}
	rel=./${rel#/}
	for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
		found=$((found + 1))
		echo "fuzz: ./$dir $target for $FUZZTIME"
		(cd "$mod" && go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 2s "$rel")
	done
done < <(grep -rlE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+\(' . | sed 's#^\./##' | sort)
echo "fuzz: $found targets passed"
