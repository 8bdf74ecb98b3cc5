// Package testdeps lets tests that need an external program (redis-server,
// redis-benchmark, ...) find it, and decides what happens when it is absent:
// on a developer machine the test is skipped with a line on stderr that shows
// even without -v; under CI (the CI environment variable set, as .ci/run
// does) the test fails, so nothing is silently skipped there.
//
// Only tests import this package, so deadcode without -test lists its
// functions as unreachable; "deadcode -test ./..." shows them reached.
package testdeps

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Require returns the path of each named program in order. A missing one
// skips the test loudly, or fails it when the CI environment variable is set.
func Require(t testing.TB, programs ...string) []string {
	t.Helper()
	paths := make([]string, 0, len(programs))
	for _, p := range programs {
		path, err := exec.LookPath(p)
		if err != nil {
			msg := fmt.Sprintf("%s: %s is not installed (scripts/install-deps.sh installs it): %v", t.Name(), p, err)
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			fmt.Fprintln(os.Stderr, "SKIP", msg)
			t.Skip(msg)
		}
		paths = append(paths, path)
	}
	return paths
}
