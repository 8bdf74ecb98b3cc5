package throttlekit

// The Limiter's options and API: construction, Allow and Wait, ModeStrict,
// statistics and Close. The local key table is in keys.go, the modes that
// use it in cacheddeny.go and leased.go, and time in clock.go.

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// Mode selects how a Limiter divides work between this process and the
// server.
type Mode uint8

const (
	// ModeStrict sends every Allow to the server as one THROTTLE.CHECK: the
	// server's decision, exactly, at one round trip each.
	ModeStrict Mode = iota
	// ModeCachedDeny sends allowed traffic to the server and remembers a
	// denial until its retry-after: a denied key costs no round trip until
	// then. Admission is as exact as ModeStrict; a denial may last a little
	// longer than the server would say (never shorter).
	ModeCachedDeny
	// ModeLeased spends credits leased from the server's fixed window with
	// THROTTLE.LEASE: most Allow calls are answered locally. Admitted units
	// per window never exceed the limit, for any number of nodes.
	ModeLeased
)

// String returns "strict", "cached-deny" or "leased".
func (m Mode) String() string {
	switch m {
	case ModeStrict:
		return "strict"
	case ModeCachedDeny:
		return "cached-deny"
	case ModeLeased:
		return "leased"
	}
	return "unknown"
}

// LimiterOptions configures a Limiter. The zero value of each field is a
// usable default except Rate, which must be set.
type LimiterOptions struct {
	Mode Mode
	Rate Rate // in ModeLeased: a fixed window (Algo FixedWindow or empty)

	// Batch is the first batch of a key in ModeLeased; 0 lets the Sizer
	// choose.
	Batch int64
	// Sizer chooses lease batches; nil means a new *AdaptiveSizer. Use
	// FixedSizer(n) for a constant batch.
	Sizer Sizer
	// LowWater starts a background lease when a key's local credits fall to
	// it or below (ModeLeased); 0 leases only when credits run out.
	LowWater int64
	// ReturnIdleAfter gives back the credits of a key unused this long with
	// THROTTLE.RETURN (ModeLeased); 0 keeps them until the window ends.
	ReturnIdleAfter time.Duration
	// MaxKeys bounds the keys held locally; 0 means 65536. The least
	// recently used are evicted (CLOCK) and their credits returned. The
	// lock-free index costs 16 bytes per key of MaxKeys.
	MaxKeys int
	// FailOpen admits requests when the server cannot be asked; otherwise
	// they are denied. Either way Allow also returns the error.
	FailOpen bool
	// Clock replaces the process clock (tests); nil is the process clock,
	// read through a coarse 1 ms ticker on the local paths.
	Clock Clock
}

// defaultKeys is MaxKeys when it is 0.
const defaultKeys = 65536

// LimiterStats counts a Limiter's traffic to the server.
type LimiterStats struct {
	Checks  int64 // THROTTLE.CHECK sent
	Leases  int64 // THROTTLE.LEASE sent (round trips)
	Returns int64 // THROTTLE.RETURN sent
	Probes  int64 // TIME sent with a lease to measure the clock offset
	Evicted int64 // local keys evicted
}

// Limiter is the two-tier limiter: a local tier in front of the server,
// whose work depends on the Mode (see the package documentation). It is safe
// for concurrent use. Call Close when done: it stops the background
// goroutines and gives back unspent credits.
type Limiter struct {
	c     *Client
	opts  LimiterOptions
	sizer Sizer
	seed  maphash.Seed
	mask  uint64                  // shard of a hash: (h>>32)&mask
	shs   []shard                 // the keys, under locks
	tbl   []atomic.Pointer[entry] // lock-free index of the local paths
	tmask uint64
	clk   clock

	offMu          sync.Mutex
	offLo, offHi   int64 // server minus local clock, ns: bounds measured at offAt
	offAt          int64 // local ns of the last measurement; 0: never
	offsetMeasured bool

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // background goroutines
	leaseWG sync.WaitGroup // prefetches in flight
	bgMu    sync.Mutex     // orders leaseWG.Add before Close's Wait
	closed  atomic.Bool
	giveCh  chan giveBack

	checks, leases, returns, probes, evicted atomic.Int64
}

