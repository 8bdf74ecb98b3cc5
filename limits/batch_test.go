package limits

import (
	"testing"

	"github.com/throttlekit/throttlekit-server/engine"
)

// TestLocalExec: Local.Exec runs a Batch's items in order, each as its own
// call would, and an item that fails leaves the others to run.
func TestLocalExec(t *testing.T) {
	c := newLocal(t)
	now := int64(1_700_000_000_000_000_000)
	fixed := newLimit(t, engine.KindFixed, 2, 1e9)
	gcra := newLimit(t, engine.KindGCRA, 2, 1e9)
	m := &MCheck{Keys: [][]byte{[]byte("a"), []byte("b")}, Limits: []engine.Limit{fixed, fixed}, Cost: 1}
	b := &Batch{Items: []BatchItem{
		{Op: Op{Kind: OpCheck, Key: []byte("a"), Limit: fixed, Cost: 1}},
		{Op: Op{Kind: OpCheck, Key: []byte("a"), Limit: gcra, Cost: 1}}, // another algorithm: WRONGTYPE
		{MCheck: m},
		{Op: Op{Kind: OpPeek, Key: []byte("a"), Limit: fixed, Cost: 1}},
		{Op: Op{Kind: OpReset, Key: []byte("b")}},
	}}
	if err := c.Exec(b, now, nil); err != nil || b.Err != nil {
		t.Fatal(err, b.Err)
	}
	it := b.Items
	if it[0].Op.Err != nil || it[0].Op.Decision.Remaining != 1 {
		t.Fatalf("check: %+v %v", it[0].Op.Decision, it[0].Op.Err)
	}
	if it[1].Op.Err != engine.ErrWrongType {
		t.Fatalf("check of another algorithm: %v", it[1].Op.Err)
	}
	if m.Err != nil || !m.Allowed || m.Decisions[0].Remaining != 0 || m.Decisions[1].Remaining != 1 {
		t.Fatalf("mcheck after the check: %+v %v", m, m.Err)
	}
	if it[3].Op.Err != nil || it[3].Op.Decision.Allowed != 0 {
		t.Fatalf("peek of the spent window: %+v %v", it[3].Op.Decision, it[3].Op.Err)
	}
	if it[4].Op.Err != nil || it[4].Op.Accepted != 1 {
		t.Fatalf("reset of the key MCheck made: %d %v", it[4].Op.Accepted, it[4].Op.Err)
	}
}

// TestLocalExecAdmission: the admission items of a Batch run as their own
// calls would, each with its own result and error.
func TestLocalExecAdmission(t *testing.T) {
	c := newLocal(t)
	now := int64(1_700_000_000_000_000_000)
	one := newLimit(t, engine.KindFixed, 1, 1e9)
	fixed := newLimit(t, engine.KindFixed, 5, 1e9)
	ban, _ := engine.NewBan(1, 1e9, 5e9)
	acq := &Acquire{Key: []byte("s"), Limit: 1, TTL: 1e10}
	full := &Acquire{Key: []byte("s"), Limit: 1, TTL: 1e10}
	bad := &Acquire{Key: make([]byte, MaxKeyLen+1), Limit: 1, TTL: 1e10}
	cb := &CheckBan{Key: []byte("b"), Limit: one, Cost: 2, Ban: ban}
	banned := &BanCall{Key: []byte("b")}
	res := &Reserve{Key: []byte("r"), Limit: fixed, Estimate: 3, TTL: 1e10}
	b := &Batch{Items: []BatchItem{{Acquire: acq}, {Acquire: full}, {Acquire: bad}, {CheckBan: cb}, {Ban: banned}, {Reserve: res}}}
	if err := c.Exec(b, now, nil); err != nil || b.Err != nil {
		t.Fatal(err, b.Err)
	}
	if acq.Err != nil || !acq.Acquired || full.Err != nil || full.Acquired || full.InFlight != 1 || bad.Err == nil {
		t.Fatalf("acquire %+v, then %+v, key too long %v", acq, full, bad.Err)
	}
	if cb.Err != nil || cb.Decision.Allowed != 0 || banned.Err != nil || banned.Left != 5000 {
		t.Fatalf("check with ban %+v %v, banned %d %v", cb.Decision, cb.Err, banned.Left, banned.Err)
	}
	if res.Err != nil || res.Decision.Remaining != 2 {
		t.Fatalf("reserve %+v %v", res.Decision, res.Err)
	}
	rel := &SlotCall{Key: []byte("s"), Token: acq.Token}
	set := &Settle{Key: []byte("r"), ID: res.ID, Actual: 1}
	lift := &BanCall{Key: []byte("b"), Lift: true}
	b = &Batch{Items: []BatchItem{{Slot: rel}, {Settle: set}, {Ban: lift}}}
	if err := c.Exec(b, now, nil); err != nil || b.Err != nil {
		t.Fatal(err, b.Err)
	}
	if rel.Err != nil || !rel.Held || set.Err != nil || !set.Settled || lift.Err != nil || !lift.Lifted {
		t.Fatalf("release %+v, settle %+v, unban %+v", rel, set, lift)
	}
}
