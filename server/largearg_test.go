package server

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/throttlekit/throttlekit-server/server/resp"
)

// pieceSocket serves data in pieces of random length, with EAGAIN between
// some of them, as a non-blocking socket fed by a sender would.
type pieceSocket struct {
	data  []byte
	rng   *rand.Rand
	reads int
	ready bool
}

func (s *pieceSocket) read(p []byte) (int, error) {
	s.reads++
	if len(s.data) == 0 || !s.ready {
		s.ready = true
		return -1, unix.EAGAIN
	}
	n := copy(p, s.data[:min(len(s.data), 1+s.rng.IntN(300<<10))])
	s.data = s.data[n:]
	s.ready = s.rng.IntN(4) != 0
	return n, nil
}

// TestReadDirectExactBuffer streams a frame with one 8 MiB argument
// through readDirect in random pieces, parsing whenever the pending frame
// can have changed, as OnTraffic does. The argument ends up in a buffer of
// exactly the frame's length, the buffer never runs ahead of what arrived
// by more than queryGrowth, little is copied on the way, and the command
// after the frame is left unread.
func TestReadDirectExactBuffer(t *testing.T) {
	const argLen = 8 << 20
	arg := bytes.Repeat([]byte{'a'}, argLen)
	for i := range arg {
		arg[i] = byte('a' + i%26)
	}
	frame := []byte("*2\r\n$4\r\nECHO\r\n$" + strconv.Itoa(argLen) + "\r\n")
	frame = append(append(frame, arg...), "\r\n"...)
	next := []byte("*1\r\n$4\r\nPING\r\n")

	for seed := range uint64(5) {
		sock := &pieceSocket{data: append(append([]byte(nil), frame...), next...), rng: rand.New(rand.NewPCG(seed, 1))}
		var (
			p      resp.Parser
			pend   resp.Pending
			cl     client
			copied int
			lazy   int
			args   [][]byte
		)
		lim := resp.Limits{MaxBulkLen: argLen}
		for n := 0; n == 0; {
			cl.moveQuery(moveBudget)
			if need := pend.Need(); len(cl.qbuf) == 0 || need-int64(len(cl.qbuf)) <= directReadMin {
				// What gnet delivers itself: the frame's head and its
				// last bytes (kept short of the next command here, to
				// see the final buffer's size).
				k := min(len(sock.data)-len(next), readBufferCap)
				if len(cl.qbuf)+k > cap(cl.qbuf) {
					cl.moveQuery(-1)
					copied += len(cl.qbuf)
				}
				cl.qbuf = growQuery(cl.qbuf, k, need)
				cl.qbuf = append(cl.qbuf, sock.data[:k]...)
				sock.data = sock.data[k:]
			} else {
				before, held := cap(cl.qbuf), len(cl.qbuf)
				var from []byte
				cl.qbuf, from = readDirect(cl.qbuf, sock.read, need, directReadBudget, cl.qmove.from != nil)
				if from != nil {
					cl.qmove = queryMove{from: from}
					lazy++
				}
				if cap(cl.qbuf) != before {
					copied += held
				}
				if int64(len(cl.qbuf)) > need {
					t.Fatalf("seed %d: read %d bytes, past the %d the frame was known to need", seed, len(cl.qbuf), need)
				}
			}
			if cap(cl.qbuf) > queryGrowth*max(len(cl.qbuf), readBufferCap) {
				t.Fatalf("seed %d: buffer of %d bytes for %d received", seed, cap(cl.qbuf), len(cl.qbuf))
			}
			if int64(len(cl.qbuf)) < pend.Wait() {
				continue
			}
			if int64(len(cl.qbuf)) >= int64(len(frame)) && cl.qmove.from != nil {
				t.Errorf("seed %d: %d bytes still to move when the frame completed", seed, len(cl.qmove.from)-cl.qmove.done)
			}
			cl.moveQuery(-1)
			var err error
			if n, args, err = p.Next(cl.qbuf, &pend, lim); err != nil {
				t.Fatal(err)
			}
			if sock.reads > 1_000_000 {
				t.Fatal("no progress")
			}
		}
		if sock.reads == 0 || lazy == 0 {
			t.Fatalf("seed %d: the socket was read directly %d times, the buffer moved lazily %d times", seed, sock.reads, lazy)
		}
		if len(args) != 2 || !bytes.Equal(args[1], arg) {
			t.Fatalf("seed %d: argument of %d bytes, want %d", seed, len(args[1]), argLen)
		}
		if cap(cl.qbuf) != len(frame) {
			t.Errorf("seed %d: final buffer of %d bytes; want exactly the frame's %d", seed, cap(cl.qbuf), len(frame))
		}
		if copied > len(frame)/queryGrowth+len(frame)/(queryGrowth*queryGrowth)+readBufferCap {
			t.Errorf("seed %d: %d bytes copied while growing", seed, copied)
		}
		if !bytes.Equal(sock.data, next) {
			t.Errorf("seed %d: %d bytes of the next command left unread, want %d", seed, len(sock.data), len(next))
		}
	}
}

