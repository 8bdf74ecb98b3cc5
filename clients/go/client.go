package throttlekit

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Decision is the outcome of a check.
//
// RetryAfter is 0 when Allowed, the wait until the same request can pass
// when denied, and negative when it can never pass at this limit (a cost
// above the limit or burst). ResetAt is when the budget is full again (for
// a lease or the fixed window: the end of the window).
type Decision struct {
	Allowed    bool
	Limit      int64
	Remaining  int64
	ResetAt    time.Time
	RetryAfter time.Duration
}

// Grant is the reply to THROTTLE.LEASE: Credits units of the current fixed
// window, to be spent before ResetAt (the window's end on the server's
// clock, to the millisecond), which is also the time Return must name.
type Grant struct {
	Credits    int64
	Limit      int64
	Remaining  int64 // credits the window still holds after this grant
	ResetAt    time.Time
	RetryAfter time.Duration // when Credits is 0: until the window ends
}

// CellResult is the reply to CL.THROTTLE, redis-cell's five numbers.
// RetryAfter is negative when the request was not limited; ResetAfter is
// when the bucket is full again. Both have redis-cell's whole-second
// resolution.
type CellResult struct {
	Limited    bool
	Limit      int64
	Remaining  int64
	RetryAfter time.Duration
	ResetAfter time.Duration
}

// Client is a typed client for the THROTTLE commands on top of a go-redis
// client. It works over RESP2 (replies are arrays) and RESP3 (maps), and
// with any redis.UniversalClient (a single node, a ring or a cluster: the
// commands name one key). It is safe for concurrent use and holds no state
// of its own.
//
// Context deadlines: the Client returns ctx.Err() at once for a context
// already done, and go-redis bounds the wait for a reply by the context
// only when its Options.ContextTimeoutEnabled is true (otherwise by its
// ReadTimeout); set it for per-call deadlines.
type Client struct {
	rdb redis.UniversalClient
}

// NewClient returns a Client that sends its commands through rdb.
func NewClient(rdb redis.UniversalClient) *Client { return &Client{rdb: rdb} }

// Redis returns the go-redis client, e.g. to start a pipeline for the *Cmd
// methods.
func (c *Client) Redis() redis.UniversalClient { return c.rdb }

func checkArgs(name, key string, rate Rate, cost int64, withCost bool) ([]any, error) {
	if err := rate.validate(); err != nil {
		return nil, err
	}
	if withCost && cost < 0 {
		return nil, &ArgError{"cost", "must not be negative"}
	}
	args := make([]any, 0, 10)
	args = append(args, name, key, rate.Limit, rate.periodMs())
	if rate.Algo != "" {
		args = append(args, "ALGO", string(rate.Algo))
	}
	if rate.Burst != 0 {
		args = append(args, "BURST", rate.Burst)
	}
	if withCost && cost != 1 {
		args = append(args, "COST", cost)
	}
	return args, nil
}

func leaseArgs(key string, rate Rate, batch int64) ([]any, error) {
	if err := rate.validate(); err != nil {
		return nil, err
	}
	if !rate.fixedOrEmpty() {
		return nil, &ArgError{"algo", "of a lease must be FixedWindow (or empty)"}
	}
	if batch < 0 {
		return nil, &ArgError{"batch", "must not be negative"}
	}
	return []any{"THROTTLE.LEASE", key, rate.Limit, rate.periodMs(), "BATCH", batch}, nil
}

func returnArgs(key string, credits int64, resetAt time.Time) ([]any, error) {
	switch {
	case credits < 0:
		return nil, &ArgError{"credits", "must not be negative"}
	case resetAt.IsZero():
		return nil, &ArgError{"resetAt", "must be set (the ResetAt of the Grant)"}
	case resetAt.Nanosecond()%int(time.Millisecond) != 0:
		return nil, &ArgError{"resetAt", "must be a whole millisecond (the ResetAt of the Grant)"}
	}
	return []any{"THROTTLE.RETURN", key, credits, resetAt.UnixMilli()}, nil
}

