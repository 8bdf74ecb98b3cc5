package throttlekit

// The local key table of a Limiter: shards of a map under a mutex each,
// with a CLOCK ring for eviction, and the lock-free index the local paths
// read (see "The local tier's layout" in the package documentation).

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
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
	gen       uint64    // generation its credits carry in entry.word
	resetAt   time.Time // end on the server's clock, to the millisecond
	deadline  int64     // local ns: credits spendable while now < deadline
	serverRem int64     // what the server had left at the last lease
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
		e.sz = SizerState{LogBatch: math.Log(float64(min(l.opts.Batch, l.opts.Rate.Limit))), Started: true}
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
		l.giveBack(v.key, v.retire(), w.resetAt)
	}
}
