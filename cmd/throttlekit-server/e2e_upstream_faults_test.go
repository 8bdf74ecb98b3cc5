package main

// Fault tests of the upstream tier through the real binary (issue 19,
// "Faults"): a real 6-node Redis Cluster (internal/clustertest) and several
// throttlekit-server processes (internal/testserver). A server is killed
// with SIGKILL mid-window, the master of a hot key's slot is killed and its
// replica takes over, and the whole cluster is stopped and started again.
//
// The scripts run at the upstream's clock, so windows are real: 1 s
// windows, and windows of about an hour (longPeriod) where a count must stay
// in one window. Nothing is timed by a sleep: admitted units are counted per key and window
// from the replies (reset_at_ms names the window), the test moves from one
// step to the next when the replies show what it waits for, and deadlines
// only bound a broken run. Time from a kill to the first answer is measured
// and logged, never asserted.

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttlekit/throttlekit-server/internal/clustertest"
	"github.com/throttlekit/throttlekit-server/internal/testserver"
)

// TestUpstreamFaults runs the fault tests against one cluster, in order:
// the cluster is whole again after each.
func TestUpstreamFaults(t *testing.T) {
	cl := clustertest.StartWith(t, clustertest.Options{NodeTimeout: time.Second})
	t.Run("ServerKilled", func(t *testing.T) { testServerKilled(t, cl) })
	t.Run("MasterKilled", func(t *testing.T) { testMasterKilled(t, cl) })
	t.Run("ClusterStopped", func(t *testing.T) { testClusterStopped(t, cl) })
}

// faultDeadline bounds every wait of these tests: it ends a broken run and
// times nothing.
const faultDeadline = 60 * time.Second

// faultTimeout is the --upstream-timeout of the servers whose every call
// must succeed until the fault: long, so that a loaded machine does not
// fail them. It also bounds how long a call waits while the upstream is
// down (go-redis retries a refused node for about two seconds), so the
// tests that wait through outages keep the default, 1 s.
const faultTimeout = "5s"

// longPeriod returns a period of about an hour, in seconds, whose current
// window (windows are aligned on the epoch) has at least ten minutes left,
// so a test's keys of that period stay in one window.
func longPeriod() string {
	now := time.Now().Unix()
	p := int64(3600)
	for p-now%p < 600 {
		p++
	}
	return strconv.FormatInt(p, 10) + "s"
}

// faultClient is a go-redis client of one server that never retries.
func faultClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, PoolSize: 1, MaxRetries: -1,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// decision is a THROTTLE.CHECK or PEEK reply: allowed, limit, remaining,
// reset_at_ms, retry-after.
type decision struct{ allowed, limit, remaining, resetAt, retryAfter int64 }

// throttle runs a THROTTLE.* command and returns its decision.
func throttle(c *redis.Client, args ...any) (decision, error) {
	v, err := c.Do(context.Background(), args...).Slice()
	if err != nil {
		return decision{}, err
	}
	if len(v) != 5 {
		return decision{}, fmt.Errorf("reply %v", v)
	}
	var d [5]int64
	for i := range d {
		n, ok := v[i].(int64)
		if !ok {
			return decision{}, fmt.Errorf("reply %v", v)
		}
		d[i] = n
	}
	return decision{d[0], d[1], d[2], d[3], d[4]}, nil
}

// infoField returns one field of the server's INFO upstream.
func infoField(t *testing.T, c *redis.Client, field string) int64 {
	t.Helper()
	s, err := c.Info(context.Background(), "upstream").Result()
	if err != nil {
		t.Fatalf("INFO upstream: %v", err)
	}
	for _, line := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("INFO %s: %q", field, v)
			}
			return n
		}
	}
	t.Fatalf("INFO upstream has no %s:\n%s", field, s)
	return 0
}

// waitUntil polls cond until it holds; the deadline bounds a broken run.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(faultDeadline); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// keyWindow names one window of one key: reset_at_ms is the window's end.
type keyWindow struct {
	key     string
	resetAt int64
}