func resetArgs(keys []string) ([]any, error) {
	if len(keys) == 0 {
		return nil, &ArgError{"keys", "must name at least one key"}
	}
	args := make([]any, 0, len(keys)+1)
	args = append(args, "THROTTLE.RESET")
	for _, k := range keys {
		args = append(args, k)
	}
	return args, nil
}

func cellArgs(key string, maxBurst, countPerPeriod int64, period time.Duration, quantity int64) ([]any, error) {
	if period%time.Second != 0 {
		return nil, &ArgError{"period", "must be a whole number of seconds (redis-cell's resolution)"}
	}
	return []any{"CL.THROTTLE", key, maxBurst, countPerPeriod, int64(period / time.Second), quantity}, nil
}

// run sends one command and returns its raw value.
func (c *Client) run(ctx context.Context, args []any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cmd := redis.NewCmd(ctx, args...)
	_ = c.rdb.Process(ctx, cmd)
	v, err := cmd.Result()
	return v, serverError(err)
}

// Check runs THROTTLE.CHECK: it consumes cost units of key's budget under
// rate if they are available. Cost 0 is a peek: whether one unit would
// pass, with nothing consumed.
func (c *Client) Check(ctx context.Context, key string, rate Rate, cost int64) (Decision, error) {
	args, err := checkArgs("THROTTLE.CHECK", key, rate, cost, true)
	if err != nil {
		return Decision{}, err
	}
	v, err := c.run(ctx, args)
	if err != nil {
		return Decision{}, err
	}
	return decisionOf(v, "allowed")
}

// Peek runs THROTTLE.PEEK: the decision a check of one unit would get, with
// nothing consumed and no key created.
func (c *Client) Peek(ctx context.Context, key string, rate Rate) (Decision, error) {
	args, err := checkArgs("THROTTLE.PEEK", key, rate, 0, false)
	if err != nil {
		return Decision{}, err
	}
	v, err := c.run(ctx, args)
	if err != nil {
		return Decision{}, err
	}
	return decisionOf(v, "allowed")
}

// Reset runs THROTTLE.RESET and returns how many of keys held state.
func (c *Client) Reset(ctx context.Context, keys ...string) (int64, error) {
	args, err := resetArgs(keys)
	if err != nil {
		return 0, err
	}
	v, err := c.run(ctx, args)
	if err != nil {
		return 0, err
	}
	return intOf(v)
}

// Lease runs THROTTLE.LEASE: up to batch credits of the current fixed
// window of rate (rate.Algo must be FixedWindow or empty; Burst is
// ignored). The credits are void at the grant's ResetAt.
func (c *Client) Lease(ctx context.Context, key string, rate Rate, batch int64) (Grant, error) {
	args, err := leaseArgs(key, rate, batch)
	if err != nil {
		return Grant{}, err
	}
	v, err := c.run(ctx, args)
	if err != nil {
		return Grant{}, err
	}
	return grantOf(v)
}

// Return runs THROTTLE.RETURN: it gives unused credits of the window that
// ends at resetAt (the Grant's ResetAt) back to key and returns how many
// the server took back (0 once that window is over).
func (c *Client) Return(ctx context.Context, key string, credits int64, resetAt time.Time) (int64, error) {
	args, err := returnArgs(key, credits, resetAt)
	if err != nil {
		return 0, err
	}
	v, err := c.run(ctx, args)
	if err != nil {
		return 0, err
	}
	return intOf(v)
}

