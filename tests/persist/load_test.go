package persisttests

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/internal/testserver"
	"github.com/throttlekit/throttlekit-server/persist"
)

// The limit every key of the load uses: ten thousand units a year (GCRA),
// so a key regains one unit every emission = period/limit (52.6 min) and
// none while a test runs. After n units from an empty state, starting at
// t, THROTTLE.PEEK at t+d reports n - floor(d/emission) consumed: regained
// below computes that floor from the whole test's duration.
const (
	limit    = 10_000
	period   = "365d"
	emission = 365 * 24 * time.Hour / limit
)

// regained returns the units a key may have regained since began: the
// exact floor(elapsed/emission), 0 for any test shorter than an emission.
func regained(began time.Time) int64 { return int64(time.Since(began) / emission) }

// reply is one RESP2 reply: an error, a status or bulk string, an integer
// or an array of integers (the decision).
type reply struct {
	err  string
	str  string
	n    int64
	ints []int64
}

// conn is a RESP connection with a reusable write buffer.
type conn struct {
	c net.Conn
	r *bufio.Reader
	w []byte
}

func dial(addr string) (*conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &conn{c: c, r: bufio.NewReaderSize(c, 64<<10)}, nil
}

// add appends one command to the write buffer.
func (c *conn) add(args ...string) {
	c.w = append(c.w, '*')
	c.w = strconv.AppendInt(c.w, int64(len(args)), 10)
	c.w = append(c.w, "\r\n"...)
	for _, a := range args {
		c.w = append(c.w, '$')
		c.w = strconv.AppendInt(c.w, int64(len(a)), 10)
		c.w = append(c.w, "\r\n"...)
		c.w = append(c.w, a...)
		c.w = append(c.w, "\r\n"...)
	}
}

// flush writes the buffered commands.
func (c *conn) flush() error {
	_, err := c.c.Write(c.w)
	c.w = c.w[:0]
	return err
}

func (c *conn) line() (string, error) {
	s, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(s, "\r\n"), nil
}

// read reads one reply.
func (c *conn) read() (reply, error) {
	s, err := c.line()
	if err != nil {
		return reply{}, err
	}
	if s == "" {
		return reply{}, errors.New("empty reply line")
	}
	switch s[0] {
	case '-':
		return reply{err: s[1:]}, nil
	case '+':
		return reply{str: s[1:]}, nil
	case ':':
		n, err := strconv.ParseInt(s[1:], 10, 64)
		return reply{n: n}, err
	case '$':
		n, err := strconv.Atoi(s[1:])
		if err != nil || n < 0 {
			return reply{}, err
		}
		buf := make([]byte, n+2)
		if _, err := ioReadFull(c.r, buf); err != nil {
			return reply{}, err
		}
		return reply{str: string(buf[:n])}, nil
	case '*':
		n, err := strconv.Atoi(s[1:])
		if err != nil {
			return reply{}, err
		}
		r := reply{ints: make([]int64, 0, max(n, 0))}
		for range n {
			e, err := c.read()
			if err != nil {
				return reply{}, err
			}
			r.ints = append(r.ints, e.n)
		}
		return r, nil
	}
	return reply{}, fmt.Errorf("unexpected reply %q", s)
}

func ioReadFull(r *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// do sends one command and reads its reply.
func (c *conn) do(args ...string) (reply, error) {
	c.add(args...)
	if err := c.flush(); err != nil {
		return reply{}, err
	}
	return c.read()
}

func key(i int) string { return "k:" + strconv.Itoa(i) }

// load is the result of runLoad.
type load struct {
	acked    []atomic.Int64 // per key: units acknowledged as consumed
	sent     []atomic.Int64 // per key: commands written (acknowledged or not)
	ops      atomic.Int64   // replies read
	tryAgain atomic.Int64   // TRYAGAIN replies
	other    atomic.Int64   // other error replies
	mu       sync.Mutex
	batchLat []time.Duration // round trip of each pipelined batch
	// start is when runLoad began; ackMs[i] counts the units acknowledged
	// in the i-th millisecond after it (the reply read), the last slot
	// every later one.
	start time.Time
	ackMs []atomic.Int64
}

// ackTimeline is the length of load.ackMs in milliseconds.
const ackTimeline = 120_000

// ackedSince returns the units acknowledged at or after t (counting the
// whole millisecond slot t falls in).
func (ld *load) ackedSince(t time.Time) (n int64) {
	i := max(0, min(int(t.Sub(ld.start)/time.Millisecond), len(ld.ackMs)-1))
	for ; i < len(ld.ackMs); i++ {
		n += ld.ackMs[i].Load()
	}
	return n
}

// runLoad drives conns connections, each writing depth THROTTLE.CHECKs on
// random keys of nkeys and reading their replies, until ctx ends or the
// server goes away. It returns once every connection has stopped.
func runLoad(ctx context.Context, addr string, conns, depth, nkeys int) *load {
	ld := newLoad(nkeys)
	ld.run(ctx, addr, conns, depth)
	return ld
}

// newLoad returns an empty load over nkeys keys; its counters may be read
// while run drives it.
func newLoad(nkeys int) *load {
	return &load{acked: make([]atomic.Int64, nkeys), sent: make([]atomic.Int64, nkeys),
		start: time.Now(), ackMs: make([]atomic.Int64, ackTimeline)}
}

// run is runLoad on ld.
func (ld *load) run(ctx context.Context, addr string, conns, depth int) {
	nkeys := len(ld.acked)
	var wg sync.WaitGroup
	for w := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dial(addr)
			if err != nil {
				return
			}
			defer c.c.Close()
			stop := context.AfterFunc(ctx, func() { _ = c.c.SetDeadline(time.Now()) })
			defer stop()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			ks := make([]int, depth)
			lat := make([]time.Duration, 0, 4096)
			defer func() { ld.mu.Lock(); ld.batchLat = append(ld.batchLat, lat...); ld.mu.Unlock() }()
			for ctx.Err() == nil {
				for i := range ks {
					ks[i] = rng.IntN(nkeys)
					c.add("THROTTLE.CHECK", key(ks[i]), strconv.Itoa(limit), period)
					ld.sent[ks[i]].Add(1)
				}
				start := time.Now()
				if c.flush() != nil {
					return
				}
				for _, k := range ks {
					r, err := c.read()
					if err != nil {
						return
					}
					ld.ops.Add(1)
					switch {
					case strings.HasPrefix(r.err, "TRYAGAIN"):
						ld.tryAgain.Add(1)
					case r.err != "":
						ld.other.Add(1)
					case len(r.ints) == 5 && r.ints[0] == 1:
						ld.acked[k].Add(1)
						ld.ackMs[min(int(time.Since(ld.start)/time.Millisecond), ackTimeline-1)].Add(1)
					}
				}
				lat = append(lat, time.Since(start))
			}
		}()
	}
	wg.Wait()
}

