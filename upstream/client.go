package upstream

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttlekit/throttlekit-server/engine"
)

// Defaults of Options.
const (
	// DefaultTimeout bounds dialing and each read and write when
	// Options.Timeout is 0.
	DefaultTimeout = time.Second
	// DefaultPoolSize is the connection pool size (per node of a cluster)
	// when Options.PoolSize is 0.
	DefaultPoolSize = 64
)

// Options tunes Dial.
type Options struct {
	// Timeout bounds dialing and each read and write; 0 means
	// DefaultTimeout. A call that exceeds it fails with CodeUnavailable.
	Timeout time.Duration
	// PoolSize is the number of connections kept per server; 0 means
	// DefaultPoolSize.
	PoolSize int
}

// Client runs the scripts on one Redis or Valkey server or on a Redis
// Cluster. It is safe for concurrent use; go-redis pools its connections
// and, on a cluster, follows MOVED and ASK redirections.
type Client struct {
	rdb     redis.UniversalClient
	cluster bool
	s       *scriptSet
	now     string       // "" uses the upstream's clock (TIME); else an injected instant
	draw    func() int64 // a reservation's sequence number: rand.Int64, tests replace it
}

// Dial connects to the upstream named by rawURL:
//
//	redis://[user:pass@]host:port[/db]       one Redis or Valkey server
//	rediss://[user:pass@]host:port[/db]      the same over TLS
//	redis-cluster://[user:pass@]host:port[,host:port...]    seeds of a Redis Cluster
//	rediss-cluster://[user:pass@]host:port[,host:port...]   the same over TLS
//
// It does not wait for the upstream: the first call connects, and a call
// made while it is unreachable fails with CodeUnavailable.
func Dial(rawURL string, opt Options) (*Client, error) {
	o, co, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	timeout := opt.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	pool := opt.PoolSize
	if pool <= 0 {
		pool = DefaultPoolSize
	}
	if co != nil {
		co.DialTimeout, co.ReadTimeout, co.WriteTimeout, co.PoolSize = timeout, timeout, timeout, pool
		return New(redis.NewClusterClient(co)), nil
	}
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolSize = timeout, timeout, timeout, pool
	// No retries on one server: a script call resent after its reply was
	// lost would run twice; the caller's failure policy answers it instead.
	// (A cluster client keeps go-redis's redirections and retries, which
	// follow a failover.)
	o.MaxRetries = -1
	return New(redis.NewClient(o)), nil
}

// New wraps a go-redis client (*redis.Client or *redis.ClusterClient). A
// cluster client gets the CROSSSLOT check of multi-key calls.
func New(rdb redis.UniversalClient) *Client {
	_, cluster := rdb.(*redis.ClusterClient)
	s := loadScripts()
	return &Client{rdb: rdb, cluster: cluster, s: &s, draw: rand.Int64}
}

// Cluster reports whether c talks to a Redis Cluster (whose multi-key
// calls need one hash slot).
func (c *Client) Cluster() bool { return c.cluster }

// Close closes the connections.
func (c *Client) Close() error { return c.rdb.Close() }

// Redis returns the underlying go-redis client.
func (c *Client) Redis() redis.UniversalClient { return c.rdb }

// At returns a Client whose calls run at the instant now (ns since the
// epoch) instead of the upstream's clock. It is meant for tests, which must
// give every call its instant to compare the scripts with the engine; it
// shares c's connections. At injected instants the scripts set no Redis
// expiry (Redis would expire by its own clock); the expiry stored with each
// state still decides.
func (c *Client) At(now int64) *Client {
	d := *c
	d.now = strconv.FormatInt(now, 10)
	return &d
}