// CellThrottle runs redis-cell's CL.THROTTLE key maxBurst countPerPeriod
// period quantity, with period sent in whole seconds (a fraction of a
// second is an *ArgError). The server validates the numbers; its errors
// are *ServerError with Code "Cell".
func (c *Client) CellThrottle(ctx context.Context, key string, maxBurst, countPerPeriod int64, period time.Duration, quantity int64) (CellResult, error) {
	args, err := cellArgs(key, maxBurst, countPerPeriod, period, quantity)
	if err != nil {
		return CellResult{}, err
	}
	v, err := c.run(ctx, args)
	if err != nil {
		return CellResult{}, err
	}
	return cellOf(v)
}

// Pipelining. Each *Cmd method below queues its command on p (a
// redis.Pipeliner from c.Redis().Pipeline() or TxPipeline(), or the
// argument of Pipelined) and returns a handle whose Result is valid once
// the pipeline has been executed. An argument the client rejects queues
// nothing and surfaces from Result.

// DecisionCmd is a queued THROTTLE.CHECK or THROTTLE.PEEK.
type DecisionCmd struct{ q queued }

// Result returns the decision once the pipeline has run.
func (d *DecisionCmd) Result() (Decision, error) {
	return resultOf(d.q, func(v any) (Decision, error) { return decisionOf(v, "allowed") })
}

// GrantCmd is a queued THROTTLE.LEASE.
type GrantCmd struct{ q queued }

// Result returns the grant once the pipeline has run.
func (g *GrantCmd) Result() (Grant, error) { return resultOf(g.q, grantOf) }

// CountCmd is a queued THROTTLE.RESET or THROTTLE.RETURN, whose reply is
// an integer.
type CountCmd struct{ q queued }

// Result returns the integer once the pipeline has run.
func (n *CountCmd) Result() (int64, error) { return resultOf(n.q, intOf) }

// CellCmd is a queued CL.THROTTLE.
type CellCmd struct{ q queued }

// Result returns the redis-cell reply once the pipeline has run.
func (c *CellCmd) Result() (CellResult, error) { return resultOf(c.q, cellOf) }

// queued is a command queued on a pipeline, or the error that kept its
// arguments from being sent.
type queued struct {
	cmd *redis.Cmd
	err error
}

// queueArgs queues args on p, unless err (from building them) is set.
func queueArgs(ctx context.Context, p redis.Pipeliner, args []any, err error) queued {
	if err != nil {
		return queued{err: err}
	}
	cmd := redis.NewCmd(ctx, args...)
	_ = p.Process(ctx, cmd)
	return queued{cmd: cmd}
}

// resultOf decodes q's reply with conv once the pipeline has run; a server
// error reply becomes *ServerError.
func resultOf[T any](q queued, conv func(any) (T, error)) (T, error) {
	if q.err != nil {
		var zero T
		return zero, q.err
	}
	v, err := q.cmd.Result()
	if err != nil {
		var zero T
		return zero, serverError(err)
	}
	return conv(v)
}

// CheckCmd queues a Check on p.
func (c *Client) CheckCmd(ctx context.Context, p redis.Pipeliner, key string, rate Rate, cost int64) *DecisionCmd {
	args, err := checkArgs("THROTTLE.CHECK", key, rate, cost, true)
	return &DecisionCmd{queueArgs(ctx, p, args, err)}
}

// PeekCmd queues a Peek on p.
func (c *Client) PeekCmd(ctx context.Context, p redis.Pipeliner, key string, rate Rate) *DecisionCmd {
	args, err := checkArgs("THROTTLE.PEEK", key, rate, 0, false)
	return &DecisionCmd{queueArgs(ctx, p, args, err)}
}

// LeaseCmd queues a Lease on p.
func (c *Client) LeaseCmd(ctx context.Context, p redis.Pipeliner, key string, rate Rate, batch int64) *GrantCmd {
	args, err := leaseArgs(key, rate, batch)
	return &GrantCmd{queueArgs(ctx, p, args, err)}
}

