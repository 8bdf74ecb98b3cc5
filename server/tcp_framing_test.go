package server_test

// Framing over real TCP: commands cut at every byte, sent in 64 KiB
// pieces, a 64 MiB argument, a command of 1M arguments, pipelines that mix
// complete and partial frames, and the query buffer limit. None of these
// waits on a clock: each reads the replies it expects, in order.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/throttlekit/throttlekit-server/server"
)

// sendPieces writes b in writes of at most size bytes.
func (c *rawConn) sendPieces(t testing.TB, b []byte, size int) {
	t.Helper()
	for len(b) > 0 {
		n := min(size, len(b))
		c.send(t, string(b[:n]))
		b = b[n:]
	}
}

func TestFramingByteByByte(t *testing.T) {
	ts := startServer(t, nil)
	c := dialRaw(t, ts.Addr)
	in := encodeCommand("ECHO", "a\r\nb\x00") + "PING\r\n" + encodeCommand("ECHO", strings.Repeat("x", 300)) +
		"ECHO \"q\\x41\"\r\n" + "*0\r\n" + encodeCommand("PING")
	c.sendPieces(t, []byte(in), 1)
	for i, want := range []any{"a\r\nb\x00", "PONG", strings.Repeat("x", 300), "qA", "PONG"} {
		if got := c.read(t); got != want {
			t.Fatalf("reply %d = %#v, want %#v", i, got, want)
		}
	}
}

func TestFraming64KiBPieces(t *testing.T) {
	ts := startServer(t, nil)
	c := dialRaw(t, ts.Addr)
	arg := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	c.sendPieces(t, []byte(encodeCommand("ECHO", string(arg))+encodeCommand("PING")), 64<<10)
	if got := c.read(t); got != string(arg) {
		t.Fatalf("echo of %d bytes came back as %d bytes", len(arg), len(fmt.Sprint(got)))
	}
	if got := c.read(t); got != "PONG" {
		t.Fatalf("PING after the frame: %#v", got)
	}
}

// TestFramingLargeArgument sends a 64 MiB argument in 64 KiB pieces to a
// server whose query buffer limit admits it, and checks it comes back whole.
func TestFramingLargeArgument(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 128 MiB through a socket")
	}
	ts := startServer(t, func(c *server.Config) { c.QueryBufferLimit = 80 << 20 })
	c := dialRaw(t, ts.Addr)
	arg := bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz012345"), 2<<20) // 64 MiB
	frame := append([]byte("*2\r\n$4\r\nECHO\r\n$"+strconv.Itoa(len(arg))+"\r\n"), arg...)
	frame = append(frame, "\r\n"...)
	c.sendPieces(t, frame, 64<<10)
	got, ok := c.read(t).(string)
	if !ok || len(got) != len(arg) || got != string(arg) {
		t.Fatalf("echo of %d bytes came back as %d bytes", len(arg), len(got))
	}
	if got := c.do(t, "PING"); got != "PONG" {
		t.Fatalf("PING after the frame: %#v", got)
	}
}

// TestFramingMillionArgs sends one command of 1M arguments (ECHO, which
// takes one: the reply is an arity error) and then a PING on the same
// connection.
func TestFramingMillionArgs(t *testing.T) {
	ts := startServer(t, nil)
	c := dialRaw(t, ts.Addr)
	const argc = 1_000_000
	var b bytes.Buffer
	b.WriteString("*" + strconv.Itoa(argc+1) + "\r\n$4\r\nECHO\r\n")
	for i := range argc {
		a := strconv.Itoa(10_000_000 + i)
		b.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
	}
	b.WriteString(encodeCommand("PING"))
	c.sendPieces(t, b.Bytes(), 64<<10)
	if got, ok := c.read(t).(respErr); !ok || !strings.Contains(string(got), "wrong number of arguments") {
		t.Fatalf("ECHO with 1M arguments: %#v, want an arity error", got)
	}
	if got := c.read(t); got != "PONG" {
		t.Fatalf("PING after the frame: %#v", got)
	}
}

