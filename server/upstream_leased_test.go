package server_test

import (
	"context"
	"math/rand"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	throttlekit "github.com/throttlekit/throttlekit-server/clients/go"
	"github.com/throttlekit/throttlekit-server/internal/clustertest"
	"github.com/throttlekit/throttlekit-server/upstream/tier"
)

// testLeased: three servers over the real cluster lease fixed 1 s windows
// of limit 1000 for the 5 "hot:" keys (leased mode by prefix, batches
// sized by the learner of --upstream-batch auto) while 60 connections
// spread over them send checks to 50 keys (45 "cold:" keys run strict). For every key and window,
// counted from the decisions' reset times, the three servers together
// admit at most 1000. The servers share one injected clock, which the
// test moves from window to window, so no count depends on timing.
func testLeased(t *testing.T, cl *clustertest.Cluster) {
	const (
		servers, conns, windows, limit = 3, 60, 4, 1000
		perConnPerWindow               = 150
		hot, cold                      = 5, 45
	)
	clk := newUpClock()
	var backs []**tier.Backend
	var clients []*redis.Client
	for i := 0; i < servers; i++ {
		up, b := startUpstream(t, cl.URL(), clk, upOpts{
			prefixes: []tier.PrefixMode{{Prefix: "hot:", Mode: tier.ModeLeased}}, sizer: &throttlekit.AdaptiveSizer{}})
		backs = append(backs, b)
		for j := 0; j < conns/servers; j++ {
			c := redis.NewClient(&redis.Options{Addr: up.Addr, Protocol: 2, PoolSize: 1, MaxRetries: -1})
			t.Cleanup(func() { _ = c.Close() })
			clients = append(clients, c)
		}
	}
	type kw struct {
		key     string
		resetAt int64
	}
	admitted := map[kw]int64{}
	var mu sync.Mutex
	var hotAdmitted, hotWindows int64
	for w := 0; w < windows; w++ {
		var wg sync.WaitGroup
		for ci, c := range clients {
			wg.Add(1)
			go func(ci int, c *redis.Client) {
				defer wg.Done()
				r := rand.New(rand.NewSource(int64(w*1000 + ci)))
				local := map[kw]int64{}
				for n := 0; n < perConnPerWindow; n++ {
					var key string
					if r.Intn(10) < 9 {
						key = "hot:" + strconv.Itoa(r.Intn(hot))
					} else {
						key = "cold:" + strconv.Itoa(r.Intn(cold))
					}
					v, err := c.Do(context.Background(), "THROTTLE.CHECK", key, limit, "1s", "ALGO", "fixed").Slice()
					if err != nil {
						t.Errorf("check %s: %v", key, err)
						return
					}
					if v[0].(int64) == 1 {
						local[kw{key, v[3].(int64)}]++
					}
				}
				mu.Lock()
				for k, n := range local {
					admitted[k] += n
				}
				mu.Unlock()
			}(ci, c)
		}
		wg.Wait()
		clk.ns.Add(int64(time.Second))
	}
	resets := map[int64]bool{}
	for k, n := range admitted {
		if n > limit {
			t.Errorf("key %s window ending %d admitted %d > %d", k.key, k.resetAt, n, limit)
		}
		if k.key[:4] == "hot:" {
			hotAdmitted += n
			resets[k.resetAt] = true
		}
	}
	hotWindows = int64(len(resets)) * hot
	var rt, allowed, hits, leases int64
	for _, b := range backs {
		s := (*b).UpstreamStats()
		rt += s.RoundTrips
		allowed += s.Allowed
		hits += s.LeaseHits
		leases += s.Leases
	}
	util := float64(hotAdmitted) / float64(hotWindows*limit)
	// Only hot keys lease, and a lease is their only upstream call.
	perHot := float64(leases) / float64(hotAdmitted)
	t.Logf("leased hot keys: %d leases for %d admitted: %.4f upstream round trips per admitted request", leases, hotAdmitted, perHot)
	if perHot > 0.05 {
		t.Errorf("%.4f upstream round trips per admitted hot request, want <= 0.05", perHot)
	}
	t.Logf("leased: %d hot key-windows, utilisation %.3f; all keys: %d upstream round trips for %d admitted (%.4f per admitted), %d leases, %d checks from leased credits",
		hotWindows, util, rt, allowed, float64(rt)/float64(allowed), leases, hits)
	if hotWindows != windows*hot {
		t.Errorf("hot key-windows %d, want %d", hotWindows, windows*hot)
	}
	if util < 0.9 {
		t.Errorf("utilisation %.3f at saturation, want >= 0.9", util)
	}
}

// TestUpstreamLeaseIdleReturn: credits a server leased and did not use go
// back to their window (ReturnIdle), so another server can admit them.
func TestUpstreamLeaseIdleReturn(t *testing.T) {
	url := "redis://" + clustertest.Server(t)
	clk := newUpClock()
	up, b := startUpstream(t, url, clk, upOpts{mode: tier.ModeLeased, batch: 50})
	c := goredis(t, up.Addr, 2)
	if v := reply(c, "THROTTLE.CHECK", "k", "100", "1s", "ALGO", "fixed"); v.([]any)[0] != int64(1) {
		t.Fatalf("check: %#v", v)
	}
	// A strict server on the same upstream sees the lease taken.
	strict, _ := startUpstream(t, url, clk, upOpts{})
	sc := goredis(t, strict.Addr, 2)
	if v := reply(sc, "THROTTLE.PEEK", "k", "100", "1s", "ALGO", "fixed"); v.([]any)[2] != int64(50) {
		t.Fatalf("after a lease of 50: %#v", v)
	}
	if n := (*b).ReturnIdle(clk.now(), 0); n != 49 {
		t.Fatalf("ReturnIdle gave back %d credits, want 49", n)
	}
	if v := reply(sc, "THROTTLE.PEEK", "k", "100", "1s", "ALGO", "fixed"); v.([]any)[2] != int64(99) {
		t.Fatalf("after the return: %#v", v)
	}
	if s := (*b).UpstreamStats(); s.Returned != 49 || s.Leases != 1 || s.Leased != 50 {
		t.Fatalf("stats %+v", s)
	}
}

// TestUpstreamLeasedServerLost: a server that stops mid-window takes its
// unused credits with it (nothing returns them); the other keeps answering
// and the window still admits at most its limit.
func TestUpstreamLeasedServerLost(t *testing.T) {
	url := "redis://" + clustertest.Server(t)
	clk := newUpClock()
	a, _ := startUpstream(t, url, clk, upOpts{mode: tier.ModeLeased, batch: 40})
	b, _ := startUpstream(t, url, clk, upOpts{mode: tier.ModeLeased, batch: 40})
	ca, cb := goredis(t, a.Addr, 2), goredis(t, b.Addr, 2)
	admitted := int64(0)
	for i := 0; i < 10; i++ {
		admitted += reply(ca, "THROTTLE.CHECK", "lost", "100", "1s", "ALGO", "fixed").([]any)[0].(int64)
	}
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		admitted += reply(cb, "THROTTLE.CHECK", "lost", "100", "1s", "ALGO", "fixed").([]any)[0].(int64)
	}
	// a leased 40 and used 10: 30 credits are lost with it.
	if admitted != 70 {
		t.Fatalf("window admitted %d, want 100 - 30 stranded = 70", admitted)
	}
	clk.ns.Add(int64(time.Second))
	if v := reply(cb, "THROTTLE.CHECK", "lost", "100", "1s", "ALGO", "fixed").([]any); v[0] != int64(1) {
		t.Fatalf("next window: %v", v)
	}
}
