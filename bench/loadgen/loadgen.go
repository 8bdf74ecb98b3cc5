// Package loadgen is the load generator of the benchmark harness: a raw RESP
// client that drives any Redis-protocol server with N connections, each
// sending pipelines of D commands whose keys are drawn uniform or Zipf over a
// keyspace.
//
// Two modes:
//   - closed loop (Config.Rate == 0): each connection writes a batch of
//     Pipeline commands in one write, reads the Pipeline replies, and
//     repeats. Throughput is what the server sustains; the latency of a
//     command is the time from its batch's write to the moment its own reply
//     was parsed.
//   - open loop (Config.Rate > 0): commands are sent on a fixed schedule
//     (Rate commands per second over all connections, one command per tick)
//     whatever the server does, and latency is measured from each command's
//     intended send time, so a stalled server is charged for every command
//     it delayed (no coordinated omission). Timer granularity of the client
//     (tens of microseconds) is part of the figure.
//
// Replies are parsed by ReplyReader, which decodes only the framing and
// whether a reply is an error; errors are counted and the last one kept so
// that a mistyped workload cannot pass for a fast one. Latency goes to one
// github.com/HdrHistogram/hdrhistogram-go histogram per connection (values
// in nanoseconds), merged at the end.
//
// The client allocates nothing per command: batches are encoded into a reused
// buffer from a Command template compiled once.
package loadgen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Command is a compiled command template: RESP-encoded arguments around
// zero or more key arguments. Every key argument of one command carries the
// same key index, each behind its own prefix, so a command can name several
// keys derived from one random key (THROTTLE.MCHECK 2 m1:7 ... m2:7 ...).
type Command struct {
	segs [][]byte // encoded bytes around the keys: len(keys)+1 parts
	keys []KeyArg // each key argument, in argument order
}

// KeyArg names a key argument of a command: its position in the
// arguments, the prefix put before the key index there and, if Width > 0,
// the width the decimal index is zero-padded to (so that every key name has
// the same length, e.g. "t:" and Width 14 make 16-byte keys).
type KeyArg struct {
	Pos    int
	Prefix string
	Width  int
}

// NewCommand compiles args into a Command. If keyArg is in range, that
// argument is replaced by keyPrefix followed by the key index for each
// command sent; otherwise every command is identical.
func NewCommand(args []string, keyArg int, keyPrefix string) Command {
	return NewMultiKeyCommand(args, KeyArg{Pos: keyArg, Prefix: keyPrefix})
}

// NewMultiKeyCommand compiles args into a Command whose arguments at the
// positions of keys are replaced, for each command sent, by that KeyArg's
// prefix followed by the command's key index. Positions out of range are
// ignored; a position named twice takes its first prefix.
func NewMultiKeyCommand(args []string, keys ...KeyArg) Command {
	c := Command{segs: [][]byte{AppendArrayHeader(nil, len(args))}}
	for i, a := range args {
		if k := slices.IndexFunc(keys, func(k KeyArg) bool { return k.Pos == i }); k >= 0 {
			c.keys = append(c.keys, keys[k])
			c.segs = append(c.segs, nil)
			continue
		}
		last := len(c.segs) - 1
		c.segs[last] = AppendBulk(c.segs[last], []byte(a))
	}
	return c
}

// Append appends the command for key index i to dst. scratch is reused to
// format the keys and returned for the next call.
func (c *Command) Append(dst, scratch []byte, i uint64) ([]byte, []byte) {
	if len(c.segs) == 0 {
		return dst, scratch // the zero Command sends nothing
	}
	dst = append(dst, c.segs[0]...)
	for k, ka := range c.keys {
		scratch = AppendPaddedKey(scratch[:0], ka.Prefix, i, ka.Width)
		dst = AppendBulk(dst, scratch)
		dst = append(dst, c.segs[k+1]...)
	}
	return dst, scratch
}

