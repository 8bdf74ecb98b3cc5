package server_test

// End-to-end tests with go-redis v9 over real TCP, in RESP2 and RESP3 mode:
// every command of the server's contract, with values derived by hand from
// each algorithm at a known limit. The server's clock is the only clock, so
// a time field is checked against the window [before, after] of wall-clock
// readings taken around the call.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttlekit-server/server"
)

const (
	hourMs = int64(3_600_000)
	dayMs  = 24 * hourMs
	// slackMs absorbs ms rounding of reset_at/retry_after (the server keeps
	// finer time than the wire shows).
	slackMs = 2
)

const wrongTypeMsg = "WRONGTYPE Operation against a key holding the wrong kind of value"

// processer is what *redis.Client and *redis.Conn have in common.
type processer interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

func newClient(t testing.TB, addr string, proto int, mutate func(*redis.Options)) *redis.Client {
	t.Helper()
	opt := &redis.Options{
		Addr:         addr,
		Protocol:     proto,
		DialTimeout:  5 * time.Second,
		ReadTimeout:  20 * time.Second,
		WriteTimeout: 20 * time.Second,
		MaxRetries:   -1, // a retry would hide a dropped connection
		PoolSize:     4,
	}
	if mutate != nil {
		mutate(opt)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// do runs one command and returns go-redis's decoded reply.
func do(ctx context.Context, p processer, args ...any) (any, error) {
	cmd := redis.NewCmd(ctx, args...)
	_ = p.Process(ctx, cmd)
	return cmd.Result()
}

// mustDo runs a command that must succeed.
func mustDo(t testing.TB, ctx context.Context, p processer, args ...any) any {
	t.Helper()
	v, err := do(ctx, p, args...)
	if err != nil {
		t.Fatalf("%v: unexpected error %v", args, err)
	}
	return v
}

// wantErr runs a command that must fail with a server error reply whose
// text starts with prefix (and contains each of contains).
func wantErr(t testing.TB, ctx context.Context, p processer, prefix string, args ...any) string {
	t.Helper()
	v, err := do(ctx, p, args...)
	if err == nil {
		t.Errorf("%v: got reply %#v, want error %q", args, v, prefix)
		return ""
	}
	var re redis.Error
	if !errors.As(err, &re) {
		t.Errorf("%v: got non-server error %v (connection broken?), want %q", args, err, prefix)
		return ""
	}
	if !strings.HasPrefix(err.Error(), prefix) {
		t.Errorf("%v: error %q, want prefix %q", args, err.Error(), prefix)
	}
	return err.Error()
}

// check runs a THROTTLE.* command returning a decision and the wall-clock
// window around it.
func check(t testing.TB, ctx context.Context, p processer, proto int, args ...any) (d decision, before, after int64) {
	t.Helper()
	before = nowMs()
	v, err := do(ctx, p, args...)
	after = nowMs()
	if err != nil {
		t.Fatalf("%v: unexpected error %v", args, err)
	}
	d, err = toDecision(v, proto, "allowed", "granted")
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return d, before, after
}

func wantInt(t testing.TB, what string, v any, want int64) {
	t.Helper()
	n, ok := v.(int64)
	if !ok || n != want {
		t.Errorf("%s = %#v, want integer %d", what, v, want)
	}
}

func wantStr(t testing.TB, what string, v any, want string) {
	t.Helper()
	s, ok := v.(string)
	if !ok || s != want {
		t.Errorf("%s = %#v, want %q", what, v, want)
	}
}

func dbsize(t testing.TB, ctx context.Context, c *redis.Client) int64 {
	t.Helper()
	n, err := c.DBSize(ctx).Result()
	if err != nil {
		t.Fatalf("DBSIZE: %v", err)
	}
	return n
}

// TestE2EGoRedis runs every command through go-redis in both protocols.
func TestE2EGoRedis(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			ts := startServer(t, nil)
			ctx := context.Background()
			c := newClient(t, ts.Addr, proto, nil)

			if n := dbsize(t, ctx, c); n != 0 {
				t.Fatalf("DBSIZE on a fresh server = %d, want 0", n)
			}
			t.Run("ProtocolNegotiated", func(t *testing.T) { testNegotiated(t, ctx, c, proto) })
			t.Run("CheckAlgos", func(t *testing.T) { testCheckAlgos(t, ctx, c, proto) })
			t.Run("CheckBurst", func(t *testing.T) { testCheckBurst(t, ctx, c, proto) })
			t.Run("CheckCost", func(t *testing.T) { testCheckCost(t, ctx, c, proto) })
			t.Run("PeriodUnits", func(t *testing.T) { testPeriodUnits(t, ctx, c, proto) })
			t.Run("Peek", func(t *testing.T) { testPeek(t, ctx, c, proto) })
			t.Run("Reset", func(t *testing.T) { testReset(t, ctx, c, proto) })
			t.Run("LeaseReturn", func(t *testing.T) { testLease(t, ctx, c, proto) })
			t.Run("WrongType", func(t *testing.T) { testWrongType(t, ctx, c, proto) })
			t.Run("CLThrottle", func(t *testing.T) { testCLThrottle(t, ctx, c) })
			t.Run("Hello", func(t *testing.T) { testHello(t, ctx, c, proto) })
			t.Run("Select", func(t *testing.T) { testSelect(t, ctx, c) })
			t.Run("Client", func(t *testing.T) { testClient(t, ctx, c) })
			t.Run("Command", func(t *testing.T) { testCommand(t, ctx, c, proto) })
			t.Run("Info", func(t *testing.T) { testInfo(t, ctx, c) })
			t.Run("TimePingEcho", func(t *testing.T) { testTimePingEcho(t, ctx, c) })
			t.Run("ResetCommand", func(t *testing.T) { testResetCommand(t, ctx, c, proto) })
			t.Run("Quit", func(t *testing.T) { testQuit(t, ts.Addr) })
			t.Run("UnknownCommand", func(t *testing.T) { testUnknown(t, ctx, c) })
			t.Run("BadArguments", func(t *testing.T) { testBadArgs(t, ctx, c) })
			t.Run("Auth", func(t *testing.T) { testAuth(t, ctx, proto) })
		})
	}
}

// testNegotiated proves go-redis's HELLO took effect: a decision comes back
// as a map in RESP3 and as an array in RESP2.
func testNegotiated(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
	v := mustDo(t, ctx, c, "THROTTLE.CHECK", "neg", 10, "1h")
	switch proto {
	case 2:
		if _, ok := v.([]any); !ok {
			t.Fatalf("RESP2 THROTTLE.CHECK reply is %T (%#v), want array", v, v)
		}
	case 3:
		if _, ok := v.(map[any]any); !ok {
			t.Fatalf("RESP3 THROTTLE.CHECK reply is %T (%#v), want map (did HELLO 3 fail?)", v, v)
		}
	}
}

