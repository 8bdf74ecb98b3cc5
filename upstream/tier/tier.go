package tier

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	throttlekit "github.com/throttlekit/throttlekit-server/clients/go"
	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/limits"
	"github.com/throttlekit/throttlekit-server/shard"
	"github.com/throttlekit/throttlekit-server/upstream"
)

// Mode is how a key's operations use the upstream.
type Mode uint8

// The modes.
const (
	// ModeStrict runs every operation on the upstream.
	ModeStrict Mode = iota
	// ModeCachedDeny runs checks on the upstream and remembers a denial
	// until its retry-after, answering checks of that key locally
	// meanwhile.
	ModeCachedDeny
	// ModeLeased leases batches of units and answers checks from them
	// locally (leased.go; the package doc states each algorithm's bound).
	ModeLeased
)

var modeNames = [...]string{"strict", "cached-deny", "leased"}

// String returns the mode's name as the flags spell it.
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "unknown"
}

// ParseMode parses "strict", "cached-deny" or "leased".
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if strings.EqualFold(s, n) {
			return Mode(i), nil
		}
	}
	return 0, errors.New("unknown upstream mode " + `"` + s + `"` + ": want strict, cached-deny or leased")
}

// PrefixMode gives the keys starting with Prefix a mode of their own.
type PrefixMode struct {
	Prefix string
	Mode   Mode
}

// Defaults of Config.
const (
	// DefaultWorkers is the number of goroutines that call the upstream
	// when Config.Workers is 0.
	DefaultWorkers = 64
	// DefaultQueue is the number of operations waiting for a worker when
	// Config.Queue is 0; beyond it an operation fails as if the upstream
	// were unavailable, so an event loop never waits for room.
	DefaultQueue = 8192
	// DefaultTimeout bounds one upstream call when Config.Timeout is 0.
	DefaultTimeout = time.Second
	// DefaultBatch is Config.Batch's default.
	DefaultBatch = 100
	// DefaultPipeline is Config.Pipeline's default.
	DefaultPipeline = 128
)

// Config configures a Backend.
type Config struct {
	Client   *upstream.Client // the upstream
	Local    *limits.Local    // local state: keyspace calls, and answers while failing open
	Mode     Mode             // the mode of keys no prefix matches
	Prefixes []PrefixMode     // longest matching prefix wins
	// FailOpen answers operations from Local while the upstream is
	// unavailable (counted in Stats.FailOpen); otherwise they fail with
	// limits.ErrUnavailable.
	FailOpen bool
	Timeout  time.Duration // one upstream call; 0 means DefaultTimeout
	// Workers is the number of goroutines calling the upstream (0 means
	// DefaultWorkers); operations of one lane (limits.Op.Lane) always go
	// to the same one, in order.
	Workers int
	Queue   int // operations waiting for the workers in all; 0 means DefaultQueue
	// Pipeline bounds the operations a worker sends in one round trip
	// (package doc, "Workers and order"); 0 means DefaultPipeline, 1 sends
	// each on its own.
	Pipeline int
	// ServerClock runs each script at the instant the front passed (the
	// server's clock) instead of the upstream's TIME. Tests with an
	// injected clock set it; production leaves the upstream's clock.
	ServerClock bool
	// Batch is the credits one lease asks for (leased mode); 0 means
	// DefaultBatch. A check of a larger cost asks for its cost.
	Batch int64
	// Sizer, if set, chooses each lease's batch instead of Batch and
	// learns from each finished window (clients/go's Sizer, shared with
	// the Go client's L1: AdaptiveSizer is --upstream-batch auto).
	Sizer throttlekit.Sizer
	// IdleReturn, if positive, gives back every IdleReturn the credits of
	// leases unused for IdleReturn and forgets expired leases and cached
	// denials (ReturnIdle), reading now from Clock (nil: time.Now). Without
	// it the caller must call ReturnIdle, or those maps keep every key.
	IdleReturn time.Duration
	Clock      func() int64
}

// Backend is limits.Backend over an upstream (package doc).
type Backend struct {
	cfg   Config
	jobs  []chan job // one queue per worker: a lane always goes to one
	wg    sync.WaitGroup
	close sync.Once

	denyMu sync.Mutex
	deny   map[string]denial

	stop    chan struct{} // closed by Close: ends idleLoop
	leaseMu sync.Mutex
	leases  map[string]*lease // leased mode: leased.go

	st counters
}

