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