// testCheckAlgos: limit 5 per hour, five admits then a denial, per algorithm.
//
// GCRA and token bucket (burst = limit = 5, one unit every T = 720,000 ms):
// the k-th admit at t0 leaves remaining 5-k and full replenishment at
// t0 + k*T; the sixth is denied with retry_after = t0 + T - now.
// Fixed and sliding window: remaining 5-k; the denial's retry_after runs to
// the time the window frees a unit.
func testCheckAlgos(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
	const limit, T = 5, hourMs / 5
	for _, algo := range []string{"", "gcra", "token", "fixed", "sliding"} {
		name := algo
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			key := "algo:" + name
			args := []any{"THROTTLE.CHECK", key, limit, "1h"}
			if algo != "" {
				args = append(args, "ALGO", algo)
			}
			var b1, a1, firstReset int64
			for k := int64(1); k <= limit; k++ {
				d, b, a := check(t, ctx, c, proto, args...)
				if k == 1 {
					b1, a1, firstReset = b, a, d.ResetAt
				}
				if d.Allowed != 1 || d.Limit != limit || d.Remaining != limit-k || d.RetryAfter != 0 {
					t.Fatalf("check %d: %+v, want allowed 1, limit %d, remaining %d, retry_after 0", k, d, limit, limit-k)
				}
				switch algo {
				case "", "gcra", "token":
					between(t, fmt.Sprintf("check %d reset_at", k), d.ResetAt, b1+k*T-slackMs, a1+k*T+slackMs)
				case "fixed":
					if d.ResetAt != firstReset {
						t.Errorf("check %d reset_at = %d, want the window end %d of the first check", k, d.ResetAt, firstReset)
					}
					between(t, "fixed reset_at", d.ResetAt, a+1-slackMs, a1+hourMs+slackMs)
				case "sliding":
					between(t, "sliding reset_at", d.ResetAt, a+1-slackMs, a1+2*hourMs+slackMs)
				}
			}
			d, b6, a6 := check(t, ctx, c, proto, args...)
			if d.Allowed != 0 || d.Limit != limit || d.Remaining != 0 {
				t.Fatalf("sixth check: %+v, want allowed 0, limit %d, remaining 0", d, limit)
			}
			switch algo {
			case "", "gcra", "token":
				between(t, "denied reset_at", d.ResetAt, b1+limit*T-slackMs, a1+limit*T+slackMs)
				between(t, "denied retry_after", d.RetryAfter, b1+T-a6-slackMs, a1+T-b6+slackMs)
			case "fixed":
				if d.ResetAt != firstReset {
					t.Errorf("denied reset_at = %d, want %d", d.ResetAt, firstReset)
				}
				between(t, "denied retry_after", d.RetryAfter, d.ResetAt-a6-slackMs, d.ResetAt-b6+slackMs)
			case "sliding":
				between(t, "denied retry_after", d.RetryAfter, 1, 2*hourMs)
				between(t, "denied reset_at", d.ResetAt, a6+1-slackMs, a1+2*hourMs+slackMs)
			}
		})
	}
}

// testCheckBurst: BURST sets the bucket size (reported as limit) for GCRA
// and token bucket; the rate stays limit/period.
func testCheckBurst(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
	for _, algo := range []string{"gcra", "token"} {
		t.Run(algo+"/burst>limit", func(t *testing.T) {
			// 1 per hour, burst 3: three admits at once, one more per hour.
			args := []any{"THROTTLE.CHECK", "burst3:" + algo, 1, "1h", "ALGO", algo, "BURST", 3}
			var b1, a1 int64
			for k := int64(1); k <= 3; k++ {
				d, b, a := check(t, ctx, c, proto, args...)
				if k == 1 {
					b1, a1 = b, a
				}
				if d.Allowed != 1 || d.Limit != 3 || d.Remaining != 3-k || d.RetryAfter != 0 {
					t.Fatalf("check %d: %+v, want [1 3 %d _ 0]", k, d, 3-k)
				}
				between(t, "reset_at", d.ResetAt, b1+k*hourMs-slackMs, a1+k*hourMs+slackMs)
			}
			d, b, a := check(t, ctx, c, proto, args...)
			if d.Allowed != 0 || d.Limit != 3 || d.Remaining != 0 {
				t.Fatalf("fourth check: %+v, want [0 3 0 _ _]", d)
			}
			between(t, "retry_after", d.RetryAfter, b1+hourMs-a-slackMs, a1+hourMs-b+slackMs)
		})
		t.Run(algo+"/burst<limit", func(t *testing.T) {
			// 10 per hour (T = 360,000 ms), burst 2: two admits, then wait T.
			const T = hourMs / 10
			args := []any{"THROTTLE.CHECK", "burst2:" + algo, 10, "1h", "ALGO", algo, "BURST", 2}
			d1, b1, a1 := check(t, ctx, c, proto, args...)
			d2, _, _ := check(t, ctx, c, proto, args...)
			d3, b3, a3 := check(t, ctx, c, proto, args...)
			if d1.Allowed != 1 || d1.Limit != 2 || d1.Remaining != 1 {
				t.Errorf("check 1: %+v, want [1 2 1 _ 0]", d1)
			}
			if d2.Allowed != 1 || d2.Limit != 2 || d2.Remaining != 0 {
				t.Errorf("check 2: %+v, want [1 2 0 _ 0]", d2)
			}
			between(t, "check 2 reset_at", d2.ResetAt, b1+2*T-slackMs, a1+2*T+slackMs)
			if d3.Allowed != 0 || d3.Limit != 2 || d3.Remaining != 0 {
				t.Errorf("check 3: %+v, want [0 2 0 _ _]", d3)
			}
			between(t, "check 3 retry_after", d3.RetryAfter, b1+T-a3-slackMs, a1+T-b3+slackMs)
		})
	}
}

// testCheckCost: COST n takes n units; a cost above the bucket can never
// succeed (retry_after -1); cost 0 consumes nothing.
func testCheckCost(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
	const T = hourMs / 10
	for _, algo := range []string{"gcra", "token", "fixed", "sliding"} {
		t.Run(algo, func(t *testing.T) {
			key := "cost:" + algo
			ck := func(cost int64) (decision, int64, int64) {
				return check(t, ctx, c, proto, "THROTTLE.CHECK", key, 10, "1h", "ALGO", algo, "COST", cost)
			}
			d, b1, a1 := ck(3)
			if d.Allowed != 1 || d.Limit != 10 || d.Remaining != 7 || d.RetryAfter != 0 {
				t.Fatalf("COST 3: %+v, want [1 10 7 _ 0]", d)
			}
			exactTime := algo == "gcra" || algo == "token"
			if exactTime {
				between(t, "COST 3 reset_at", d.ResetAt, b1+3*T-slackMs, a1+3*T+slackMs)
			}
			d, b, a := ck(8)
			if d.Allowed != 0 || d.Limit != 10 || d.Remaining != 7 {
				t.Fatalf("COST 8 with 7 left: %+v, want [0 10 7 _ >0]", d)
			}
			if exactTime {
				between(t, "COST 8 retry_after", d.RetryAfter, b1+T-a-slackMs, a1+T-b+slackMs)
			} else if d.RetryAfter <= 0 {
				t.Errorf("COST 8 retry_after = %d, want > 0", d.RetryAfter)
			}
			d, _, _ = ck(0)
			if d.Limit != 10 || d.Remaining != 7 || d.RetryAfter != 0 || d.Allowed != 1 {
				t.Errorf("COST 0: %+v, want [1 10 7 _ 0] (consumes nothing)", d)
			}
			d, _, _ = ck(7)
			if d.Allowed != 1 || d.Remaining != 0 || d.RetryAfter != 0 {
				t.Errorf("COST 7 with 7 left: %+v, want [1 10 0 _ 0]", d)
			}
			if exactTime {
				between(t, "COST 7 reset_at", d.ResetAt, b1+10*T-slackMs, a1+10*T+slackMs)
			}
			// A cost above the limit can never succeed: retry_after -1, on a
			// fresh key too, and nothing is consumed.
			fresh := "costbig:" + algo
			d, _, _ = check(t, ctx, c, proto, "THROTTLE.CHECK", fresh, 10, "1h", "ALGO", algo, "COST", 11)
			if d.Allowed != 0 || d.Limit != 10 || d.Remaining != 10 || d.RetryAfter != -1 {
				t.Errorf("COST 11 > limit 10 on a fresh key: %+v, want [0 10 10 _ -1]", d)
			}
			d, _, _ = check(t, ctx, c, proto, "THROTTLE.CHECK", fresh, 10, "1h", "ALGO", algo, "COST", 10)
			if d.Allowed != 1 || d.Remaining != 0 {
				t.Errorf("COST 10 = limit after the refused COST 11: %+v, want [1 10 0 _ 0]", d)
			}
		})
	}
}

