package attack

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestPipelineWithoutReading sends a million pipelined commands and never
// reads a reply. The replies (about 300 MiB) pile up behind the client
// until the output buffer limit closes the connection; the server's
// resident memory stays bounded throughout, and other clients are served.
func TestPipelineWithoutReading(t *testing.T) {
	const commands = 1_000_000
	p := startServer(t) // default limits: client-output-buffer-limit 128mb
	watch := watchRSS(t, p)
	ctl := startControl(t, p, true)

	nc, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// Each ECHO of a 300-byte argument draws a 307-byte reply.
	one := cmd("ECHO", string(bytes.Repeat([]byte{'e'}, 300)))
	batch := bytes.Repeat(one, 1000)
	_ = nc.SetWriteDeadline(time.Now().Add(120 * time.Second))
	sent, werr := 0, error(nil)
	for sent < commands {
		if _, werr = nc.Write(batch); werr != nil {
			break
		}
		sent += 1000
	}
	var ne net.Error
	if errors.As(werr, &ne) && ne.Timeout() {
		t.Fatalf("writes blocked for 120 s after %d commands: the server stopped reading but kept the connection", sent)
	}
	// Whether the writes failed (the server closed first) or all went
	// through, the connection must end without a million replies.
	_ = nc.SetReadDeadline(time.Now().Add(120 * time.Second))
	got, rerr := io.Copy(io.Discard, nc)
	if errors.As(rerr, &ne) && ne.Timeout() {
		t.Fatalf("connection still open 120 s after %d commands (%d reply bytes read)", sent, got)
	}
	replies := got / int64(len("$300\r\n")+300+2)
	if replies >= commands {
		t.Fatalf("all %d replies arrived: the output buffer limit never closed the connection", replies)
	}
	lat := ctl.stop(t)
	peak := watch.stop()
	t.Logf("sent %d of %d commands (write error: %v); %d bytes of replies readable after the close (~%d replies)",
		sent, commands, werr, got, replies)
	t.Logf("server peak RSS %s (now %s)", mib(peak), mib(p.rss(t)))
	t.Logf("control client meanwhile: %d commands, p50 %v, p99 %v, max %v",
		len(lat), lat.quantile(0.5), lat.quantile(0.99), lat.quantile(1))
	if peak > 1<<30 {
		t.Errorf("peak RSS %s over 1 GiB", mib(peak))
	}
	if p99 := lat.quantile(0.99); p99 > time.Second {
		t.Errorf("control client p99 %v > 1s", p99)
	}
	if got := dial(t, p).do("PING"); got.str != "PONG" {
		t.Fatalf("PING after the attack = %+v", got)
	}
}