// denial is a cached denial of cached-deny mode: checks of at least cost
// units against the same limit are denied until until (server clock, ns).
type denial struct {
	lim   engine.Limit
	cost  int64
	until int64
	d     engine.Decision
}

var _ limits.Backend = (*Backend)(nil)

// job is one entry of a worker's queue: a single-key operation to send in
// the worker's next pipeline (op set), or a function to run in its turn.
type job struct {
	op  *limits.Op
	now int64
	fn  func()
}

// New returns a Backend and starts its workers. Close stops them.
func New(cfg Config) (*Backend, error) {
	if cfg.Client == nil || cfg.Local == nil {
		return nil, errors.New("tier: Client and Local are required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Sizer == nil {
		cfg.Sizer = throttlekit.FixedSizer(cfg.Batch)
	}
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.Pipeline <= 0 {
		cfg.Pipeline = DefaultPipeline
	}
	b := &Backend{cfg: cfg, jobs: make([]chan job, cfg.Workers), deny: make(map[string]denial), leases: make(map[string]*lease)}
	if cfg.IdleReturn > 0 {
		b.stop = make(chan struct{})
		b.wg.Add(1)
		go b.idleLoop()
	}
	b.wg.Add(cfg.Workers)
	for i := range b.jobs {
		ch := make(chan job, max(cfg.Queue/cfg.Workers, 1))
		b.jobs[i] = ch
		go func() {
			defer b.wg.Done()
			b.work(ch)
		}()
	}
	return b, nil
}

// Close stops the workers once the queued operations are done. Calls
// after Close panic; stop the fronts first.
func (b *Backend) Close() {
	b.close.Do(func() {
		if b.stop != nil {
			close(b.stop)
		}
		for _, ch := range b.jobs {
			close(ch)
		}
		b.wg.Wait()
	})
}

// ModeOf returns the mode of key: the longest matching prefix's, or the
// default.
func (b *Backend) ModeOf(key []byte) Mode {
	m, best := b.cfg.Mode, -1
	for _, p := range b.cfg.Prefixes {
		if len(p.Prefix) > best && len(key) >= len(p.Prefix) && string(key[:len(p.Prefix)]) == p.Prefix {
			m, best = p.Mode, len(p.Prefix)
		}
	}
	return m
}

// modeOf returns the mode op runs in: the mode the operation asks for
// (limits.Op.Mode, a policy's per-descriptor mode) if any, else its key's
// (ModeOf).
func (b *Backend) modeOf(op *limits.Op) Mode {
	switch op.Mode {
	case limits.ModeStrict:
		return ModeStrict
	case limits.ModeCachedDeny:
		return ModeCachedDeny
	case limits.ModeLeased:
		return ModeLeased
	}
	return b.ModeOf(op.Key)
}

// Modes returns the default mode and the per-prefix modes.
func (b *Backend) Modes() (Mode, []PrefixMode) { return b.cfg.Mode, b.cfg.Prefixes }

// FailOpen reports the failure policy.
func (b *Backend) FailOpen() bool { return b.cfg.FailOpen }

// client returns the client to call at now.
func (b *Backend) client(now int64) *upstream.Client {
	if b.cfg.ServerClock {
		return b.cfg.Client.At(now)
	}
	return b.cfg.Client
}

// submit queues fn for the worker of lane; false when its queue is full.
// One worker runs a lane's jobs in order.
func (b *Backend) submit(lane uint64, fn func()) bool {
	return b.enqueue(lane, job{fn: fn})
}

// submitOp queues op, run at now, for the worker of lane's next pipeline;
// false when the queue is full. The worker completes op and calls its Done.
func (b *Backend) submitOp(lane uint64, op *limits.Op, now int64) bool {
	return b.enqueue(lane, job{op: op, now: now})
}

func (b *Backend) enqueue(lane uint64, j job) bool {
	select {
	case b.jobs[lane%uint64(len(b.jobs))] <- j:
		b.st.pending.Add(1)
		return true
	default:
		return false
	}
}

// work is a worker: it takes what is queued, up to Config.Pipeline jobs,
// sends each run of consecutive operations as one pipeline and runs each
// function in its turn, so jobs complete in the order they were queued.
func (b *Backend) work(ch chan job) {
	batch := make([]job, 0, b.cfg.Pipeline)
	ops := make([]*limits.Op, 0, b.cfg.Pipeline)
	nows := make([]int64, 0, b.cfg.Pipeline)
	for j := range ch {
		batch = append(batch[:0], j)
	drain:
		for len(batch) < b.cfg.Pipeline {
			select {
			case j, ok := <-ch:
				if !ok {
					break drain
				}
				batch = append(batch, j)
			default:
				break drain
			}
		}
		for _, j := range batch {
			if j.op != nil {
				ops, nows = append(ops, j.op), append(nows, j.now)
				continue
			}
			b.flush(ops, nows)
			ops, nows = ops[:0], nows[:0]
			j.fn()
		}
		b.flush(ops, nows)
		ops, nows = ops[:0], nows[:0]
		clear(batch)
	}
}

// flush runs ops (ops[i] at nows[i]) as one pipeline and calls each one's
// Done, in order.
func (b *Backend) flush(ops []*limits.Op, nows []int64) {
	if len(ops) == 0 {
		return
	}
	b.runAll(ops, nows)
	for _, op := range ops {
		done(op)
	}
	clear(ops)
}

// call runs f against the upstream with the timeout, timing it.
func (b *Backend) call(f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timeout)
	start := time.Now()
	err := f(ctx)
	cancel()
	b.st.observe(time.Since(start), err)
	return err
}