// testPeriodUnits: the same 1-per-period GCRA limit with each unit; the
// admit's reset_at and the following denial's retry_after are one period.
func testPeriodUnits(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
	for _, tc := range []struct {
		period string
		ms     int64
	}{
		{"1500", 1500}, {"1500ms", 1500}, {"2s", 2000}, {"3m", 180_000}, {"1h", hourMs}, {"1d", dayMs}, {"7d", 7 * dayMs},
	} {
		t.Run(tc.period, func(t *testing.T) {
			key := "unit:" + tc.period
			d1, b1, a1 := check(t, ctx, c, proto, "THROTTLE.CHECK", key, 1, tc.period)
			if d1.Allowed != 1 || d1.Limit != 1 || d1.Remaining != 0 || d1.RetryAfter != 0 {
				t.Fatalf("first check: %+v, want [1 1 0 _ 0]", d1)
			}
			between(t, "reset_at", d1.ResetAt, b1+tc.ms-slackMs, a1+tc.ms+slackMs)
			d2, b2, a2 := check(t, ctx, c, proto, "THROTTLE.CHECK", key, 1, tc.period)
			if d2.Allowed != 0 || d2.Remaining != 0 {
				t.Fatalf("second check: %+v, want [0 1 0 _ ~period]", d2)
			}
			between(t, "retry_after", d2.RetryAfter, b1+tc.ms-a2-slackMs, a1+tc.ms-b2+slackMs)
		})
	}
	// Limit 4 per "2s": one unit every 500 ms.
	d, b, a := check(t, ctx, c, proto, "THROTTLE.CHECK", "unit:rate", 4, "2s")
	if d.Allowed != 1 || d.Limit != 4 || d.Remaining != 3 {
		t.Errorf("4 per 2s: %+v, want [1 4 3 _ 0]", d)
	}
	between(t, "4 per 2s reset_at", d.ResetAt, b+500-slackMs, a+500+slackMs)
}

// testPeek: PEEK reports without consuming and never creates a key.
func testPeek(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
	n0 := dbsize(t, ctx, c)
	for _, algo := range []string{"gcra", "token", "fixed", "sliding"} {
		key := "peek:" + algo
		for i := 0; i < 3; i++ {
			d, b, a := check(t, ctx, c, proto, "THROTTLE.PEEK", key, 10, "1m", "ALGO", algo)
			if d.Allowed != 1 || d.Limit != 10 || d.Remaining != 10 || d.RetryAfter != 0 {
				t.Errorf("%s: PEEK of a fresh key: %+v, want [1 10 10 now 0]", algo, d)
			}
			if algo == "gcra" || algo == "token" {
				between(t, algo+" fresh PEEK reset_at", d.ResetAt, b-slackMs, a+slackMs) // full now
			} else {
				// A window algorithm may name now or the end of the window.
				between(t, algo+" fresh PEEK reset_at", d.ResetAt, b-slackMs, a+2*60_000+slackMs)
			}
		}
	}
	if n := dbsize(t, ctx, c); n != n0 {
		t.Fatalf("DBSIZE after PEEKs of fresh keys = %d, want %d (PEEK must create no key)", n, n0)
	}
	for _, algo := range []string{"gcra", "token", "fixed", "sliding"} {
		key := "peek:" + algo
		check(t, ctx, c, proto, "THROTTLE.CHECK", key, 10, "1m", "ALGO", algo)
		d2, _, _ := check(t, ctx, c, proto, "THROTTLE.CHECK", key, 10, "1m", "ALGO", algo)
		for i := 0; i < 3; i++ {
			p, _, _ := check(t, ctx, c, proto, "THROTTLE.PEEK", key, 10, "1m", "ALGO", algo)
			if p.Allowed != 1 || p.Limit != 10 || p.Remaining != 8 || p.RetryAfter != 0 {
				t.Errorf("%s: PEEK %d after 2 checks: %+v, want [1 10 8 _ 0]", algo, i, p)
			}
			if algo != "token" && p.ResetAt != d2.ResetAt {
				t.Errorf("%s: PEEK reset_at = %d, want %d as the last check said", algo, p.ResetAt, d2.ResetAt)
			}
			if algo == "token" && (p.ResetAt < d2.ResetAt-slackMs || p.ResetAt > d2.ResetAt+slackMs) {
				t.Errorf("%s: PEEK reset_at = %d, want %d±%d", algo, p.ResetAt, d2.ResetAt, slackMs)
			}
		}
	}
	if n := dbsize(t, ctx, c); n != n0+4 {
		t.Errorf("DBSIZE after checking 4 keys = %d, want %d", n, n0+4)
	}
	// PEEK of an exhausted key reports remaining 0 and the same reset_at.
	d, _, _ := check(t, ctx, c, proto, "THROTTLE.CHECK", "peek:full", 1, "1h")
	p, _, _ := check(t, ctx, c, proto, "THROTTLE.PEEK", "peek:full", 1, "1h")
	if p.Limit != 1 || p.Remaining != 0 || p.ResetAt != d.ResetAt {
		t.Errorf("PEEK of an exhausted key: %+v, want limit 1, remaining 0, reset_at %d", p, d.ResetAt)
	}
	d3, _, _ := check(t, ctx, c, proto, "THROTTLE.CHECK", "peek:full", 1, "1h")
	if d3.Allowed != 0 {
		t.Errorf("CHECK after PEEK of an exhausted key: %+v, want denied", d3)
	}
}

