package persist

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/shard"
)

// Mode says when a Persister writes.
type Mode uint8

const (
	// ModeAsync writes the changes of each Interval in the background; a
	// crash loses at most the changes of one interval plus one flush.
	ModeAsync Mode = iota
	// ModeSync writes as soon as the server asks (Commit), grouping every
	// request that arrives while a write is in flight into the next one;
	// the server holds its replies until Durable reaches its ticket.
	ModeSync
)

// String returns "async" or "sync", the spelling ParseMode accepts.
func (m Mode) String() string {
	if m == ModeSync {
		return "sync"
	}
	return "async"
}

// ParseMode parses "async" or "sync".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "async":
		return ModeAsync, nil
	case "sync":
		return ModeSync, nil
	}
	return 0, &Error{Code: CodeBadURL, Msg: fmt.Sprintf("unknown persist mode %q (async or sync)", s)}
}

// Policy says what the server does while the backend is unavailable.
type Policy uint8

const (
	// FailOpen keeps answering from memory; changes wait in the Persister
	// (coalesced per key) until the backend is back.
	FailOpen Policy = iota
	// FailClosed refuses commands that change state while the last write
	// failed (Refusing reports it); reads from memory still work.
	FailClosed
)

// String returns "open" or "closed", the spelling ParsePolicy accepts.
func (p Policy) String() string {
	if p == FailClosed {
		return "closed"
	}
	return "open"
}

// ParsePolicy parses "open" or "closed".
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "open":
		return FailOpen, nil
	case "closed":
		return FailClosed, nil
	}
	return 0, &Error{Code: CodeBadURL, Msg: fmt.Sprintf("unknown failure policy %q (open or closed)", s)}
}

// Config tunes a Persister. Zero fields take the defaults given.
type Config struct {
	Mode   Mode
	Policy Policy
	// Interval is the period of background flushes: the write period in
	// ModeAsync, a safety net in ModeSync. 0 means 1 s.
	Interval time.Duration
	// BatchSize bounds the records of one Backend.Write. 0 means 1000.
	BatchSize int
	// MinBackoff and MaxBackoff bound the wait before retrying after a
	// failed write; it doubles from MinBackoff on each failure in a row.
	// 0 means 50 ms and 10 s.
	MinBackoff, MaxBackoff time.Duration
	// WriteTimeout bounds one Backend.Write. 0 means 30 s.
	WriteTimeout time.Duration
	// ExpireEvery is the period of the background removal of expired rows.
	// 0 means 1 min; negative turns it off.
	ExpireEvery time.Duration
	// Now returns the time in Unix nanoseconds, the clock of the store's
	// expiries (the server passes its clock). nil means time.Now.
	Now func() int64
	// OnCommit, when set, is called by the flushing goroutine after each
	// write that made everything up to epoch durable (see Commit). It must
	// not block: wake the event loops and return.
	OnCommit func(epoch uint64)
	// OnError, when set, is called with each failed write or expiry (for
	// logging). It must not block.
	OnError func(err error)
	// OnFlushed, when set, is called by the flushing goroutine with the
	// duration of each successful write that carried rows (for the
	// server's latency monitor). It must not block.
	OnFlushed func(d time.Duration)
}

// FlushBounds are the upper bounds, in seconds, of the buckets of
// Stats.FlushSeconds; the last bucket counts longer flushes.
var FlushBounds = [...]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Histogram counts durations: Counts[i] is the number of observations at
// most FlushBounds[i] and above FlushBounds[i-1] (not cumulative); the
// last count is above every bound.
type Histogram struct {
	Counts [len(FlushBounds) + 1]uint64
	Sum    float64 // seconds
	Count  uint64
}

func (h *Histogram) observe(sec float64) {
	i := 0
	for i < len(FlushBounds) && sec > FlushBounds[i] {
		i++
	}
	h.Counts[i]++
	h.Sum += sec
	h.Count++
}

