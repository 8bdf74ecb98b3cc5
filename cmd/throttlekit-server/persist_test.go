package main

import (
	"strings"
	"testing"

	"github.com/throttlekit/throttlekit-server/internal/pgtest"
	"github.com/throttlekit/throttlekit-server/internal/testserver"
)

// TestPersistShutdownWritesEverything runs the program on Postgres, in
// async mode with an interval far longer than the test (so only the final
// flush of a clean stop can write the changes) and in sync mode, and
// checks that a second run loads the changes and that the persistence
// metrics are exported.
func TestPersistShutdownWritesEverything(t *testing.T) {
	pg := pgtest.Start(t)
	for _, mode := range []string{"async", "sync"} {
		t.Run(mode, func(t *testing.T) { shutdownWritesEverything(t, pg.URL+"&table=shutdown_"+mode, mode) })
	}
}

func shutdownWritesEverything(t *testing.T, url, mode string) {
	args := []string{"--persist", url, "--persist-mode", mode, "--persist-interval", "1h"}
	info := `throttlekit_persist_info{backend="postgres",mode="` + mode + `",fail="open"}`

	addr, maddr := testserver.FreeAddr(t), testserver.FreeAddr(t)
	stop := startProgram(t, addr, maddr, args...)
	rc := dialRESP(t, addr)
	for range 3 {
		if got := rc.do(t, "THROTTLE.CHECK", "user:1", "10", "1h"); !strings.HasPrefix(got, "1 10 ") {
			t.Fatalf("THROTTLE.CHECK: %q", got)
		}
	}
	m := scrape(t, maddr)
	if m[info] != 1 || m["throttlekit_persist_healthy"] != 1 {
		t.Errorf("persistence metrics missing or unhealthy: info %v healthy %v", m[info], m["throttlekit_persist_healthy"])
	}
	stop() // SIGTERM's path: drain, then the final flush

	addr2, maddr2 := testserver.FreeAddr(t), testserver.FreeAddr(t)
	startProgram(t, addr2, maddr2, args...)
	rc2 := dialRESP(t, addr2)
	if got := rc2.do(t, "THROTTLE.PEEK", "user:1", "10", "1h", "COST", "0"); !strings.HasPrefix(got, "1 10 7 ") {
		t.Errorf("THROTTLE.PEEK after the restart: %q, want 7 remaining", got)
	}
	m2 := scrape(t, maddr2)
	if m2["throttlekit_persist_loaded_keys"] != 1 {
		t.Errorf("throttlekit_persist_loaded_keys = %v, want 1", m2["throttlekit_persist_loaded_keys"])
	}
	if got := rc2.do(t, "CONFIG", "GET", "persist"); strings.Contains(got, "postgres://") {
		t.Errorf("CONFIG GET persist shows the URL (it may hold a password): %q", got)
	}
}