// mapErr turns an upstream error into the error a front words: engine
// errors pass through, CROSSSLOT and unavailability get this package's
// limits errors. unavailable reports a CodeUnavailable error (the caller
// applies the failure policy).
func mapErr(err error) (out error, unavailable bool) {
	if err == nil {
		return nil, false
	}
	var ee *engine.Error
	switch upstream.CodeOf(err) {
	case upstream.CodeUnavailable:
		return limits.ErrUnavailable, true
	case upstream.CodeCrossSlot:
		return limits.ErrCrossSlot, false
	case upstream.CodeWrongType:
		return engine.ErrWrongType, false
	case upstream.CodeEngine:
		if errors.As(err, &ee) {
			return ee, false
		}
	case upstream.CodeArgs:
		return err, false
	}
	return limits.ErrUpstream, false
}

// Do runs op: from the deny cache at once when it can, else on the
// upstream from a worker, returning with op.Err == limits.ErrPending and
// calling op.Done once op holds its results. The caller hands a value of
// its own, with Key bytes that stay valid until Done.
func (b *Backend) Do(op *limits.Op, now int64, _ *limits.Section) {
	if op.Kind == limits.OpCheck && b.modeOf(op) == ModeCachedDeny && b.cachedDeny(op, now) {
		b.st.denyHits.Add(1)
		return
	}
	if b.leasable(op) {
		b.doLeased(op, now)
		return
	}
	res := new(limits.Op) // completed by a worker: op is not written after Do returns
	*res = *op
	if !b.submitOp(op.Lane, res, now) {
		b.st.queueFull.Add(1)
		b.fail(op, now)
		return
	}
	op.Err = limits.ErrPending
}

// done calls op.Done with op.
func done(op *limits.Op) {
	if op.Done != nil {
		op.Done(op)
	}
}

// cachedDeny answers op from a remembered denial.
func (b *Backend) cachedDeny(op *limits.Op, now int64) bool {
	b.denyMu.Lock()
	dn, ok := b.deny[string(op.Key)]
	if ok && now >= dn.until {
		delete(b.deny, string(op.Key))
		ok = false
	}
	b.denyMu.Unlock()
	if !ok || dn.lim != op.Limit || op.Cost < dn.cost {
		return false
	}
	op.Decision = dn.d
	op.Decision.RetryAfter = (dn.until - now + 999_999) / 1_000_000
	op.Err = nil
	return true
}

// remember caches a denial of op, sent at now (server clock). The
// upstream decided at an instant no earlier than now, and its retry-after
// r is the wait rounded up to the millisecond, so the wait exceeds r-1 ms:
// until = now + (r-1) ms is before the instant the upstream would admit
// again. The cache never denies longer than the upstream would, whatever
// the two clocks read (only a duration crosses between them).
func (b *Backend) remember(op *limits.Op, now int64) {
	d := op.Decision
	if d.Allowed != 0 || d.RetryAfter <= 1 {
		return // -1 (never admits this cost) or under 1 ms: left to the upstream
	}
	b.denyMu.Lock()
	b.deny[string(op.Key)] = denial{lim: op.Limit, cost: op.Cost, until: now + (d.RetryAfter-1)*1_000_000, d: d}
	b.denyMu.Unlock()
}