// Stats is a snapshot of a Persister's state and counters.
type Stats struct {
	Backend string // "postgres" or "dynamodb"
	Mode    string // "async" or "sync"
	Policy  string // "open" or "closed"
	Healthy bool   // the last write succeeded (or none failed yet)
	// LagMs is the age in milliseconds of the oldest change not yet
	// durable: changed in the store and not gathered, gathered and
	// waiting, or in a write that has not returned. 0 when every change is
	// durable. It is exact to within the gap between two gathers: a change
	// first seen by a gather is dated at the gather before it (see the
	// package doc, "Lag and dirty keys").
	LagMs int64
	// DirtyKeys is the number of keys changed and not yet durable, the
	// keys of a write in flight included (one per key however often it
	// changed).
	DirtyKeys   int64
	Durable     uint64 // the epoch made durable (see Commit)
	Requested   uint64 // the last epoch handed out by Commit
	RowsWritten int64  // upserts written, cumulative
	RowsDeleted int64  // tombstones written, cumulative
	RowsExpired int64  // expired rows removed in the background, cumulative
	Flushes     int64  // flushes that wrote everything they set out to write
	Errors      int64  // failed writes and expiries
	LastError   string // the last failure, "" when none
	// FlushSeconds is the duration of each flush that wrote something
	// (gathering plus writing), successful or not.
	FlushSeconds Histogram
	// Loaded, LoadSkipped and LoadTime describe the start-up LoadAll.
	Loaded      int64
	LoadSkipped int64
	LoadTime    time.Duration
}

// LoadStats reports a LoadAll.
type LoadStats struct {
	Keys    int64         // keys put into the store
	Skipped int64         // rows read but not loaded (expired by now, too long, zero state)
	Took    time.Duration // wall time of the whole load
}

// shrinkAbove is the number of records gathered in one flush above which
// the Persister drops its buffers once they are written.
const shrinkAbove = 1 << 14

// Persister keeps a shard.Store durable through a Backend. It gathers the
// store's changes with Store.Flush, coalesces them per key, writes them in
// batches and retries failed writes with exponential backoff. Methods are
// safe for concurrent use. See the package doc for the modes and their
// guarantees.
type Persister struct {
	b     Backend
	store *shard.Store
	cfg   Config

	requested atomic.Uint64 // last ticket handed out by Commit
	durable   atomic.Uint64 // last ticket made durable
	healthy   atomic.Bool
	wake      chan struct{}

	flushMu sync.Mutex // serialises flushes; guards closing and closed
	closing bool       // Close has begun
	closed  bool       // Close has made its final flush

	// The records gathered and not yet durable, at most one per key in
	// recs[taken:], in the order they were first gathered. A flush hands
	// recs[written:taken] to a Write and freezes them: a later change of
	// one of those keys is appended as a new record instead of changing
	// the one being written. Their keys live in arena, which only grows
	// until every record is written and is then reused (spare is the
	// other arena of a compaction); index maps a key (a string sharing the
	// arena's bytes) to its newest record; since[i] is an instant before
	// which recs[i] holds no change that is not durable (Now units).
	gmu        sync.Mutex // guards the fields below
	recs       []Record
	since      []int64
	arena      []byte
	spare      []byte
	index      map[string]int32
	written    int                                          // recs[:written] are written
	taken      int                                          // recs[:taken] are written or being written
	tracking   bool                                         // the store tracks changes: Stats may gather
	final      bool                                         // Close has made its final flush: gather no more
	lastGather int64                                        // Now() when the last gather began
	gatheredAt time.Time                                    // the same instant, monotonic
	newSince   int64                                        // since of the records the current gather appends
	gather     func(key []byte, st engine.State, exp int64) // p.add, bound once

	mu        sync.Mutex // guards st
	st        Stats
	startOnce sync.Once
	stop      chan struct{}
	done      sync.WaitGroup
}

// New returns a Persister that saves store into b. It does nothing until
// LoadAll, Start or Flush is called.
func New(b Backend, store *shard.Store, cfg Config) *Persister {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 1000
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 50 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(10*time.Second, cfg.MinBackoff)
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.ExpireEvery == 0 {
		cfg.ExpireEvery = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = func() int64 { return time.Now().UnixNano() }
	}
	p := &Persister{
		b:     b,
		store: store,
		cfg:   cfg,
		wake:  make(chan struct{}, 1),
		index: make(map[string]int32),
		stop:  make(chan struct{}),
	}
	p.gather = p.add
	p.healthy.Store(true)
	p.st = Stats{Backend: b.Name(), Mode: cfg.Mode.String(), Policy: cfg.Policy.String()}
	p.lastGather, p.gatheredAt = cfg.Now(), time.Now()
	return p
}