// TestFramingMixedPipeline sends a long pipeline of commands of every size
// in pieces of random length, so that frames are cut at every kind of
// point: in headers, in data, between CR and LF, and between frames.
func TestFramingMixedPipeline(t *testing.T) {
	ts := startServer(t, nil)
	c := dialRaw(t, ts.Addr)
	rng := rand.New(rand.NewPCG(1, 2))
	var (
		in   bytes.Buffer
		want []any
	)
	for i := range 2000 {
		switch i % 5 {
		case 0:
			in.WriteString("PING\r\n")
			want = append(want, "PONG")
		case 1:
			in.WriteString(encodeCommand("PING"))
			want = append(want, "PONG")
		default:
			arg := strings.Repeat(string(rune('a'+i%26)), rng.IntN(1<<uint(rng.IntN(17)+1)))
			in.WriteString(encodeCommand("ECHO", arg))
			want = append(want, arg)
		}
	}
	done := make(chan error, 1)
	go func() {
		// Read while writing: the replies of a long pipeline exceed what
		// the socket buffers hold.
		for i, w := range want {
			got, err := readReply(c.r)
			if err != nil {
				done <- fmt.Errorf("reply %d: %v", i, err)
				return
			}
			if got != w {
				done <- fmt.Errorf("reply %d: %.40q, want %.40q", i, got, w)
				return
			}
		}
		done <- nil
	}()
	b := in.Bytes()
	for len(b) > 0 {
		n := min(len(b), 1+rng.IntN(100_000))
		if _, err := c.Conn.Write(b[:n]); err != nil {
			t.Fatalf("write: %v", err)
		}
		b = b[n:]
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestFramingQueryBufferLimit: a frame that cannot fit the limit is refused
// as soon as its header says so, without waiting for its data; one that
// grows past it without a header saying so (many arguments) is refused
// when it does. The limit must hold one bulk of ProtoMaxBulkLen, so the
// announced frame that overflows it has several bulks.
func TestFramingQueryBufferLimit(t *testing.T) {
	const reply = "ERR Protocol error: client reached max query buffer length"
	ts := startServer(t, func(c *server.Config) {
		c.QueryBufferLimit = 1 << 20
		c.ProtoMaxBulkLen = 1<<20 - server.QueryHeaderRoom
	})
	bulk := "$500000\r\n" + strings.Repeat("b", 500000) + "\r\n"
	tests := []struct {
		name string
		in   string
	}{
		{"announced bulk", "*4\r\n$4\r\nECHO\r\n" + bulk + bulk + "$500000\r\nabc"},
		{"announced arguments", "*500000\r\n$4\r\nECHO\r\n"},
		// 63 bytes past the limit: the client has sent everything by the
		// time the server refuses, so no byte arrives after its close (a
		// byte arriving then would make the server's kernel answer with a
		// reset, which can discard the error reply before it is read).
		{"grown past", "*100000\r\n" + strings.Repeat("$5\r\nabcde\r\n", 95330)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialRaw(t, ts.Addr)
			if got := c.do(t, "PING"); got != "PONG" {
				t.Fatalf("PING: %#v", got)
			}
			c.sendPieces(t, []byte(tt.in), 64<<10)
			if got := c.read(t); got != respErr(reply) {
				t.Fatalf("reply %#v, want %q", got, reply)
			}
			c.expectClosed(t)
		})
	}
	// A frame within the limit is served.
	c := dialRaw(t, ts.Addr)
	arg := strings.Repeat("z", 1<<19)
	c.sendPieces(t, []byte(encodeCommand("ECHO", arg)), 4096)
	if got := c.read(t); got != arg {
		t.Fatalf("ECHO of 512 KiB under a 1 MiB limit failed")
	}
}

// TestFramingDefaultLimit: with the default limits, one argument of
// DefaultProtoMaxBulkLen is served (the default query buffer holds it),
// and a longer one is refused from its header.
func TestFramingDefaultLimit(t *testing.T) {
	ts := startServer(t, nil)
	c := dialRaw(t, ts.Addr)
	arg := strings.Repeat("d", server.DefaultProtoMaxBulkLen)
	c.sendPieces(t, []byte(encodeCommand("ECHO", arg)), 1<<20)
	if got := c.read(t); got != arg {
		t.Fatalf("ECHO of DefaultProtoMaxBulkLen bytes failed")
	}
	c.send(t, "*2\r\n$4\r\nECHO\r\n$"+strconv.Itoa(server.DefaultProtoMaxBulkLen+1)+"\r\n")
	if got := c.read(t); got != respErr("ERR Protocol error: invalid bulk length") {
		t.Fatalf("reply %#v", got)
	}
	c.expectClosed(t)
}

// TestFramingMalformedByteByByte: a malformed header sent one byte at a
// time gets its protocol error as soon as it is complete, and the
// connection is closed, as whole.
func TestFramingMalformedByteByByte(t *testing.T) {
	ts := startServer(t, nil)
	for _, tc := range []struct{ in, want string }{
		{"*1\r\n$-5\r\n", "Protocol error: invalid bulk length"},
		{"*2\r\n$1\r\na\r\n$-3\r\n", "Protocol error: invalid bulk length"},
		{"*1\r\nX", "Protocol error: expected '$', got 'X'"},
	} {
		c := dialRaw(t, ts.Addr)
		c.sendPieces(t, []byte(tc.in), 1)
		got := c.read(t)
		if e, ok := got.(error); !ok || !strings.Contains(e.Error(), tc.want) {
			t.Fatalf("%q: reply %#v, want an error containing %q", tc.in, got, tc.want)
		}
		c.expectClosed(t)
	}
}
