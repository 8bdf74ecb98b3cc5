package throttlekit

import (
	"context"
	"errors"
	"hash/maphash"
	"math"
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
// usable default except Limit, which must be set.
type LimiterOptions struct {
	Mode  Mode
	Limit Limit // in ModeLeased: a fixed window (Algo empty or "fixed")

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
	// Now replaces the clock (tests). nil: the process clock, read through a
	// coarse 1 ms ticker on the local-hit path.
	Now func() time.Time
}

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
	err   error // invalid options: every Allow returns it
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

type giveBack struct {
	key              string
	credits, resetAt int64
}

// Timing constants of the leased tier.
const (
	clockTick     = time.Millisecond // coarse clock resolution
	baseMargin    = time.Millisecond // added to every deadline besides tick and offset
	driftPPM      = 100              // assumed clock drift between offset probes
	offsetRefresh = 10 * time.Second // probe the server clock this often
	defaultKeys   = 65536
)

// A key's credits and the generation of the window they belong to share
// one atomic word, so that the local path spends them with one
// compare-and-swap and can never spend a credit of one window while
// reporting another.
const (
	creditBits = 46
	creditMask = 1<<creditBits - 1
	maxLeased  = 1 << 45 // the largest limit of a leased limiter
)

func creditsOf(x uint64) int64 { return int64(x & creditMask) }
func genOf(x uint64) uint64    { return x >> creditBits }

// shard is one lock's share of the local keys, with a CLOCK ring.
type shard struct {
	mu   sync.Mutex
	m    map[string]*entry
	ring []*entry
	hand int
	cap  int
	_    [40]byte // keep neighbouring shards' locks off one cache line
}

// window is one lease window of a key: immutable once published.
type window struct {
	gen       uint64 // generation its credits carry in entry.word
	resetAtMs int64  // end on the server's clock
	resetAt   time.Time
	deadline  int64 // local ns: credits spendable while now < deadline
	serverRem int64 // what the server had left at the last lease
}

// denial is a remembered denial of ModeCachedDeny: immutable once
// published.
type denial struct {
	until, cost int64 // local ns; the smallest cost it applies to
	d           Decision
}

// entry is one key's local state. The atomic fields are read by the local
// path without a lock; every other field, and every change of a window's
// generation, is guarded by the shard's lock.
type entry struct {
	key string
	h   uint64

	word    atomic.Uint64          // genOf: window generation; creditsOf: credits
	win     atomic.Pointer[window] // the window of the credits; nil: none
	deny    atomic.Pointer[denial]
	ref     atomic.Bool // CLOCK reference bit
	lastUse atomic.Int64
	leasing atomic.Bool // a lease is in flight (written under the lock)

	gone      bool          // evicted: a lease in flight gives its credits back
	wait      chan struct{} // closed when the lease in flight completes
	exhausted int64         // local ns until which the window is known to be empty
	emptyEnd  time.Time     // the end of that window (server clock)
	sz        SizerState
	stats     Window // Leases, Leased, Returned of the open window
}

// touch marks e used at now without writing shared memory when nothing
// changed (the local path runs on every core).
func (e *entry) touch(now int64) {
	if !e.ref.Load() {
		e.ref.Store(true)
	}
	if e.lastUse.Load() < now {
		e.lastUse.Store(now)
	}
}

// spend takes cost credits of window w if at least need are there; it
// returns the credits left.
func (e *entry) spend(w *window, need, cost int64) (int64, bool) {
	for {
		x := e.word.Load()
		c := creditsOf(x)
		if genOf(x) != w.gen || c < need {
			return 0, false
		}
		if e.word.CompareAndSwap(x, x-uint64(cost)) {
			return c - cost, true
		}
	}
}

// take empties e's credits, keeping the generation, and returns them.
func (e *entry) take() int64 {
	for {
		x := e.word.Load()
		if e.word.CompareAndSwap(x, x&^creditMask) {
			return creditsOf(x)
		}
	}
}

// retire voids e's window (shard lock held): a new generation, no credits.
// It returns the credits that were left.
func (e *entry) retire() int64 {
	for {
		x := e.word.Load()
		if e.word.CompareAndSwap(x, (genOf(x)+1)<<creditBits) {
			e.win.Store(nil)
			return creditsOf(x)
		}
	}
}

// NewLimiter returns a Limiter in front of c. Invalid options are reported
// by every Allow (a *ArgError) rather than by a panic.
//
// Memory: a Limiter other than ModeStrict keeps an index of two pointers
// per key of MaxKeys (1 MiB at the default) besides the keys it holds.
func NewLimiter(c *Client, opts LimiterOptions) *Limiter {
	l := &Limiter{c: c, opts: opts, seed: maphash.MakeSeed()}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.err = l.validate()
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
	l.clk.init(opts.Now)
	if l.err != nil || opts.Mode == ModeStrict {
		return l
	}
	t := 2
	for t < 2*keys {
		t *= 2
	}
	l.tbl = make([]atomic.Pointer[entry], t)
	l.tmask = uint64(t - 1)
	if opts.Now == nil {
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
	return l
}

func (l *Limiter) validate() error {
	if err := l.opts.Limit.validate(); err != nil {
		return err
	}
	switch l.opts.Mode {
	case ModeStrict, ModeCachedDeny:
	case ModeLeased:
		if a := l.opts.Limit.Algo; a != "" && a != "fixed" {
			return &ArgError{"algo", "of a leased limiter must be fixed (or empty)"}
		}
		if l.opts.Limit.Limit > maxLeased {
			return &ArgError{"limit", "of a leased limiter must be at most 2^45"}
		}
		if l.opts.Batch < 0 || l.opts.LowWater < 0 || l.opts.ReturnIdleAfter < 0 {
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

// Allow decides whether cost units of key may pass now. On a server error
// it returns the FailOpen decision and the error; with an invalid cost or
// options, a denial and an *ArgError.
//
// In ModeLeased a cost above the limit is denied at once (RetryAfter -1)
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
func (l *Limiter) Allow(ctx context.Context, key string, cost int64) (Decision, error) {
	if l.err != nil {
		return Decision{}, l.err
	}
	if cost < 0 {
		return Decision{}, &ArgError{"cost", "must not be negative"}
	}
	if l.opts.Mode == ModeLeased {
		return l.allowLeased(ctx, key, cost) // checks closed off the local path
	}
	if l.closed.Load() {
		return l.failed(ErrClosed)
	}
	switch l.opts.Mode {
	case ModeCachedDeny:
		return l.allowCachedDeny(ctx, key, cost)
	}
	l.checks.Add(1)
	d, err := l.c.Check(ctx, key, l.opts.Limit, cost)
	if err != nil {
		return l.failed(err)
	}
	return d, nil
}

// failed applies the FailOpen policy to err.
func (l *Limiter) failed(err error) (Decision, error) {
	return Decision{Allowed: l.opts.FailOpen, Limit: l.opts.Limit.Limit}, err
}

func (l *Limiter) shardAt(h uint64) *shard { return &l.shs[(h>>32)&l.mask] }

// lookup finds key in the lock-free index: two slots, either may hold it.
// A miss only sends the call down the locked path.
func (l *Limiter) lookup(h uint64, key string) *entry {
	i := h & l.tmask
	if e := l.tbl[i].Load(); e != nil && e.key == key {
		return e
	}
	if e := l.tbl[i^1].Load(); e != nil && e.key == key {
		return e
	}
	return nil
}

// publish puts e in the index, in a free slot of its two or over the first.
func (l *Limiter) publish(e *entry) {
	i := e.h & l.tmask
	if l.tbl[i].CompareAndSwap(nil, e) || l.tbl[i^1].CompareAndSwap(nil, e) {
		return
	}
	l.tbl[i].Store(e)
}

// get returns key's entry (shard lock held), inserting it (and evicting
// another) if needed.
func (l *Limiter) get(s *shard, h uint64, key string) *entry {
	if e := s.m[key]; e != nil {
		e.ref.Store(true)
		if l.lookup(h, key) != e {
			l.publish(e)
		}
		return e
	}
	e := &entry{key: key, h: h}
	if l.opts.Batch > 0 {
		e.sz = SizerState{LogBatch: math.Log(float64(min(l.opts.Batch, l.opts.Limit.Limit))), Started: true}
	}
	if len(s.ring) < s.cap {
		s.ring = append(s.ring, e)
	} else {
		for {
			v := s.ring[s.hand]
			if v.ref.Load() {
				v.ref.Store(false)
				s.hand = (s.hand + 1) % len(s.ring)
				continue
			}
			l.evict(s, v)
			s.ring[s.hand] = e
			s.hand = (s.hand + 1) % len(s.ring)
			break
		}
	}
	s.m[key] = e
	l.publish(e)
	return e
}

// evict drops v (shard lock held) and gives its credits back; a lease in
// flight finds v.gone and gives its grant back.
func (l *Limiter) evict(s *shard, v *entry) {
	delete(s.m, v.key)
	i := v.h & l.tmask
	l.tbl[i].CompareAndSwap(v, nil)
	l.tbl[i^1].CompareAndSwap(v, nil)
	v.gone = true
	l.evicted.Add(1)
	if w := v.win.Load(); w != nil {
		l.giveBack(v.key, v.retire(), w.resetAtMs)
	}
}

// giveBack queues a THROTTLE.RETURN; a full queue drops it (the credits
// then lapse with their window, which is safe).
func (l *Limiter) giveBack(key string, credits, resetAtMs int64) {
	if l.giveCh == nil || credits <= 0 {
		return
	}
	select {
	case l.giveCh <- giveBack{key, credits, resetAtMs}:
	default:
	}
}

func (l *Limiter) giver() {
	defer l.wg.Done()
	for {
		select {
		case g := <-l.giveCh:
			l.sendReturn(g)
		case <-l.ctx.Done():
			for { // Close: send what is queued, then stop
				select {
				case g := <-l.giveCh:
					l.sendReturn(g)
				default:
					return
				}
			}
		}
	}
}

func (l *Limiter) sendReturn(g giveBack) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.returns.Add(1)
	_, _ = l.c.Return(ctx, g.key, g.credits, g.resetAt)
}

// ---- ModeCachedDeny ----

func (l *Limiter) allowCachedDeny(ctx context.Context, key string, cost int64) (Decision, error) {
	h := maphash.String(l.seed, key)
	if e := l.lookup(h, key); e != nil {
		if dn := e.deny.Load(); dn != nil {
			if now := l.clk.fast(); now < dn.until && max(cost, 1) >= dn.cost {
				e.touch(now)
				d := dn.d
				d.RetryAfter = ceilMs(dn.until - now)
				return d, nil
			}
		}
	}
	s := l.shardAt(h)
	s.mu.Lock()
	if e := s.m[key]; e != nil {
		// The index may have lost e to a neighbour: ask the map too.
		if dn := e.deny.Load(); dn != nil {
			if now := l.clk.precise(); now < dn.until && max(cost, 1) >= dn.cost {
				l.publish(e)
				s.mu.Unlock()
				d := dn.d
				d.RetryAfter = ceilMs(dn.until - now)
				return d, nil
			}
		}
	}
	s.mu.Unlock()
	l.checks.Add(1)
	d, err := l.c.Check(ctx, key, l.opts.Limit, cost)
	if err != nil {
		return l.failed(err)
	}
	if !d.Allowed && d.RetryAfter > 0 {
		// The server's retry-after counts from when it decided, before the
		// reply arrived: counting it from now denies a little longer, never
		// shorter.
		dn := &denial{until: l.clk.precise() + int64(d.RetryAfter), cost: max(cost, 1), d: d}
		s.mu.Lock()
		l.get(s, h, key).deny.Store(dn)
		s.mu.Unlock()
	}
	return d, nil
}

// ceilMs rounds a positive nanosecond span up to whole milliseconds, the
// server's resolution.
func ceilMs(ns int64) time.Duration {
	return time.Duration((ns+999_999)/1e6) * time.Millisecond
}

// ---- ModeLeased ----

func (l *Limiter) allowLeased(ctx context.Context, key string, cost int64) (Decision, error) {
	lim := l.opts.Limit.Limit
	h := maphash.String(l.seed, key)
	if cost > lim {
		return l.tooBig(h, key)
	}
	need := max(cost, 1) // cost 0 asks whether one unit would pass
	if e := l.lookup(h, key); e != nil {
		if w := e.win.Load(); w != nil {
			if now := l.clk.fast(); now < w.deadline {
				if left, ok := e.spend(w, need, cost); ok {
					e.touch(now)
					if left <= l.opts.LowWater && l.opts.LowWater > 0 && !e.leasing.Load() {
						l.lowWater(h, e, now)
					}
					return Decision{Allowed: true, Limit: lim, Remaining: left + w.serverRem, ResetAt: w.resetAt}, nil
				}
			}
		}
	}
	return l.allowLeasedSlow(ctx, h, key, cost)
}

// tooBig answers a cost above the limit: never at this limit.
func (l *Limiter) tooBig(h uint64, key string) (Decision, error) {
	lim := l.opts.Limit.Limit
	d := Decision{Limit: lim, Remaining: lim, RetryAfter: -1}
	if e := l.lookup(h, key); e != nil {
		if w := e.win.Load(); w != nil {
			d.Remaining, d.ResetAt = creditsOf(e.word.Load())+w.serverRem, w.resetAt
		}
	}
	return d, nil
}

// lowWater starts a background lease for e unless one is under way.
func (l *Limiter) lowWater(h uint64, e *entry, now int64) {
	s := l.shardAt(h)
	s.mu.Lock()
	if !e.gone && !e.leasing.Load() && now >= e.exhausted && e.win.Load() != nil {
		l.prefetch(s, e)
	}
	s.mu.Unlock()
}

// prefetch starts a background lease for e (shard lock held).
func (l *Limiter) prefetch(s *shard, e *entry) {
	l.bgMu.Lock()
	defer l.bgMu.Unlock()
	if l.closed.Load() {
		return
	}
	batch := l.batchFor(e, 1)
	e.leasing.Store(true)
	e.wait = make(chan struct{})
	l.leaseWG.Add(1)
	go func() {
		defer l.leaseWG.Done()
		ctx, cancel := context.WithTimeout(l.ctx, 5*time.Second)
		defer cancel()
		_ = l.lease(ctx, s, e, batch)
	}()
}

// batchFor asks the sizer and clamps its answer to [need, limit].
func (l *Limiter) batchFor(e *entry, need int64) int64 {
	lim := l.opts.Limit.Limit
	b := l.sizer.Batch(&e.sz, lim)
	return max(need, min(max(b, 1), lim))
}

func (l *Limiter) allowLeasedSlow(ctx context.Context, h uint64, key string, cost int64) (Decision, error) {
	lim := l.opts.Limit.Limit
	need := max(cost, 1)
	s := l.shardAt(h)
	for {
		if l.closed.Load() {
			return l.failed(ErrClosed)
		}
		now := l.clk.precise()
		s.mu.Lock()
		e := l.get(s, h, key)
		w := e.win.Load()
		if w != nil && now >= w.deadline {
			l.endWindow(e)
			w = nil
		}
		have := int64(0)
		if w != nil {
			if left, ok := e.spend(w, need, cost); ok {
				e.touch(now)
				s.mu.Unlock()
				return Decision{Allowed: true, Limit: lim, Remaining: left + w.serverRem, ResetAt: w.resetAt}, nil
			}
			have = creditsOf(e.word.Load())
		}
		if now < e.exhausted {
			d := Decision{Limit: lim, Remaining: have, ResetAt: e.emptyEnd, RetryAfter: ceilMs(e.exhausted - now)}
			s.mu.Unlock()
			return d, nil
		}
		if e.leasing.Load() {
			ch := e.wait
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return l.failed(ctx.Err())
			}
		}
		batch := l.batchFor(e, need-have)
		e.leasing.Store(true)
		e.wait = make(chan struct{})
		s.mu.Unlock()
		if err := l.lease(ctx, s, e, batch); err != nil {
			return l.failed(err)
		}
	}
}

// endWindow closes e's window (shard lock held): its credits are void.
func (l *Limiter) endWindow(e *entry) {
	w := e.stats
	w.Stranded = e.retire()
	w.Limit = l.opts.Limit.Limit
	w.Used = max(0, w.Leased-w.Stranded-w.Returned)
	l.sizer.Observe(&e.sz, w)
	e.stats = Window{}
}

// lease runs one THROTTLE.LEASE for e (e.leasing set by the caller) and
// folds the grant into e. It measures the server clock offset with a TIME
// in the same pipeline when the last measurement is stale.
func (l *Limiter) lease(ctx context.Context, s *shard, e *entry, batch int64) error {
	probe := l.offsetStale()
	t0 := l.clk.precise()
	var (
		g       Grant
		err     error
		srvTime time.Time
		timeErr error = errors.New("not probed")
	)
	l.leases.Add(1)
	if probe {
		l.probes.Add(1)
		p := l.c.rdb.Pipeline()
		tc := p.Time(ctx)
		gc := l.c.LeaseCmd(ctx, p, e.key, l.opts.Limit, batch)
		_, _ = p.Exec(ctx)
		srvTime, timeErr = tc.Result()
		g, err = gc.Result()
	} else {
		g, err = l.c.Lease(ctx, e.key, l.opts.Limit, batch)
	}
	t1 := l.clk.precise()
	if probe {
		l.setOffset(srvTime, timeErr, t0, t1)
	}
	offHi, offLo, margin := l.offset(t1)

	s.mu.Lock()
	defer s.mu.Unlock()
	e.leasing.Store(false)
	close(e.wait)
	e.wait = nil
	if err != nil {
		return err
	}
	if e.gone {
		l.giveBack(e.key, g.Credits, g.ResetAtMs)
		return nil
	}
	end := g.ResetAtMs * 1e6
	// Spend only while the server surely has not reached the end: local +
	// offHi is the latest the server's clock can read.
	nw := &window{resetAtMs: g.ResetAtMs, deadline: end - offHi - margin, serverRem: g.Remaining}
	if w := e.win.Load(); w != nil && w.resetAtMs == g.ResetAtMs {
		nw.gen, nw.resetAt = w.gen, w.resetAt
		for {
			x := e.word.Load()
			if e.word.CompareAndSwap(x, x+uint64(g.Credits)) {
				break
			}
		}
	} else {
		if w != nil {
			l.endWindow(e)
		}
		nw.gen = genOf(e.word.Load()) + 1
		nw.resetAt = time.UnixMilli(g.ResetAtMs)
		e.word.Store(nw.gen<<creditBits | uint64(g.Credits))
	}
	e.win.Store(nw)
	if g.Credits > 0 {
		e.stats.Leases++
		e.stats.Leased += g.Credits
	}
	e.touch(t1)
	switch {
	case g.Credits == 0 && g.RetryAfter > 0:
		e.exhausted = t1 + int64(g.RetryAfter)
		e.emptyEnd = nw.resetAt
	case g.Remaining == 0 || t1 >= nw.deadline:
		// Empty (or void on arrival): nothing more until the server has
		// surely moved on, local + offLo being the earliest it can read.
		e.exhausted = end - offLo + margin
		e.emptyEnd = nw.resetAt
	}
	return nil
}

func (l *Limiter) offsetStale() bool {
	l.offMu.Lock()
	defer l.offMu.Unlock()
	return !l.offsetMeasured || l.clk.precise()-l.offAt > int64(offsetRefresh)
}

// setOffset records the bounds of (server clock - local clock) from a TIME
// reply read by the server at some local instant in [t0, t1]. TIME has
// microsecond resolution, so the server's clock read in [S, S+1µs).
func (l *Limiter) setOffset(srv time.Time, err error, t0, t1 int64) {
	l.offMu.Lock()
	defer l.offMu.Unlock()
	l.offsetMeasured = true
	l.offAt = t1
	if err != nil {
		// No TIME: assume the clocks agree and rely on the margin.
		l.offLo, l.offHi = 0, 0
		return
	}
	s := srv.UnixNano()
	l.offLo, l.offHi = s-t1, s+1000-t0
}

// offset returns the offset bounds and the margin at local time now: a base
// margin, the coarse clock's tick, and drift since the last measurement.
func (l *Limiter) offset(now int64) (hi, lo, margin int64) {
	l.offMu.Lock()
	defer l.offMu.Unlock()
	margin = int64(baseMargin) + (now-l.offAt)*driftPPM/1e6
	if l.opts.Now == nil {
		margin += 2 * int64(clockTick)
	}
	return l.offHi, l.offLo, margin
}

// ReturnIdle gives back the credits of every key unused for
// ReturnIdleAfter (all keys if it is 0) and returns how many the server
// took back. A Limiter with ReturnIdleAfter set calls it in the background;
// call it yourself to return credits at a moment of your choosing.
func (l *Limiter) ReturnIdle(ctx context.Context) (int64, error) {
	return l.returnIdle(ctx, int64(l.opts.ReturnIdleAfter))
}

func (l *Limiter) returnIdle(ctx context.Context, idle int64) (int64, error) {
	if l.opts.Mode != ModeLeased || l.err != nil {
		return 0, nil
	}
	now := l.clk.precise()
	var todo []giveBack
	for i := range l.shs {
		s := &l.shs[i]
		s.mu.Lock()
		for _, e := range s.m {
			w := e.win.Load()
			if w == nil || e.leasing.Load() || now-e.lastUse.Load() < idle || now >= w.deadline {
				continue
			}
			if c := e.take(); c > 0 {
				todo = append(todo, giveBack{e.key, c, w.resetAtMs})
				e.stats.Returned += c
			}
		}
		s.mu.Unlock()
	}
	var total int64
	var first error
	for _, g := range todo {
		l.returns.Add(1)
		n, err := l.c.Return(ctx, g.key, g.credits, g.resetAt)
		if err != nil && first == nil {
			first = err
		}
		total += n
	}
	return total, first
}

func (l *Limiter) janitor() {
	defer l.wg.Done()
	t := time.NewTicker(max(l.opts.ReturnIdleAfter/2, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-t.C:
			_, _ = l.ReturnIdle(l.ctx)
		case <-l.ctx.Done():
			return
		}
	}
}

// Close stops the background goroutines and gives back every key's unspent
// credits (ModeLeased). Allow after Close returns ErrClosed. Close does not
// close the Client.
func (l *Limiter) Close() error {
	l.bgMu.Lock() // a prefetch after this sees closed
	first := l.closed.CompareAndSwap(false, true)
	l.bgMu.Unlock()
	if !first {
		return nil
	}
	var err error
	if l.opts.Mode == ModeLeased && l.err == nil {
		l.leaseWG.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err = l.returnIdle(ctx, 0)
		cancel()
	}
	l.cancel()
	l.wg.Wait()
	return err
}

// clock is the Limiter's time source: epoch nanoseconds anchored once to
// the wall clock and advanced by the monotonic clock, so a step of the wall
// clock cannot move it. fast reads a copy refreshed every clockTick by a
// goroutine (an atomic load, where reading the clock costs 70-350 ns on
// some virtual machines); it lags by up to a tick plus scheduling delay,
// which the deadline margin covers.
type clock struct {
	now    func() time.Time
	wall0  int64
	mono0  time.Time
	coarse atomic.Int64
}

func (c *clock) init(now func() time.Time) {
	c.now = now
	c.mono0 = time.Now()
	c.wall0 = c.mono0.UnixNano()
	c.coarse.Store(c.wall0)
}

func (c *clock) precise() int64 {
	if c.now != nil {
		return c.now().UnixNano()
	}
	return c.wall0 + int64(time.Since(c.mono0))
}

func (c *clock) fast() int64 {
	if c.now != nil {
		return c.now().UnixNano()
	}
	return c.coarse.Load()
}

func (c *clock) run(ctx context.Context, wg *sync.WaitGroup) {
	defer wg.Done()
	t := time.NewTicker(clockTick)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.coarse.Store(c.precise())
		case <-ctx.Done():
			return
		}
	}
}
