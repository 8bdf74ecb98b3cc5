package rls

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/throttlekit/throttlekit-server/policy"
)

func reloadCfg(limit int) string {
	return fmt.Sprintf(`
domain: live
descriptors:
  - key: x
    rate_limit: {unit: minute, requests_per_unit: %d}
  - key: y
    rate_limit: {unit: minute, requests_per_unit: %d}
  - key: z
    rate_limit: {unit: hour, requests_per_unit: 1000000000}
`, limit, limit)
}

// TestHotReloadUnderLoad: clients call without pause while the watched file
// is switched between two versions and an invalid one. No call fails, no
// response mixes the versions (x and y always carry the same limit), the
// invalid file changes nothing, and the counters of the rules survive every
// reload (z never changes; x and y change only their rate).
func TestHotReloadUnderLoad(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "live.yaml")
	write := func(body string) {
		tmp := filepath.Join(dir, ".tmp")
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write(reloadCfg(1000000))
	type report struct {
		set *policy.Set
		err error
	}
	reports := make(chan report, 256)
	e := startEnvStore(t, dir, policy.StoreOptions{OnReload: func(s *policy.Set, err error) { reports <- report{s, err} }}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	watchDone := make(chan error, 1)
	go func() { watchDone <- e.store.Watch(ctx) }()
	defer func() {
		cancel()
		if err := <-watchDone; err != nil {
			t.Error(err)
		}
	}()

	const workers = 4
	var stop atomic.Bool
	var total, mixed, failed atomic.Int64
	seen := [2]atomic.Int64{} // responses under version 1 and 2
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				r, err := e.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "live",
					Descriptors: []*ratelimitDesc{desc("x", "k"), desc("y", "k"), desc("z", "k")}})
				if err != nil {
					failed.Add(1)
					t.Error(err)
					return
				}
				total.Add(1)
				lx, ly := r.Statuses[0].CurrentLimit.GetRequestsPerUnit(), r.Statuses[1].CurrentLimit.GetRequestsPerUnit()
				if lx != ly || r.OverallCode != rlsv3.RateLimitResponse_OK {
					mixed.Add(1)
					continue
				}
				seen[lx/1000000-1].Add(1)
			}
		}()
	}
	// wait for the reload a write caused: ok selects success or failure.
	wait := func(ok bool) *policy.Set {
		t.Helper()
		timeout := time.After(time.Minute) // hang guard only
		for {
			select {
			case r := <-reports:
				if (r.err == nil) == ok {
					return r.set
				}
			case <-timeout:
				t.Fatal("no reload reported")
			}
		}
	}
	// waitServed waits until a response under version v has been seen
	// since the call, so every switch happens under load.
	waitServed := func(v int) {
		n := seen[v-1].Load()
		for seen[v-1].Load() == n && failed.Load() == 0 {
			time.Sleep(time.Millisecond) // polling for progress; no duration is asserted
		}
	}
	const cycles = 5
	for c := 0; c < cycles; c++ {
		waitServed(1)
		write(reloadCfg(2000000))
		wait(true)
		waitServed(2)
		write("domain: live\ndescriptors:\n  - key: x\n    rate_limit: {unit: minute, requests_per_unit: -3}\n")
		wait(false)
		// Every reload from now on reads the invalid file and fails, so
		// the set in force must still be version 2.
		if r := e.store.Current().Match("live", []policy.Entry{{Key: "x", Value: "k"}}); r == nil || r.RequestsPerUnit != 2000000 {
			t.Fatalf("an invalid file replaced the set: x is %v", r)
		}
		waitServed(2)
		write(reloadCfg(1000000))
		wait(true)
	}
	stop.Store(true)
	wg.Wait()
	if failed.Load() != 0 || mixed.Load() != 0 {
		t.Fatalf("%d failed, %d mixed of %d", failed.Load(), mixed.Load(), total.Load())
	}
	if e.store.Failures() < cycles {
		t.Errorf("%d failures counted, want >= %d", e.store.Failures(), cycles)
	}
	// Counters survived: every request is still counted on z and on x.
	for len(reports) > 0 {
		<-reports
	}
	n := total.Load()
	r := e.call("live", 0, withHits(desc("z", "k"), 0), withHits(desc("x", "k"), 0))
	if got := int64(r.Statuses[0].LimitRemaining); got != 1000000000-n {
		t.Errorf("z remaining %d after %d requests, want %d", got, n, 1000000000-n)
	}
	if lim, got := int64(r.Statuses[1].CurrentLimit.RequestsPerUnit), int64(r.Statuses[1].LimitRemaining); got != lim-n {
		t.Errorf("x remaining %d of %d after %d requests", got, lim, n)
	}
	t.Logf("%d requests, %d under version 1, %d under version 2, %d reloads, %d rejected",
		n, seen[0].Load(), seen[1].Load(), e.store.Loads(), e.store.Failures())
}
