package attack

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMonitorThatNeverReads attaches a MONITOR client that never reads its
// feed while another client runs a million commands: the monitor is
// closed once its queued feed passes the output buffer limit, the server's
// memory stays bounded, and the busy client gets every reply.
func TestMonitorThatNeverReads(t *testing.T) {
	const commands = 1_000_000
	p := startServer(t)
	watch := watchRSS(t, p)
	mon := dial(t, p)
	if v := mon.do("MONITOR"); v.str != "OK" {
		t.Fatalf("MONITOR = %+v", v)
	}

	nc, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(120 * time.Second))
	// Each command shows as a monitor line of about 160 bytes: 160 MB of
	// feed in all.
	one := cmd("THROTTLE.CHECK", "mon:"+string(bytes.Repeat([]byte{'m'}, 80)), "1000000000", "1s")
	batch := bytes.Repeat(one, 1000)
	werr := make(chan error, 1)
	go func() {
		for i := 0; i < commands/1000; i++ {
			if _, err := nc.Write(batch); err != nil {
				werr <- err
				return
			}
		}
		werr <- nil
	}()
	r := bufio.NewReaderSize(nc, 256<<10)
	for got := 0; got < commands; {
		line, err := r.ReadSlice('\n')
		if err != nil {
			t.Fatalf("busy client: reply %d: %v", got, err)
		}
		if line[0] == '*' {
			got++
		} else if line[0] != ':' {
			t.Fatalf("busy client: reply %d: %q", got, line)
		}
	}
	if err := <-werr; err != nil {
		t.Fatalf("busy client: write: %v", err)
	}
	// The monitor has been dropped: what it can still read ends in EOF.
	_ = mon.c.SetReadDeadline(time.Now().Add(120 * time.Second))
	n, err := io.Copy(io.Discard, mon.r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("monitor still connected 120 s after the busy client finished (%d bytes of feed read)", n)
	}
	peak := watch.stop()
	t.Logf("%d commands with a monitor that never read: monitor closed after %d bytes of feed readable; server peak RSS %s (now %s)",
		commands, n, mib(peak), mib(p.rss(t)))
	if peak > 1<<30 {
		t.Errorf("peak RSS %s over 1 GiB", mib(peak))
	}
}

// TestConnectionChurn opens and drops thousands of connections, some
// mid-command: afterwards the server holds as many file descriptors and
// clients as before.
func TestConnectionChurn(t *testing.T) {
	const rounds = 3000
	p := startServer(t)
	admin := dial(t, p)
	// Only admin is connected once the start-up probe is forgotten.
	const baseClients = "connected_clients:1"
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if got := infoField(admin.do("INFO", "clients").str, "connected_clients"); got == baseClients {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("60 s after start: %s, want %s", got, baseClients)
		}
	}
	baseFDs := p.fds(t)
	half := []byte("*3\r\n$14\r\nTHROTTLE.CHECK\r\n$1\r\nk")
	for i := 0; i < rounds; i++ {
		nc, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		switch i % 3 {
		case 0: // closed at once
		case 1: // a frame cut in the middle
			_, _ = nc.Write(half)
		case 2: // a reset (SO_LINGER 0) after a whole command
			_, _ = nc.Write(cmd("PING"))
			_ = nc.(*net.TCPConn).SetLinger(0)
		}
		nc.Close()
	}
	// The server learns of the closes asynchronously: poll, with a
	// safety net, until its client count and descriptors are back.
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := infoField(admin.do("INFO", "clients").str, "connected_clients")
		fds := p.fds(t)
		if got == baseClients && fds <= baseFDs {
			t.Logf("%d connections opened and dropped: server file descriptors %d before, %d after", rounds, baseFDs, fds)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("60 s after %d connections came and went: %s (before: %s), %d file descriptors (before: %d): %s",
				rounds, got, baseClients, fds, baseFDs, p.fdList(t))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if v := admin.do("PING"); v.str != "PONG" {
		t.Fatalf("PING = %+v", v)
	}
}

// fds returns how many file descriptors p has open.
func (p *proc) fds(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("list fds of %s: %v", p.name, err)
	}
	return len(ents)
}

// fdList describes p's open file descriptors, for a failure message.
func (p *proc) fdList(t testing.TB) string {
	dir := fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range ents {
		target, _ := os.Readlink(dir + "/" + e.Name())
		fmt.Fprintf(&b, "%s->%s ", e.Name(), target)
	}
	return b.String()
}