// Config describes one load run.
type Config struct {
	Addr     string        // host:port of the server
	Conns    int           // connections, >= 1
	Pipeline int           // commands per write in closed loop, >= 1
	Warmup   time.Duration // load applied before measuring starts
	Duration time.Duration // measured interval
	Rate     float64       // open loop: commands per second in total; 0 = closed loop
	Cmd      Command       // what to send
	Keys     int           // keyspace size, >= 1
	Dist     Dist          // key distribution
	Seed     uint64        // base seed; connection i uses Seed+i

	// OnMeasure, if set, is called when measuring starts (start=true) and
	// when it stops (start=false), so that a caller can sample server-side
	// counters over exactly the measured interval.
	OnMeasure func(start bool)
}

// Result is the outcome of a run.
type Result struct {
	Ops       int64                   // replies received while measuring
	Errors    int64                   // of which error replies
	LastError string                  // text of one error reply, if any
	Elapsed   time.Duration           // measured interval as observed
	Hist      *hdrhistogram.Histogram // latency of measured replies, ns
}

// Throughput returns replies per second over the measured interval.
func (r *Result) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Elapsed.Seconds()
}

// Quantile returns the latency at quantile q (0..100) in microseconds.
func (r *Result) Quantile(q float64) float64 {
	if r.Hist == nil || r.Hist.TotalCount() == 0 {
		return 0
	}
	return float64(r.Hist.ValueAtQuantile(q)) / 1e3
}

// MaxMicros returns the largest recorded latency in microseconds.
func (r *Result) MaxMicros() float64 {
	if r.Hist == nil || r.Hist.TotalCount() == 0 {
		return 0
	}
	return float64(r.Hist.Max()) / 1e3
}

// Phases of a run.
const (
	phaseWarmup = iota
	phaseMeasure
	phaseDone
)

// histMax is the largest latency a histogram records (10 s); larger values
// are clamped to it.
const histMax = int64(10 * time.Second)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1_000, histMax, 3) }

// worker is one connection's state and tallies.
type worker struct {
	conn   net.Conn
	rr     *ReplyReader
	keys   *KeyGen
	hist   *hdrhistogram.Histogram
	ops    int64
	errs   int64
	lastEr string
	err    error
}

func (w *worker) record(kind int, lat time.Duration) {
	if kind == KindError {
		w.errs++
		w.lastEr = w.rr.LastError
	}
	w.ops++
	v := int64(lat)
	if v > histMax {
		v = histMax
	}
	if v < 1_000 {
		v = 1_000 // the histogram's lowest discernible value: 1 µs
	}
	_ = w.hist.RecordValue(v)
}

// Run drives the server described by cfg and returns the measured result.
// ctx cancels a run early (the result then covers what was measured).
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Conns < 1 || cfg.Pipeline < 1 || cfg.Keys < 1 || cfg.Duration <= 0 {
		return Result{}, fmt.Errorf("loadgen: invalid config: conns=%d pipeline=%d keys=%d duration=%v",
			cfg.Conns, cfg.Pipeline, cfg.Keys, cfg.Duration)
	}
	workers := make([]*worker, cfg.Conns)
	for i := range workers {
		kg, err := NewKeyGen(cfg.Dist, cfg.Keys, cfg.Seed+uint64(i)*7919)
		if err != nil {
			return Result{}, err
		}
		c, err := net.DialTimeout("tcp", cfg.Addr, 5*time.Second)
		if err != nil {
			for _, w := range workers[:i] {
				w.conn.Close()
			}
			return Result{}, fmt.Errorf("loadgen: dial %s: %w", cfg.Addr, err)
		}
		_ = c.SetDeadline(time.Now().Add(cfg.Warmup + cfg.Duration + 30*time.Second))
		workers[i] = &worker{conn: c, rr: NewReplyReader(bufio.NewReaderSize(c, 64<<10)), keys: kg, hist: newHist()}
	}
	defer func() {
		for _, w := range workers {
			w.conn.Close()
		}
	}()

	var phase atomic.Int32
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if cfg.Rate > 0 {
				w.err = w.openLoop(&cfg, &phase)
			} else {
				w.err = w.closedLoop(&cfg, &phase)
			}
		}()
	}

	sleep(ctx, cfg.Warmup)
	if cfg.OnMeasure != nil {
		cfg.OnMeasure(true)
	}
	start := time.Now()
	phase.Store(phaseMeasure)
	sleep(ctx, cfg.Duration)
	phase.Store(phaseDone)
	elapsed := time.Since(start)
	if cfg.OnMeasure != nil {
		cfg.OnMeasure(false)
	}
	wg.Wait()

	res := Result{Elapsed: elapsed, Hist: newHist()}
	var errs []error
	for _, w := range workers {
		res.Ops += w.ops
		res.Errors += w.errs
		if w.lastEr != "" {
			res.LastError = w.lastEr
		}
		res.Hist.Merge(w.hist)
		if w.err != nil {
			errs = append(errs, w.err)
		}
	}
	return res, errors.Join(errs...)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// closedLoop sends batches of cfg.Pipeline commands until the run is done.
