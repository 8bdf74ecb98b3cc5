package persisttests

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/internal/dynatest"
	"github.com/throttlekit/throttlekit-server/internal/pgtest"
	"github.com/throttlekit/throttlekit-server/internal/testserver"
	"github.com/throttlekit/throttlekit-server/persist"
)

// The crash-test load: 50 connections pipelining 16 THROTTLE.CHECKs each
// for crashLoad (TK_PERSIST_CRASH_SECONDS to change it), over crashKeys
// keys (backend.syncKeys in sync mode).
const (
	crashConns = 50
	crashDepth = 16
	crashKeys  = 10_000
	// crashMinPerKey is the mean of units acknowledged per key the load
	// reaches before the kill (TestCrashSync wants at least 10 to see a
	// loss of one unit per key); crashMaxLoad bounds the wait for it.
	crashMinPerKey = 12
	crashMaxLoad   = 90 * time.Second
)

func crashLoad() time.Duration {
	if s, err := strconv.Atoi(os.Getenv("TK_PERSIST_CRASH_SECONDS")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 3 * time.Second
}

// backend is a persistence backend the crash tests run against.
type backend struct {
	name string
	// syncKeys is the number of keys of the sync crash load: few enough
	// that each key gets many units at this backend's sync throughput, so
	// that a loss of one unit on many keys cannot hide.
	syncKeys int
	start    func(t *testing.T, table string) (url string, args []string, unlock func(t *testing.T))
}

func backends() []backend {
	return []backend{
		{"postgres", crashKeys, func(t *testing.T, table string) (string, []string, func(*testing.T)) {
			pg := pgtest.Start(t)
			url := pg.URL + "&table=" + table
			return url, nil, func(t *testing.T) { waitUnlocked(t, url, persist.Options{}) }
		}},
		{"dynamodb", 200, func(t *testing.T, table string) (string, []string, func(*testing.T)) {
			dy := dynatest.Start(t)
			// The same owner on restart takes the dead server's lease at once.
			return dy.URL(table), []string{"--persist-owner", "crash-test"}, func(*testing.T) {}
		}},
	}
}

// poll is one INFO persistence taken during the load.
type poll struct {
	sent  time.Time // when the INFO was written
	lagMs int64     // persist_lag_ms
	dirty int64     // persist_dirty_keys
}

// durableBefore is an instant before which every change was durable when
// the poll was answered, and stays durable: the server computed the lag
// after sent, and the lag is whole milliseconds rounded down.
func (p poll) durableBefore() time.Time {
	return p.sent.Add(-time.Duration(p.lagMs+1) * time.Millisecond)
}

// crashRun is what crash measured.
type crashRun struct {
	ld     *load
	after  []int64   // units consumed per key after the restart
	regain int64     // units a key may have regained (see regained)
	killed time.Time // when SIGKILL was sent
	polls  []poll    // INFO persistence during the load, in order
	// flushSec and flushes are the server's flush-duration histogram sum
	// and count at the last scrape before the kill.
	flushSec float64
	flushes  int64
}

// crash runs the load over keys keys against a server in mode, polling
// INFO persistence and /metrics, kills it with SIGKILL while the load
// runs, restarts it on the same table and reads what is consumed after.
func crash(t *testing.T, b backend, mode, interval string, keys int) *crashRun {
	url, extra, unlock := b.start(t, "crash_"+mode)
	metrics := testserver.FreeAddr(t)
	args := append([]string{"--persist", url, "--persist-mode", mode, "--persist-interval", interval}, extra...)
	began := time.Now()
	srv := startServer(t, append(args, "--metrics-addr", metrics)...)
	ctx, cancel := context.WithCancel(context.Background())
	ld := newLoad(keys)
	done := make(chan struct{})
	go func() { ld.run(ctx, srv.Addr, crashConns, crashDepth); close(done) }()
	run := &crashRun{ld: ld}
	var mu sync.Mutex
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		for ctx.Err() == nil {
			sent := time.Now()
			m, err := info(srv.Addr)
			if err != nil {
				return
			}
			lag, err1 := strconv.ParseInt(m["persist_lag_ms"], 10, 64)
			dirty, err2 := strconv.ParseInt(m["persist_dirty_keys"], 10, 64)
			if err1 == nil && err2 == nil {
				mu.Lock()
				run.polls = append(run.polls, poll{sent, lag, dirty})
				mu.Unlock()
			}
			if sec, n, ok := flushHistogram(metrics); ok {
				mu.Lock()
				run.flushSec, run.flushes = sec, n
				mu.Unlock()
			}
			time.Sleep(10 * time.Millisecond) // polling period, not a correctness wait
		}
	}()
	// The kill comes once the load has run for crashLoad and acknowledged
	// crashMinPerKey units per key on average, whichever is later, so a slow
	// machine gets a longer load rather than too few units per key to see a
	// loss of one (crashMaxLoad bounds the wait; the assertions then report).
	for t0 := time.Now(); time.Since(t0) < crashMaxLoad; time.Sleep(20 * time.Millisecond) {
		if time.Since(t0) >= crashLoad() && total(ld.acked) >= crashMinPerKey*int64(keys) {
			break
		}
	}
	run.killed = time.Now()
	srv.Stop() // SIGKILL while the load runs
	<-done
	cancel()
	<-pollDone
	if run.ld.ops.Load() == 0 {
		t.Fatalf("no replies before the kill; server log:\n%s", srv.Log())
	}
	unlock(t)
	srv2 := startServer(t, args...)
	run.after = consumed(t, srv2.Addr, keys)
	run.regain = regained(began)
	if x, xk := excess(run.ld.sent, run.after); x > 0 {
		t.Errorf("%d units on %d keys consumed after the restart beyond the commands sent: the measurement is broken", x, xk)
	}
	return run
}

