package server_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/server"
)

// BenchmarkCheckTransport runs THROTTLE.CHECK from 50 connections, each
// sending pipelines of P commands and reading the P replies, over the TCP
// listener and over the TLS listener of the same server. ops/s is the
// throughput of the whole server; compare tls with tcp at the same P.
//
//	go test ./server -run '^$' -bench CheckTransport -benchtime 1s -count 3
func BenchmarkCheckTransport(b *testing.B) {
	const conns = 50
	p := newTestPKI(b)
	ts := startTLSServer(b, p, server.TLSAuthNone, nil)
	dialers := []struct {
		name string
		dial func() (net.Conn, error)
	}{
		{"tcp", func() (net.Conn, error) { return net.Dial("tcp", ts.Addr) }},
		{"tls", func() (net.Conn, error) { return tls.Dial("tcp", tlsAddr(b, ts), p.clientTLS(false)) }},
	}
	for _, pipe := range []int{1, 16} {
		for _, d := range dialers {
			b.Run(fmt.Sprintf("%s/P=%d", d.name, pipe), func(b *testing.B) {
				cs := make([]net.Conn, conns)
				for i := range cs {
					c, err := d.dial()
					if err != nil {
						b.Fatal(err)
					}
					defer c.Close()
					cs[i] = c
				}
				batch := []byte(strings.Repeat(encodeCommand("THROTTLE.CHECK", "bench", "1000000000", "1s"), pipe))
				rounds := (b.N + conns*pipe - 1) / (conns * pipe)
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				errs := make(chan error, conns)
				for _, c := range cs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						r := bufio.NewReaderSize(c, 64<<10)
						for range rounds {
							if _, err := c.Write(batch); err != nil {
								errs <- err
								return
							}
							for range pipe {
								if err := skipReply(r); err != nil {
									errs <- err
									return
								}
							}
						}
					}()
				}
				wg.Wait()
				el := time.Since(start)
				b.StopTimer()
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
				b.ReportMetric(float64(rounds*conns*pipe)/el.Seconds(), "ops/s")
			})
		}
	}
}

// skipReply reads one RESP2 reply of THROTTLE.CHECK: an array of
// integers, or an error line.
func skipReply(r *bufio.Reader) error {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return err
	}
	switch line[0] {
	case '*':
		n := 0
		for _, ch := range line[1 : len(line)-2] {
			n = n*10 + int(ch-'0')
		}
		for range n {
			if _, err := r.ReadSlice('\n'); err != nil {
				return err
			}
		}
		return nil
	case '-':
		return fmt.Errorf("error reply %q", line)
	}
	return io.ErrUnexpectedEOF
}
