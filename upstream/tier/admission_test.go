package tier

import (
	"strconv"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/internal/clustertest"
	"github.com/throttlekit/throttlekit-server/internal/testserver"
	"github.com/throttlekit/throttlekit-server/limits"
	"github.com/throttlekit/throttlekit-server/shard"
)

// wait runs call with done installed as the value's Done hook and
// returns the completed value: call's own when it did not go pending.
func wait[T any](t *testing.T, v *T, setDone func(func(*T)), call func() error, setErr func(*T, error)) *T {
	t.Helper()
	ch := make(chan *T, 1)
	setDone(func(r *T) { ch <- r })
	err := call()
	if err != limits.ErrPending {
		setErr(v, err)
		return v
	}
	select {
	case r := <-ch:
		return r
	case <-time.After(time.Minute): // a hang, not a timing assumption
		t.Fatal("operation never completed")
		return nil
	}
}

func acquire(t *testing.T, b limits.Backend, q limits.Acquire, now int64) *limits.Acquire {
	return wait(t, &q, func(f func(*limits.Acquire)) { q.Done = f }, func() error { return b.Acquire(&q, now, nil) },
		func(v *limits.Acquire, err error) { v.Err = err })
}

func slot(t *testing.T, b limits.Backend, s limits.SlotCall, now int64) *limits.SlotCall {
	return wait(t, &s, func(f func(*limits.SlotCall)) { s.Done = f }, func() error { return b.Slot(&s, now, nil) },
		func(v *limits.SlotCall, err error) { v.Err = err })
}

func reserve(t *testing.T, b limits.Backend, r limits.Reserve, now int64) *limits.Reserve {
	return wait(t, &r, func(f func(*limits.Reserve)) { r.Done = f }, func() error { return b.Reserve(&r, now, nil) },
		func(v *limits.Reserve, err error) { v.Err = err })
}

func settle(t *testing.T, b limits.Backend, s limits.Settle, now int64) *limits.Settle {
	return wait(t, &s, func(f func(*limits.Settle)) { s.Done = f }, func() error { return b.Settle(&s, now, nil) },
		func(v *limits.Settle, err error) { v.Err = err })
}

func checkBan(t *testing.T, b limits.Backend, cb limits.CheckBan, now int64) *limits.CheckBan {
	return wait(t, &cb, func(f func(*limits.CheckBan)) { cb.Done = f }, func() error { return b.CheckBan(&cb, now, nil) },
		func(v *limits.CheckBan, err error) { v.Err = err })
}

func ban(t *testing.T, b limits.Backend, bc limits.BanCall, now int64) *limits.BanCall {
	return wait(t, &bc, func(f func(*limits.BanCall)) { bc.Done = f }, func() error { return b.Ban(&bc, now, nil) },
		func(v *limits.BanCall, err error) { v.Err = err })
}

// TestAdmissionStrict runs every admission operation through the Backend
// (pending, completed by its workers) and through a limits.Local at the
// same instants, and compares the results; tokens and ids are the
// backend's own, used in its later calls.
func TestAdmissionStrict(t *testing.T) {
	url := "redis://" + clustertest.Server(t)
	// Every mode runs them strict: the same results in each.
	for i, mode := range []Mode{ModeStrict, ModeCachedDeny, ModeLeased} {
		t.Run(mode.String(), func(t *testing.T) {
			b := newBackend(t, url, Config{Workers: 4, Mode: mode})
			admissionStrict(t, b, []byte("adm"+strconv.Itoa(i)))
		})
	}
}