// LoadAll fills the store from the backend with every row whose expiry is
// after now, then switches the store's change tracking on without writing
// back what it loaded. Call it once, before the store takes traffic and
// before Start: a change made to the store during LoadAll would be taken
// for loaded data and not written.
func (p *Persister) LoadAll(ctx context.Context, now int64) (LoadStats, error) {
	start := time.Now()
	var ls LoadStats
	err := p.b.Load(ctx, now, func(key []byte, st engine.State, exp int64) error {
		if p.store.Load(key, st, exp, now) {
			ls.Keys++
		} else {
			ls.Skipped++
		}
		return nil
	})
	p.gmu.Lock()
	p.lastGather, p.gatheredAt = p.cfg.Now(), time.Now()
	p.store.Flush(func([]byte, engine.State, int64) {}) // tracking on; everything held is what we just read
	p.tracking = true
	p.gmu.Unlock()
	ls.Took = time.Since(start)
	p.mu.Lock()
	p.st.Loaded, p.st.LoadSkipped, p.st.LoadTime = ls.Keys, ls.Skipped, ls.Took
	p.mu.Unlock()
	return ls, err
}

// Start launches the background goroutines: the flusher (every Interval,
// on Commit, and on retry after a failure) and the expiry of old rows.
// Calling it again does nothing. Close stops them.
func (p *Persister) Start() {
	p.startOnce.Do(func() {
		p.done.Add(1)
		go p.run()
		if p.cfg.ExpireEvery > 0 {
			p.done.Add(1)
			go p.expireLoop()
		}
	})
}

// Commit asks for a flush of everything changed in the store so far and
// returns its ticket: once Durable() >= the ticket, every change made
// before the call is durable. It never blocks; calls made while a write
// is in flight share the next write (group commit).
func (p *Persister) Commit() uint64 {
	n := p.requested.Add(1)
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return n
}

// Durable returns the highest ticket whose changes are all durable. It is
// one atomic load.
func (p *Persister) Durable() uint64 { return p.durable.Load() }

// Healthy reports whether the last write succeeded (true before any).
func (p *Persister) Healthy() bool { return p.healthy.Load() }

// Refusing reports whether the server should refuse changes now: the
// policy is FailClosed and the backend is failing. The server answers
// "-TRYAGAIN persistence unavailable" while it is true.
func (p *Persister) Refusing() bool { return p.cfg.Policy == FailClosed && !p.healthy.Load() }

// Mode returns the configured Mode.
func (p *Persister) Mode() Mode { return p.cfg.Mode }

// Stats returns a snapshot of the counters, with the lag and the dirty
// keys as of the call. To count the changes the store holds, it first
// gathers them (as a flush would, without writing; they are written by
// the next flush), so it costs one walk over the keys changed since the
// last gather; it never waits for a write.
func (p *Persister) Stats() Stats {
	p.gmu.Lock()
	if p.tracking && !p.final {
		p.gatherLocked()
	}
	dirty, oldest := p.pendingLocked()
	p.gmu.Unlock()
	now := p.cfg.Now()
	p.mu.Lock()
	s := p.st
	p.mu.Unlock()
	s.Healthy = p.healthy.Load()
	s.Durable = p.durable.Load()
	s.Requested = p.requested.Load()
	s.DirtyKeys = dirty
	if dirty > 0 {
		s.LagMs = max(0, (now-oldest)/1e6)
	}
	return s
}

// pendingLocked returns the number of keys gathered and not yet durable
// and the since of the oldest such record (gmu held).
func (p *Persister) pendingLocked() (keys int64, oldest int64) {
	n := len(p.recs) - p.written
	if n == 0 {
		return 0, 0
	}
	// A key of the write in flight that changed again has a second,
	// newer record after it: count the key once.
	for i := p.written; i < p.taken; i++ {
		k := p.recs[i].Key
		if j := p.index[unsafe.String(unsafe.SliceData(k), len(k))]; int(j) != i {
			n--
		}
	}
	return int64(n), p.since[p.written]
}

// Flush gathers the store's changes and writes everything pending now,
// ignoring any backoff, and returns when done. It serves tests, a save
// command and shutdown; the background flusher does the same on its own.
func (p *Persister) Flush(ctx context.Context) error {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	if p.closed {
		return &Error{Code: CodeClosed, Msg: "persister closed"}
	}
	return p.flushLocked(ctx)
}

// gatherLocked moves the store's changes into the records (gmu held).
// Records it appends carry the start of the previous gather as their
// since: a change this gather is the first to see was made after the
// previous one began.
func (p *Persister) gatherLocked() {
	start, mono := p.cfg.Now(), time.Now()
	p.newSince = p.lastGather
	p.store.Flush(p.gather)
	p.lastGather, p.gatheredAt, p.tracking = start, mono, true
}