// Load sends every script with SCRIPT LOAD (to every master of a cluster),
// so the first EVALSHA of each finds it. Calls work without it: a NOSCRIPT
// reply makes the call resend the script with EVAL.
func (c *Client) Load(ctx context.Context) error {
	load := func(ctx context.Context, r *redis.Client) error {
		for _, s := range c.s.all() {
			if err := s.Load(ctx, r).Err(); err != nil {
				return err
			}
		}
		return nil
	}
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		return classify(cc.ForEachMaster(ctx, load))
	}
	if r, ok := c.rdb.(*redis.Client); ok {
		return classify(load(ctx, r))
	}
	for _, s := range c.s.all() {
		if err := s.Load(ctx, c.rdb).Err(); err != nil {
			return classify(err)
		}
	}
	return nil
}

// run is EVALSHA, and EVAL when the server answers NOSCRIPT (a restarted
// server, a new cluster node, SCRIPT FLUSH): EVAL also caches the script.
func (c *Client) run(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	r := s.EvalSha(ctx, c.rdb, keys, args...)
	if redis.HasErrorPrefix(r.Err(), "NOSCRIPT") {
		r = s.Eval(ctx, c.rdb, keys, args...)
	}
	c.reloadOnFailure(r.Err()) // failover.go
	return r
}

// limitArgs validates l as engine.NewLimit does, so arguments the engine
// rejects never reach the upstream.
func limitArgs(l engine.Limit) (engine.Limit, error) {
	v, err := engine.NewLimit(l.Algo, l.Limit, l.Period, l.Burst)
	if err != nil {
		return v, &Error{CodeEngine, err}
	}
	return v, nil
}

// Check runs THROTTLE.CHECK on key: one request of cost units against l
// (cost 0 peeks), atomically on the upstream. It returns what
// l.Check returns for the key's state at the upstream's clock.
func (c *Client) Check(ctx context.Context, key string, l engine.Limit, cost int64) (engine.Decision, error) {
	cl := Call{Kind: CallCheck, Key: key, Limit: l, N: cost}
	c.do(ctx, &cl)
	return cl.Decision, cl.Err
}

// Peek runs THROTTLE.PEEK: what Check with the same arguments would answer,
// consuming nothing. Allowed and RetryAfter are those of a request of cost
// units (cost 0 and 1 ask about one unit); Limit, Remaining and ResetAt
// describe the key as it is.
func (c *Client) Peek(ctx context.Context, key string, l engine.Limit, cost int64) (engine.Decision, error) {
	cl := Call{Kind: CallPeek, Key: key, Limit: l, N: cost}
	c.do(ctx, &cl)
	return cl.Decision, cl.Err
}

func decisionOf(r *redis.Cmd) (engine.Decision, error) {
	v, err := r.StringSlice()
	if err != nil {
		return engine.Decision{}, classify(err)
	}
	var d engine.Decision
	if err := decode(v, &d); err != nil {
		return d, err
	}
	return d, nil
}

func decode(v []string, d *engine.Decision) error {
	if len(v) != 5 {
		return &Error{CodeScript, errors.New("unexpected reply length " + strconv.Itoa(len(v)))}
	}
	var n [5]int64
	for i, s := range v {
		x, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return &Error{CodeScript, err}
		}
		n[i] = x
	}
	*d = engine.Decision{Allowed: n[0], Limit: n[1], Remaining: n[2], ResetAt: n[3], RetryAfter: n[4]}
	return nil
}

// Rule is one limit of MCheck: a key and the limit it is checked against.
type Rule struct {
	Key   string
	Limit engine.Limit
}

// MDecision is MCheck's outcome.
type MDecision struct {
	Allowed    bool              // every limit admitted cost and all were consumed
	RetryAfter int64             // the largest RetryAfter of the denying limits (-1 if one never admits); 0 if allowed
	Decisions  []engine.Decision // one per rule, as THROTTLE.MCHECK reports them
}

