package throttlekit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	throttlekit "github.com/throttlekit/throttlekit-server/clients/go"
)

// forEachProto runs f against one server in RESP2 and in RESP3; sfx makes
// the keys of the two runs distinct.
func forEachProto(t *testing.T, f func(t *testing.T, c *throttlekit.Client, sfx string)) {
	t.Helper()
	srv := startServer(t)
	for _, proto := range []int{2, 3} {
		sfx := string(rune('0' + proto))
		t.Run("resp"+sfx, func(t *testing.T) {
			f(t, throttlekit.NewClient(srv.RedisClient(t, proto, nil)), ":"+sfx)
		})
	}
}

func TestMCheck(t *testing.T) {
	forEachProto(t, func(t *testing.T, c *throttlekit.Client, sfx string) {
		ctx := context.Background()
		user := throttlekit.Rate{Limit: 5, Period: time.Minute}
		global := throttlekit.Rate{Limit: 2, Period: time.Minute, Algo: throttlekit.FixedWindow}
		limits := []throttlekit.KeyLimit{{"user" + sfx, user}, {"global" + sfx, global}}

		md, err := c.MCheck(ctx, limits, 2)
		if err != nil {
			t.Fatal(err)
		}
		if !md.Allowed || md.RetryAfter != 0 || len(md.Decisions) != 2 ||
			md.Decisions[0].Remaining != 3 || md.Decisions[1].Remaining != 0 || md.Decisions[1].Limit != 2 {
			t.Fatalf("first mcheck: %+v", md)
		}
		// The global limit is spent: denied, and the user's budget is untouched.
		md, err = c.MCheck(ctx, limits, 1)
		if err != nil {
			t.Fatal(err)
		}
		if md.Allowed || md.RetryAfter <= 0 || md.RetryAfter > time.Minute ||
			!md.Decisions[0].Allowed || md.Decisions[0].Remaining != 3 ||
			md.Decisions[1].Allowed || md.Decisions[1].RetryAfter != md.RetryAfter {
			t.Fatalf("denied mcheck: %+v", md)
		}
		d, err := c.Peek(ctx, "user"+sfx, user)
		if err != nil || d.Remaining != 3 {
			t.Fatalf("user after denied mcheck: %+v %v", d, err)
		}
		// A cost above a limit can never pass: negative retry-after.
		md, err = c.MCheck(ctx, []throttlekit.KeyLimit{{"a" + sfx, user}, {"b" + sfx, throttlekit.Rate{Limit: 1, Period: time.Second}}}, 3)
		if err != nil {
			t.Fatal(err)
		}
		if md.Allowed || md.RetryAfter >= 0 || md.Decisions[1].RetryAfter >= 0 {
			t.Fatalf("cost above limit: %+v", md)
		}
		// A key holding another algorithm's state: typed error.
		_, err = c.MCheck(ctx, []throttlekit.KeyLimit{{"global" + sfx, user}}, 1)
		if !errors.Is(err, throttlekit.ErrWrongType) {
			t.Fatalf("wrong type: %v", err)
		}
	})
}