// NewLimiter returns a Limiter in front of c, or an *ArgError (nothing
// started) when opts are invalid: the options are checked once, here.
//
// Memory: a Limiter other than ModeStrict keeps an index of two pointers
// per key of MaxKeys (1 MiB at the default) besides the keys it holds.
func NewLimiter(c *Client, opts LimiterOptions) (*Limiter, error) {
	if c == nil {
		return nil, &ArgError{"client", "must not be nil"}
	}
	if err := validateOptions(opts); err != nil {
		return nil, err
	}
	l := &Limiter{c: c, opts: opts, seed: maphash.MakeSeed()}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.sizer = opts.Sizer
	if l.sizer == nil {
		l.sizer = &AdaptiveSizer{}
	}
	keys := opts.MaxKeys
	if keys <= 0 {
		keys = defaultKeys
	}
	n := 1
	for n < 64 && n*2 <= keys {
		n *= 2
	}
	l.mask = uint64(n - 1)
	l.shs = make([]shard, n)
	for i := range l.shs {
		s := &l.shs[i]
		s.cap = keys / n
		if i < keys%n {
			s.cap++
		}
		s.m = make(map[string]*entry)
	}
	l.clk.init(opts.Clock)
	if opts.Mode == ModeStrict {
		return l, nil
	}
	t := 2
	for t < 2*keys {
		t *= 2
	}
	l.tbl = make([]atomic.Pointer[entry], t)
	l.tmask = uint64(t - 1)
	if opts.Clock == nil {
		l.wg.Add(1)
		go l.clk.run(l.ctx, &l.wg)
	}
	if opts.Mode == ModeLeased {
		l.giveCh = make(chan giveBack, 1024)
		l.wg.Add(1)
		go l.giver()
		if opts.ReturnIdleAfter > 0 {
			l.wg.Add(1)
			go l.janitor()
		}
	}
	return l, nil
}

func validateOptions(o LimiterOptions) error {
	if err := o.Rate.validate(); err != nil {
		return err
	}
	switch o.Mode {
	case ModeStrict, ModeCachedDeny:
	case ModeLeased:
		if !o.Rate.fixedOrEmpty() {
			return &ArgError{"algo", "of a leased limiter must be FixedWindow (or empty)"}
		}
		if o.Rate.Limit > maxLeased {
			return &ArgError{"limit", "of a leased limiter must be at most 2^45"}
		}
		if o.Batch < 0 || o.LowWater < 0 || o.ReturnIdleAfter < 0 {
			return &ArgError{"options", "Batch, LowWater and ReturnIdleAfter must not be negative"}
		}
	default:
		return &ArgError{"mode", "is not ModeStrict, ModeCachedDeny or ModeLeased"}
	}
	return nil
}

// Stats returns the counts of commands the Limiter sent.
func (l *Limiter) Stats() LimiterStats {
	return LimiterStats{
		Checks: l.checks.Load(), Leases: l.leases.Load(), Returns: l.returns.Load(),
		Probes: l.probes.Load(), Evicted: l.evicted.Load(),
	}
}