// p99 returns the 99th percentile batch round trip.
func (ld *load) p99() time.Duration {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	if len(ld.batchLat) == 0 {
		return 0
	}
	s := slices.Clone(ld.batchLat)
	slices.Sort(s)
	return s[len(s)*99/100]
}

// consumed reads, for every key, the units consumed as THROTTLE.PEEK COST 0
// reports them (limit minus remaining), pipelined in pages.
func consumed(t *testing.T, addr string, nkeys int) []int64 {
	t.Helper()
	c, err := dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.c.Close()
	out := make([]int64, nkeys)
	const page = 1000
	for lo := 0; lo < nkeys; lo += page {
		hi := min(lo+page, nkeys)
		for i := lo; i < hi; i++ {
			c.add("THROTTLE.PEEK", key(i), strconv.Itoa(limit), period, "COST", "0")
		}
		if err := c.flush(); err != nil {
			t.Fatal(err)
		}
		for i := lo; i < hi; i++ {
			r, err := c.read()
			if err != nil || len(r.ints) != 5 {
				t.Fatalf("THROTTLE.PEEK %s: %+v %v", key(i), r, err)
			}
			out[i] = limit - r.ints[2]
		}
	}
	return out
}

// info returns INFO persistence as a map.
func info(addr string) (map[string]string, error) {
	c, err := dial(addr)
	if err != nil {
		return nil, err
	}
	defer c.c.Close()
	_ = c.c.SetDeadline(time.Now().Add(10 * time.Second))
	r, err := c.do("INFO", "persistence")
	if err != nil {
		return nil, err
	}
	if r.err != "" {
		return nil, errors.New(r.err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(r.str, "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

// waitFor polls INFO persistence until cond holds, failing after a
// generous deadline (the deadline only bounds a failure).
func waitFor(t testing.TB, addr, what string, cond func(map[string]string) bool) map[string]string {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		m, err := info(addr)
		if err == nil && cond(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 90s (last INFO %v, err %v)", what, m, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startServer starts the binary with args and waits until it has loaded.
func startServer(t testing.TB, args ...string) *testserver.Server {
	t.Helper()
	s := testserver.Start(t, args...)
	waitFor(t, s.Addr, "start-up load", func(m map[string]string) bool { return m["loading"] == "0" })
	return s
}

// waitUnlocked waits until no server holds the table's writer lock (after
// a SIGKILL, Postgres ends the dead session's lock once it notices).
func waitUnlocked(t *testing.T, url string, opts persist.Options) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		be, err := persist.Open(ctx, url, opts)
		cancel()
		if err == nil {
			_ = be.Close()
			return
		}
		if !errors.Is(err, persist.ErrInUse) || time.Now().After(deadline) {
			t.Fatalf("open %s after the crash: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// compare checks consumed-after-restart against acknowledged-before-crash
// per key. Each key may have regained regain units meanwhile (see
// regained: 0 in any test shorter than an emission). It returns the units
// acknowledged but missing beyond that, and the keys affected.
func compare(acked []atomic.Int64, after []int64, regain int64) (lost, keys int64) {
	for i := range acked {
		if miss := acked[i].Load() - regain - after[i]; miss > 0 {
			lost += miss
			keys++
		}
	}
	return lost, keys
}

// excess checks the other side: no key may show more units consumed after
// the restart than commands were sent for it (acknowledged or not). It
// returns the units in excess and the keys affected; anything but 0 means
// the measurement, not the durability, is broken.
func excess(sent []atomic.Int64, after []int64) (units, keys int64) {
	for i := range sent {
		if x := after[i] - sent[i].Load(); x > 0 {
			units += x
			keys++
		}
	}
	return units, keys
}

// perKey returns the mean units acknowledged per key.
func perKey(acked []atomic.Int64) float64 {
	return float64(total(acked)) / float64(len(acked))
}

func total(acked []atomic.Int64) (n int64) {
	for i := range acked {
		n += acked[i].Load()
	}
	return n
}