// flushLocked is one flush (flushMu held): take the ticket, gather, and
// write the records gathered so far in batches, gathering again between
// batches once an Interval has passed since the last gather (so that a
// flush longer than the Interval writes states no older than that);
// records appended by those gathers wait for the next flush. Then publish.
func (p *Persister) flushLocked(ctx context.Context) error {
	t0 := time.Now()
	target := p.requested.Load()
	p.gmu.Lock()
	p.gatherLocked()
	n := len(p.recs) // this flush writes recs[:n]
	p.gmu.Unlock()
	if n == 0 {
		p.succeeded(target, 0, 0, 0)
		return nil
	}
	var rows, dels int64
	var err error
	for {
		p.gmu.Lock()
		lo := p.written
		if lo >= n {
			p.gmu.Unlock()
			break
		}
		if lo > 0 && !p.closing && time.Since(p.gatheredAt) >= p.cfg.Interval {
			p.gatherLocked()
		}
		hi := min(lo+p.cfg.BatchSize, n)
		batch := p.recs[lo:hi:hi]
		p.taken = hi
		p.gmu.Unlock()

		// The records of batch are frozen (see add): they are read here
		// while other gathers may run.
		wctx, cancel := context.WithTimeout(ctx, p.cfg.WriteTimeout)
		err = p.b.Write(wctx, batch)
		cancel()
		if err != nil {
			break
		}
		for j := range batch {
			if batch[j].Tombstone() {
				dels++
			} else {
				rows++
			}
		}
		p.gmu.Lock()
		p.written = hi
		p.gmu.Unlock()
	}
	p.gmu.Lock()
	p.drop()
	p.gmu.Unlock()
	sec := time.Since(t0).Seconds()
	if err != nil {
		p.failed(err, rows, dels, sec)
		return err
	}
	p.succeeded(target, rows, dels, sec)
	return nil
}

// add gathers one change from Store.Flush (gmu held): a newer state of a
// key already gathered replaces the older one, unless that record is
// frozen in a write (then, like a new key, the change is appended and its
// key copied into the arena). In the steady state it allocates nothing.
func (p *Persister) add(key []byte, st engine.State, exp int64) {
	if i, ok := p.index[string(key)]; ok && int(i) >= p.taken {
		p.recs[i].State, p.recs[i].ExpireAt = st, exp
		return
	}
	p.appendRec(key, st, exp, p.newSince)
}

// appendRec appends a record, copying its key into the arena, and points
// the index at it (gmu held).
func (p *Persister) appendRec(key []byte, st engine.State, exp, since int64) {
	off := len(p.arena)
	p.arena = append(p.arena, key...)
	k := p.arena[off:len(p.arena):len(p.arena)]
	// The arena's bytes are not written again while a record or index
	// entry refers to them (see drop), so the string may share them. An
	// entry that exists keeps its old string, whose bytes stay put too.
	p.index[unsafe.String(unsafe.SliceData(k), len(k))] = int32(len(p.recs))
	p.recs = append(p.recs, Record{Key: k, State: st, ExpireAt: exp})
	p.since = append(p.since, since)
}

// drop forgets the written records at the end of a flush (gmu held). When
// none is left the arena is reused from its start; otherwise (a write
// failed, or gathers during the flush appended records) the others move to
// the front and their keys to the spare arena, so the bytes of written
// keys do not pile up. A key left twice (its frozen record was not
// written and a newer one follows) keeps one record: the older one's place
// and since with the newer state.
func (p *Persister) drop() {
	n, total := p.written, len(p.recs)
	p.written, p.taken = 0, 0
	if n == total {
		clear(p.recs)
		p.recs, p.since, p.arena = p.recs[:0], p.since[:0], p.arena[:0]
		clear(p.index)
		if total > shrinkAbove {
			// Go maps and slices keep their peak size: after a large
			// backlog (the first flush, an outage) give the memory back.
			p.recs, p.since, p.arena, p.spare, p.index = nil, nil, nil, nil, make(map[string]int32)
		}
		return
	}
	arena := p.spare[:0]
	clear(p.index)
	m := 0
	for i := n; i < total; i++ {
		r := p.recs[i]
		if j, ok := p.index[string(r.Key)]; ok {
			p.recs[j].State, p.recs[j].ExpireAt = r.State, r.ExpireAt
			continue
		}
		off := len(arena)
		arena = append(arena, r.Key...)
		k := arena[off:len(arena):len(arena)]
		p.recs[m] = Record{Key: k, State: r.State, ExpireAt: r.ExpireAt}
		p.since[m] = p.since[i]
		p.index[unsafe.String(unsafe.SliceData(k), len(k))] = int32(m)
		m++
	}
	clear(p.recs[m:])
	p.recs, p.since = p.recs[:m], p.since[:m]
	p.spare, p.arena = p.arena[:0], arena
	if cap(p.spare) > 4*cap(p.arena)+shrinkAbove {
		p.spare = nil
	}
}

