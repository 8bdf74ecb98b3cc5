package attack

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestSlowBigUploads opens many connections that each announce a 64 MiB
// argument (the largest allowed) and send only its first MiB, then stop.
// The server holds what it received, but its memory stays proportional to
// that, not to what was announced, and other clients are served.
func TestSlowBigUploads(t *testing.T) {
	const (
		conns     = 200
		announced = 64 << 20
		sent      = 1 << 20
	)
	p := startServer(t)
	base := p.rss(t)
	watch := watchRSS(t, p)
	ctl := startControl(t, p, true)
	head := []byte("*2\r\n$4\r\nECHO\r\n$" + strconv.Itoa(announced) + "\r\n")
	chunk := bytes.Repeat([]byte{'u'}, 64<<10)
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := 0; i < conns; i++ {
		c := dial(t, p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.c.SetWriteDeadline(time.Now().Add(120 * time.Second))
			if _, err := c.c.Write(head); err != nil {
				errs <- err
				return
			}
			for n := 0; n < sent; n += len(chunk) {
				if _, err := c.c.Write(chunk); err != nil {
					errs <- fmt.Errorf("after %d bytes: %w", n, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("upload: %v", err)
	}
	// Wait (a safety net of 60 s, not a timing assertion) until the server
	// has read every byte: then what it holds is the whole upload.
	unread := p.recvQueue(t)
	for deadline := time.Now().Add(60 * time.Second); unread > 0; unread = p.recvQueue(t) {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still unread by the server after 60 s", unread)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if v := dial(t, p).do("PING"); v.str != "PONG" {
		t.Fatalf("PING during the uploads = %+v", v)
	}
	now := p.rss(t)
	info := dial(t, p).do("INFO", "clients")
	lat := ctl.stop(t)
	peak := watch.stop()
	t.Logf("%d connections each announced %s and sent %s (%s in all, all read): server RSS %s before, %s after (%.2f bytes per byte received), peak %s; %s",
		conns, mib(announced), mib(sent), mib(conns*sent), mib(base), mib(now),
		float64(now-base)/float64(conns*sent), mib(peak), infoField(info.str, "connected_clients"))
	t.Logf("control client meanwhile: %d commands, p50 %v, p99 %v, max %v",
		len(lat), lat.quantile(0.5), lat.quantile(0.99), lat.quantile(1))
	if peak > 1<<30 {
		t.Errorf("peak RSS %s over 1 GiB for %s received", mib(peak), mib(conns*sent))
	}
	// Hundreds of connections streaming at once on a machine of two
	// cores: the bound is loose on purpose (the figure is in the log).
	if p99 := lat.quantile(0.99); p99 > 5*time.Second {
		t.Errorf("control client p99 %v > 5s", p99)
	}
}

// TestQueryBufferLimit sends one command of 300 arguments of 1 MiB each,
// every argument within proto-max-bulk-len, the whole far over
// client-query-buffer-limit: the server answers with Redis's error and
// closes the connection without holding them. redis-server's
// behaviour on the same input with the same settings is logged.
func TestQueryBufferLimit(t *testing.T) {
	const (
		args   = 300
		argLen = 1 << 20
	)
	flags := []string{"--proto-max-bulk-len", "1mb", "--client-query-buffer-limit", "2mb"}
	ours := startServer(t, flags...)
	watch := watchRSS(t, ours)
	got, sent := uploadMany(t, ours, args, argLen)
	peak := watch.stop()
	const want = "-ERR Protocol error: client reached max query buffer length\r\n"
	t.Logf("throttlekit-server: %q after %s sent; peak RSS %s", got, mib(sent), mib(peak))
	if string(got) != want {
		t.Errorf("got %q, want %q then the close", got, want)
	}
	if peak > 1<<30 {
		t.Errorf("peak RSS %s over 1 GiB", mib(peak))
	}
	if v := dial(t, ours).do("PING"); v.str != "PONG" {
		t.Fatalf("PING after the attack = %+v", v)
	}

	t.Run("redis-server", func(t *testing.T) {
		redis := startRedis(t, flags...)
		watch := watchRSS(t, redis)
		got, sent := uploadMany(t, redis, args, argLen)
		t.Logf("redis-server: %q after %s sent; peak RSS %s", trim(got), mib(sent), mib(watch.stop()))
	})
}

// uploadMany streams one command of n arguments of size bytes each to p
// while reading what comes back, and returns what the server sent before
// closing (or answering) and how much was written.
func uploadMany(t *testing.T, p *proc, n, size int) ([]byte, int64) {
	t.Helper()
	c := dial(t, p)
	var written int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.c.SetWriteDeadline(time.Now().Add(120 * time.Second))
		hdr := []byte("*" + strconv.Itoa(n) + "\r\n")
		if _, err := c.c.Write(hdr); err != nil {
			return
		}
		arg := append([]byte("$"+strconv.Itoa(size)+"\r\n"), bytes.Repeat([]byte{'q'}, size)...)
		arg = append(arg, "\r\n"...)
		for i := 0; i < n; i++ {
			m, err := c.c.Write(arg)
			written += int64(m)
			if err != nil {
				return
			}
		}
		// Still open after the whole command: QUIT, so the server
		// closes once it has answered.
		_, _ = c.c.Write(cmd("QUIT"))
	}()
	_ = c.c.SetReadDeadline(time.Now().Add(120 * time.Second))
	var got bytes.Buffer
	_, err := io.Copy(&got, c.c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: connection open 120 s into the upload; received %q", p.name, trim(got.Bytes()))
	}
	c.c.Close()
	<-done
	return got.Bytes(), written
}
