package rlqs

import (
	"math/rand"
	"sync"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

const simPolicy = `
domain: edge
descriptors:
  - key: route
    value: checkout
    rate_limit:
      unit: second
      requests_per_unit: 1000
`

// simEnvoy follows its assignments as Envoy's rate_limit_quota filter
// does: a token-bucket assignment is a bucket that starts full and
// refills continuously at tokens_per_fill per fill_interval; an assignment
// whose strategy equals the active one only extends it; a request with no
// active assignment is denied (no_assignment_behavior and
// expired_assignment_behavior configured as DENY_ALL); abandon erases the
// bucket.
type simEnvoy struct {
	ts     *testStream
	id     map[string]string
	rng    *rand.Rand
	domain string // sent on the first report only

	strategy *typev3.RateLimitStrategy
	expires  int64
	tokens   float64
	last     int64 // last refill, ns

	allowed, denied uint64 // since the last report
	lastDemand      uint64 // allowed + denied of the last report
	reported        int64  // the window of the last report
	assigned        map[int64]int64
	window          int64 // the window the active bucket was installed in
	stale           int64 // requests admitted in a later window than their bucket's
}

func (v *simEnvoy) apply(r *rlqsv3.RateLimitQuotaResponse, now int64) {
	for _, a := range r.GetBucketAction() {
		if a.GetAbandonAction() != nil {
			v.strategy = nil
			continue
		}
		q := a.GetQuotaAssignmentAction()
		s := q.GetRateLimitStrategy()
		active := v.strategy != nil && now < v.expires
		if !active || !proto.Equal(s, v.strategy) {
			v.strategy = s
			if tb := s.GetTokenBucket(); tb != nil {
				v.tokens, v.last = float64(tb.GetMaxTokens()), now
				v.window = (now - t0) / 1e9
				v.assigned[(now-t0)/1e9] += int64(tb.GetMaxTokens())
			}
		}
		v.expires = now + q.GetAssignmentTimeToLive().AsDuration().Nanoseconds()
	}
}

// admit decides one request at now.
func (v *simEnvoy) admit(now int64) bool {
	ok := false
	if v.strategy != nil && now < v.expires {
		switch s := v.strategy.GetStrategy().(type) {
		case *typev3.RateLimitStrategy_BlanketRule_:
			ok = s.BlanketRule == typev3.RateLimitStrategy_ALLOW_ALL
		case *typev3.RateLimitStrategy_TokenBucket:
			tb := s.TokenBucket
			fill := float64(tb.GetTokensPerFill().GetValue()) / float64(tb.GetFillInterval().AsDuration().Nanoseconds())
			v.tokens = min(float64(tb.GetMaxTokens()), v.tokens+float64(now-v.last)*fill)
			v.last = now
			if v.tokens >= 1 {
				v.tokens--
				ok = true
				if (now-t0)/1e9 != v.window {
					v.stale++
				}
			}
		}
	}
	if ok {
		v.allowed++
	} else {
		v.denied++
	}
	return ok
}

func (v *simEnvoy) report(now, elapsed int64) {
	u := usage(v.id, v.allowed, v.denied)
	u.TimeElapsed = durationpb.New(time.Duration(elapsed))
	v.lastDemand, v.reported = v.allowed+v.denied, (now-t0)/1e9
	v.allowed, v.denied = 0, 0
	r := v.ts.exchange(v.domain, u)
	v.domain = ""
	v.apply(r, now)
}

// TestEightEnvoysShareOneBucket is the proof of the package doc's bound:
// eight Envoys, four with bursty demand far above their share and four
// with a trickle below it, each following its assignments and reporting
// every 100 ms (at its own offset, never on a window's boundary), against
// one bucket of 1000 per second for six windows, the last two calm (the
// demand drops below the limit, so buckets still hold tokens when their
// window ends). No window admits more than 1000, no request is admitted
// with tokens of an earlier window, and one Envoy disconnecting mid-run
// leaves its share to the others in the next window. At each window's
// start the service pushes every Envoy whose last report carried requests
// a fresh assignment (its alarm fires on the injected clock), and each
// such Envoy admits its first request of the window before its first
// report in it.
func TestEightEnvoysShareOneBucket(t *testing.T) {
	const (
		envoys   = 8
		limit    = 1000
		tick     = 10 * int64(time.Millisecond)
		interval = 100 * int64(time.Millisecond)
		windows  = 6
		quitter  = envoys - 1
		quitAt   = 2*int64(time.Second) + 500*int64(time.Millisecond)
		calmFrom = 4 // from this window on, every Envoy trickles: tokens are left at the window's end
	)
	offset := func(i int) int64 { return (10 + int64(i)*30%90) * int64(time.Millisecond) }
	e := startEnv(t, simPolicy, nil)
	vs := make([]*simEnvoy, envoys)
	for i := range vs {
		vs[i] = &simEnvoy{ts: e.open(), id: map[string]string{"route": "checkout"}, rng: rand.New(rand.NewSource(int64(i + 1))),
			domain: "edge", assigned: map[int64]int64{}}
	}
	admitted := make([]int64, windows)
	offered := make([]int64, windows)
	pushed := make([]int, windows)      // Envoys pushed an assignment at the window's start
	earlyFirst := make([]int, windows)  // of them, those whose first request before their first report passed
	earlyDenied := make([]int, windows) // and those whose first one was denied
	pushWin := make([]int64, envoys)    // the window of each Envoy's last push
	firstDone := make([]bool, envoys)
	gone := false
	for now := t0; now < t0+windows*int64(time.Second); now += tick {
		e.clock.ns.Store(now)
		w := (now - t0) / int64(time.Second)
		if !gone && now-t0 >= quitAt {
			vs[quitter].ts.close()
			e.waitStreams(envoys - 1)
			gone = true
		}
		live := vs
		if gone {
			live = vs[:quitter]
		}
		e.alarms.fire(now)
		if (now-t0)%int64(time.Second) == 0 && w > 0 {
			// The window's start: every Envoy that reported requests in
			// the window just ended gets its push, before any report.
			for i, v := range live {
				if v.reported == w-1 && v.lastDemand > 0 {
					v.apply(v.ts.recv(), now)
					pushWin[i], firstDone[i] = w, false
					pushed[w]++
				}
			}
		}
		var wg sync.WaitGroup
		for i, v := range live {
			// Staggered reports, none on a window's boundary: a
			// request between a window's start and an Envoy's next
			// report is served by the pushed assignment.
			if (now-t0-offset(i))%interval == 0 {
				wg.Add(1)
				go func(v *simEnvoy) { defer wg.Done(); v.report(now, interval) }(v)
			}
		}
		wg.Wait()
		for i, v := range live {
			n := v.rng.Intn(3) // a trickle below the share (light Envoys)
			if i%2 == 1 && w < calmFrom && v.rng.Intn(10) < 3 {
				n += 20 + v.rng.Intn(21) // and bursts far above it (heavy ones)
			}
			for j := 0; j < n; j++ {
				offered[w]++
				ok := v.admit(now + int64(j))
				if ok {
					admitted[w]++
				}
				if w > 0 && pushWin[i] == w && !firstDone[i] && v.reported != w {
					firstDone[i] = true // its first request of the window, before its first report in it
					if ok {
						earlyFirst[w]++
					} else {
						earlyDenied[w]++
					}
				}
			}
		}
	}
	var total int64
	for w := range admitted {
		t.Logf("window %d: offered %d, admitted %d (utilisation %.1f%%); %d Envoys pushed at its start, first request before a report admitted for %d, denied for %d",
			w, offered[w], admitted[w], 100*float64(admitted[w])/limit, pushed[w], earlyFirst[w], earlyDenied[w])
		if w > 0 && (pushed[w] == 0 || earlyFirst[w] == 0 || earlyDenied[w] != 0) {
			t.Errorf("window %d: %d pushes, %d first requests admitted and %d denied before a report; want pushes, and every first request admitted",
				w, pushed[w], earlyFirst[w], earlyDenied[w])
		}
		if admitted[w] > limit {
			t.Errorf("window %d admitted %d, more than the limit %d", w, admitted[w], limit)
		}
		if w < calmFrom && offered[w] <= 2*limit {
			t.Fatalf("window %d offered only %d: the demand must exceed the limit", w, offered[w])
		}
		total += admitted[w]
	}
	for i, v := range vs {
		if v.stale != 0 {
			t.Errorf("envoy %d admitted %d requests with tokens of an earlier window", i, v.stale)
		}
	}
	if total < windows*limit/2 {
		t.Errorf("admitted %d over %d windows, less than half the budget", total, windows)
	}
	st := e.svc.Stats()
	t.Logf("stats: %+v", st)
	if st.Returned == 0 && st.Leased > 0 {
		t.Logf("the disconnected Envoy had no unused credits")
	}

	// The quitter's share flows to the others: in window 3, the first
	// without it, the seven together are assigned more than seven shares
	// of an eight-way split, which they could not get while it was there.
	survivors := func(w int64) (n int64) {
		for _, v := range vs[:quitter] {
			n += v.assigned[w]
		}
		return n
	}
	eighth := int64((limit + envoys - 1) / envoys)
	t.Logf("assigned to the seven survivors: window 1 %d, window 3 %d (seven eighths: %d)", survivors(1), survivors(3), (envoys-1)*eighth)
	if got := survivors(3); got <= (envoys-1)*eighth {
		t.Errorf("window 3: survivors assigned %d, want more than %d", got, (envoys-1)*eighth)
	}
	for w := int64(0); w < windows; w++ {
		var sum int64
		for _, v := range vs {
			sum += v.assigned[w]
		}
		if bound := int64(limit); sum > bound && !(w == quitAt/int64(time.Second) && sum <= bound+st.Returned) {
			t.Errorf("window %d: %d tokens assigned, more than the limit and the credits returned", w, sum)
		}
	}
}