// tally counts admitted units per key and window from the replies of many
// connections, and the newest window any reply named.
type tally struct {
	mu       sync.Mutex
	admitted map[keyWindow]int64
	newest   atomic.Int64
}

func newTally() *tally { return &tally{admitted: map[keyWindow]int64{}} }

func (ta *tally) add(key string, d decision) {
	ta.mu.Lock()
	ta.admitted[keyWindow{key, d.resetAt}] += d.allowed
	ta.mu.Unlock()
	for {
		n := ta.newest.Load()
		if d.resetAt <= n || ta.newest.CompareAndSwap(n, d.resetAt) {
			return
		}
	}
}

func (ta *tally) get(key string, resetAt int64) int64 {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	return ta.admitted[keyWindow{key, resetAt}]
}

// overLimit reports every window of ta that admitted more than limit.
func (ta *tally) overLimit(t *testing.T, limit int64) {
	t.Helper()
	ta.mu.Lock()
	defer ta.mu.Unlock()
	for k, n := range ta.admitted {
		if n > limit {
			t.Errorf("key %s, window ending %d: %d admitted > limit %d", k.key, k.resetAt, n, limit)
		}
	}
}

// testServerKilled: three servers lease fixed 1 s windows of 1000 for five
// hot keys while 30 connections, ten per server, check them. One server is
// killed (SIGKILL) mid-window: the other two keep answering every command,
// and no window of any key admits more than 1000, counted from the
// replies. The credits the dead server held are stranded: on a key of a
// long window they are counted exactly (the survivors spend the rest of
// the window, then PEEK shows what is left upstream).
func testServerKilled(t *testing.T, cl *clustertest.Cluster) {
	const (
		limit, hot, perServer = 1000, 5, 10
		lostLimit, lostBatch  = 600, 50
		lostUsed              = 20
	)
	// No idle return during the test, so the dead server's credits are
	// exactly what it leased and did not spend.
	args := []string{"--upstream", cl.URL(), "--upstream-mode", "leased", "--upstream-batch", strconv.Itoa(lostBatch),
		"--upstream-idle-return", "1h", "--upstream-timeout", faultTimeout}
	var srv [3]*testserver.Server
	for i := range srv {
		srv[i] = testserver.Start(t, args...)
	}

	// The long window: the doomed server leases one batch and spends 20.
	period := longPeriod()
	lost := faultClient(t, srv[0].Addr)
	for i := 0; i < lostUsed; i++ {
		if d, err := throttle(lost, "THROTTLE.CHECK", "lost", lostLimit, period, "ALGO", "fixed"); err != nil || d.allowed != 1 {
			t.Fatalf("check %d of the long window: %+v, %v", i, d, err)
		}
	}

	ta := newTally()
	var dead, stop atomic.Bool
	var wg sync.WaitGroup
	var after [3]atomic.Int64 // replies each server gave after the kill
	for s := range srv {
		for j := 0; j < perServer; j++ {
			c := faultClient(t, srv[s].Addr)
			wg.Add(1)
			go func(s, j int) {
				defer wg.Done()
				r := rand.New(rand.NewSource(int64(s*100 + j)))
				for !stop.Load() {
					wasDead := dead.Load()
					key := "hot:" + strconv.Itoa(r.Intn(hot))
					d, err := throttle(c, "THROTTLE.CHECK", key, limit, "1s", "ALGO", "fixed")
					if err != nil {
						if s == 0 && dead.Load() {
							return // the killed server's connections break
						}
						t.Errorf("server %d: %s: %v", s, key, err)
						return
					}
					ta.add(key, d)
					if wasDead {
						after[s].Add(1)
					}
				}
			}(s, j)
		}
	}
	defer func() { stop.Store(true); wg.Wait() }()

	// Kill mid-window once the replies have crossed two window boundaries
	// and the hot keys' window has admitted a few hundred units.
	first := int64(0)
	waitUntil(t, "a first reply", func() bool { first = ta.newest.Load(); return first > 0 })
	waitUntil(t, "two windows of load", func() bool { return ta.newest.Load() >= first+2000 })
	killWindow := ta.newest.Load()
	waitUntil(t, "admissions in the kill window", func() bool {
		n := int64(0)
		for k := 0; k < hot; k++ {
			n += ta.get("hot:"+strconv.Itoa(k), killWindow)
		}
		return n >= 500 || ta.newest.Load() > killWindow
	})
	if ta.newest.Load() > killWindow { // the load is slower than a window: kill in the next one
		killWindow = ta.newest.Load()
	}
	dead.Store(true) // before the kill, so its connections' errors are expected
	srv[0].Stop()    // SIGKILL
	waitUntil(t, "a whole window after the kill", func() bool { return ta.newest.Load() >= killWindow+2000 })
	stop.Store(true)
	wg.Wait()

	ta.overLimit(t, limit)
	for s := 1; s < 3; s++ {
		if after[s].Load() == 0 {
			t.Errorf("server %d answered nothing after the kill", s)
		}
	}
	var unused, full []string
	for k := 0; k < hot; k++ {
		key := "hot:" + strconv.Itoa(k)
		unused = append(unused, strconv.FormatInt(limit-ta.get(key, killWindow), 10))
		n := ta.get(key, killWindow+1000)
		if n == 0 {
			t.Errorf("%s: nothing admitted in the window after the kill", key)
		}
		full = append(full, strconv.FormatInt(n, 10))
	}
	t.Logf("server killed mid-window: units of the kill window not admitted per hot key (stranded with the dead server, or unspent at the end): %s; admitted by the two survivors in the next window: %s (limit %d)",
		strings.Join(unused, ", "), strings.Join(full, ", "), limit)

	// The survivors spend what is left of the long window until each is
	// refused; whatever the window still holds upstream is counted by a
	// PEEK. The rest was held by the dead server.
	used := int64(lostUsed)
	for s := 1; s < 3; s++ {
		c := faultClient(t, srv[s].Addr)
		for n := 0; ; n++ {
			d, err := throttle(c, "THROTTLE.CHECK", "lost", lostLimit, period, "ALGO", "fixed")
			if err != nil {
				t.Fatalf("server %d, long window: %v", s, err)
			}
			if d.allowed == 0 {
				break
			}
			if n > lostLimit {
				t.Fatalf("server %d admitted more than the long window's limit", s)
			}
			used += d.allowed
		}
	}
	p, err := throttle(faultClient(t, srv[1].Addr), "THROTTLE.PEEK", "lost", lostLimit, period, "ALGO", "fixed")
	if err != nil {
		t.Fatal(err)
	}
	stranded := lostLimit - used - p.remaining
	t.Logf("long window of %d: %d admitted, %d left upstream, %d stranded with the killed server (it leased %d and spent %d); survivors' INFO upstream_stranded_credits %d, %d",
		lostLimit, used, p.remaining, stranded, lostBatch, lostUsed,
		infoField(t, faultClient(t, srv[1].Addr), "upstream_stranded_credits"),
		infoField(t, faultClient(t, srv[2].Addr), "upstream_stranded_credits"))
	if stranded != lostBatch-lostUsed {
		t.Errorf("%d credits stranded with the killed server, want %d (a batch of %d less the %d it spent)",
			stranded, lostBatch-lostUsed, lostBatch, lostUsed)
	}
}