// TestMoveQuery checks that a lazy move copies at most its budget per
// call and leaves the buffer whole.
func TestMoveQuery(t *testing.T) {
	from := make([]byte, 3*moveBudget+1)
	for i := range from {
		from[i] = byte(i % 251)
	}
	cl := &client{qbuf: make([]byte, len(from), 2*len(from)), qmove: queryMove{from: from}}
	for calls := 1; cl.qmove.from != nil; calls++ {
		done := cl.qmove.done
		cl.moveQuery(moveBudget)
		if cl.qmove.from != nil && cl.qmove.done-done != moveBudget {
			t.Fatalf("call %d moved %d bytes", calls, cl.qmove.done-done)
		}
		if calls > 4 {
			t.Fatal("no progress")
		}
	}
	if !bytes.Equal(cl.qbuf, from) {
		t.Fatal("the moved bytes differ")
	}
}

// TestGrowQueryLadder checks the steps a query buffer takes toward a large
// announced frame: each at most queryGrowth times what has arrived, the
// last one the frame's length exactly.
func TestGrowQueryLadder(t *testing.T) {
	const need = 64 << 20
	var q []byte
	var caps []int
	for len(q) < need {
		q = growQuery(q, min(readBufferCap, need-len(q)), need)
		if len(caps) == 0 || caps[len(caps)-1] != cap(q) {
			caps = append(caps, cap(q))
		}
		q = q[:cap(q)]
	}
	want := []int{need >> 9, need >> 6, need >> 3, need}
	if len(caps) != len(want) {
		t.Fatalf("capacities %v, want %v", caps, want)
	}
	for i := range want {
		if caps[i] != want[i] {
			t.Fatalf("capacities %v, want %v", caps, want)
		}
	}
}

// TestConsumeQueryReleases checks that a query buffer grown for a large
// frame is not kept once the frame is consumed.
func TestConsumeQueryReleases(t *testing.T) {
	big := make([]byte, 4<<20)
	tests := []struct {
		name    string
		rest    int
		wantCap func(c int) bool
	}{
		{"empty", 0, func(c int) bool { return c == 0 }},
		{"a few bytes follow", 100, func(c int) bool { return c == maxKeptQuery }},
		{"a large rest", 1 << 20, func(c int) bool { return c == len(big) }},
	}
	t.Run("left to the output queue", func(t *testing.T) {
		shared := make([]byte, 1<<20)
		cl := &client{qbuf: shared, qbufShared: true}
		copy(shared[len(shared)-4:], "*1\r\n")
		cl.consumeQuery(len(shared) - 4)
		if string(cl.qbuf) != "*1\r\n" || cap(cl.qbuf) != maxKeptQuery || cl.qbufShared || shared[0] != 0 {
			t.Fatalf("after consuming: %q cap %d shared %v; the queued buffer changed: %v", cl.qbuf, cap(cl.qbuf), cl.qbufShared, shared[0] != 0)
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := &client{qbuf: big}
			copy(big[len(big)-tt.rest:], bytes.Repeat([]byte{'r'}, tt.rest))
			cl.consumeQuery(len(big) - tt.rest)
			if len(cl.qbuf) != tt.rest || !tt.wantCap(cap(cl.qbuf)) {
				t.Fatalf("after consuming: len %d cap %d", len(cl.qbuf), cap(cl.qbuf))
			}
			if !bytes.Equal(cl.qbuf, bytes.Repeat([]byte{'r'}, tt.rest)) {
				t.Fatal("the rest was not kept")
			}
		})
	}
}

