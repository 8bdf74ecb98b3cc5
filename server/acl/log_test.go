package acl

import (
	"fmt"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestLogMerge(t *testing.T) {
	l := NewLog(DefaultLogMaxLen)
	ev := Event{Reason: DeniedCommand, Context: ContextTopLevel, Object: "get", Username: "alice", ClientInfo: "id=1"}
	l.Add(ev, t0)
	ev.ClientInfo = "id=2"
	l.Add(ev, t0.Add(30*time.Second)) // merged: same everything within 60 s
	l.Add(ev, t0.Add(90*time.Second)) // merged: 60 s after the last update
	es := l.Entries(10, t0.Add(100*time.Second))
	if len(es) != 1 {
		t.Fatalf("entries = %d, want 1", len(es))
	}
	e := es[0]
	if e.Count != 3 || e.ClientInfo != "id=2" || e.EntryID != 0 ||
		e.TimestampCreated != t0.UnixMilli() || e.TimestampLastUpdated != t0.Add(90*time.Second).UnixMilli() ||
		e.AgeSeconds != 10 || e.Reason.String() != "command" || e.Context.String() != "toplevel" {
		t.Fatalf("entry = %+v", e)
	}
	// More than 60 s after the last update: a new entry.
	l.Add(ev, t0.Add(151*time.Second))
	// Different reason, context, object or user: new entries.
	l.Add(Event{Reason: DeniedKey, Object: "get", Username: "alice"}, t0.Add(152*time.Second))
	l.Add(Event{Reason: DeniedCommand, Context: ContextMulti, Object: "get", Username: "alice"}, t0.Add(152*time.Second))
	l.Add(Event{Reason: DeniedCommand, Object: "set", Username: "alice"}, t0.Add(152*time.Second))
	l.Add(Event{Reason: DeniedCommand, Object: "get", Username: "bob"}, t0.Add(152*time.Second))
	es = l.Entries(-1, t0)
	if len(es) != 0 {
		t.Fatalf("Entries(-1) = %d entries", len(es))
	}
	es = l.Entries(100, t0.Add(152*time.Second))
	if len(es) != 6 {
		t.Fatalf("entries = %d, want 6", len(es))
	}
	for i, want := range []int64{5, 4, 3, 2, 1, 0} {
		if es[i].EntryID != want {
			t.Fatalf("entry %d id %d, want %d (newest first)", i, es[i].EntryID, want)
		}
	}
	// Merging moves the entry to the front.
	l.Add(ev, t0.Add(160*time.Second))
	es = l.Entries(1, t0.Add(160*time.Second))
	if es[0].EntryID != 1 || es[0].Count != 2 {
		t.Fatalf("front entry = %+v", es[0])
	}
	l.Reset()
	if l.Len() != 0 {
		t.Fatal("Reset left entries")
	}
	l.Add(ev, t0)
	if es := l.Entries(10, t0); es[0].EntryID != 6 {
		t.Fatalf("entry ids must keep counting after Reset: %d", es[0].EntryID)
	}
}

func TestLogBoundAndScan(t *testing.T) {
	l := NewLog(5)
	for i := range 8 {
		l.Add(Event{Reason: DeniedKey, Object: fmt.Sprint("k", i), Username: "u"}, t0)
	}
	if l.Len() != 5 {
		t.Fatalf("Len = %d, want 5", l.Len())
	}
	if es := l.Entries(10, t0); es[0].Object != "k7" || es[4].Object != "k3" {
		t.Fatalf("kept %s..%s, want k7..k3", es[0].Object, es[4].Object)
	}
	// Only the 10 newest entries are searched for a merge.
	l = NewLog(100)
	old := Event{Reason: DeniedKey, Object: "old", Username: "u"}
	l.Add(old, t0)
	for i := range 10 {
		l.Add(Event{Reason: DeniedKey, Object: fmt.Sprint("k", i), Username: "u"}, t0)
	}
	l.Add(old, t0)
	if l.Len() != 12 {
		t.Fatalf("an entry beyond the 10 newest was merged: Len = %d", l.Len())
	}
	l.SetMaxLen(3)
	l.Add(old, t0) // merges with the newest; trimming waits for a new entry
	if l.Len() != 12 {
		t.Fatalf("Len = %d", l.Len())
	}
	l.Add(Event{Reason: DeniedAuth, Object: "AUTH", Username: "x"}, t0)
	if l.Len() != 3 {
		t.Fatalf("Len = %d after SetMaxLen(3)", l.Len())
	}
}

func TestDenialEvent(t *testing.T) {
	a := newTestACL(t)
	if err := a.SetUser("u", "on", "~a*", "+get"); err != nil {
		t.Fatal(err)
	}
	u := a.User("u")
	ar := args("get", "bkey")
	v := u.Check(cGet, -1, ar, []KeyRef{{1, KeyRead}})
	ev := u.DenialEvent(cGet, -1, ar, v, ContextMulti, "id=7")
	if ev != (Event{Reason: DeniedKey, Context: ContextMulti, Object: "bkey", Username: "u", ClientInfo: "id=7"}) {
		t.Fatalf("key event = %+v", ev)
	}
	ar = args("config", "get", "x")
	v = u.Check(cConfig, 0, ar, nil)
	ev = u.DenialEvent(cConfig, 0, ar, v, ContextTopLevel, "")
	if ev.Reason != DeniedCommand || ev.Object != "config|get" {
		t.Fatalf("command event = %+v", ev)
	}
	a.Log().Add(ev, t0)
	if a.Log().Len() != 1 {
		t.Fatal("ACL.Log did not record")
	}
}