// failoverClient is what one connection of testMasterKilled saw.
type failoverClient struct {
	errs int // errors since the kill; the first one starts this connection's outage
	// before counts, per window, the units admitted before this
	// connection's first error after the kill: every admission the killed
	// master acknowledged is among them (a connection sends its next
	// command only after a reply, and once the master is dead its commands
	// fail until the new master answers).
	before map[int64]int64
}

// testMasterKilled: the master serving a hot key's slot is killed
// (SIGKILL) while two strict servers and two leased servers check keys of
// that slot, fixed windows of 2000. The replica is promoted after the node
// timeout and service resumes without restarting anything; the time from
// the kill to the first admitted answer is logged.
//
// Replication is asynchronous: writes the old master acknowledged and had
// not yet sent to its replica are lost, and the window goes on from the
// replica's count. To make that loss happen rather than hope for it, the
// test lets each key admit 300, cuts the replica's link to its master (a
// wrong masterauth keeps it from reconnecting, then CLIENT KILL TYPE
// master), lets the old master acknowledge about 100 more admissions of
// each key and kills it; the connections wait between these steps. The
// window is long (longPeriod): a window shorter than the failover ends
// before the new master answers, and cannot show it. After the failover the connections spend the window until each is
// refused. The bound the package doc states (upstream/tier, "Failures")
// is asserted: over the limit by at most the admissions the old master
// acknowledged in that window (strict), or the credits it granted in it
// (leased, from the servers' INFO upstream_leased_credits at the kill).
func testMasterKilled(t *testing.T, cl *clustertest.Cluster) {
	const (
		limit, perServer, batch = 2000, 4, 50
		strictKey, leasedKey    = "{fo}strict", "{fo}leased"
		beforeCut, afterCut     = 300, 100
	)
	period := longPeriod()
	common := []string{"--upstream", cl.URL()}
	type group struct {
		key      string
		srv      []*testserver.Server
		clients  []*failoverClient
		ta       *tally
		admitted atomic.Int64
		gate     atomic.Int64 // connections wait while admitted >= gate
	}
	groups := []*group{{key: strictKey, ta: newTally()}, {key: leasedKey, ta: newTally()}}
	for _, g := range groups {
		g.gate.Store(beforeCut)
	}
	for i := 0; i < 2; i++ {
		groups[0].srv = append(groups[0].srv, testserver.Start(t, common...))
		groups[1].srv = append(groups[1].srv, testserver.Start(t, append([]string{"--upstream-mode", "leased",
			"--upstream-batch", strconv.Itoa(batch)}, common...)...))
	}
	var killed atomic.Bool // set once the master is dead
	var recovered atomic.Int64
	var stop atomic.Bool
	var finished, early atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	conns := 0
	for _, g := range groups {
		for _, s := range g.srv {
			for j := 0; j < perServer; j++ {
				fc := &failoverClient{before: map[int64]int64{}}
				g.clients = append(g.clients, fc)
				c := faultClient(t, s.Addr)
				conns++
				wg.Add(1)
				go func(g *group) {
					defer wg.Done()
					defer finished.Add(1)
					for !stop.Load() {
						if g.admitted.Load() >= g.gate.Load() {
							time.Sleep(time.Millisecond) // until the next step opens the gate
							continue
						}
						d, err := throttle(c, "THROTTLE.CHECK", g.key, limit, period, "ALGO", "fixed")
						if err != nil {
							if !strings.Contains(err.Error(), "TRYAGAIN upstream unavailable") {
								t.Errorf("%s: %v", g.key, err)
								return
							}
							// An error before the kill is (signs of) an overloaded
							// machine; it does not start this connection's
							// outage, so the admissions after it still count as
							// the old master's: the bound only grows.
							if killed.Load() {
								mu.Lock()
								fc.errs++
								mu.Unlock()
							} else {
								early.Add(1)
							}
							time.Sleep(time.Millisecond) // the server fails fast: no busy loop meanwhile
							continue
						}
						mu.Lock()
						if fc.errs == 0 {
							fc.before[d.resetAt] += d.allowed
						} else if g.key == strictKey && d.allowed == 1 {
							recovered.CompareAndSwap(0, time.Now().UnixNano())
						}
						mu.Unlock()
						g.ta.add(g.key, d)
						g.admitted.Add(d.allowed)
						if d.allowed == 0 && killed.Load() {
							return // the window is spent, on the new master
						}
					}
				}(g)
			}
		}
	}
	defer func() { stop.Store(true); wg.Wait() }()

	waitUntil(t, "admissions before the cut", func() bool {
		return groups[0].admitted.Load() >= beforeCut && groups[1].admitted.Load() >= beforeCut
	})
	master := cl.MasterOf(t, strictKey)
	replicas := cl.ReplicasOf(t, master)
	if len(replicas) == 0 {
		t.Fatalf("master %s has no replica", cl.Seeds[master])
	}
	for _, r := range replicas {
		if _, err := cl.Do(r, "CONFIG", "SET", "masterauth", "not-the-password"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = cl.Do(r, "CONFIG", "SET", "masterauth", "") })
		if _, err := cl.Do(r, "CLIENT", "KILL", "TYPE", "master"); err != nil {
			t.Fatal(err)
		}
	}
	var cut [2]int64
	for i, g := range groups {
		cut[i] = g.admitted.Load()
		g.gate.Store(cut[i] + afterCut)
	}
	for deadline := time.Now().Add(faultDeadline); groups[0].admitted.Load() < cut[0]+afterCut ||
		groups[1].admitted.Load() < cut[1]+afterCut; {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for admissions after the cut: strict %d, leased %d, at the cut %v; %d -TRYAGAIN before the kill",
				groups[0].admitted.Load(), groups[1].admitted.Load(), cut, early.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	killTime := time.Now()
	cl.Kill(t, master)
	killed.Store(true)
	for _, g := range groups {
		g.gate.Store(math.MaxInt64)
	}
	var sinceCut [2]int64
	for i, g := range groups {
		sinceCut[i] = g.admitted.Load() - cut[i]
	}
	// Every credit the leased servers hold or spent was granted by the old
	// master: the new one needs the node timeout to be promoted.
	granted := int64(0)
	for _, s := range groups[1].srv {
		granted += infoField(t, faultClient(t, s.Addr), "upstream_leased_credits")
	}
	// The cluster's view, polled meanwhile: when a live node first names
	// another master for the slot.
	var promoted time.Time
	waitUntil(t, "the failover and an admitted answer after it", func() bool {
		if promoted.IsZero() {
			if i, err := cl.Owner(strictKey); err == nil && i != master {
				promoted = time.Now()
			}
		}
		return recovered.Load() != 0 && !promoted.IsZero()
	})
	took := time.Duration(recovered.Load() - killTime.UnixNano())
	waitUntil(t, "every connection refused by the spent window", func() bool { return finished.Load() == int64(conns) })
	newMaster := cl.MasterOf(t, strictKey)

	errs := 0
	for _, fc := range groups[0].clients {
		errs += fc.errs
	}
	t.Logf("master %s of the slot killed: replica %s seen promoted in a live node's CLUSTER NODES (polled) %v after the kill, first admitted answer through a strict server %v after the kill (node timeout 1s); %d -TRYAGAIN replies to the strict servers' clients meanwhile",
		cl.Seeds[master], cl.Seeds[newMaster], promoted.Sub(killTime).Round(time.Millisecond), took.Round(time.Millisecond), errs)
	if n := early.Load(); n > 0 {
		t.Logf("%d -TRYAGAIN replies before the kill (the upstream timed out on a loaded machine)", n)
	}
	if newMaster == master {
		t.Errorf("the killed node %s still serves the slot", cl.Seeds[master])
	}
	for gi, g := range groups {
		g.ta.mu.Lock()
		for kw, n := range g.ta.admitted {
			bound, what := int64(0), "admissions acknowledged by the old master"
			for _, fc := range g.clients {
				bound += fc.before[kw.resetAt]
			}
			if g.key == leasedKey {
				bound, what = granted, "credits granted by the old master"
			}
			t.Logf("%s, window ending %d, limit %d: %d admitted, over by %d; %d admitted after the replica's link was cut and before the kill; bound: %d %s",
				g.key, kw.resetAt, limit, n, max(n-limit, 0), sinceCut[gi], bound, what)
			if n-limit > bound {
				t.Errorf("%s, window ending %d: %d admitted, over the limit %d by %d > the bound: %d %s",
					g.key, kw.resetAt, n, limit, n-limit, bound, what)
			}
		}
		g.ta.mu.Unlock()
	}
	cl.Restart(t, master) // whole again for the next test: it rejoins as a replica
}