// TestCopyPieces checks copyPieces against copy, overlapping forward moves
// included.
func TestCopyPieces(t *testing.T) {
	src := make([]byte, 3*copyPiece+5)
	for i := range src {
		src[i] = byte(i)
	}
	dst := make([]byte, len(src)-7)
	if n := copyPieces(dst, src); n != len(dst) || !bytes.Equal(dst, src[:len(dst)]) {
		t.Fatalf("copied %d", n)
	}
	buf := append([]byte(nil), src...)
	off := copyPiece + 3
	if n := copyPieces(buf, buf[off:]); n != len(src)-off || !bytes.Equal(buf[:n], src[off:]) {
		t.Fatalf("overlapping move: copied %d", n)
	}
}

// streamConn is a connection whose input is delivered a read at a time, as
// gnet delivers it: each read lands in one reused buffer of gnet's read
// size, which Peek returns and Read and Discard consume.
type streamConn struct {
	testConn
	ctx  any
	buf  []byte // gnet's read buffer, reused by every read
	in   []byte // the unconsumed part of the last read
	outN int    // bytes written; the bytes themselves are dropped
}

func (c *streamConn) Context() any             { return c.ctx }
func (c *streamConn) InboundBuffered() int     { return len(c.in) }
func (c *streamConn) Peek(int) ([]byte, error) { return c.in, nil }
func (c *streamConn) Discard(n int) (int, error) {
	if n < 0 || n > len(c.in) {
		n = len(c.in)
	}
	c.in = c.in[n:]
	return n, nil
}
func (c *streamConn) Read(p []byte) (int, error) {
	n := copy(p, c.in)
	c.in = c.in[n:]
	return n, nil
}
func (c *streamConn) Write(p []byte) (int, error) { c.outN += len(p); return len(p), nil }

// deliver hands the next read of up to readBufferCap bytes of *stream to
// the server.
func (c *streamConn) deliver(s *Server, stream *[]byte) {
	k := min(len(*stream), readBufferCap)
	c.in = append(c.buf[:0], (*stream)[:k]...)
	*stream = (*stream)[k:]
	s.onTraffic(c)
}

// TestPipeStreamKeepsQueryBuffer: a client that pipelines small commands
// without pause (redis-cli --pipe), so that nearly every read ends inside
// a command, is served from one query buffer of at most pipeQueryCap
// bytes, reused: the second pass over the stream allocates that buffer
// once, not one per read (the query buffer used to be reallocated on every read, garbage
// that held the heap, and RSS, high after a million such commands). Once
// the stream ends between two commands the buffer is released.
func TestPipeStreamKeepsQueryBuffer(t *testing.T) {
	tl := newTestLoop(t, nil)
	c := &streamConn{buf: make([]byte, 0, readBufferCap)}
	tl.cl.conn = c
	c.ctx = tl.cl
	var stream []byte
	const cmds = 50_000
	for i := range cmds {
		stream = append(stream, cmd("THROTTLE.CHECK", fmt.Sprintf("pk:%d", i), "10", "1h")...) // lengths vary: reads end inside commands
	}
	pass := func() (reads, maxCap int) {
		in := stream
		for len(in) > 0 {
			c.deliver(tl.srv, &in)
			reads++
			maxCap = max(maxCap, cap(tl.cl.qbuf))
		}
		return reads, maxCap
	}
	_, maxCap := pass() // creates the keys
	if maxCap > pipeQueryCap {
		t.Fatalf("query buffer grew to %d bytes, want at most %d", maxCap, pipeQueryCap)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	reads, maxCap := pass()
	runtime.ReadMemStats(&after)
	if maxCap > pipeQueryCap {
		t.Fatalf("query buffer grew to %d bytes, want at most %d", maxCap, pipeQueryCap)
	}
	// The pass starts with no query buffer (the last one ended between
	// commands): it allocates the first cut's and one of pipeQueryCap.
	if got := after.TotalAlloc - before.TotalAlloc; got > 2*pipeQueryCap {
		t.Fatalf("%d bytes allocated in %d reads of a pipelined stream, want one query buffer", got, reads)
	}
	if len(tl.cl.qbuf) != 0 || cap(tl.cl.qbuf) > maxKeptQuery {
		t.Fatalf("after the stream: query buffer of %d bytes, %d held", cap(tl.cl.qbuf), len(tl.cl.qbuf))
	}
	tl.l.ctr.flush(&tl.l.pub)
	if n := tl.l.pub.cmds[cmdThrottleCheck].Load(); n != 2*cmds {
		t.Fatalf("%d checks answered, want %d", n, 2*cmds)
	}
}