// testReset: THROTTLE.RESET counts the keys that held state and clears them.
func testReset(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
	check(t, ctx, c, proto, "THROTTLE.CHECK", "rst:1", 10, "1h")
	check(t, ctx, c, proto, "THROTTLE.CHECK", "rst:2", 10, "1h", "ALGO", "token")
	check(t, ctx, c, proto, "THROTTLE.CHECK", "rst:3", 10, "1h", "ALGO", "fixed")
	check(t, ctx, c, proto, "THROTTLE.CHECK", "rst:3", 10, "1h", "ALGO", "fixed")
	n0 := dbsize(t, ctx, c)
	wantInt(t, "RESET rst:1 rst:2 rst:3 rst:none", mustDo(t, ctx, c, "THROTTLE.RESET", "rst:1", "rst:2", "rst:3", "rst:none"), 3)
	if n := dbsize(t, ctx, c); n != n0-3 {
		t.Errorf("DBSIZE after RESET of 3 keys = %d, want %d", n, n0-3)
	}
	wantInt(t, "RESET rst:1 again", mustDo(t, ctx, c, "THROTTLE.RESET", "rst:1"), 0)
	d, _, _ := check(t, ctx, c, proto, "THROTTLE.CHECK", "rst:3", 10, "1h", "ALGO", "fixed")
	if d.Allowed != 1 || d.Remaining != 9 {
		t.Errorf("CHECK after RESET: %+v, want a full budget again [1 10 9 _ 0]", d)
	}
	// After RESET a key may take another algorithm.
	d, _, _ = check(t, ctx, c, proto, "THROTTLE.CHECK", "rst:2", 10, "1h", "ALGO", "sliding")
	if d.Allowed != 1 || d.Remaining != 9 {
		t.Errorf("CHECK with another ALGO after RESET: %+v, want [1 10 9 _ 0]", d)
	}
}

// testLease: window-coupled leases draw from the fixed-window budget.
func testLease(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
	lease := func(batch int64) (decision, int64, int64) {
		return check(t, ctx, c, proto, "THROTTLE.LEASE", "lease", 10, "1h", "BATCH", batch)
	}
	d, _, a1 := lease(4)
	R := d.ResetAt
	if d.Allowed != 4 || d.Limit != 10 || d.Remaining != 6 || d.RetryAfter != 0 {
		t.Fatalf("LEASE 4: %+v, want [4 10 6 R 0]", d)
	}
	between(t, "LEASE reset_at", R, a1+1-slackMs, a1+hourMs+slackMs)
	for _, want := range []decision{{4, 10, 2, R, 0}, {2, 10, 0, R, 0}} {
		if d, _, _ = lease(4); d != want {
			t.Errorf("LEASE 4: %+v, want %+v", d, want)
		}
	}
	d, b, a := lease(4)
	if d.Allowed != 0 || d.Limit != 10 || d.Remaining != 0 || d.ResetAt != R {
		t.Errorf("LEASE 4 on an empty window: %+v, want [0 10 0 %d >0]", d, R)
	}
	between(t, "empty-window retry_after", d.RetryAfter, R-a-slackMs, R-b+slackMs)
	// Fixed-window checks share the budget.
	if d, _, _ = check(t, ctx, c, proto, "THROTTLE.CHECK", "lease", 10, "1h", "ALGO", "fixed"); d.Allowed != 0 || d.Remaining != 0 {
		t.Errorf("fixed CHECK after leasing everything: %+v, want denied", d)
	}
	// Returning to the current window gives the credits back.
	wantInt(t, "RETURN 3 to the current window", mustDo(t, ctx, c, "THROTTLE.RETURN", "lease", 3, R), 3)
	if d, _, _ = check(t, ctx, c, proto, "THROTTLE.PEEK", "lease", 10, "1h", "ALGO", "fixed"); d.Remaining != 3 || d.ResetAt != R {
		t.Errorf("PEEK after RETURN 3: %+v, want remaining 3, reset_at %d", d, R)
	}
	if d, _, _ = lease(2); d != (decision{2, 10, 1, R, 0}) {
		t.Errorf("LEASE 2 after RETURN 3: %+v, want [2 10 1 %d 0]", d, R)
	}
	if d, _, _ = check(t, ctx, c, proto, "THROTTLE.CHECK", "lease", 10, "1h", "ALGO", "fixed"); d != (decision{1, 10, 0, R, 0}) {
		t.Errorf("fixed CHECK for the last unit: %+v, want [1 10 0 %d 0]", d, R)
	}
	// A return naming an earlier window is void.
	wantInt(t, "RETURN to the previous window", mustDo(t, ctx, c, "THROTTLE.RETURN", "lease", 1, R-hourMs), 0)
	wantInt(t, "RETURN to a long-gone window", mustDo(t, ctx, c, "THROTTLE.RETURN", "lease", 5, 1000), 0)
	if d, _, _ = check(t, ctx, c, proto, "THROTTLE.PEEK", "lease", 10, "1h", "ALGO", "fixed"); d.Remaining != 0 {
		t.Errorf("PEEK after void RETURNs: %+v, want remaining 0", d)
	}
	// Net grants in one window never exceed the limit, however much is
	// "returned": 10 admitted + 3 returned + 3 re-admitted so far.
	acc, err := do(ctx, c, "THROTTLE.RETURN", "lease", 100, R)
	if err != nil {
		t.Fatalf("RETURN 100: %v", err)
	}
	accepted, _ := acc.(int64)
	if accepted < 0 || accepted > 10 {
		t.Errorf("RETURN 100 accepted %#v, want 0..10", acc)
	}
	d, _, _ = lease(100)
	if d.Allowed > accepted || d.Allowed > 10 || d.Remaining < 0 || d.Allowed+d.Remaining > 10 {
		t.Errorf("LEASE 100 after RETURN 100 (accepted %d): %+v — net grants in the window would exceed limit 10", accepted, d)
	}
	// Leases hold fixed-window state: another algorithm is refused.
	wantErr(t, ctx, c, wrongTypeMsg, "THROTTLE.CHECK", "lease", 10, "1h", "ALGO", "gcra")
	// A lease on a fresh key with a batch above the limit grants the limit.
	if d, _, _ = check(t, ctx, c, proto, "THROTTLE.LEASE", "lease:big", 10, "1h", "BATCH", 25); d.Allowed != 10 || d.Remaining != 0 {
		t.Errorf("LEASE 25 at limit 10: %+v, want [10 10 0 _ 0]", d)
	}
}

// testWrongType: a key holding one algorithm's state refuses the others
// with WRONGTYPE and its state is left as it was.
func testWrongType(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
	algos := []string{"gcra", "token", "fixed", "sliding"}
	for _, have := range algos {
		for _, other := range algos {
			if have == other {
				continue
			}
			key := "wt:" + have + ":" + other
			check(t, ctx, c, proto, "THROTTLE.CHECK", key, 10, "1h", "ALGO", have)
			wantErr(t, ctx, c, wrongTypeMsg, "THROTTLE.CHECK", key, 10, "1h", "ALGO", other)
			wantErr(t, ctx, c, wrongTypeMsg, "THROTTLE.PEEK", key, 10, "1h", "ALGO", other)
			if have != "fixed" {
				wantErr(t, ctx, c, wrongTypeMsg, "THROTTLE.LEASE", key, 10, "1h", "BATCH", 1)
			}
			if have != "gcra" {
				wantErr(t, ctx, c, wrongTypeMsg, "CL.THROTTLE", key, 9, 10, 3600)
			}
			d, _, _ := check(t, ctx, c, proto, "THROTTLE.PEEK", key, 10, "1h", "ALGO", have)
			if d.Remaining != 9 {
				t.Errorf("%s key after %s attempts: %+v, want remaining 9 (state untouched)", have, other, d)
			}
		}
	}
	mustDo(t, ctx, c, "CL.THROTTLE", "wt:cell", 9, 10, 3600)
	wantErr(t, ctx, c, wrongTypeMsg, "THROTTLE.CHECK", "wt:cell", 10, "1h", "ALGO", "token")
}

