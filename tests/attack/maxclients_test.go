package attack

import (
	"net"
	"strings"
	"testing"
	"time"
)

// TestMaxClients opens maxclients connections, then 200 more: each extra
// one gets Redis's refusal and is closed, and the first ones keep being
// served.
func TestMaxClients(t *testing.T) {
	const maxClients, extra = 50, 200
	p := startServer(t, "--maxclients", "50")

	// The start-up probe's connection may not be forgotten yet when the
	// first clients arrive: a refused one is retried, a bounded number of
	// times.
	admitted := make([]*conn, 0, maxClients)
	for len(admitted) < maxClients {
		var v value
		for try := 0; ; try++ {
			c := dial(t, p)
			c.write(cmd("PING"))
			_ = c.c.SetReadDeadline(time.Now().Add(60 * time.Second))
			var err error
			if v, err = c.reply(); err == nil && v.str == "PONG" {
				admitted = append(admitted, c)
				break
			}
			c.c.Close()
			if try == 100 {
				t.Fatalf("client %d not admitted after %d tries: %+v, %v", len(admitted)+1, try, v, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	const refusal = "-ERR max number of clients reached\r\n"
	for i := 0; i < extra; i++ {
		nc, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatalf("extra connection %d: dial: %v", i, err)
		}
		c := newConn(t, nc)
		got := c.expectClosed(60 * time.Second)
		nc.Close()
		if string(got) != refusal {
			t.Fatalf("extra connection %d got %q, want %q then the close", i, got, refusal)
		}
	}

	// Every admitted client still works, and the server counts exactly them.
	for i, c := range admitted {
		if v := c.do("THROTTLE.CHECK", "mc", "1000", "1h"); v.kind != '*' || len(v.elems) != 5 || v.elems[0].n != 1 {
			t.Fatalf("admitted client %d: THROTTLE.CHECK = %+v", i, v)
		}
	}
	info := admitted[0].do("INFO", "clients")
	if !strings.Contains(info.str, "connected_clients:50\r\n") {
		t.Fatalf("INFO clients after the refusals:\n%s", info.str)
	}
	if v := admitted[0].do("INFO", "stats"); !strings.Contains(v.str, "rejected_connections:") {
		t.Logf("INFO stats has no rejected_connections line")
	} else {
		for _, line := range strings.Split(v.str, "\r\n") {
			if strings.HasPrefix(line, "rejected_connections:") {
				t.Logf("INFO stats %s after %d extra connections", line, extra)
			}
		}
	}
	// Once one admitted client leaves, a new one is admitted again.
	admitted[0].c.Close()
	for try := 0; ; try++ {
		c := dial(t, p)
		c.write(cmd("PING"))
		_ = c.c.SetReadDeadline(time.Now().Add(60 * time.Second))
		if v, err := c.reply(); err == nil && v.str == "PONG" {
			break
		} else if try == 500 {
			t.Fatalf("no slot freed after a client left: %+v, %v", v, err)
		}
		c.c.Close()
		time.Sleep(10 * time.Millisecond)
	}
}
