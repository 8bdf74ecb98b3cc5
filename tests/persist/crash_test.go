package persisttests

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/internal/dynatest"
	"github.com/throttlekit/throttlekit-server/internal/pgtest"
	"github.com/throttlekit/throttlekit-server/persist"
)

// The crash-test load: 50 connections pipelining 16 THROTTLE.CHECKs each
// over 10k keys for a few seconds.
const (
	crashConns = 50
	crashDepth = 16
	crashKeys  = 10_000
	crashLoad  = 3 * time.Second
)

// backend is a persistence backend the crash tests run against.
type backend struct {
	name  string
	start func(t *testing.T, table string) (url string, args []string, unlock func(t *testing.T))
}

func backends() []backend {
	return []backend{
		{"postgres", func(t *testing.T, table string) (string, []string, func(*testing.T)) {
			pg := pgtest.Start(t)
			url := pg.URL + "&table=" + table
			return url, nil, func(t *testing.T) { waitUnlocked(t, url, persist.Options{}) }
		}},
		{"dynamodb", func(t *testing.T, table string) (string, []string, func(*testing.T)) {
			dy := dynatest.Start(t)
			// The same owner on restart takes the dead server's lease at once.
			return dy.URL(table), []string{"--persist-owner", "crash-test"}, func(*testing.T) {}
		}},
	}
}

// crash runs the load against a server in mode, kills it with SIGKILL while
// the load runs, restarts it on the same table and returns what was
// acknowledged before and what is consumed after, with the regain allowed.
func crash(t *testing.T, b backend, mode, interval string) (acked *load, after []int64, regain int64) {
	url, extra, unlock := b.start(t, "crash_"+mode)
	args := append([]string{"--persist", url, "--persist-mode", mode, "--persist-interval", interval}, extra...)
	began := time.Now()
	srv := startServer(t, args...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *load, 1)
	go func() { done <- runLoad(ctx, srv.Addr, crashConns, crashDepth, crashKeys) }()
	time.Sleep(crashLoad) // load duration, not a correctness wait
	srv.Stop()            // SIGKILL while the load runs
	ld := <-done
	cancel()
	if ld.ops.Load() == 0 {
		t.Fatalf("no replies before the kill; server log:\n%s", srv.Log())
	}
	unlock(t)
	srv2 := startServer(t, args...)
	after = consumed(t, srv2.Addr, crashKeys)
	regain = int64(time.Since(began)/emission) + 1
	return ld, after, regain
}

func TestCrashSync(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ld, after, regain := crash(t, b, "sync", "100ms")
			lost, keys := compare(ld.acked, after, regain)
			t.Logf("%s sync: %d replies, %d units acknowledged over %d keys, %d TRYAGAIN, %d other errors; lost %d units on %d keys (regain allowance %d)",
				b.name, ld.ops.Load(), total(ld.acked), crashKeys, ld.tryAgain.Load(), ld.other.Load(), lost, keys, regain)
			if lost > 0 {
				t.Errorf("sync mode lost %d acknowledged units on %d keys", lost, keys)
			}
			if ld.other.Load() > 0 {
				t.Errorf("%d unexpected error replies", ld.other.Load())
			}
		})
	}
}

// TestCrashAsync measures what async mode loses in a crash; the loss is
// logged, not asserted (it is bounded by about one interval of changes).
func TestCrashAsync(t *testing.T) {
	if os.Getenv("TK_PERSIST_ASYNC_CRASH") == "" && testing.Short() {
		t.Skip("short")
	}
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			const interval = 100 * time.Millisecond
			ld, after, regain := crash(t, b, "async", interval.String())
			lost, keys := compare(ld.acked, after, regain)
			rate := float64(ld.ops.Load()) / crashLoad.Seconds()
			t.Logf("%s async, interval %v: %d units acknowledged at ~%.0f replies/s; lost %d units on %d keys = %.0f ms of acknowledged traffic",
				b.name, interval, total(ld.acked), rate, lost, keys, float64(lost)/rate*1000)
		})
	}
}
