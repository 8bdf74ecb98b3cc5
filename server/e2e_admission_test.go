package server_test

// End-to-end tests of the admission commands over real TCP connections.

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestE2EMCheckAllOrNothing: 50 connections race MCHECK over two keys with
// limits 100 and 1000. Exactly 100 requests pass, and the second key has
// consumed exactly 100 units: a denial by the first limit never consumed
// from the second. (The store has 2 loops' worth of default shards, so the
// two keys almost surely sit in different shards; the property holds
// either way.)
func TestE2EMCheckAllOrNothing(t *testing.T) {
	ts := startServer(t, nil)
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
				v := rc.do(t, "THROTTLE.MCHECK", "2", "e2e:small", "100", "1h", "fixed", "e2e:big", "1000", "1h", "fixed")
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
	v := rc.do(t, "THROTTLE.PEEK", "e2e:big", "1000", "1h", "ALGO", "fixed")
	d, err := toDecision(v, 2)
	if err != nil {
		t.Fatal(err)
	}
	if d.Remaining != 900 {
		t.Fatalf("e2e:big remaining %d, want 900 (exactly 100 consumed)", d.Remaining)
	}
}

// TestE2EAcquire: 200 goroutines on 50 connections take slots of a limit
// of 10 and hold them for random short times; one in twenty never releases.
// in_flight is never above 10, and once every holder is done and the ttl
// has passed the key holds nothing. The server reads the wall clock, so
// expiry is awaited by polling with a generous deadline; nothing asserts
// on timing.
func TestE2EAcquire(t *testing.T) {
	ts := startServer(t, nil)
	const limit, workers, conns = 10, 200, 50
	const ttl = "1s" // far above any hold, so only abandoned slots expire
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
	var over atomic.Int64
	var holders atomic.Int64 // releasing holders only: counted after ACQUIRE, uncounted before RELEASE
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			deadline := time.Now().Add(30 * time.Second)
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
				if w%20 == 0 {
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
	if over.Load() != 0 {
		t.Fatalf("%d workers never acquired a slot", over.Load())
	}
	// Back to 0 once the abandoned slots' ttl passes: an ACQUIRE then sees
	// only itself. Poll; the deadline only bounds a failure.
	deadline := time.Now().Add(20 * time.Second)
	for {
		arr := do(0, "THROTTLE.ACQUIRE", "e2e:sem", strconv.Itoa(limit), ttl).([]any)
		if arr[0] == int64(1) {
			do(0, "THROTTLE.RELEASE", "e2e:sem", arr[3].(string))
		}
		if arr[2] == int64(1) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("in_flight still %v long after the ttl", arr[2])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