// clReply decodes a CL.THROTTLE reply (an array of five integers in both
// protocols).
func clReply(t testing.TB, ctx context.Context, c processer, args ...any) [5]int64 {
	t.Helper()
	v := mustDo(t, ctx, c, append([]any{"CL.THROTTLE"}, args...)...)
	arr, ok := v.([]any)
	if !ok || len(arr) != 5 {
		t.Fatalf("CL.THROTTLE %v: reply %#v, want array of 5 integers", args, v)
	}
	var out [5]int64
	for i, e := range arr {
		n, ok := e.(int64)
		if !ok {
			t.Fatalf("CL.THROTTLE %v: element %d = %#v, want integer", args, i, e)
		}
		out[i] = n
	}
	return out
}

// testCLThrottle: redis-cell's arithmetic, derived by hand from its GCRA
// (limit = max_burst+1; T = period/count; tolerance = T*(max_burst+1);
// retry_after -1 when allowed; times rounded up to whole seconds).
func testCLThrottle(t *testing.T, ctx context.Context, c *redis.Client) {
	type step struct {
		args []any
		want [5]int64
	}
	// 15 burst, 30 per 60 s: T = 2 s, tolerance 32 s.
	steps := []step{
		{[]any{"user123", 15, 30, 60, 1}, [5]int64{0, 16, 15, -1, 2}},  // README example
		{[]any{"user123", 15, 30, 60}, [5]int64{0, 16, 14, -1, 4}},     // quantity defaults to 1
		{[]any{"user123", 15, 30, 60, 0}, [5]int64{0, 16, 14, -1, 4}},  // quantity 0 peeks
		{[]any{"user123", 15, 30, 60, 20}, [5]int64{1, 16, 14, -1, 4}}, // 20 > 16: never, retry -1
		{[]any{"user123", 15, 30, 60, 14}, [5]int64{0, 16, 0, -1, 32}}, // takes the rest
		{[]any{"user123", 15, 30, 60, 1}, [5]int64{1, 16, 0, 2, 32}},   // limited: one T away
		{[]any{"cl:fresh0", 15, 30, 60, 0}, [5]int64{0, 16, 16, -1, 0}},
		{[]any{"cl:fresh20", 15, 30, 60, 20}, [5]int64{1, 16, 16, -1, 0}},
		{[]any{"cl:fresh16", 15, 30, 60, 16}, [5]int64{0, 16, 0, -1, 32}},
		{[]any{"cl:zero-burst", 0, 1, 10}, [5]int64{0, 1, 0, -1, 10}},
		{[]any{"cl:zero-burst", 0, 1, 10}, [5]int64{1, 1, 0, 10, 10}},
	}
	for i, s := range steps {
		if got := clReply(t, ctx, c, s.args...); got != s.want {
			t.Errorf("step %d: CL.THROTTLE %v = %v, want %v", i, s.args, got, s.want)
		}
	}
	// Exhausting a fresh key one unit at a time: k-th call leaves 16-k and
	// resets in 2k s; the 17th is limited with retry 2 s, reset 32 s.
	for k := int64(1); k <= 16; k++ {
		want := [5]int64{0, 16, 16 - k, -1, 2 * k}
		if got := clReply(t, ctx, c, "cl:seq", 15, 30, 60); got != want {
			t.Fatalf("call %d: %v, want %v", k, got, want)
		}
	}
	if got, want := clReply(t, ctx, c, "cl:seq", 15, 30, 60), [5]int64{1, 16, 0, 2, 32}; got != want {
		t.Errorf("call 17: %v, want %v", got, want)
	}
	// Errors, word for word as redis-cell replies, and the connection lives on.
	usage := "Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]"
	for _, e := range []struct {
		args []any
		msg  string
	}{
		{[]any{"CL.THROTTLE", "k", 15, 30}, usage},
		{[]any{"CL.THROTTLE", "k"}, usage},
		{[]any{"CL.THROTTLE", "k", 15, 30, 60, 1, 2}, usage},
		{[]any{"CL.THROTTLE", "k", "abc", 30, 60}, "Cell error: Store error: Couldn't parse as integer: abc"},
		{[]any{"CL.THROTTLE", "k", 15, "x", 60}, "Cell error: Store error: Couldn't parse as integer: x"},
		{[]any{"CL.THROTTLE", "k", 15, 30, "60s"}, "Cell error: Store error: Couldn't parse as integer: 60s"},
		{[]any{"CL.THROTTLE", "k", 15, 30, 60, "1.5"}, "Cell error: Store error: Couldn't parse as integer: 1.5"},
		{[]any{"CL.THROTTLE", "k", 15, 30, "99999999999999999999"}, "Cell error: Store error: Couldn't parse as integer: 99999999999999999999"},
		{[]any{"CL.THROTTLE", "k", 15, 0, 60}, "Cell error: Store error: Zero rates are not supported"},
		{[]any{"CL.THROTTLE", "k", 15, 30, 0}, "Cell error: Store error: Zero rates are not supported"},
	} {
		got := wantErr(t, ctx, c, e.msg, e.args...)
		if got != "" && got != e.msg {
			t.Errorf("%v: error %q, want exactly %q", e.args, got, e.msg)
		}
		if v, err := c.Ping(ctx).Result(); err != nil || v != "PONG" {
			t.Fatalf("PING after %v: %q %v", e.args, v, err)
		}
	}
}

// helloFields decodes a HELLO reply (RESP3 map or RESP2 flat array).
func helloFields(t testing.TB, v any) map[string]any {
	t.Helper()
	out := map[string]any{}
	switch hv := v.(type) {
	case map[any]any:
		for k, e := range hv {
			out[fmt.Sprint(k)] = e
		}
	case map[string]any:
		return hv
	case []any:
		if len(hv)%2 != 0 {
			t.Fatalf("HELLO reply has odd length: %#v", v)
		}
		for i := 0; i < len(hv); i += 2 {
			out[fmt.Sprint(hv[i])] = hv[i+1]
		}
	default:
		t.Fatalf("HELLO reply %T %#v, want map or flat array", v, v)
	}
	return out
}