// MCheck runs THROTTLE.MCHECK: cost units against every rule, all or
// nothing, as one script. On a cluster the keys must share a hash slot
// (give them one hash tag, "{tenant}:..."); otherwise it fails with
// CodeCrossSlot and sends nothing.
func (c *Client) MCheck(ctx context.Context, rules []Rule, cost int64) (MDecision, error) {
	if len(rules) == 0 {
		return MDecision{}, &Error{CodeArgs, errors.New("no rules")}
	}
	keys := make([]string, len(rules))
	args := make([]any, 0, 2+4*len(rules))
	args = append(args, c.now, cost)
	for i, r := range rules {
		l, err := limitArgs(r.Limit)
		if err != nil {
			return MDecision{}, err
		}
		keys[i] = r.Key
		args = append(args, l.Algo.String(), l.Limit, l.Period, l.Burst)
	}
	if err := c.sameSlot(keys); err != nil {
		return MDecision{}, err
	}
	v, err := c.run(ctx, c.s.mcheck, keys, args...).StringSlice()
	if err != nil {
		return MDecision{}, classify(err)
	}
	if len(v) != 2+5*len(rules) {
		return MDecision{}, &Error{CodeScript, errors.New("unexpected reply length " + strconv.Itoa(len(v)))}
	}
	m := MDecision{Allowed: v[0] == "1", Decisions: make([]engine.Decision, len(rules))}
	if m.RetryAfter, err = strconv.ParseInt(v[1], 10, 64); err != nil {
		return MDecision{}, &Error{CodeScript, err}
	}
	for i := range rules {
		if err := decode(v[2+5*i:7+5*i], &m.Decisions[i]); err != nil {
			return MDecision{}, err
		}
	}
	return m, nil
}

// sameSlot refuses keys a cluster keeps in different slots, and a key
// named twice.
func (c *Client) sameSlot(keys []string) error {
	for i := range keys {
		for j := 0; j < i; j++ {
			if keys[i] == keys[j] {
				return &Error{CodeArgs, errors.New("key " + strconv.Quote(keys[i]) + " is named twice")}
			}
		}
	}
	if !c.cluster {
		return nil
	}
	s := Slot(keys[0])
	for _, k := range keys[1:] {
		if Slot(k) != s {
			return &Error{CodeCrossSlot, ErrCrossSlot}
		}
	}
	return nil
}

// Reset runs THROTTLE.RESET: it deletes the keys and returns how many held
// live state. On a cluster the keys must share a hash slot.
func (c *Client) Reset(ctx context.Context, keys ...string) (int64, error) {
	if len(keys) == 0 {
		return 0, &Error{CodeArgs, errors.New("no keys")}
	}
	if err := c.sameSlot(keys); err != nil {
		return 0, err
	}
	return intOf(c.run(ctx, c.s.reset, keys, c.now))
}

func intOf(r *redis.Cmd) (int64, error) {
	s, err := r.Text()
	if err != nil {
		return 0, classify(err)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, &Error{CodeScript, err}
	}
	return n, nil
}

// Lease runs THROTTLE.LEASE: min(batch, remaining) credits of key's current
// fixed window of limit units per period ns (engine.Limit.Lease).
// Decision.Allowed holds the credits granted, valid until ResetAt.
func (c *Client) Lease(ctx context.Context, key string, limit, period, batch int64) (engine.Decision, error) {
	cl := Call{Kind: CallLease, Key: key, Limit: engine.Limit{Algo: engine.KindFixed, Limit: limit, Period: period}, N: batch}
	c.do(ctx, &cl)
	return cl.Decision, cl.Err
}

// Return runs THROTTLE.RETURN: it gives back unused leased credits of the
// window whose ResetAt was resetAtMs and returns how many were taken back
// (engine.Return).
func (c *Client) Return(ctx context.Context, key string, credits, resetAtMs int64) (int64, error) {
	cl := Call{Kind: CallReturn, Key: key, N: credits, ResetAt: resetAtMs}
	c.do(ctx, &cl)
	return cl.Count, cl.Err
}

// Throttle runs CL.THROTTLE (redis-cell 0.5.0) on key: quantity units
// against cell (engine.Cell.Throttle; 0 peeks, a negative quantity refunds).
func (c *Client) Throttle(ctx context.Context, key string, cell engine.Cell, quantity int64) (engine.CellReply, error) {
	cl := Call{Kind: CallCell, Key: key, Cell: cell, N: quantity}
	c.do(ctx, &cl)
	return cl.CellReply, cl.Err
}