func TestReserveSettle(t *testing.T) {
	forEachProto(t, func(t *testing.T, c *throttlekit.Client, sfx string) {
		ctx := context.Background()
		lim := throttlekit.Rate{Limit: 10, Period: time.Hour, Algo: throttlekit.FixedWindow}
		key := "llm" + sfx

		r, err := c.Reserve(ctx, key, lim, 8, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Allowed || r.ID == "" || r.Remaining != 2 || r.Limit != 10 {
			t.Fatalf("reserve: %+v", r)
		}
		// Denied: nothing charged, no ID.
		r2, err := c.Reserve(ctx, key, lim, 5, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if r2.Allowed || r2.ID != "" || r2.RetryAfter <= 0 || r2.Remaining != 2 {
			t.Fatalf("denied reserve: %+v", r2)
		}
		// Settling below the estimate refunds the difference, once.
		ok, err := c.Settle(ctx, key, r.ID, 3)
		if err != nil || !ok {
			t.Fatalf("settle: %v %v", ok, err)
		}
		d, err := c.Peek(ctx, key, lim)
		if err != nil || d.Remaining != 7 {
			t.Fatalf("after settle: %+v %v", d, err)
		}
		ok, err = c.Settle(ctx, key, r.ID, 3)
		if err != nil || ok {
			t.Fatalf("second settle: %v %v", ok, err)
		}
		// Settling above the estimate charges past the limit.
		r, err = c.Reserve(ctx, key, lim, 1, time.Minute)
		if err != nil || !r.Allowed {
			t.Fatalf("reserve 1: %+v %v", r, err)
		}
		if ok, err = c.Settle(ctx, key, r.ID, 9); err != nil || !ok {
			t.Fatalf("settle above: %v %v", ok, err)
		}
		if d, err = c.Peek(ctx, key, lim); err != nil || d.Allowed || d.Remaining != 0 {
			t.Fatalf("after debt: %+v %v", d, err)
		}
		// An ID the server never issued is rejected by the server.
		if _, err = c.Settle(ctx, key, "not-an-id", 1); !errors.Is(err, throttlekit.ErrInvalidArgument) {
			t.Fatalf("bad id: %v", err)
		}
	})
}

func TestCheckBan(t *testing.T) {
	forEachProto(t, func(t *testing.T, c *throttlekit.Client, sfx string) {
		ctx := context.Background()
		lim := throttlekit.Rate{Limit: 1, Period: time.Minute}
		ban := throttlekit.BanPolicy{Threshold: 2, Duration: time.Hour}
		key := "ip" + sfx

		d, err := c.CheckBan(ctx, key, lim, 1, ban)
		if err != nil || !d.Allowed {
			t.Fatalf("first: %+v %v", d, err)
		}
		d, err = c.CheckBan(ctx, key, lim, 1, ban)
		if err != nil || d.Allowed || d.RetryAfter > time.Minute {
			t.Fatalf("first denial: %+v %v", d, err)
		}
		if left, err := c.Banned(ctx, key); err != nil || left != 0 {
			t.Fatalf("banned after one denial: %v %v", left, err)
		}
		// The threshold-th denial starts the ban.
		d, err = c.CheckBan(ctx, key, lim, 1, ban)
		if err != nil || d.Allowed || d.RetryAfter < 59*time.Minute {
			t.Fatalf("banning denial: %+v %v", d, err)
		}
		left, err := c.Banned(ctx, key)
		if err != nil || left < 59*time.Minute || left > time.Hour {
			t.Fatalf("banned: %v %v", left, err)
		}
		d, err = c.CheckBan(ctx, key, lim, 1, ban)
		if err != nil || d.Allowed || d.RetryAfter < 59*time.Minute {
			t.Fatalf("while banned: %+v %v", d, err)
		}
		ok, err := c.Unban(ctx, key)
		if err != nil || !ok {
			t.Fatalf("unban: %v %v", ok, err)
		}
		if ok, err = c.Unban(ctx, key); err != nil || ok {
			t.Fatalf("second unban: %v %v", ok, err)
		}
		if left, err = c.Banned(ctx, key); err != nil || left != 0 {
			t.Fatalf("banned after unban: %v %v", left, err)
		}
	})
}

func TestAcquireRelease(t *testing.T) {
	forEachProto(t, func(t *testing.T, c *throttlekit.Client, sfx string) {
		ctx := context.Background()
		key := "jobs" + sfx
		ttl := time.Hour

		a, err := c.Acquire(ctx, key, 2, ttl)
		if err != nil || !a.Acquired || a.Token == "" || a.InFlight != 1 || a.Limit != 2 || a.RetryAfter != 0 {
			t.Fatalf("first acquire: %+v %v", a, err)
		}
		b, err := c.Acquire(ctx, key, 2, ttl)
		if err != nil || !b.Acquired || b.InFlight != 2 || b.Token == a.Token {
			t.Fatalf("second acquire: %+v %v", b, err)
		}
		// Beyond the limit: no slot, no token, wait for the first expiry.
		x, err := c.Acquire(ctx, key, 2, ttl)
		if err != nil || x.Acquired || x.Token != "" || x.InFlight != 2 || x.RetryAfter <= 0 || x.RetryAfter > ttl {
			t.Fatalf("third acquire: %+v %v", x, err)
		}
		ok, err := c.Release(ctx, key, a.Token)
		if err != nil || !ok {
			t.Fatalf("release: %v %v", ok, err)
		}
		if ok, err = c.Release(ctx, key, a.Token); err != nil || ok {
			t.Fatalf("second release: %v %v", ok, err)
		}
		if ok, err = c.Refresh(ctx, key, a.Token, ttl); err != nil || ok {
			t.Fatalf("refresh of a released slot: %v %v", ok, err)
		}
		if ok, err = c.Refresh(ctx, key, b.Token, 2*ttl); err != nil || !ok {
			t.Fatalf("refresh: %v %v", ok, err)
		}
		x, err = c.Acquire(ctx, key, 2, ttl)
		if err != nil || !x.Acquired || x.InFlight != 2 {
			t.Fatalf("acquire after release: %+v %v", x, err)
		}
		if _, err = c.Release(ctx, key, "garbage"); !errors.Is(err, throttlekit.ErrInvalidArgument) {
			t.Fatalf("bad token: %v", err)
		}
	})
}

func TestAdmissionPipeline(t *testing.T) {
	forEachProto(t, func(t *testing.T, c *throttlekit.Client, sfx string) {
		ctx := context.Background()
		lim := throttlekit.Rate{Limit: 3, Period: time.Minute}
		p := c.Redis().Pipeline()
		mc := c.MCheckCmd(ctx, p, []throttlekit.KeyLimit{{"pa" + sfx, lim}, {"pb" + sfx, lim}}, 1)
		rc := c.ReserveCmd(ctx, p, "pr"+sfx, lim, 2, 0)
		bc := c.CheckBanCmd(ctx, p, "pc"+sfx, lim, 1, throttlekit.BanPolicy{Threshold: 1, Duration: time.Second})
		bd := c.BannedCmd(ctx, p, "pc"+sfx)
		ub := c.UnbanCmd(ctx, p, "pc"+sfx)
		ac := c.AcquireCmd(ctx, p, "ps"+sfx, 1, time.Minute)
		bad := c.AcquireCmd(ctx, p, "ps"+sfx, 0, time.Minute) // rejected, not queued
		if _, err := p.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if md, err := mc.Result(); err != nil || !md.Allowed || len(md.Decisions) != 2 {
			t.Fatalf("mcheck: %+v %v", md, err)
		}
		r, err := rc.Result()
		if err != nil || !r.Allowed || r.ID == "" {
			t.Fatalf("reserve: %+v %v", r, err)
		}
		if d, err := bc.Result(); err != nil || !d.Allowed {
			t.Fatalf("checkban: %+v %v", d, err)
		}
		if left, err := bd.Result(); err != nil || left != 0 {
			t.Fatalf("banned: %v %v", left, err)
		}
		if ok, err := ub.Result(); err != nil || ok {
			t.Fatalf("unban: %v %v", ok, err)
		}
		s, err := ac.Result()
		if err != nil || !s.Acquired {
			t.Fatalf("acquire: %+v %v", s, err)
		}
		if _, err := bad.Result(); !errors.Is(err, throttlekit.ErrInvalidArgument) {
			t.Fatalf("bad acquire: %v", err)
		}

		p = c.Redis().Pipeline()
		sc := c.SettleCmd(ctx, p, "pr"+sfx, r.ID, 1)
		sc2 := c.SettleCmd(ctx, p, "pr"+sfx, r.ID, 1)
		fc := c.RefreshCmd(ctx, p, "ps"+sfx, s.Token, time.Minute)
		lc := c.ReleaseCmd(ctx, p, "ps"+sfx, s.Token)
		if _, err := p.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		for i, want := range []bool{true, false, true, true} {
			got, err := []*throttlekit.BoolCmd{sc, sc2, fc, lc}[i].Result()
			if err != nil || got != want {
				t.Fatalf("bool command %d: %v %v, want %v", i, got, err, want)
			}
		}
	})
}

// TestAdmissionArgErrors checks the arguments the client rejects before
// sending anything: no server is needed, and none is reachable.
func TestAdmissionArgErrors(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer rdb.Close()
	c := throttlekit.NewClient(rdb)
	ctx := context.Background()
	lim := throttlekit.Rate{Limit: 5, Period: time.Second}
	many := make([]throttlekit.KeyLimit, throttlekit.MaxMCheckLimits+1)
	for i := range many {
		many[i] = throttlekit.KeyLimit{Key: string(rune('a' + i)), Rate: lim}
	}
	ban := throttlekit.BanPolicy{Threshold: 3, Duration: time.Minute}
	for _, tc := range []struct {
		name, arg string
		call      func() error
	}{
		{"mcheck none", "limits", func() error { _, err := c.MCheck(ctx, nil, 1); return err }},
		{"mcheck too many", "limits", func() error { _, err := c.MCheck(ctx, many, 1); return err }},
		{"mcheck twice", "limits", func() error {
			_, err := c.MCheck(ctx, []throttlekit.KeyLimit{{"k", lim}, {"k", lim}}, 1)
			return err
		}},
		{"mcheck burst", "burst", func() error {
			_, err := c.MCheck(ctx, []throttlekit.KeyLimit{{"k", throttlekit.Rate{Limit: 5, Period: time.Second, Burst: 9}}}, 1)
			return err
		}},
		{"mcheck cost", "cost", func() error { _, err := c.MCheck(ctx, []throttlekit.KeyLimit{{"k", lim}}, -1); return err }},
		{"mcheck period", "period", func() error {
			_, err := c.MCheck(ctx, []throttlekit.KeyLimit{{"k", throttlekit.Rate{Limit: 5}}}, 1)
			return err
		}},
		{"reserve estimate", "estimate", func() error { _, err := c.Reserve(ctx, "k", lim, -1, 0); return err }},
		{"reserve ttl", "ttl", func() error { _, err := c.Reserve(ctx, "k", lim, 1, 1500*time.Microsecond); return err }},
		{"reserve negative ttl", "ttl", func() error { _, err := c.Reserve(ctx, "k", lim, 1, -time.Second); return err }},
		{"reserve algo", "algo", func() error {
			_, err := c.Reserve(ctx, "k", throttlekit.Rate{Limit: 5, Period: time.Second, Algo: "leaky"}, 1, 0)
			return err
		}},
		{"settle id", "id", func() error { _, err := c.Settle(ctx, "k", "", 1); return err }},
		{"settle actual", "actual", func() error { _, err := c.Settle(ctx, "k", "1.1.5.1000", -2); return err }},
		{"ban threshold", "ban threshold", func() error {
			_, err := c.CheckBan(ctx, "k", lim, 1, throttlekit.BanPolicy{Duration: time.Minute})
			return err
		}},
		{"ban duration", "ban duration", func() error {
			_, err := c.CheckBan(ctx, "k", lim, 1, throttlekit.BanPolicy{Threshold: 1})
			return err
		}},
		{"ban cost", "cost", func() error { _, err := c.CheckBan(ctx, "k", lim, -1, ban); return err }},
		{"acquire limit", "limit", func() error { _, err := c.Acquire(ctx, "k", throttlekit.MaxSlots+1, time.Second); return err }},
		{"acquire ttl", "ttl", func() error { _, err := c.Acquire(ctx, "k", 1, 0); return err }},
		{"release token", "token", func() error { _, err := c.Release(ctx, "k", ""); return err }},
		{"refresh token", "token", func() error { _, err := c.Refresh(ctx, "k", "", time.Second); return err }},
		{"refresh ttl", "ttl", func() error { _, err := c.Refresh(ctx, "k", "0.1", time.Nanosecond); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var ae *throttlekit.ArgError
			if !errors.As(err, &ae) || ae.Arg != tc.arg || !errors.Is(err, throttlekit.ErrInvalidArgument) {
				t.Fatalf("got %v, want an ArgError for %q", err, tc.arg)
			}
		})
	}
}