func testHello(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
	conn := c.Conn()
	defer conn.Close()
	id := mustDo(t, ctx, conn, "CLIENT", "ID")

	v := mustDo(t, ctx, conn, "HELLO", 3)
	if _, ok := v.(map[any]any); !ok {
		t.Errorf("HELLO 3 reply %T, want a RESP3 map", v)
	}
	f := helloFields(t, v)
	wantInt(t, "HELLO 3 proto", f["proto"], 3)
	if f["id"] != id {
		t.Errorf("HELLO 3 id = %#v, want CLIENT ID %#v", f["id"], id)
	}
	for _, k := range []string{"server", "version", "mode", "role"} {
		if _, ok := f[k]; !ok {
			t.Errorf("HELLO 3 reply lacks %q: %#v", k, f)
		}
	}
	if _, ok := mustDo(t, ctx, conn, "THROTTLE.CHECK", "hello:k", 10, "1h").(map[any]any); !ok {
		t.Errorf("THROTTLE.CHECK after HELLO 3 is not a map")
	}

	v = mustDo(t, ctx, conn, "HELLO", "2")
	if _, ok := v.([]any); !ok {
		t.Errorf("HELLO 2 reply %T, want a flat RESP2 array", v)
	}
	wantInt(t, "HELLO 2 proto", helloFields(t, v)["proto"], 2)
	if _, ok := mustDo(t, ctx, conn, "THROTTLE.CHECK", "hello:k", 10, "1h").([]any); !ok {
		t.Errorf("THROTTLE.CHECK after HELLO 2 is not an array")
	}
	// HELLO without a version reports the current protocol.
	wantInt(t, "HELLO (no version) proto", helloFields(t, mustDo(t, ctx, conn, "HELLO"))["proto"], 2)

	wantErr(t, ctx, conn, "NOPROTO", "HELLO", 4)
	wantErr(t, ctx, conn, "NOPROTO", "HELLO", 1)
	wantErr(t, ctx, conn, "ERR", "HELLO", "abc")
	// A failed HELLO leaves the protocol as it was.
	if _, ok := mustDo(t, ctx, conn, "THROTTLE.CHECK", "hello:k", 10, "1h").([]any); !ok {
		t.Errorf("after failed HELLOs the protocol changed")
	}

	f = helloFields(t, mustDo(t, ctx, conn, "HELLO", 3, "SETNAME", "hello-name"))
	wantInt(t, "HELLO 3 SETNAME proto", f["proto"], 3)
	wantStr(t, "CLIENT GETNAME after HELLO SETNAME", mustDo(t, ctx, conn, "CLIENT", "GETNAME"), "hello-name")
	// Back to the client's own protocol for the connection's next user.
	mustDo(t, ctx, conn, "HELLO", proto)
}

func testSelect(t *testing.T, ctx context.Context, c *redis.Client) {
	wantStr(t, "SELECT 0", mustDo(t, ctx, c, "SELECT", 0), "OK")
	wantErr(t, ctx, c, "ERR", "SELECT", 1)
	wantErr(t, ctx, c, "ERR", "SELECT", "abc")
	wantErr(t, ctx, c, "ERR", "SELECT")
	if v, err := c.Ping(ctx).Result(); err != nil || v != "PONG" {
		t.Errorf("PING after SELECT errors: %q %v", v, err)
	}
}

func testClient(t *testing.T, ctx context.Context, c *redis.Client) {
	c1, c2 := c.Conn(), c.Conn()
	defer c1.Close()
	defer c2.Close()
	id1, ok1 := mustDo(t, ctx, c1, "CLIENT", "ID").(int64)
	id2, ok2 := mustDo(t, ctx, c2, "CLIENT", "ID").(int64)
	if !ok1 || !ok2 || id1 <= 0 || id2 <= 0 || id1 == id2 {
		t.Errorf("CLIENT ID of two connections: %d %d, want distinct positive integers", id1, id2)
	}
	wantStr(t, "CLIENT SETNAME", mustDo(t, ctx, c1, "CLIENT", "SETNAME", "alpha"), "OK")
	wantStr(t, "CLIENT GETNAME", mustDo(t, ctx, c1, "CLIENT", "GETNAME"), "alpha")
	if v, err := do(ctx, c2, "CLIENT", "GETNAME"); err != redis.Nil {
		t.Errorf("CLIENT GETNAME without a name: %#v %v, want nil", v, err)
	}
	wantErr(t, ctx, c1, "ERR", "CLIENT", "SETNAME", "has space")
	wantStr(t, "CLIENT GETNAME after a refused SETNAME", mustDo(t, ctx, c1, "CLIENT", "GETNAME"), "alpha")
	wantStr(t, "CLIENT SETINFO LIB-NAME", mustDo(t, ctx, c1, "CLIENT", "SETINFO", "LIB-NAME", "e2elib"), "OK")
	wantStr(t, "CLIENT SETINFO LIB-VER", mustDo(t, ctx, c1, "CLIENT", "SETINFO", "LIB-VER", "1.2.3"), "OK")
	wantErr(t, ctx, c1, "ERR", "CLIENT", "SETINFO", "NOPE", "x")

	info, ok := mustDo(t, ctx, c1, "CLIENT", "INFO").(string)
	if !ok {
		t.Fatalf("CLIENT INFO is not a string")
	}
	for _, want := range []string{fmt.Sprintf("id=%d ", id1), "name=alpha", "lib-name=e2elib", "lib-ver=1.2.3"} {
		if !strings.Contains(info, want) {
			t.Errorf("CLIENT INFO %q lacks %q", info, want)
		}
	}
	if !strings.HasSuffix(info, "\n") || strings.Count(info, "\n") != 1 {
		t.Errorf("CLIENT INFO %q: want one line ending in a newline", info)
	}
	list, ok := mustDo(t, ctx, c2, "CLIENT", "LIST").(string)
	if !ok {
		t.Fatalf("CLIENT LIST is not a string")
	}
	for _, want := range []string{fmt.Sprintf("id=%d ", id1), fmt.Sprintf("id=%d ", id2), "name=alpha"} {
		if !strings.Contains(list, want) {
			t.Errorf("CLIENT LIST %q lacks %q", list, want)
		}
	}
	if !strings.HasSuffix(list, "\n") {
		t.Errorf("CLIENT LIST %q: lines must end in a newline", list)
	}
	wantErr(t, ctx, c1, "ERR", "CLIENT", "NOSUCHSUB")
	wantErr(t, ctx, c1, "ERR", "CLIENT")
	// go-redis's own parsers.
	if ci, err := c1.ClientInfo(ctx).Result(); err != nil || ci.ID != id1 || ci.Name != "alpha" {
		t.Errorf("go-redis ClientInfo: %+v %v, want id %d name alpha", ci, err, id1)
	}
	if n, err := c1.ClientGetName(ctx).Result(); err != nil || n != "alpha" {
		t.Errorf("go-redis ClientGetName: %q %v", n, err)
	}
	_, _ = do(ctx, c1, "CLIENT", "SETNAME", "") // leave the pooled connection unnamed if allowed
}