// Allow is AllowN(ctx, key, 1): whether one unit of key may pass now.
func (l *Limiter) Allow(ctx context.Context, key string) (Decision, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN decides whether n units of key may pass now, and consumes them if
// so; n 0 asks whether one unit would pass, consuming nothing. On a server
// error it returns the FailOpen decision and the error; with a negative n,
// a denial and an *ArgError; after Close, the FailOpen decision and
// ErrClosed.
//
// In ModeLeased an n above the limit is denied at once (RetryAfter -1)
// without a round trip: its Remaining and ResetAt are those the key's lease
// knows, or the whole limit and the zero time before the key's first lease.
// Otherwise a leased limiter leasing exactly what a call lacks
// (FixedSizer(1)) gives ModeStrict's decisions, but for a denial's
// RetryAfter, which may be longer by the leased tier's margin
// (TestStrictAndLeasedAgree).
//
// Cost: ModeStrict, one round trip; ModeCachedDeny, one round trip unless
// a remembered denial answers (a hash and a few loads); ModeLeased, on a
// local hit a hash, a few loads and one compare-and-swap, no lock and no
// allocation, and a lease round trip per batch.
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (Decision, error) {
	if n < 0 {
		return Decision{}, &ArgError{"n", "must not be negative"}
	}
	switch l.opts.Mode {
	case ModeLeased:
		return l.allowLeased(ctx, key, n) // checks closed off the local path
	case ModeCachedDeny:
		if l.closed.Load() {
			return l.failed(ErrClosed)
		}
		return l.allowCachedDeny(ctx, key, n)
	}
	if l.closed.Load() {
		return l.failed(ErrClosed)
	}
	l.checks.Add(1)
	d, err := l.c.Check(ctx, key, l.opts.Rate, n)
	if err != nil {
		return l.failed(err)
	}
	return d, nil
}

// failed applies the FailOpen policy to err.
func (l *Limiter) failed(err error) (Decision, error) {
	return Decision{Allowed: l.opts.FailOpen, Limit: l.opts.Rate.Limit}, err
}

// Wait is WaitN(ctx, key, 1): it blocks until one unit of key passes.
func (l *Limiter) Wait(ctx context.Context, key string) (Decision, error) {
	return l.WaitN(ctx, key, 1)
}

// WaitN blocks until n units of key pass (and are consumed) or ctx ends.
// It asks AllowN, and after each denial sleeps for the denial's
// retry-after before it asks again: one question per retry-after, never a
// spin. A Limiter with its own Clock sleeps through Clock.Sleep; Close
// ends a sleep on the process clock.
//
// It returns the admitting decision and a nil error, or gives up at once:
//   - with ErrNeverAllowed (wrapped) when n can never pass at this rate
//     (a retry-after of -1: n above the limit or burst);
//   - with ErrWouldExceedDeadline (wrapped), without sleeping, when ctx's
//     deadline comes before the retry-after has passed, as
//     golang.org/x/time/rate does;
//   - with ctx.Err() when ctx is done before it asks or while it sleeps;
//   - with ErrClosed or a server error as AllowN returns them.
//
// The decision that comes with an error is the denial WaitN gave up on,
// but for the last two cases: a context done before the first question
// gets a denial with only Limit set, and AllowN's errors come with AllowN's decision,
// which follows FailOpen (with FailOpen set it is Allowed, and the caller
// may proceed as AllowN's caller would).
func (l *Limiter) WaitN(ctx context.Context, key string, n int64) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{Limit: l.opts.Rate.Limit}, err
	}
	for {
		d, err := l.AllowN(ctx, key, n)
		if err != nil || d.Allowed {
			return d, err
		}
		if d.RetryAfter < 0 {
			return d, fmt.Errorf("%w: WaitN(n=%d) with a limit of %d", ErrNeverAllowed, n, d.Limit)
		}
		// A denial's retry-after is at least the server's millisecond;
		// should one say 0, wait that millisecond rather than spin.
		wait := max(d.RetryAfter, time.Millisecond)
		if dl, ok := ctx.Deadline(); ok && l.clk.until(dl) < wait {
			return d, fmt.Errorf("%w: WaitN(n=%d) would wait %v", ErrWouldExceedDeadline, n, wait)
		}
		if err := l.clk.sleep(ctx, l.ctx.Done(), wait); err != nil {
			return d, err
		}
	}
}

// Close stops the background goroutines and gives back every key's unspent
// credits (ModeLeased). AllowN after Close returns ErrClosed, and so does a
// WaitN that Close interrupts. Close does not close the Client.
func (l *Limiter) Close() error {
	l.bgMu.Lock() // a prefetch after this sees closed
	first := l.closed.CompareAndSwap(false, true)
	l.bgMu.Unlock()
	if !first {
		return nil
	}
	var err error
	if l.opts.Mode == ModeLeased {
		l.leaseWG.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err = l.returnIdle(ctx, 0)
		cancel()
	}
	l.cancel()
	l.wg.Wait()
	return err
}
