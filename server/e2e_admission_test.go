package server_test

// End-to-end tests of the admission commands over real TCP connections.

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/internal/clock"
	"github.com/throttlekit/throttlekit-server/server"
	"github.com/throttlekit/throttlekit-server/shard"
)

// TestE2EMCheckAllOrNothing: 50 connections race MCHECK over two keys with
// limits 100 and 1000. Exactly 100 requests pass, and the second key has
// consumed exactly 100 units: a denial by the first limit never consumed
// from the second. The two keys are chosen on different shards, so the
// check spans two shard locks. The clock is frozen, so the fixed windows
// cannot roll over between the calls however slowly they run.
func TestE2EMCheckAllOrNothing(t *testing.T) {
	var mono atomic.Int64 // never advanced
	ts := startServer(t, func(c *server.Config) { c.Clock = clock.NewFrom(1_700_000_000_000_000_000, mono.Load).Now })
	small := "e2e:small"
	big := keyOnAnotherShard(t, ts.Store, small, "e2e:big:")
	const conns, each = 50, 6
	var admitted, denied atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan string, conns)
	for c := 0; c < conns; c++ {
		rc := dialRaw(t, ts.Addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				v := rc.do(t, "THROTTLE.MCHECK", "2", small, "100", "1h", "fixed", big, "1000", "1h", "fixed")
				arr, ok := v.([]any)
				if !ok || len(arr) != 3 {
					errs <- "bad reply"
					return
				}
				if arr[0] == int64(1) {
					admitted.Add(1)
				} else {
					denied.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if admitted.Load() != 100 || denied.Load() != conns*each-100 {
		t.Fatalf("admitted %d denied %d, want 100 and %d", admitted.Load(), denied.Load(), conns*each-100)
	}
	rc := dialRaw(t, ts.Addr)
	v := rc.do(t, "THROTTLE.PEEK", big, "1000", "1h", "ALGO", "fixed")
	d, err := toDecision(v, 2)
	if err != nil {
		t.Fatal(err)
	}
	if d.Remaining != 900 {
		t.Fatalf("%s remaining %d, want 900 (exactly 100 consumed)", big, d.Remaining)
	}
}

// keyOnAnotherShard returns the first of prefix0, prefix1, ... whose shard
// in store is not key's: a Txn that locked key's shard refuses it.
func keyOnAnotherShard(t *testing.T, store *shard.Store, key, prefix string) string {
	t.Helper()
	var tx shard.Txn
	for i := 0; i < 10000; i++ {
		k := prefix + strconv.Itoa(i)
		tx.Begin(store)
		_ = tx.Add([]byte(key))
		_ = tx.Lock()
		_, _, err := tx.Get([]byte(k), 0)
		tx.Unlock()
		if errors.Is(err, shard.ErrNotLocked) {
			return k
		}
	}
	t.Fatalf("no key %s<n> on another shard than %q: does the store have one shard?", prefix, key)
	return ""
}

// TestE2EAcquire: 200 goroutines on 50 connections take slots of a limit
// of 10 and hold them for short random times; one in forty never releases.
// in_flight is never above 10, every RELEASE frees its slot, and once every
// holder is done and the abandoned slots' ttl has passed the key holds
// nothing. Time is the test's: releasing holders take their slot for an
// hour and abandoning ones for a second, and while the workers run the
// clock jumps by 2 s at a time, at most 1000 times (2000 s, short of the
// hour), so abandoned slots expire amid the ACQUIREs and a released one
// never has. Five abandoned slots at most leave five to the others, so no
// worker starves whether or not the clock moves.
func TestE2EAcquire(t *testing.T) {
	var mono atomic.Int64
	ts := startServer(t, func(c *server.Config) { c.Clock = clock.NewFrom(1_700_000_000_000_000_000, mono.Load).Now })
	const limit, workers, conns = 10, 200, 50
	const holdTTL, abandonTTL = "1h", "1s"
	pool := make([]*rawConn, conns)
	locks := make([]sync.Mutex, conns)
	for i := range pool {
		pool[i] = dialRaw(t, ts.Addr)
	}
	do := func(i int, args ...string) any {
		locks[i%conns].Lock()
		defer locks[i%conns].Unlock()
		return pool[i%conns].do(t, args...)
	}
	stop := make(chan struct{})
	ticked := make(chan struct{})
	go func() { // the clock: 2 s jumps, paced only so that workers run between them
		defer close(ticked)
		for i := 0; i < 1000; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				mono.Add(int64(2 * time.Second))
			}
		}
	}()
	var over atomic.Int64
	var holders atomic.Int64 // releasing holders only: counted after ACQUIRE, uncounted before RELEASE
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			abandon := w%40 == 0
			ttl := holdTTL
			if abandon {
				ttl = abandonTTL
			}
			deadline := time.Now().Add(30 * time.Second) // bounds a failure only
			for time.Now().Before(deadline) {
				arr, ok := do(w, "THROTTLE.ACQUIRE", "e2e:sem", strconv.Itoa(limit), ttl).([]any)
				if !ok || len(arr) != 5 {
					t.Errorf("ACQUIRE reply %v", arr)
					return
				}
				if inFlight, _ := arr[2].(int64); inFlight > limit {
					t.Errorf("in_flight %d above %d", inFlight, limit)
				}
				if arr[0] != int64(1) {
					time.Sleep(time.Millisecond)
					continue
				}
				tok, _ := arr[3].(string)
				if abandon {
					return // never releases: its slot frees itself after the ttl
				}
				if h := holders.Add(1); h > limit {
					t.Errorf("%d releasing holders at once, limit %d", h, limit)
				}
				time.Sleep(time.Duration(r.IntN(3000)) * time.Microsecond)
				holders.Add(-1)
				if v := do(w, "THROTTLE.RELEASE", "e2e:sem", tok); v != int64(1) {
					t.Errorf("RELEASE %s = %v, want 1", tok, v)
				}
				return
			}
			over.Add(1) // never acquired within a generous deadline
		}()
	}
	wg.Wait()
	close(stop)
	<-ticked
	if over.Load() != 0 {
		t.Fatalf("%d workers never acquired a slot", over.Load())
	}
	// Past the abandoned slots' ttl: an ACQUIRE sees only itself.
	mono.Add(int64(2 * time.Second))
	arr := do(0, "THROTTLE.ACQUIRE", "e2e:sem", strconv.Itoa(limit), holdTTL).([]any)
	if arr[0] != int64(1) || arr[2] != int64(1) {
		t.Fatalf("ACQUIRE after the ttl = %v, want acquired with in_flight 1", arr)
	}
	if v := do(0, "THROTTLE.RELEASE", "e2e:sem", arr[3].(string)); v != int64(1) {
		t.Fatalf("RELEASE = %v, want 1", v)
	}
}