func testCommand(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
	n, ok := mustDo(t, ctx, c, "COMMAND", "COUNT").(int64)
	names := []string{"throttle.check", "throttle.peek", "throttle.reset", "throttle.lease", "throttle.return",
		"cl.throttle", "ping", "echo", "hello", "auth", "select", "client", "command", "info", "dbsize",
		"time", "quit", "reset"}
	if !ok || n < int64(len(names)) {
		t.Errorf("COMMAND COUNT = %d, want >= %d", n, len(names))
	}
	all, ok := mustDo(t, ctx, c, "COMMAND").([]any)
	if !ok || int64(len(all)) != n {
		t.Errorf("COMMAND returned %d entries, want COMMAND COUNT = %d", len(all), n)
	}
	infos, err := c.Command(ctx).Result()
	if err != nil {
		t.Fatalf("go-redis COMMAND parse: %v", err)
	}
	for _, name := range names {
		if _, ok := infos[name]; !ok {
			t.Errorf("COMMAND lacks %q", name)
		}
	}
	if ci := infos["throttle.check"]; ci != nil && (ci.FirstKeyPos != 1 || ci.LastKeyPos != 1 || ci.StepCount != 1) {
		t.Errorf("COMMAND throttle.check keys = %d,%d,%d, want 1,1,1", ci.FirstKeyPos, ci.LastKeyPos, ci.StepCount)
	}
	if ci := infos["cl.throttle"]; ci != nil && ci.FirstKeyPos != 1 {
		t.Errorf("COMMAND cl.throttle first key = %d, want 1", ci.FirstKeyPos)
	}
	if ci := infos["throttle.reset"]; ci != nil && (ci.FirstKeyPos != 1 || ci.LastKeyPos != -1) {
		t.Errorf("COMMAND throttle.reset keys = %d..%d, want 1..-1", ci.FirstKeyPos, ci.LastKeyPos)
	}
	one, ok := mustDo(t, ctx, c, "COMMAND", "INFO", "THROTTLE.CHECK").([]any)
	if !ok || len(one) != 1 {
		t.Fatalf("COMMAND INFO THROTTLE.CHECK: %#v, want one entry", one)
	}
	if e, ok := one[0].([]any); !ok || len(e) < 6 || e[0] != "throttle.check" {
		t.Errorf("COMMAND INFO THROTTLE.CHECK entry %#v, want [throttle.check arity flags first last step ...]", one[0])
	}
	two, ok := mustDo(t, ctx, c, "COMMAND", "INFO", "ping", "nosuchcmd").([]any)
	if !ok || len(two) != 2 || two[1] != nil {
		t.Errorf("COMMAND INFO ping nosuchcmd = %#v, want [entry, nil]", two)
	}
	docs := mustDo(t, ctx, c, "COMMAND", "DOCS")
	var docNames []string
	switch dv := docs.(type) {
	case []any:
		if proto == 3 {
			t.Errorf("COMMAND DOCS in RESP3 is an array, want a map")
		}
		for i := 0; i+1 < len(dv); i += 2 {
			docNames = append(docNames, fmt.Sprint(dv[i]))
		}
	case map[any]any:
		if proto == 2 {
			t.Errorf("COMMAND DOCS in RESP2 is a map")
		}
		for k := range dv {
			docNames = append(docNames, fmt.Sprint(k))
		}
	default:
		t.Fatalf("COMMAND DOCS reply %T", docs)
	}
	joined := " " + strings.Join(docNames, " ") + " "
	for _, name := range []string{"throttle.check", "cl.throttle"} {
		if !strings.Contains(joined, " "+name+" ") {
			t.Errorf("COMMAND DOCS lacks %q (has %v)", name, docNames)
		}
	}
	d1 := mustDo(t, ctx, c, "COMMAND", "DOCS", "throttle.check")
	switch dv := d1.(type) {
	case []any:
		if len(dv) != 2 || dv[0] != "throttle.check" {
			t.Errorf("COMMAND DOCS throttle.check = %#v, want [throttle.check, docs]", dv)
		}
	case map[any]any:
		if _, ok := dv["throttle.check"]; !ok || len(dv) != 1 {
			t.Errorf("COMMAND DOCS throttle.check = %#v, want {throttle.check: docs}", dv)
		}
	default:
		t.Errorf("COMMAND DOCS throttle.check reply %T", d1)
	}
}

func testInfo(t *testing.T, ctx context.Context, c *redis.Client) {
	for _, args := range [][]any{{"INFO"}, {"INFO", "server"}, {"INFO", "all"}} {
		v := mustDo(t, ctx, c, args...)
		s, ok := v.(string)
		if !ok {
			t.Errorf("%v reply is %T, want a bulk string", args, v)
			continue
		}
		if !strings.Contains(s, "redis_version:") {
			t.Errorf("%v lacks redis_version: %q", args, s)
		}
	}
	s, err := c.Info(ctx).Result()
	if err != nil {
		t.Fatalf("go-redis Info: %v", err)
	}
	if !strings.Contains(s, "\r\nloading:0\r\n") && !strings.Contains(s, "\nloading:0\n") {
		t.Errorf("INFO lacks a line loading:0: %q", s)
	}
	if !strings.Contains(s, "# Server") {
		t.Errorf("INFO lacks the # Server section header: %q", s)
	}
}

func testTimePingEcho(t *testing.T, ctx context.Context, c *redis.Client) {
	before := time.Now()
	tm, err := c.Time(ctx).Result()
	after := time.Now()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	if tm.Before(before.Truncate(time.Microsecond)) || tm.After(after.Add(time.Microsecond)) {
		t.Errorf("TIME = %v, want between %v and %v", tm, before, after)
	}
	raw, ok := mustDo(t, ctx, c, "TIME").([]any)
	if !ok || len(raw) != 2 {
		t.Fatalf("TIME reply %#v, want [seconds, microseconds]", raw)
	}
	us, _ := raw[1].(string)
	if n, err := strconv.Atoi(us); err != nil || n < 0 || n > 999_999 {
		t.Errorf("TIME microseconds %#v, want a bulk string 0..999999", raw[1])
	}

	wantStr(t, "PING", mustDo(t, ctx, c, "PING"), "PONG")
	wantStr(t, "PING msg", mustDo(t, ctx, c, "PING", "hello there"), "hello there")
	wantStr(t, "ECHO", mustDo(t, ctx, c, "ECHO", "a b c"), "a b c")
	bin := "\x00\r\n$3\r\nbinary\xff"
	wantStr(t, "ECHO binary", mustDo(t, ctx, c, "ECHO", bin), bin)
	wantStr(t, "ECHO empty", mustDo(t, ctx, c, "ECHO", ""), "")
	wantStr(t, "lower-case ping", mustDo(t, ctx, c, "ping"), "PONG")
	wantErr(t, ctx, c, "ERR wrong number of arguments", "PING", "a", "b")
	wantErr(t, ctx, c, "ERR wrong number of arguments", "ECHO")
	wantErr(t, ctx, c, "ERR wrong number of arguments", "ECHO", "a", "b")
	wantErr(t, ctx, c, "ERR wrong number of arguments", "DBSIZE", "x")
	wantErr(t, ctx, c, "ERR wrong number of arguments", "TIME", "x")
}

func testResetCommand(t *testing.T, ctx context.Context, c *redis.Client, proto int) {
	conn := c.Conn()
	defer conn.Close()
	mustDo(t, ctx, conn, "HELLO", 3)
	mustDo(t, ctx, conn, "CLIENT", "SETNAME", "to-reset")
	wantStr(t, "RESET", mustDo(t, ctx, conn, "RESET"), "RESET")
	if v, err := do(ctx, conn, "CLIENT", "GETNAME"); err != redis.Nil {
		t.Errorf("CLIENT GETNAME after RESET: %#v %v, want nil", v, err)
	}
	// RESET returns the connection to RESP2.
	if v := mustDo(t, ctx, conn, "THROTTLE.CHECK", "reset:k", 10, "1h"); v != nil {
		if _, ok := v.([]any); !ok {
			t.Errorf("THROTTLE.CHECK after RESET is %T, want a RESP2 array", v)
		}
	}
	wantErr(t, ctx, conn, "ERR wrong number of arguments", "RESET", "x")
	mustDo(t, ctx, conn, "HELLO", proto)
}

func testQuit(t *testing.T, addr string) {
	c := dialRaw(t, addr)
	c.send(t, "PING\r\nQUIT\r\nPING\r\n")
	if v := c.read(t); v != "PONG" {
		t.Errorf("PING before QUIT = %#v", v)
	}
	if v := c.read(t); v != "OK" {
		t.Errorf("QUIT = %#v, want OK", v)
	}
	c.expectClosed(t)
}