func (p *Persister) succeeded(target uint64, rows, dels int64, sec float64) {
	p.mu.Lock()
	p.st.RowsWritten += rows
	p.st.RowsDeleted += dels
	p.st.Flushes++
	if rows+dels > 0 {
		p.st.FlushSeconds.observe(sec)
	}
	p.mu.Unlock()
	if p.cfg.OnFlushed != nil && rows+dels > 0 {
		p.cfg.OnFlushed(time.Duration(sec * float64(time.Second)))
	}
	p.healthy.Store(true)
	for {
		d := p.durable.Load()
		if target <= d || p.durable.CompareAndSwap(d, target) {
			break
		}
	}
	if p.cfg.OnCommit != nil && target > 0 {
		p.cfg.OnCommit(p.durable.Load())
	}
}

func (p *Persister) failed(err error, rows, dels int64, sec float64) {
	p.mu.Lock()
	p.st.RowsWritten += rows
	p.st.RowsDeleted += dels
	p.st.Errors++
	p.st.LastError = err.Error()
	p.st.FlushSeconds.observe(sec)
	p.mu.Unlock()
	p.healthy.Store(false)
	if p.cfg.OnError != nil {
		p.cfg.OnError(err)
	}
}

// run is the flusher: it flushes on each tick and each Commit, and after a
// failure waits out an exponential backoff before trying again (Commits in
// the meantime wait for that retry).
func (p *Persister) run() {
	defer p.done.Done()
	tick := time.NewTicker(p.cfg.Interval)
	defer tick.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	var backoff time.Duration
	var retryAt time.Time
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		case <-p.wake:
		case <-retry.C:
		}
		if backoff > 0 && time.Now().Before(retryAt) {
			continue
		}
		p.flushMu.Lock()
		if p.closed {
			p.flushMu.Unlock()
			return
		}
		err := p.flushLocked(context.Background())
		p.flushMu.Unlock()
		if err != nil {
			backoff = min(max(2*backoff, p.cfg.MinBackoff), p.cfg.MaxBackoff)
			retryAt = time.Now().Add(backoff)
			retry.Reset(backoff)
			continue
		}
		backoff = 0
		if p.requested.Load() > p.durable.Load() {
			// Commits arrived during the write: serve them now.
			select {
			case p.wake <- struct{}{}:
			default:
			}
		}
	}
}

func (p *Persister) expireLoop() {
	defer p.done.Done()
	t := time.NewTicker(p.cfg.ExpireEvery)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			_, _ = p.Expire(context.Background())
		}
	}
}

// Expire removes the rows that expired by now from the backend and returns
// how many. The background goroutine calls it every ExpireEvery.
func (p *Persister) Expire(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*p.cfg.WriteTimeout)
	defer cancel()
	n, err := p.b.Expire(ctx, p.cfg.Now())
	p.mu.Lock()
	p.st.RowsExpired += n
	if err != nil {
		p.st.Errors++
		p.st.LastError = err.Error()
	}
	p.mu.Unlock()
	if err != nil && p.cfg.OnError != nil {
		p.cfg.OnError(err)
	}
	return n, err
}

// Close stops the background goroutines, makes a final flush and closes
// the backend. It returns the final flush's error, if any: the changes it
// could not write are lost. Later calls return an error matching ErrClosed.
func (p *Persister) Close(ctx context.Context) error {
	p.flushMu.Lock()
	if p.closing {
		p.flushMu.Unlock()
		return &Error{Code: CodeClosed, Msg: "persister closed"}
	}
	p.closing = true
	p.flushMu.Unlock()
	close(p.stop)
	p.done.Wait()
	p.flushMu.Lock()
	err := p.flushLocked(ctx)
	// A Stats call during that flush may have gathered changes it did
	// not set out to write: write them too (a few passes at most, since
	// nothing should change the store any more).
	for range 3 {
		p.gmu.Lock()
		left := len(p.recs) > 0
		p.gmu.Unlock()
		if err != nil || !left {
			break
		}
		err = p.flushLocked(ctx)
	}
	p.closed = true
	p.gmu.Lock()
	p.final = true
	p.gmu.Unlock()
	p.flushMu.Unlock()
	if cerr := p.b.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, ErrClosed) {
		return err
	}
	return nil
}
