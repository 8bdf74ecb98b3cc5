package loadgen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// FillResult is the outcome of Fill.
type FillResult struct {
	Sent      int64         // commands sent (and replies read)
	Errors    int64         // error replies
	LastError string        // text of one error reply, if any
	Elapsed   time.Duration // wall time
}

// Fill sends cmd once for every key index in [0, n), so that a server ends up
// holding n distinct keys. The keyspace is split into conns contiguous ranges
// sent over conns connections, pipeline commands per write.
func Fill(ctx context.Context, addr string, cmd Command, n, conns, pipeline int) (FillResult, error) {
	if n < 0 || conns < 1 || pipeline < 1 {
		return FillResult{}, fmt.Errorf("loadgen: invalid fill: n=%d conns=%d pipeline=%d", n, conns, pipeline)
	}
	start := time.Now()
	type tally struct {
		sent, errs int64
		last       string
		err        error
	}
	tallies := make([]tally, conns)
	var wg sync.WaitGroup
	per := (n + conns - 1) / conns
	for ci := range conns {
		lo, hi := ci*per, min((ci+1)*per, n)
		if lo >= hi {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := &tallies[ci]
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.err = err
				return
			}
			defer c.Close()
			rr := NewReplyReader(bufio.NewReaderSize(c, 64<<10))
			buf := make([]byte, 0, 64*pipeline)
			var scratch []byte
			for i := lo; i < hi; {
				if ctx.Err() != nil {
					t.err = ctx.Err()
					return
				}
				buf = buf[:0]
				k := 0
				for ; k < pipeline && i < hi; k++ {
					buf, scratch = cmd.Append(buf, scratch, uint64(i))
					i++
				}
				_ = c.SetDeadline(time.Now().Add(30 * time.Second))
				if _, err := c.Write(buf); err != nil {
					t.err = err
					return
				}
				for range k {
					kind, err := rr.Skip()
					if err != nil {
						t.err = err
						return
					}
					t.sent++
					if kind == KindError {
						t.errs++
						t.last = rr.LastError
					}
				}
			}
		}()
	}
	wg.Wait()
	res := FillResult{Elapsed: time.Since(start)}
	var errs []error
	for _, t := range tallies {
		res.Sent += t.sent
		res.Errors += t.errs
		if t.last != "" {
			res.LastError = t.last
		}
		if t.err != nil {
			errs = append(errs, t.err)
		}
	}
	return res, errors.Join(errs...)
}