func testUnknown(t *testing.T, ctx context.Context, c *redis.Client) {
	for _, tc := range []struct {
		args []any
		msg  string
	}{
		{[]any{"FOO", "a", "b"}, "ERR unknown command 'FOO', with args beginning with: 'a' 'b' "},
		{[]any{"foo"}, "ERR unknown command 'foo', with args beginning with: "},
		{[]any{"Throttle.Nope", "k", "1"}, "ERR unknown command 'Throttle.Nope', with args beginning with: 'k' '1' "},
	} {
		got := wantErr(t, ctx, c, "ERR unknown command", tc.args...)
		if got != "" && got != tc.msg {
			t.Errorf("%v: error %q, want exactly %q", tc.args, got, tc.msg)
		}
	}
	if v, err := c.Ping(ctx).Result(); err != nil || v != "PONG" {
		t.Errorf("PING after unknown commands: %q %v", v, err)
	}
}

// testBadArgs: every malformed argument gets an -ERR that is not an
// "unknown command", creates no key, and leaves the connection usable.
func testBadArgs(t *testing.T, ctx context.Context, c *redis.Client) {
	conn := c.Conn()
	defer conn.Close()
	n0 := dbsize(t, ctx, c)
	arity := "ERR wrong number of arguments"
	big := "99999999999999999999"
	for _, tc := range []struct {
		prefix string
		args   []any
	}{
		{arity, []any{"THROTTLE.CHECK"}},
		{arity, []any{"THROTTLE.CHECK", "bad"}},
		{arity, []any{"THROTTLE.CHECK", "bad", 10}},
		{arity, []any{"THROTTLE.PEEK", "bad", 10}},
		{arity, []any{"THROTTLE.RESET"}},
		{arity, []any{"THROTTLE.LEASE", "bad", 10}},
		{arity, []any{"THROTTLE.RETURN", "bad", 1}},
		{arity, []any{"THROTTLE.RETURN", "bad", 1, 2, 3}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", "ten", "1s"}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", "1.5", "1s"}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", "", "1s"}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 10, "soon"}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 10, "1w"}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 10, "1.5"}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 10, "s"}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 10, ""}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 0, "1s"}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", -1, "1s"}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 10, 0}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 10, "0s"}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 10, "-5s"}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 10, -1000}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", big, "1s"}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 10, big}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 10, "9223372036854775807d"}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 10, "999999999999d"}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 10, "1s", "ALGO", "leaky"}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 10, "1s", "ALGO"}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 10, "1s", "BURST"}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 10, "1s", "BURST", -1}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 10, "1s", "BURST", "x"}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 10, "1s", "BURST", big}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 10, "1s", "COST", -1}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 10, "1s", "COST", "x"}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 10, "1s", "COST", "9223372036854775808"}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 10, "1s", "COLOR", "red"}},
		{"ERR", []any{"THROTTLE.CHECK", "bad", 10, "1s", "extra"}},
		{"ERR", []any{"THROTTLE.PEEK", "bad", 10, "1s", "ALGO", "nope"}},
		{"ERR", []any{"THROTTLE.PEEK", "bad", "x", "1s"}},
		{"ERR", []any{"THROTTLE.LEASE", "bad", 10, "1s", "BATCH"}},
		{"ERR", []any{"THROTTLE.LEASE", "bad", 10, "1s", "BATCH", "x"}},
		{"ERR", []any{"THROTTLE.LEASE", "bad", 10, "1s", "BATCH", -1}},
		{"ERR", []any{"THROTTLE.LEASE", "bad", 10, "1s", "SIZE", 1}},
		{"ERR", []any{"THROTTLE.LEASE", "bad", 0, "1s", "BATCH", 1}},
		{"ERR", []any{"THROTTLE.LEASE", "bad", 10, "nope", "BATCH", 1}},
		{"ERR", []any{"THROTTLE.RETURN", "bad", "x", 1000}},
		{"ERR", []any{"THROTTLE.RETURN", "bad", -1, 1000}},
		{"ERR", []any{"THROTTLE.RETURN", "bad", 1, "x"}},
		{"ERR", []any{"THROTTLE.RETURN", "bad", 1, big}},
	} {
		got := wantErr(t, ctx, conn, tc.prefix, tc.args...)
		if strings.Contains(got, "unknown command") {
			t.Errorf("%v: %q is an unknown-command error, want an argument error", tc.args, got)
		}
		if v, err := do(ctx, conn, "PING"); err != nil || v != "PONG" {
			t.Fatalf("PING after %v: %#v %v (connection not usable)", tc.args, v, err)
		}
	}
	if n := dbsize(t, ctx, c); n != n0 {
		t.Errorf("DBSIZE after rejected commands = %d, want %d (nothing created)", n, n0)
	}
}

// testAuth runs against a second server with a password.
func testAuth(t *testing.T, ctx context.Context, proto int) {
	ts := startServer(t, func(cfg *server.Config) { cfg.RequirePass = "s3cret" })

	// No password: go-redis's HELLO is refused, it falls back, and commands
	// get NOAUTH.
	anon := newClient(t, ts.Addr, proto, nil)
	if err := anon.Ping(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Errorf("PING without AUTH: %v, want NOAUTH", err)
	}
	wantErr(t, ctx, anon, "NOAUTH", "THROTTLE.CHECK", "auth:k", 10, "1h")

	conn := anon.Conn()
	defer conn.Close()
	wantErr(t, ctx, conn, "WRONGPASS", "AUTH", "wrong")
	wantErr(t, ctx, conn, "WRONGPASS", "AUTH", "default", "wrong")
	wantErr(t, ctx, conn, "WRONGPASS", "HELLO", 3, "AUTH", "default", "wrong")
	wantErr(t, ctx, conn, "NOAUTH", "PING")
	wantStr(t, "AUTH s3cret", mustDo(t, ctx, conn, "AUTH", "s3cret"), "OK")
	wantStr(t, "PING after AUTH", mustDo(t, ctx, conn, "PING"), "PONG")
	wantStr(t, "AUTH default s3cret", mustDo(t, ctx, conn, "AUTH", "default", "s3cret"), "OK")
	wantStr(t, "RESET", mustDo(t, ctx, conn, "RESET"), "RESET")
	wantErr(t, ctx, conn, "NOAUTH", "PING") // RESET signs the connection out
	f := helloFields(t, mustDo(t, ctx, conn, "HELLO", 3, "AUTH", "default", "s3cret", "SETNAME", "via-hello"))
	wantInt(t, "HELLO 3 AUTH proto", f["proto"], 3)
	wantStr(t, "GETNAME after HELLO AUTH SETNAME", mustDo(t, ctx, conn, "CLIENT", "GETNAME"), "via-hello")

	// With the password go-redis authenticates inside HELLO.
	authed := newClient(t, ts.Addr, proto, func(o *redis.Options) {
		o.Password = "s3cret"
		o.ClientName = "e2e-client"
	})
	v := mustDo(t, ctx, authed, "THROTTLE.CHECK", "auth:k", 10, "1h")
	d, err := toDecision(v, proto)
	if err != nil || d.Allowed != 1 || d.Remaining != 9 {
		t.Errorf("THROTTLE.CHECK after AUTH: %+v %v, want [1 10 9 _ 0]", d, err)
	}
	name, err := authed.ClientGetName(ctx).Result()
	if err != nil || name != "e2e-client" {
		t.Errorf("CLIENT GETNAME with ClientName option: %q %v", name, err)
	}
}
