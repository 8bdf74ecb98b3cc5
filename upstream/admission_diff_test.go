package upstream

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/internal/clustertest"
	"github.com/throttlekit/throttlekit-server/limits"
	"github.com/throttlekit/throttlekit-server/shard"
)

// TestAdmissionDifferential runs random sequences of the admission
// operations (acquire, release, refresh; reserve, settle; check with a
// penalty box, banned, unban; plain checks between them) through the
// scripts on a real redis-server and through limits.Local, at the same
// injected instants, and compares every result field for field, every
// error, and after every operation the state of the key it touched.
// Tokens and reservation ids name the same slot or reservation on both
// sides, though their generation and sequence numbers differ (the
// upstream draws its own): the test pairs them.
func TestAdmissionDifferential(t *testing.T) {
	c, err := Dial("redis://"+clustertest.Server(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seqs, ops := 12, 500
	if testing.Short() {
		seqs, ops = 4, 300
	}
	tl := admTally{}
	for seq := 0; seq < seqs; seq++ {
		runAdmissionSequence(t, c, uint64(seq), ops, "a"+strconv.Itoa(seq)+":", &tl)
	}
	tl.require(t)
}

// admTally counts the outcomes the sequences reached, so the test shows
// (and asserts) that each operation took each of its paths.
type admTally map[string]int

func (tl admTally) require(tb testing.TB) {
	tb.Helper()
	for _, k := range []string{"acquire=1", "acquire=0", "release=1", "release=0", "refresh=1", "refresh=0",
		"reserve=1", "reserve=0", "settle-charge", "settle-refund", "settle=0", "checkban=1", "checkban=0",
		"ban-started", "banned>0", "banned=0", "unban=1", "unban=0", "error"} {
		if tl[k] == 0 {
			tb.Errorf("no %s outcome", k)
		}
	}
	tb.Logf("outcomes: %v", map[string]int(tl))
}

type slotPair struct {
	local limits.SlotToken
	slot  int64
	gen   int64
	key   string
}

type resPair struct {
	local limits.ReservationID
	up    Reservation
	key   string
	est   int64
}

// runAdmissionSequence runs one sequence on keys starting with prefix.
func runAdmissionSequence(t *testing.T, c *Client, seed uint64, ops int, prefix string, tl *admTally) {
	ctx := context.Background()
	g := gen{rand.New(rand.NewPCG(seed, 0xad))}
	loc := limits.NewLocal(shard.New(shard.Config{Shards: 4, MaxKeys: 1 << 12}), limits.Config{})
	keys := make([]string, 4)
	lims := make([]engine.Limit, len(keys))
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
		if i == 3 {
			keys[i] = prefix + "{x}}y" // braces that are no hash tag of the key's own
		}
		lims[i] = engine.Limit{Algo: g.algo(), Limit: g.pick(1, 2, 3, 5, 10), Period: g.pick(1e9, 3e9+7, 60e9, 1e6+1)}
	}
	starts := []int64{1_795_000_000_123_456_789, 1 << 62, 1<<53 + 77}
	now := starts[int(seed)%len(starts)] + g.r.Int64N(1e12)
	var slots []slotPair
	var ress []resPair
	lastBan := -1 // the key whose check last started a ban
	fail := func(i int, what string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d op %d at now=%d: %s", seed, i, now, fmt.Sprintf(what, args...))
	}
	limitFor := func(ki int) engine.Limit {
		if g.r.IntN(40) == 0 {
			return g.limit(g.algo())
		}
		return lims[ki]
	}
	for i := 0; i < ops; i++ {
		// Forward only: Local reclaims expired records as its clock
		// advances, so a clock stepping back may or may not find them.
		switch g.r.IntN(6) {
		case 0:
		case 1:
			now += g.r.Int64N(1e6)
		case 2:
			now += g.pick(1e9, 3e9, 60e9, 1_000_001)
		default:
			now += g.r.Int64N(5e8)
		}
		at := c.At(now)
		ki := g.r.IntN(len(keys))
		k := keys[ki]
		kb := []byte(k)
		op := g.r.IntN(10)
		switch op {
		case 0: // acquire
			limit := g.pick(1, 2, 3, 3, 5, 1024)
			ttl := g.pick(1e6, 1e9, 2e9, 5e9, 30e9, 1)
			q := limits.Acquire{Key: kb, Limit: limit, TTL: ttl}
			werr := loc.Acquire(&q, now, nil)
			got, gerr := at.Acquire(ctx, k, limit, ttl)
			if werr != nil || gerr != nil {
				fail(i, "acquire %s: %v, %v", k, gerr, werr)
			}
			if got.Acquired != q.Acquired || got.InFlight != q.InFlight || got.RetryAfter != q.RetryAfter ||
				(q.Acquired && got.Slot != q.Token.Slot) {
				fail(i, "acquire %s limit %d ttl %d: got %+v, want %+v", k, limit, ttl, got, q)
			}
			if q.Acquired {
				slots = append(slots, slotPair{q.Token, got.Slot, got.Gen, k})
				(*tl)["acquire=1"]++
			} else {
				(*tl)["acquire=0"]++
			}
		case 1, 2: // release or refresh
			if len(slots) == 0 {
				continue
			}
			p := slots[max(0, len(slots)-1-g.r.IntN(4))] // mostly recent: older ones expired
			lt, gs, gg := p.local, p.slot, p.gen
			if g.r.IntN(8) == 0 { // a token that never held the slot
				lt.Gen += 1 << 40
				gg += 1 << 40
			}
			var want, got bool
			var werr, gerr error
			name := "release"
			if op == 1 {
				want, werr = loc.Release([]byte(p.key), lt, now, nil)
				got, gerr = at.Release(ctx, p.key, gs, gg)
			} else {
				name = "refresh"
				ttl := g.pick(1e6, 1e9, 5e9, 40e9)
				want, werr = loc.Refresh([]byte(p.key), lt, ttl, now, nil)
				got, gerr = at.Refresh(ctx, p.key, gs, gg, ttl)
			}
			if werr != nil || gerr != nil || got != want {
				fail(i, "%s %s %v: got %v, %v; want %v, %v", name, p.key, lt, got, gerr, want, werr)
			}
			(*tl)[name+"="+strconv.Itoa(int(boolInt(got)))]++
		case 3: // reserve
			l := limitFor(ki)
			est := g.pick(0, 1, 1, 2, 3, l.Limit, l.Limit+1, -1)
			ttl := g.pick(l.Period, 1e9, 5e9, 1e6)
			lim, lerr := engine.NewLimit(l.Algo, l.Limit, l.Period, 0)
			r := limits.Reserve{Key: kb, Limit: lim, Estimate: est, TTL: ttl}
			var werr error
			if lerr != nil {
				werr = lerr
			} else {
				werr = loc.Reserve(&r, now, nil)
			}
			d, up, gerr := at.Reserve(ctx, k, l, est, ttl)
			if !sameErr(gerr, werr) || (werr == nil && d != r.Decision) {
				fail(i, "reserve %s %+v est %d: got %+v, %v; want %+v, %v", k, l, est, d, gerr, r.Decision, werr)
			}
			switch {
			case werr != nil:
				(*tl)["error"]++
			case d.Allowed != 0:
				ress = append(ress, resPair{r.ID, up, k, est})
				(*tl)["reserve=1"]++
			default:
				(*tl)["reserve=0"]++
			}
		case 4: // settle
			if len(ress) == 0 {
				continue
			}
			p := ress[max(0, len(ress)-1-g.r.IntN(3))]
			actual := g.pick(0, 1, 2, 3, 5, 10, 100, 1<<31+5)
			lid, up := p.local, p.up
			if g.r.IntN(10) == 0 { // an id naming another limit finds nothing
				lid.Limit.Period++
				up.Limit.Period++
			}
			s := limits.Settle{Key: []byte(p.key), ID: lid, Actual: actual}
			werr := loc.Settle(&s, now, nil)
			got, gerr := at.Settle(ctx, p.key, up, actual)
			if !sameErr(gerr, werr) || got != s.Settled {
				fail(i, "settle %s %v actual %d: got %v, %v; want %v, %v", p.key, lid, actual, got, gerr, s.Settled, werr)
			}
			switch {
			case werr != nil:
				(*tl)["error"]++
			case !got:
				(*tl)["settle=0"]++
			case actual > p.est:
				(*tl)["settle-charge"]++
			case actual < p.est:
				(*tl)["settle-refund"]++
			}
		case 5, 6: // check with a penalty box
			l := limitFor(ki)
			cost := g.pick(0, 1, 1, 1, 2, 3, -1, l.Limit+1)
			dur := g.pick(1e6, 1e9, 5e9, 120e9, 600e9)
			b := engine.Ban{Threshold: g.pick(1, 1, 2, 3, 5), Window: l.Period, Duration: dur}
			cb := limits.CheckBan{Key: kb, Limit: l, Cost: cost, Ban: b}
			var werr error
			if _, err := engine.NewLimit(l.Algo, l.Limit, l.Period, l.Burst); err != nil {
				werr = err
			} else {
				werr = loc.CheckBan(&cb, now, nil)
			}
			got, gerr := at.CheckBan(ctx, k, l, cost, b)
			if !sameErr(gerr, werr) || (werr == nil && got != cb.Decision) {
				fail(i, "checkban %s %+v cost %d %+v: got %+v, %v; want %+v, %v", k, l, cost, b, got, gerr, cb.Decision, werr)
			}
			switch {
			case werr != nil:
				(*tl)["error"]++
			case got.Allowed != 0:
				(*tl)["checkban=1"]++
			default:
				(*tl)["checkban=0"]++
				lastBan = ki
				if got.RetryAfter >= (dur+999_999)/1e6 {
					(*tl)["ban-started"]++
				}
			}
		case 7: // banned, or now and then unban
			if lastBan >= 0 && g.r.IntN(2) == 0 {
				k, kb = keys[lastBan], []byte(keys[lastBan])
			}
			if g.r.IntN(4) == 0 {
				want, werr := loc.Unban(kb, now, nil)
				got, gerr := at.Unban(ctx, k)
				if werr != nil || gerr != nil || got != want {
					fail(i, "unban %s: got %v, %v; want %v, %v", k, got, gerr, want, werr)
				}
				(*tl)["unban="+strconv.Itoa(int(boolInt(got)))]++
				break
			}
			want, werr := loc.Banned(kb, now)
			got, gerr := at.Banned(ctx, k)
			if werr != nil || gerr != nil || got != want {
				fail(i, "banned %s: got %d, %v; want %d, %v", k, got, gerr, want, werr)
			}
			if got > 0 {
				(*tl)["banned>0"]++
			} else {
				(*tl)["banned=0"]++
			}
		default: // a plain check, so the states also move outside the records
			l := limitFor(ki)
			cost := g.pick(0, 1, 1, 2)
			o := limits.Op{Kind: limits.OpCheck, Key: kb, Limit: l, Cost: cost}
			if _, err := engine.NewLimit(l.Algo, l.Limit, l.Period, l.Burst); err != nil {
				o.Err = err
			} else {
				loc.Do(&o, now, nil)
			}
			got, gerr := at.Check(ctx, k, l, cost)
			if !sameErr(gerr, o.Err) || (o.Err == nil && got != o.Decision) {
				fail(i, "check %s %+v cost %d: got %+v, %v; want %+v, %v", k, l, cost, got, gerr, o.Decision, o.Err)
			}
		}
		// The user key holds the same live state on both sides.
		want := ""
		if st, exp, ok := loc.Lookup(kb, now, nil); ok {
			want = fmt.Sprintf("%d %d %d %d", st.Kind, st.A, st.B, exp)
		}
		raw, _ := c.rdb.Get(ctx, k).Result()
		if f := strings.Fields(raw); len(f) == 4 {
			if exp, _ := strconv.ParseInt(f[3], 10, 64); exp <= now {
				raw = ""
			}
		}
		if raw != want {
			fail(i, "after op %d, key %s holds %q, want %q", op, k, raw, want)
		}
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// TestSlotTags checks that every hash slot has a tag and that record keys
// hash to their user key's slot, whatever braces the user key holds.
func TestSlotTags(t *testing.T) {
	tags := slotTags()
	for s, tag := range tags {
		if tag == [3]byte{} || Slot(string(tag[:])) != s {
			t.Fatalf("slot %d: tag %q hashes to %d", s, tag[:], Slot(string(tag[:])))
		}
	}
	for _, k := range []string{"", "a", "{t}:x", "a}b", "{}x", "{", "}{x}", "x{y", "{a}{b}", "k\x00\xff"} {
		for _, rk := range []string{recordKey('s', k, ""), recordKey('b', k, ""), recordKey('r', k, "7.1.10.1000")} {
			if Slot(rk) != Slot(k) {
				t.Errorf("record %q of key %q: slot %d, the key's is %d", rk, k, Slot(rk), Slot(k))
			}
		}
	}
}

// TestAdmissionUpstreamClock runs each admission script on the upstream's
// own clock (TIME), the way servers call them: the records get a Redis
// expiry (so an abandoned slot, ban or reservation costs nothing once it
// lapses) and the operations answer as at an injected instant.
func TestAdmissionUpstreamClock(t *testing.T) {
	c, err := Dial("redis://"+clustertest.Server(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	pttl := func(key string) int64 {
		t.Helper()
		d, err := c.rdb.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d.Milliseconds()
	}

	g, err := c.Acquire(ctx, "uc", 1, 3600e9)
	if err != nil || !g.Acquired || g.InFlight != 1 || g.Gen <= 0 {
		t.Fatalf("acquire: %+v, %v", g, err)
	}
	if ms := pttl(recordKey('s', "uc", "")); ms <= 0 || ms > 3_600_001 {
		t.Errorf("slot hash expires in %d ms, want within the hour's ttl", ms)
	}
	if again, err := c.Acquire(ctx, "uc", 1, 3600e9); err != nil || again.Acquired || again.RetryAfter <= 0 {
		t.Errorf("second acquire at limit 1: %+v, %v; want denied with a retry", again, err)
	}
	if ok, err := c.Refresh(ctx, "uc", g.Slot, g.Gen, 7200e9); err != nil || !ok {
		t.Errorf("refresh: %v, %v", ok, err)
	}
	if ms := pttl(recordKey('s', "uc", "")); ms <= 3_600_001 || ms > 7_200_001 {
		t.Errorf("after a refresh to two hours the slot hash expires in %d ms", ms)
	}
	if ok, err := c.Release(ctx, "uc", g.Slot, g.Gen); err != nil || !ok {
		t.Errorf("release: %v, %v", ok, err)
	}
	if ok, err := c.Release(ctx, "uc", g.Slot, g.Gen); err != nil || ok {
		t.Errorf("second release: %v, %v; want false", ok, err)
	}

	lim, _ := engine.NewLimit(engine.KindFixed, 1, 3600e9, 0)
	b, _ := engine.NewBan(1, lim.Period, 1800e9)
	if d, err := c.CheckBan(ctx, "ub", lim, 2, b); err != nil || d.Allowed != 0 {
		t.Fatalf("checkban over the limit: %+v, %v", d, err)
	}
	if ms, err := c.Banned(ctx, "ub"); err != nil || ms <= 0 || ms > 1_800_001 {
		t.Errorf("banned: %d, %v; want the 30 min ban", ms, err)
	}
	if ms := pttl(recordKey('b', "ub", "")); ms <= 0 || ms > 1_800_001 {
		t.Errorf("ban record expires in %d ms, want within the 30 min ban", ms)
	}
	if ok, err := c.Unban(ctx, "ub"); err != nil || !ok {
		t.Errorf("unban: %v, %v", ok, err)
	}

	d, r, err := c.Reserve(ctx, "ur", lim, 1, 600e9)
	if err != nil || d.Allowed != 1 || r.Seq < 0 {
		t.Fatalf("reserve: %+v %+v, %v", d, r, err)
	}
	if ms := pttl(r.recordKey("ur")); ms <= 0 || ms > 600_001 {
		t.Errorf("reservation record expires in %d ms, want within its 10 min ttl", ms)
	}
	if ok, err := c.Settle(ctx, "ur", r, 0); err != nil || !ok {
		t.Errorf("settle: %v, %v", ok, err)
	}
	if d, err := c.Check(ctx, "ur", lim, 1); err != nil || d.Allowed != 1 {
		t.Errorf("the refund of a settle at 0 left no room: %+v, %v", d, err)
	}
}

// TestReserveIDInUse: a reservation whose drawn id is already open on its
// key is refused by the script (TKDUP) before anything is charged, and
// Reserve draws again.
func TestReserveIDInUse(t *testing.T) {
	c, err := Dial("redis://"+clustertest.Server(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	at := c.At(1_795_000_000_000_000_000)
	lim, _ := engine.NewLimit(engine.KindFixed, 10, 60e9, 0)
	d, r, err := at.Reserve(ctx, "dup", lim, 2, 60e9)
	if err != nil || d.Allowed != 1 {
		t.Fatalf("reserve: %+v, %v", d, err)
	}
	// The same id again, straight to the script.
	_, err = decisionOf(at.run(ctx, at.s.reserve, []string{"dup", r.recordKey("dup")}, at.now, "reserve",
		"fixed", lim.Limit, lim.Period, 2, int64(60e9)))
	if err == nil || !strings.Contains(err.Error(), "TKDUP") {
		t.Fatalf("a reservation id in use: %v, want TKDUP", err)
	}
	if p, err := at.Peek(ctx, "dup", lim, 1); err != nil || p.Remaining != 8 {
		t.Fatalf("after the refused reservation: %+v, %v; want only the first 2 units charged", p, err)
	}
	// Through Reserve: the first draw is the id in use, the second a new one.
	draws := []int64{r.Seq, r.Seq + 1}
	at.draw = func() int64 { n := draws[0]; draws = draws[1:]; return n }
	d2, r2, err := at.Reserve(ctx, "dup", lim, 3, 60e9)
	if err != nil || d2.Allowed != 1 || r2.Seq != r.Seq+1 || d2.Remaining != 5 {
		t.Fatalf("reserve drawing an id in use first: %+v %+v, %v; want the second id, 3 more units charged", d2, r2, err)
	}
}
