package server

import (
	"bytes"
	"crypto/sha256"
	"hash"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// fakeConn stands for a gnet connection whose socket takes room bytes
// and whose outbound buffer holds the rest, hashing what is sent in order.
type fakeConn struct {
	sum      hash.Hash
	n        int
	room     int // what the socket takes before gnet must buffer
	outbound int // bytes gnet would hold
	writes   int
	iovs     []int // buffers per Writev
	piece    int   // longest buffer handed over
	wakes    atomic.Int32
}

func newFakeConn(room int) *fakeConn { return &fakeConn{sum: sha256.New(), room: room} }

func (f *fakeConn) take(b []byte) {
	f.piece = max(f.piece, len(b))
	_, _ = f.sum.Write(b)
	f.n += len(b)
	direct := 0
	if f.outbound == 0 {
		direct = min(f.room, len(b))
		f.room -= direct
	}
	f.outbound += len(b) - direct
}

func (f *fakeConn) Write(b []byte) (int, error) {
	f.writes++
	f.take(b)
	return len(b), nil
}

func (f *fakeConn) Writev(bs [][]byte) (int, error) {
	f.iovs = append(f.iovs, len(bs))
	n := 0
	for _, b := range bs {
		f.take(b)
		n += len(b)
	}
	return n, nil
}

func (f *fakeConn) OutboundBuffered() int { return f.outbound }

func (f *fakeConn) Wake(gnet.AsyncCallback) error {
	f.wakes.Add(1)
	return nil
}

// read lets the client read everything: the socket is empty again.
func (f *fakeConn) read(room int) { f.outbound, f.room = 0, room }

// same reports whether f and g were sent the same bytes.
func (f *fakeConn) same(g *fakeConn) bool {
	return f.n == g.n && bytes.Equal(f.sum.Sum(nil), g.sum.Sum(nil))
}

// bigBatch is a pipeline with two large ECHOs among small replies.
func bigBatch() string {
	big := strings.Repeat("x", 3*bigReplyMin+17)
	other := strings.Repeat("y", bigReplyMin)
	return cmd("PING") + cmd("ECHO", big) + cmd("ECHO", "small") + cmd("ECHO", other) + cmd("PING", "tail")
}

// TestBigReplyQueued checks that a large ECHO read from the query buffer
// is queued by reference and handed to gnet a window at a time, in pieces
// of at most writePiece bytes, as the client reads, and that the bytes on
// the wire are those of the copying path.
func TestBigReplyQueued(t *testing.T) {
	in := bigBatch()
	const room = 256 << 10 // a socket buffer
	run := func(owned bool) (*fakeConn, *testLoop) {
		tl := newTestLoop(t, func(c *Config) { c.ProtoMaxBulkLen = 8 * bigReplyMin })
		tl.l.ownedInput = owned
		n, closed := tl.l.process(tl.cl, []byte(in), time.Now().UnixNano())
		tl.l.ownedInput = false
		if closed || n != len(in) {
			t.Fatalf("process: consumed %d of %d, closed %v", n, len(in), closed)
		}
		f := newFakeConn(room)
		if !owned {
			_, _ = f.Write(tl.l.out)
			return f, tl
		}
		if len(tl.l.out) > bigReplyMin {
			t.Fatalf("reply buffer holds %d bytes: the payloads were copied", len(tl.l.out))
		}
		tl.l.queueOut(tl.cl)
		if len(tl.l.bigs) != 0 || tl.l.bigBytes != 0 || !tl.cl.qbufShared {
			t.Fatalf("after queueOut: %d bigs, %d bytes, shared %v", len(tl.l.bigs), tl.l.bigBytes, tl.cl.qbufShared)
		}
		for calls := 0; tl.cl.outq.pending(); calls++ {
			before := f.n
			if err := tl.l.feed(f, tl.cl, false); err != nil {
				t.Fatal(err)
			}
			if handed := f.n - before; handed > feedBudget+writePiece {
				t.Fatalf("one call handed over %d bytes", handed)
			}
			if f.outbound > outWindow+feedBudget+writePiece {
				t.Fatalf("gnet holds %d bytes", f.outbound)
			}
			if calls > 1000 {
				t.Fatal("no progress")
			}
			f.read(room)
		}
		tl.cl.outq.reset()
		return f, tl
	}
	copied, _ := run(false)
	direct, tl := run(true)
	if !direct.same(copied) {
		t.Fatalf("queued replies differ from the copying path: %d bytes vs %d", direct.n, copied.n)
	}
	if direct.writes != 0 || direct.piece > writePiece {
		t.Errorf("%d writes, longest buffer %d; want writevs of at most %d", direct.writes, direct.piece, writePiece)
	}
	if direct.wakes.Load() == 0 {
		t.Error("feed never asked to be called again")
	}
	if tl.cl.outq.bytes != 0 || tl.cl.outq.bufs != nil {
		t.Errorf("queue not empty after the reply: %d bytes", tl.cl.outq.bytes)
	}
}

// TestFeedWaitsForReader checks that feed stops at the window while the
// client does not read, counts what is left for the output limit, and
// hands everything over when the connection closes after it.
func TestFeedWaitsForReader(t *testing.T) {
	tl := newTestLoop(t, func(c *Config) { c.ProtoMaxBulkLen = 64 * bigReplyMin })
	big := strings.Repeat("z", 16*bigReplyMin)
	in := cmd("ECHO", big)
	tl.l.ownedInput = true
	if n, _ := tl.l.process(tl.cl, []byte(in), time.Now().UnixNano()); n != len(in) {
		t.Fatalf("consumed %d of %d", n, len(in))
	}
	tl.l.ownedInput = false
	tl.l.queueOut(tl.cl)
	total := tl.cl.outq.bytes
	f := newFakeConn(0)
	for range 30 { // the client reads nothing
		if err := tl.l.feed(f, tl.cl, false); err != nil {
			t.Fatal(err)
		}
	}
	if f.outbound > outWindow+feedBudget || !tl.cl.outq.pending() {
		t.Fatalf("gnet holds %d bytes, %d queued", f.outbound, tl.cl.outq.bytes)
	}
	if got := int64(f.n) + tl.cl.outq.bytes; got != total {
		t.Fatalf("the %d bytes handed over and the queue's %d do not add up to the reply's %d", f.n, tl.cl.outq.bytes, total)
	}
	if tl.cl.outq.wake == nil {
		t.Fatal("no poll scheduled while waiting for the client")
	}
	if tl.cl.outq.poll != outPollMax {
		t.Fatalf("poll interval %v after thirty looks at a client that reads nothing; want the maximum %v", tl.cl.outq.poll, outPollMax)
	}
	f.read(0) // the client reads: the next look comes soon again
	if err := tl.l.feed(f, tl.cl, false); err != nil {
		t.Fatal(err)
	}
	if f.outbound >= outWindow && tl.cl.outq.poll != outPoll {
		t.Fatalf("poll interval %v after the client read; want %v", tl.cl.outq.poll, outPoll)
	}
	if err := tl.l.feed(f, tl.cl, true); err != nil {
		t.Fatal(err)
	}
	if tl.cl.outq.pending() || tl.cl.outq.wake != nil || int64(f.n) != total {
		t.Fatalf("after feeding all: %d queued, %d of %d handed over", tl.cl.outq.bytes, f.n, total)
	}
	want := newFakeConn(0)
	_, _ = want.Write(appendBulk(nil, []byte(big)))
	if !f.same(want) {
		t.Fatal("bytes handed over differ from the reply")
	}
}

// TestFeedManyBuffers checks that a queue of more than maxIovecs buffers
// is handed over in several writevs, in order.
func TestFeedManyBuffers(t *testing.T) {
	tl := newTestLoop(t, nil)
	payload := bytes.Repeat([]byte{'p'}, bigReplyMin)
	want := newFakeConn(0)
	tl.l.ownedInput = true
	for i := range maxIovecs {
		tl.l.appendBulkArg(tl.cl, payload)
		tl.l.out = appendInt(tl.l.out, int64(i))
		_, _ = want.Write(appendInt(appendBulk(nil, payload), int64(i)))
	}
	tl.l.ownedInput = false
	tl.l.queueOut(tl.cl)
	f := newFakeConn(0)
	if err := tl.l.feed(f, tl.cl, true); err != nil {
		t.Fatal(err)
	}
	if !f.same(want) {
		t.Fatal("bytes handed over differ from the replies")
	}
	if len(f.iovs) < 2 {
		t.Fatalf("writevs %v: want the buffers split", f.iovs)
	}
	for _, n := range f.iovs {
		if n > maxIovecs {
			t.Fatalf("a writev of %d buffers; the bound is %d", n, maxIovecs)
		}
	}
}

// TestAppendBulkArgCopies lists the cases where a large argument is copied
// into the reply buffer as before: not from the query buffer, inside
// MULTI, with CLIENT REPLY OFF, or below bigReplyMin.
func TestAppendBulkArgCopies(t *testing.T) {
	big := bytes.Repeat([]byte{'b'}, bigReplyMin)
	tests := []struct {
		name  string
		setup func(tl *testLoop)
		arg   []byte
	}{
		{"not owned", func(tl *testLoop) { tl.l.ownedInput = false }, big},
		{"small", func(*testLoop) {}, big[:bigReplyMin-1]},
		{"in multi", func(tl *testLoop) { tl.cl.multi = &multiState{multi: true} }, big},
		{"reply off", func(tl *testLoop) { tl.cl.intro.reply = replyOff }, big},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := newTestLoop(t, nil)
			tl.l.ownedInput = true
			tt.setup(tl)
			tl.l.appendBulkArg(tl.cl, tt.arg)
			if len(tl.l.bigs) != 0 || !bytes.Equal(tl.l.out, appendBulk(nil, tt.arg)) {
				t.Fatalf("%d refs, %d bytes in the reply buffer; want the copy", len(tl.l.bigs), len(tl.l.out))
			}
		})
	}
}