func admissionStrict(t *testing.T, b *Backend, key []byte) {
	loc := limits.NewLocal(shard.New(shard.Config{}), limits.Config{})
	now := int64(t0)

	var upTok, locTok []limits.SlotToken
	for i := 0; i < 3; i++ {
		q := limits.Acquire{Key: key, Limit: 2, TTL: 2e9, Lane: 3}
		got := acquire(t, b, q, now)
		want := acquire(t, loc, q, now)
		if got.Err != nil || got.Acquired != want.Acquired || got.InFlight != want.InFlight ||
			got.RetryAfter != want.RetryAfter || got.Token.Slot != want.Token.Slot {
			t.Fatalf("acquire %d: got %+v, want %+v", i, got, want)
		}
		if got.Acquired {
			upTok, locTok = append(upTok, got.Token), append(locTok, want.Token)
		}
	}
	if len(upTok) != 2 {
		t.Fatalf("acquired %d slots at limit 2", len(upTok))
	}
	now += 1e9
	for i, ttl := range []int64{5e9, 0, 0} { // refresh, release, release again
		got := slot(t, b, limits.SlotCall{Key: key, Token: upTok[0], TTL: ttl}, now)
		want := slot(t, loc, limits.SlotCall{Key: key, Token: locTok[0], TTL: ttl}, now)
		if got.Err != nil || got.Held != want.Held {
			t.Fatalf("slot call %d: got %+v, want %+v", i, got, want)
		}
	}

	lim, _ := engine.NewLimit(engine.KindToken, 10, 1e9, 0)
	r := limits.Reserve{Key: key, Limit: lim, Estimate: 8, TTL: 1e9}
	gr, wr := reserve(t, b, r, now), reserve(t, loc, r, now)
	if gr.Err != nil || gr.Decision != wr.Decision || gr.ID.Limit != wr.ID.Limit {
		t.Fatalf("reserve: got %+v, want %+v", gr, wr)
	}
	for i, actual := range []int64{3, 3} { // settles once
		gs := settle(t, b, limits.Settle{Key: key, ID: gr.ID, Actual: actual}, now)
		ws := settle(t, loc, limits.Settle{Key: key, ID: wr.ID, Actual: actual}, now)
		if gs.Err != nil || gs.Settled != ws.Settled || gs.Settled != (i == 0) {
			t.Fatalf("settle %d: got %+v, want %+v", i, gs, ws)
		}
	}

	bn, _ := engine.NewBan(2, lim.Period, 30e9)
	for i := 0; i < 4; i++ {
		cb := limits.CheckBan{Key: key, Limit: lim, Cost: 6, Ban: bn}
		got, want := checkBan(t, b, cb, now), checkBan(t, loc, cb, now)
		if got.Err != nil || got.Decision != want.Decision {
			t.Fatalf("checkban %d: got %+v, want %+v", i, got, want)
		}
	}
	for i, lift := range []bool{false, true, false} { // banned, unban, banned
		got, want := ban(t, b, limits.BanCall{Key: key, Lift: lift}, now+1e9), ban(t, loc, limits.BanCall{Key: key, Lift: lift}, now+1e9)
		if got.Err != nil || got.Left != want.Left || got.Lifted != want.Lifted {
			t.Fatalf("ban call lift=%v: got %+v, want %+v", lift, got, want)
		}
		if i == 0 && got.Left != 29000 {
			t.Fatalf("two denials at threshold 2 left %d ms of the 30 s ban a second later", got.Left)
		}
	}
	// An engine error comes back as the engine's error value.
	bad := limits.CheckBan{Key: key, Limit: lim, Cost: -1, Ban: bn}
	if got := checkBan(t, b, bad, now); got.Err != engine.ErrNegativeCost {
		t.Fatalf("checkban cost -1: %v", got.Err)
	}
}

// TestAdmissionUnavailable: with the upstream down the admission
// operations fail closed with ErrUnavailable, or open from the local
// records.
func TestAdmissionUnavailable(t *testing.T) {
	url := "redis://" + testserver.FreeAddr(t)
	lim, _ := engine.NewLimit(engine.KindFixed, 5, 1e9, 0)
	bn, _ := engine.NewBan(1, lim.Period, 1e9)
	key := []byte("down")
	for _, open := range []bool{false, true} {
		b := newBackend(t, url, Config{FailOpen: open})
		want := error(limits.ErrUnavailable)
		if open {
			want = nil
		}
		q := acquire(t, b, limits.Acquire{Key: key, Limit: 1, TTL: 1e9}, t0)
		r := reserve(t, b, limits.Reserve{Key: key, Limit: lim, Estimate: 1, TTL: 1e9}, t0)
		cb := checkBan(t, b, limits.CheckBan{Key: key, Limit: lim, Cost: 1, Ban: bn}, t0)
		s := slot(t, b, limits.SlotCall{Key: key, Token: q.Token}, t0)
		st := settle(t, b, limits.Settle{Key: key, ID: r.ID, Actual: 1}, t0)
		bc := ban(t, b, limits.BanCall{Key: key}, t0)
		for name, err := range map[string]error{"acquire": q.Err, "reserve": r.Err, "checkban": cb.Err,
			"slot": s.Err, "settle": st.Err, "ban": bc.Err} {
			if err != want {
				t.Errorf("open=%v %s: %v, want %v", open, name, err, want)
			}
		}
		if open && (!q.Acquired || !s.Held || r.Decision.Allowed != 1 || !st.Settled || cb.Decision.Allowed != 1) {
			t.Errorf("open: the local records did not answer: %+v %+v %+v %+v %+v", q, s, r, st, cb)
		}
		if st := b.Stats(); open && st.Keys == 0 {
			t.Errorf("open: the local store holds nothing after the checks")
		}
	}
}