// TestCrashSync: in sync mode a SIGKILL under load loses nothing that was
// acknowledged, to the unit on every key.
func TestCrashSync(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			r := crash(t, b, "sync", "100ms", b.syncKeys)
			ld := r.ld
			lost, keys := compare(ld.acked, r.after, r.regain)
			t.Logf("%s sync: %d replies, %d units acknowledged over %d keys (%.0f per key), %d TRYAGAIN, %d other errors; lost %d units on %d keys (regain allowance %d)",
				b.name, ld.ops.Load(), total(ld.acked), len(ld.acked), perKey(ld.acked), ld.tryAgain.Load(), ld.other.Load(), lost, keys, r.regain)
			if lost > 0 {
				t.Errorf("sync mode lost %d acknowledged units on %d keys", lost, keys)
			}
			if perKey(ld.acked) < 10 {
				t.Errorf("only %.1f units acknowledged per key: too few to see a loss of one", perKey(ld.acked))
			}
			if ld.other.Load() > 0 {
				t.Errorf("%d unexpected error replies", ld.other.Load())
			}
		})
	}
}

// TestCrashAsync: in async mode a crash loses at most what the server's
// own lag said was not durable. The last INFO persistence answered before
// the kill gives an instant before which every change was durable (its
// time minus persist_lag_ms); every unit the client saw acknowledged
// before that instant must survive. The loss in milliseconds of traffic,
// the lag and the flush durations are logged against the interval.
func TestCrashAsync(t *testing.T) {
	if os.Getenv("TK_PERSIST_ASYNC_CRASH") == "" && testing.Short() {
		t.Skip("short")
	}
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			const interval = 100 * time.Millisecond
			r := crash(t, b, "async", interval.String(), crashKeys)
			ld := r.ld
			lost, keys := compare(ld.acked, r.after, r.regain)
			if len(r.polls) == 0 {
				t.Fatal("no INFO answered during the load")
			}
			var durable time.Time
			var maxLag, maxDirty int64
			for _, p := range r.polls {
				if d := p.durableBefore(); d.After(durable) {
					durable = d
				}
				maxLag, maxDirty = max(maxLag, p.lagMs), max(maxDirty, p.dirty)
			}
			last := r.polls[len(r.polls)-1]
			bound := ld.ackedSince(durable)
			rate := float64(total(ld.acked)) / r.killed.Sub(ld.start).Seconds()
			meanFlush := 0.0
			if r.flushes > 0 {
				meanFlush = r.flushSec / float64(r.flushes) * 1000
			}
			t.Logf("%s async, interval %v: %d units acknowledged at ~%.0f/s; lost %d units on %d keys = %.0f ms of acknowledged traffic; "+
				"bound %d units (acknowledged after %v before the kill, the last INFO's lag %d ms %v before the kill); "+
				"lag max %d ms, dirty keys max %d; %d flushes, mean %.0f ms",
				b.name, interval, total(ld.acked), rate, lost, keys, float64(lost)/rate*1000,
				bound, r.killed.Sub(durable).Round(time.Millisecond), last.lagMs, r.killed.Sub(last.sent).Round(time.Millisecond),
				maxLag, maxDirty, r.flushes, meanFlush)
			if lost > bound {
				t.Errorf("lost %d units, more than the %d acknowledged after the server's lag said everything before was durable", lost, bound)
			}
		})
	}
}

// flushHistogram scrapes the flush-duration histogram's sum and count.
func flushHistogram(addr string) (sec float64, n int64, ok bool) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, 0, false
	}
	defer resp.Body.Close()
	var gotSum, gotCount bool
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, v, found := strings.Cut(sc.Text(), " ")
		switch {
		case !found:
		case name == "throttlekit_persist_flush_duration_seconds_sum":
			sec, err = strconv.ParseFloat(v, 64)
			gotSum = err == nil
		case name == "throttlekit_persist_flush_duration_seconds_count":
			n, err = strconv.ParseInt(v, 10, 64)
			gotCount = err == nil
		}
	}
	return sec, n, gotSum && gotCount
}
