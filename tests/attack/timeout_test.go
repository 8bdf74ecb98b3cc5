package attack

import (
	"sync"
	"testing"
	"time"
)

// TestHalfSentCommandsTimeOut cuts frames in the middle and goes silent:
// with --timeout 1 the server closes each connection, after answering the
// complete commands that came before the cut.
func TestHalfSentCommandsTimeOut(t *testing.T) {
	p := startServer(t, "--timeout", "1")
	cases := []struct {
		name string
		send string
		want string // everything the server sends before closing
	}{
		{"nothing sent", "", ""},
		{"multibulk count only", "*3\r", ""},
		{"cut in a bulk header", "*4\r\n$14\r\nTHROTTLE.CH", ""},
		{"cut in a bulk length", "*2\r\n$4\r\nECHO\r\n$12", ""},
		{"large bulk announced, little sent", "*2\r\n$4\r\nECHO\r\n$10000000\r\nabc", ""},
		{"cut before the final CRLF", "*1\r\n$4\r\nPING", ""},
		{"inline without its newline", "THROTTLE.CHECK k 3 1s", ""},
		{"complete command then a cut", "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$3\r\nab", "+PONG\r\n"},
		{"cut inside MULTI", "MULTI\r\nTHROTTLE.CHECK k 3 1s\r\n*1\r\n$4\r\nEX", "+OK\r\n+QUEUED\r\n"},
	}
	var wg sync.WaitGroup
	took := make([]time.Duration, len(cases))
	for i, tc := range cases {
		c := dial(t, p)
		if tc.send != "" {
			c.write([]byte(tc.send))
		}
		start := time.Now()
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(tc.name, func(t *testing.T) {
				c.t = t
				got := c.expectClosed(60 * time.Second)
				took[i] = time.Since(start)
				if string(got) != tc.want {
					t.Errorf("received %q before the close, want %q", got, tc.want)
				}
			})
		}()
	}
	wg.Wait()
	for i, tc := range cases {
		t.Logf("%-36s closed after %v", tc.name, took[i].Round(10*time.Millisecond))
	}
	// The server itself is fine: a fresh client is served.
	if v := dial(t, p).do("PING"); v.str != "PONG" {
		t.Fatalf("PING after the timeouts = %+v", v)
	}
}