// testClusterStopped: every node of the cluster stops. A server with
// --upstream-fail closed answers -TRYAGAIN upstream unavailable; one with
// open answers from its local state, which enforces the limit meanwhile,
// and counts those answers in INFO upstream; a leased server keeps
// spending the credits it holds until they run out (its window outlasts
// the test), then answers -TRYAGAIN. When the cluster starts again on the
// same ports, the three servers, never restarted, serve from it again.
func testClusterStopped(t *testing.T, cl *clustertest.Cluster) {
	const batch = 50
	common := []string{"--upstream", cl.URL()}
	closed := faultClient(t, testserver.Start(t, common...).Addr)
	open := faultClient(t, testserver.Start(t, append([]string{"--upstream-fail", "open"}, common...)...).Addr)
	leased := faultClient(t, testserver.Start(t, append([]string{"--upstream-mode", "leased", "--upstream-batch",
		strconv.Itoa(batch), "--upstream-idle-return", "1h"}, common...)...).Addr)
	period := longPeriod()
	check := func(c *redis.Client, key string, limit int) (decision, error) {
		return throttle(c, "THROTTLE.CHECK", key, limit, period, "ALGO", "fixed")
	}
	for key, c := range map[string]*redis.Client{"closed": closed, "open": open, "leased": leased} {
		var d decision
		waitUntil(t, key+" serving", func() bool { // a loaded machine may time a first call out
			var err error
			d, err = check(c, key, 600)
			return err == nil
		})
		if d.allowed != 1 {
			t.Fatalf("%s, before the stop: %+v", key, d)
		}
	}
	failOpen := infoField(t, open, "upstream_fail_open_answers") // a first call timed out counts here

	cl.Stop(t)
	const unavailable = "TRYAGAIN upstream unavailable"
	if _, err := check(closed, "closed", 600); err == nil || err.Error() != unavailable {
		t.Errorf("closed, cluster stopped: %v, want %s", err, unavailable)
	}
	// Open: the local state answers, 3 admitted of 3, then a denial.
	for i := 0; i < 4; i++ {
		d, err := check(open, "down", 3)
		if err != nil || d.allowed != map[bool]int64{true: 1, false: 0}[i < 3] {
			t.Errorf("open, cluster stopped, check %d: %+v, %v", i, d, err)
		}
	}
	if n := infoField(t, open, "upstream_fail_open_answers") - failOpen; n != 4 {
		t.Errorf("INFO upstream_fail_open_answers grew by %d with 4 answers from local state", n)
	}
	// Leased: the first check took a batch and spent one; the rest serve.
	for i := 1; i < batch; i++ {
		if d, err := check(leased, "leased", 600); err != nil || d.allowed != 1 {
			t.Fatalf("leased, cluster stopped, credit %d of %d: %+v, %v", i+1, batch, d, err)
		}
	}
	if _, err := check(leased, "leased", 600); err == nil || err.Error() != unavailable {
		t.Errorf("leased, credits spent, cluster stopped: %v, want %s", err, unavailable)
	}

	start := time.Now()
	cl.Restart(t)
	restarted := time.Now()
	// Service returns on the servers' next calls; go-redis redials. The
	// nodes kept no data, so the window starts afresh: the closed
	// server's key has 599 left after this check, not 598.
	var d decision
	waitUntil(t, "closed serving again", func() bool {
		var err error
		d, err = check(closed, "closed", 600)
		return err == nil
	})
	if d.allowed != 1 || d.remaining != 599 {
		t.Errorf("closed, first answer after the restart: %+v, want admitted with 599 left (a window started afresh)", d)
	}
	waitUntil(t, "leased serving again", func() bool {
		d, err := check(leased, "leased", 600)
		return err == nil && d.allowed == 1
	})
	waitUntil(t, "open serving from the cluster again", func() bool {
		before := infoField(t, open, "upstream_fail_open_answers")
		d, err := check(open, "again", 600)
		return err == nil && d.allowed == 1 && infoField(t, open, "upstream_fail_open_answers") == before
	})
	t.Logf("cluster stopped and started again (the restart took %v until cluster_state:ok on every node): the three servers served from it %v after that",
		restarted.Sub(start).Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))
}