// forget drops a cached denial (a reset, or an admission by another path).
func (b *Backend) forget(key []byte) {
	b.denyMu.Lock()
	delete(b.deny, string(key))
	b.denyMu.Unlock()
}

// run completes op on the upstream on its own (a worker's goroutine),
// without calling its Done.
func (b *Backend) run(op *limits.Op, now int64) {
	b.runAll([]*limits.Op{op}, []int64{now})
}

// callKinds maps the operations runAll sends to their calls.
var callKinds = [...]upstream.CallKind{
	limits.OpCheck: upstream.CallCheck, limits.OpPeek: upstream.CallPeek, limits.OpLease: upstream.CallLease,
	limits.OpReturn: upstream.CallReturn, limits.OpCell: upstream.CallCell, limits.OpReset: upstream.CallReset,
	limits.OpRateGCRA: upstream.CallGCRA,
}

// runAll completes ops (ops[i] at nows[i]) on the upstream in one round
// trip (upstream.Client.Pipe), in order, without calling their Done. An
// operation whose call could not reach the upstream gets the failure
// policy, each on its own: closed, ErrUnavailable; open, the local answer.
func (b *Backend) runAll(ops []*limits.Op, nows []int64) {
	calls := make([]upstream.Call, len(ops))
	for i, op := range ops {
		b.st.pending.Add(-1)
		cl := &calls[i]
		cl.Key, cl.Limit, cl.Cell, cl.GCRA, cl.N = string(op.Key), op.Limit, op.Cell, op.GCRA, op.Cost
		if b.cfg.ServerClock {
			cl.At = nows[i]
		}
		switch op.Kind {
		case limits.OpReturn:
			cl.N, cl.ResetAt = op.Credits, op.ResetAt
		case limits.OpReset:
			b.forget(op.Key)
		}
		if int(op.Kind) < len(callKinds) {
			cl.Kind = callKinds[op.Kind]
		} else {
			cl.Kind, cl.Err = upstream.CallKind(255), limits.ErrUnsupported
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timeout)
	start := time.Now()
	b.cfg.Client.Pipe(ctx, calls)
	cancel()
	b.st.observeBatch(time.Since(start), calls)
	for i, op := range ops {
		b.complete(op, nows[i], &calls[i])
	}
}

// complete copies cl's result into op and applies the failure policy.
func (b *Backend) complete(op *limits.Op, now int64, cl *upstream.Call) {
	if cl.Err == limits.ErrUnsupported {
		op.Err = cl.Err
		return
	}
	e, unavailable := mapErr(cl.Err)
	switch {
	case unavailable:
		b.fail(op, now)
		return
	case e != nil:
		op.Err = e
		return
	}
	op.Err = nil
	switch op.Kind {
	case limits.OpCheck, limits.OpPeek, limits.OpLease:
		op.Decision = cl.Decision
	case limits.OpCell:
		op.CellReply = cl.CellReply
	case limits.OpReturn, limits.OpReset:
		op.Accepted = cl.Count
	case limits.OpRateGCRA:
		op.GCRAReply = cl.GCRAReply
		if op.GCRAReply.Limited == 0 {
			b.st.allowed.Add(1)
		}
	}
	if op.Kind == limits.OpCheck {
		if op.Decision.Allowed != 0 {
			b.st.allowed.Add(1)
		} else if b.modeOf(op) == ModeCachedDeny {
			b.remember(op, now)
		}
	}
}

// fail applies the failure policy to op: closed, ErrUnavailable; open,
// the answer of the local state.
func (b *Backend) fail(op *limits.Op, now int64) {
	if !b.cfg.FailOpen {
		op.Err = limits.ErrUnavailable
		return
	}
	b.st.failOpen.Add(1)
	b.cfg.Local.Do(op, now, nil)
}

// Peek runs op synchronously on the upstream: it blocks the caller, so
// an event loop uses Do with limits.OpPeek instead.
func (b *Backend) Peek(key []byte, lim *engine.Limit, cost, now int64, _ *limits.Section) (engine.Decision, error) {
	op := limits.Op{Kind: limits.OpPeek, Key: key, Limit: *lim, Cost: cost}
	b.st.pending.Add(1) // run counts one off
	b.run(&op, now)
	return op.Decision, op.Err
}

// Reset forgets key on the upstream synchronously (it blocks the caller;
// an event loop uses Do with limits.OpReset). A failure counts as "held
// nothing".
func (b *Backend) Reset(key []byte, now int64, _ *limits.Section) bool {
	op := limits.Op{Kind: limits.OpReset, Key: key}
	b.st.pending.Add(1)
	b.run(&op, now)
	return op.Err == nil && op.Accepted > 0
}

// MCheck runs m as one script on the upstream. On a cluster its keys
// must share a hash slot, else it returns limits.ErrCrossSlot at once and
// sends nothing. Otherwise it returns limits.ErrPending and calls m.Done
// once m holds its results or, in m.Err, the error.
func (b *Backend) MCheck(m *limits.MCheck, now int64, _ *limits.Section) error {
	keys := make([]string, len(m.Keys))
	for i, k := range m.Keys {
		keys[i] = string(k)
	}
	if b.cfg.Client.Cluster() && len(keys) > 0 {
		s := upstream.Slot(keys[0])
		for _, k := range keys[1:] {
			if upstream.Slot(k) != s {
				b.st.errs[upstream.CodeCrossSlot].Add(1)
				return limits.ErrCrossSlot
			}
		}
	}
	rules := make([]upstream.Rule, len(keys))
	for i := range keys {
		rules[i] = upstream.Rule{Key: keys[i], Limit: m.Limits[i]}
	}
	orig := m
	res := *m // completed by a worker: the caller's m is not written after MCheck returns
	m = &res
	job := func() {
		b.st.pending.Add(-1)
		c := b.client(now)
		var md upstream.MDecision
		err := b.call(func(ctx context.Context) (e error) {
			md, e = c.MCheck(ctx, rules, m.Cost)
			return e
		})
		e, unavailable := mapErr(err)
		switch {
		case unavailable && b.cfg.FailOpen:
			b.st.failOpen.Add(1)
			e = b.cfg.Local.MCheck(m, now, nil)
		case e == nil:
			m.Allowed, m.RetryAfter = md.Allowed, md.RetryAfter
			m.Decisions = append(m.Decisions[:0], md.Decisions...)
			if md.Allowed {
				b.st.allowed.Add(1)
			}
		}
		m.Err = e
		if m.Done != nil {
			m.Done(m)
		}
	}
	if !b.submit(m.Lane, job) {
		b.st.queueFull.Add(1)
		if b.cfg.FailOpen {
			b.st.failOpen.Add(1)
			return b.cfg.Local.MCheck(orig, now, nil)
		}
		return limits.ErrUnavailable
	}
	return limits.ErrPending
}

// Exec runs bt's items as one script on the upstream (upstream.Client.Exec),
// at one instant, in their lane's turn: they take effect together, each
// with its own results and error, or not at all. Every item runs strict,
// whatever its key's mode: a cached denial is not consulted and leased
// credits are not spent (a check draws on the upstream's window itself,
// which the leases are coupled to, so limits still hold). On a cluster
// the items' keys must share a hash slot, else it returns
// limits.ErrCrossSlot at once and sends nothing (the records of the
// admission items live on their user key's slot). Otherwise it returns
// limits.ErrPending and calls bt.Done with the completed copy. An
// upstream that cannot be reached fails the whole batch with
// limits.ErrUnavailable (nothing ran) or, failing open, runs it on the
// local store (Local.Exec).
func (b *Backend) Exec(bt *limits.Batch, now int64, _ *limits.Section) error {
	calls := make([]upstream.Call, len(bt.Items))
	first, cross := -1, false
	slot := func(k string) {
		if !b.cfg.Client.Cluster() {
			return
		}
		if first < 0 {
			first = upstream.Slot(k)
		}
		if upstream.Slot(k) != first {
			cross = true
		}
	}
	for i := range bt.Items {
		it := &bt.Items[i]
		cl := &calls[i]
		if m := it.MCheck; m != nil {
			cl.Kind, cl.N = upstream.CallMCheck, m.Cost
			cl.Rules = make([]upstream.Rule, len(m.Keys))
			for j, k := range m.Keys {
				cl.Rules[j] = upstream.Rule{Key: string(k), Limit: m.Limits[j]}
				slot(cl.Rules[j].Key)
			}
			continue
		}
		if admissionCall(it, cl) {
			slot(cl.Key)
			continue
		}
		op := &it.Op
		if int(op.Kind) >= len(callKinds) {
			return limits.ErrUnsupported
		}
		cl.Kind, cl.Key, cl.Limit, cl.Cell, cl.GCRA, cl.N = callKinds[op.Kind], string(op.Key), op.Limit, op.Cell, op.GCRA, op.Cost
		if op.Kind == limits.OpReturn {
			cl.N, cl.ResetAt = op.Credits, op.ResetAt
		}
		slot(cl.Key)
	}
	if cross {
		b.st.errs[upstream.CodeCrossSlot].Add(1)
		return limits.ErrCrossSlot
	}
	if b.cfg.ServerClock && len(calls) > 0 {
		calls[0].At = now
	}
	res := *bt // completed by a worker: the caller's bt is not written after Exec returns
	res.Items = append([]limits.BatchItem(nil), bt.Items...)
	for i := range res.Items {
		if m := res.Items[i].MCheck; m != nil {
			c := *m
			c.Decisions = nil
			res.Items[i].MCheck = &c
		}
		copyAdmission(&res.Items[i])
	}
	job := func() {
		b.st.pending.Add(-1)
		for i := range res.Items {
			if op := &res.Items[i].Op; res.Items[i].MCheck == nil && op.Kind == limits.OpReset {
				b.forget(op.Key)
			}
		}
		err := b.call(func(ctx context.Context) error { return b.cfg.Client.Exec(ctx, calls) })
		e, unavailable := mapErr(err)
		switch {
		case unavailable && b.cfg.FailOpen:
			b.st.failOpen.Add(1)
			_ = b.cfg.Local.Exec(&res, now, nil)
		case unavailable:
			res.Err = limits.ErrUnavailable
		case e != nil:
			res.Err = e
		default:
			res.Err = nil
			for i := range res.Items {
				it := &res.Items[i]
				if m := it.MCheck; m != nil {
					md := calls[i].MDecision
					if m.Err, _ = mapErr(calls[i].Err); m.Err == nil {
						m.Allowed, m.RetryAfter, m.Decisions = md.Allowed, md.RetryAfter, md.Decisions
						if md.Allowed {
							b.st.allowed.Add(1)
						}
					}
					continue
				}
				if b.admissionResult(it, &calls[i]) {
					continue
				}
				b.complete(&it.Op, now, &calls[i])
			}
		}
		if res.Done != nil {
			res.Done(&res)
		}
	}
	if !b.submit(bt.Lane, job) {
		b.st.queueFull.Add(1)
		if b.cfg.FailOpen {
			b.st.failOpen.Add(1)
			return b.cfg.Local.Exec(bt, now, nil)
		}
		return limits.ErrUnavailable
	}
	return limits.ErrPending
}

// Begin binds sec to the local store; the upstream ignores sections.
func (b *Backend) Begin(sec *limits.Section) { b.cfg.Local.Begin(sec) }

// Get reads the local store (the state answered while failing open).
func (b *Backend) Get(key []byte, now int64, sec *limits.Section) (engine.State, bool) {
	return b.cfg.Local.Get(key, now, sec)
}

// Lookup reads the local store.
func (b *Backend) Lookup(key []byte, now int64, sec *limits.Section) (engine.State, int64, bool) {
	return b.cfg.Local.Lookup(key, now, sec)
}

// Scan scans the local store.
func (b *Backend) Scan(p *shard.ScanPage, cursor uint64, count int, now int64, sec *limits.Section) (uint64, error) {
	return b.cfg.Local.Scan(p, cursor, count, now, sec)
}

// FlushAll forgets the local store and the cached denials; the upstream
// keeps its keys.
func (b *Backend) FlushAll(now int64, sec *limits.Section) {
	b.denyMu.Lock()
	clear(b.deny)
	b.denyMu.Unlock()
	b.cfg.Local.FlushAll(now, sec)
}

// Len returns the local store's key count.
func (b *Backend) Len(sec *limits.Section) int { return b.cfg.Local.Len(sec) }

// Stats returns the local store's statistics.
func (b *Backend) Stats() shard.Stats { return b.cfg.Local.Stats() }

// OffHeapBytes returns the local store's bytes outside the Go heap.
func (b *Backend) OffHeapBytes() int64 { return b.cfg.Local.OffHeapBytes() }

// Usage returns what key holds in the local store (MEMORY USAGE): leases
// and cached denials, not the upstream's state.
func (b *Backend) Usage(key []byte, now int64) (shard.KeyUsage, bool) {
	return b.cfg.Local.Usage(key, now)
}

// RecordStats returns the local record store's statistics.
func (b *Backend) RecordStats() shard.Stats { return b.cfg.Local.RecordStats() }