func (w *worker) closedLoop(cfg *Config, phase *atomic.Int32) error {
	buf := make([]byte, 0, 64*cfg.Pipeline)
	var scratch []byte
	for {
		p := phase.Load()
		if p == phaseDone {
			return nil
		}
		buf = buf[:0]
		for range cfg.Pipeline {
			buf, scratch = cfg.Cmd.Append(buf, scratch, w.keys.Next())
		}
		t0 := time.Now()
		if _, err := w.conn.Write(buf); err != nil {
			return fmt.Errorf("loadgen: write: %w", err)
		}
		for range cfg.Pipeline {
			kind, err := w.rr.Skip()
			if err != nil {
				return fmt.Errorf("loadgen: read reply: %w", err)
			}
			if phase.Load() == phaseMeasure {
				w.record(kind, time.Since(t0))
			}
		}
	}
}

// openLoop sends one command per tick of a fixed schedule and measures each
// reply against the command's intended send time.
func (w *worker) openLoop(cfg *Config, phase *atomic.Int32) error {
	interval := time.Duration(float64(time.Second) * float64(cfg.Conns) / cfg.Rate)
	if interval <= 0 {
		interval = 1
	}
	type sent struct {
		at      time.Time
		measure bool
	}
	queue := make(chan sent, 1<<16)
	werr := make(chan error, 1)
	go func() {
		defer close(queue)
		buf := make([]byte, 0, 4096)
		var scratch []byte
		var due []sent
		next := time.Now()
		for phase.Load() != phaseDone {
			now := time.Now()
			if d := next.Sub(now); d > 0 {
				time.Sleep(d)
				now = time.Now()
			}
			// Send every command whose intended time has passed in one write.
			buf = buf[:0]
			due = due[:0]
			for !next.After(now) && len(due) < 1024 {
				buf, scratch = cfg.Cmd.Append(buf, scratch, w.keys.Next())
				due = append(due, sent{at: next, measure: phase.Load() == phaseMeasure})
				next = next.Add(interval)
			}
			if _, err := w.conn.Write(buf); err != nil {
				werr <- fmt.Errorf("loadgen: write: %w", err)
				return
			}
			for _, s := range due {
				queue <- s
			}
		}
		werr <- nil
	}()
	var rerr error
	for s := range queue {
		if rerr != nil {
			continue // drain so the writer can finish
		}
		kind, err := w.rr.Skip()
		if err != nil {
			rerr = fmt.Errorf("loadgen: read reply: %w", err)
			w.conn.Close()
			continue
		}
		if s.measure {
			w.record(kind, time.Since(s.at))
		}
	}
	if err := <-werr; err != nil && rerr == nil {
		return err
	}
	return rerr
}