// ReturnCmd queues a Return on p.
func (c *Client) ReturnCmd(ctx context.Context, p redis.Pipeliner, key string, credits int64, resetAt time.Time) *CountCmd {
	args, err := returnArgs(key, credits, resetAt)
	return &CountCmd{queueArgs(ctx, p, args, err)}
}

// ResetCmd queues a Reset on p.
func (c *Client) ResetCmd(ctx context.Context, p redis.Pipeliner, keys ...string) *CountCmd {
	args, err := resetArgs(keys)
	return &CountCmd{queueArgs(ctx, p, args, err)}
}

// CellThrottleCmd queues a CellThrottle on p.
func (c *Client) CellThrottleCmd(ctx context.Context, p redis.Pipeliner, key string, maxBurst, countPerPeriod int64, period time.Duration, quantity int64) *CellCmd {
	args, err := cellArgs(key, maxBurst, countPerPeriod, period, quantity)
	return &CellCmd{queueArgs(ctx, p, args, err)}
}

// Reply decoding: RESP2 gives an array of five integers, RESP3 a map with
// named fields in the same order.

var decisionFields = [5]string{"", "limit", "remaining", "reset_at_ms", "retry_after_ms"}

func fiveInts(v any, first string) ([5]int64, error) {
	var out [5]int64
	switch r := v.(type) {
	case []any:
		if len(r) != 5 {
			return out, fmt.Errorf("%w: array of %d elements, want 5", ErrUnexpectedReply, len(r))
		}
		for i, e := range r {
			n, ok := e.(int64)
			if !ok {
				return out, fmt.Errorf("%w: element %d is %T, want an integer", ErrUnexpectedReply, i, e)
			}
			out[i] = n
		}
	case map[any]any:
		for i, name := range decisionFields {
			if i == 0 {
				name = first
			}
			n, ok := r[name].(int64)
			if !ok {
				return out, fmt.Errorf("%w: map field %q is %T, want an integer", ErrUnexpectedReply, name, r[name])
			}
			out[i] = n
		}
	default:
		return out, fmt.Errorf("%w: %T, want an array or a map", ErrUnexpectedReply, v)
	}
	return out, nil
}

func msDuration(ms int64) time.Duration {
	if ms < 0 {
		return -1
	}
	return time.Duration(ms) * time.Millisecond
}

func decisionOf(v any, first string) (Decision, error) {
	n, err := fiveInts(v, first)
	if err != nil {
		return Decision{}, err
	}
	return Decision{
		Allowed:    n[0] == 1,
		Limit:      n[1],
		Remaining:  n[2],
		ResetAt:    time.UnixMilli(n[3]),
		RetryAfter: msDuration(n[4]),
	}, nil
}

func grantOf(v any) (Grant, error) {
	n, err := fiveInts(v, "granted")
	if err != nil {
		return Grant{}, err
	}
	return Grant{Credits: n[0], Limit: n[1], Remaining: n[2], ResetAt: time.UnixMilli(n[3]), RetryAfter: msDuration(n[4])}, nil
}

func cellOf(v any) (CellResult, error) {
	r, ok := v.([]any)
	if !ok || len(r) != 5 {
		return CellResult{}, fmt.Errorf("%w: CL.THROTTLE reply %T, want an array of 5", ErrUnexpectedReply, v)
	}
	var n [5]int64
	for i, e := range r {
		x, ok := e.(int64)
		if !ok {
			return CellResult{}, fmt.Errorf("%w: element %d is %T, want an integer", ErrUnexpectedReply, i, e)
		}
		n[i] = x
	}
	sec := func(s int64) time.Duration {
		if s < 0 {
			return -1
		}
		return time.Duration(s) * time.Second
	}
	return CellResult{Limited: n[0] == 1, Limit: n[1], Remaining: n[2], RetryAfter: sec(n[3]), ResetAfter: sec(n[4])}, nil
}

func intOf(v any) (int64, error) {
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("%w: %T, want an integer", ErrUnexpectedReply, v)
	}
	return n, nil
}