// GCRA runs Redis's GCRA command on key (engine.RateGCRA.Apply): g is
// what engine.NewRateGCRA made of the command's arguments, so the float
// period is parsed once, by the caller, and the script sees only integers.
// A denied call writes nothing; an allowed one stores the new theoretical
// arrival time until its millisecond, as Redis does.
func (c *Client) GCRA(ctx context.Context, key string, g engine.RateGCRA) (engine.RateGCRAReply, error) {
	if g.Burst < 1 || g.Interval < 1 || g.Tokens < 1 {
		return engine.RateGCRAReply{}, &Error{CodeEngine, engine.ErrOutOfRange}
	}
	return gcraReplyOf(c.run(ctx, c.s.gcra, []string{key}, c.now, g.Burst, g.Interval, g.Tokens))
}

func gcraReplyOf(r *redis.Cmd) (engine.RateGCRAReply, error) {
	v, err := r.StringSlice()
	if err != nil {
		return engine.RateGCRAReply{}, classify(err)
	}
	if len(v) != 5 {
		return engine.RateGCRAReply{}, &Error{CodeScript, errors.New("unexpected reply length " + strconv.Itoa(len(v)))}
	}
	var n [5]int64
	for i, s := range v {
		if n[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return engine.RateGCRAReply{}, &Error{CodeScript, err}
		}
	}
	return engine.RateGCRAReply{Limited: n[0], Burst: n[1], Remaining: n[2], RetryAfter: n[3], ResetAfter: n[4]}, nil
}

// errFixedLease refuses LeaseLimit and ReturnLimit of a fixed window,
// whose leases are Lease and Return.
var errFixedLease = &Error{CodeArgs, errors.New("a fixed window leases with Lease and Return")}

// LeaseLimit leases units of a GCRA, token-bucket or sliding-window limit
// (leased mode): it charges min(batch, remaining) units of key at once, as
// a check of that cost would, and returns them in Decision.Allowed with the
// key's Limit and Remaining after the grant. For a sliding window,
// ResetAt is the end (ms, rounded up) of the window the units count in,
// before which they must be spent; for GCRA and token bucket it is the
// instant the budget is full again after the grant, which ReturnLimit
// names. RetryAfter is 0 when the whole batch was granted, else the ms
// until one more unit fits. A fixed window is refused (CodeArgs): it
// leases with Lease.
func (c *Client) LeaseLimit(ctx context.Context, key string, l engine.Limit, batch int64) (engine.Decision, error) {
	l, err := limitArgs(l)
	if err != nil {
		return engine.Decision{}, err
	}
	if l.Algo == engine.KindFixed {
		return engine.Decision{}, errFixedLease
	}
	return decisionOf(c.run(ctx, c.s.leaseAlgo, []string{key}, c.now, l.Algo.String(), l.Limit, l.Period, l.Burst, batch))
}

// ReturnLimit un-charges credits units a LeaseLimit granted and the server
// did not spend; resetAtMs is that lease's ResetAt. It returns the units
// taken back, never more than the lease can still be worth: for a sliding
// window, none once its window ended, else at most the window's count; for
// GCRA and token bucket, at most the units the budget regains between now
// and resetAtMs less a millisecond (an unused unit of the lease is still
// charged until then), and at most what the key holds charged now. A
// caller returns each lease's units once: a second return of the same
// units would give them back twice.
func (c *Client) ReturnLimit(ctx context.Context, key string, l engine.Limit, credits, resetAtMs int64) (int64, error) {
	l, err := limitArgs(l)
	if err != nil {
		return 0, err
	}
	if l.Algo == engine.KindFixed {
		return 0, errFixedLease
	}
	return intOf(c.run(ctx, c.s.retAlgo, []string{key}, c.now, l.Algo.String(), l.Limit, l.Period, l.Burst, credits, resetAtMs))
}
