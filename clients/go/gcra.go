package throttlekit

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// GCRALimit is the configuration of Redis's GCRA command: TokensPerPeriod
// tokens per Period at a sustained rate, and MaxBurst more at once (a full
// bucket holds MaxBurst + 1). Period may have a fraction of a second; the
// server works in microseconds.
type GCRALimit struct {
	MaxBurst        int64
	TokensPerPeriod int64
	Period          time.Duration
}

// GCRAResult is the reply of GCRA.
//
// Limit is MaxBurst + 1. RetryAfter is 0 when the call was allowed, the
// wait (whole seconds, rounded up) until it can pass when denied, and
// negative when it can never pass (more tokens than Limit). ResetAfter is
// the wait (whole seconds, rounded up) until the bucket is full again.
type GCRAResult struct {
	Limited    bool
	Limit      int64
	Remaining  int64
	RetryAfter time.Duration
	ResetAfter time.Duration
}

// validate checks what the server would refuse.
func (l GCRALimit) validate(tokens int64) error {
	switch {
	case l.MaxBurst < 0:
		return &ArgError{"max-burst", "must not be negative"}
	case l.TokensPerPeriod < 1:
		return &ArgError{"tokens-per-period", "must be at least 1"}
	case l.Period <= 0:
		return &ArgError{"period", "must be positive"}
	case tokens < 1:
		return &ArgError{"tokens", "must be at least 1"}
	}
	return nil
}

// GCRA runs the GCRA command (Redis's rate limiter, as the server answers
// it): it takes tokens from key's bucket under lim if they fit. A denied
// call changes nothing. A key that holds another algorithm's state is
// ErrWrongType.
func (c *Client) GCRA(ctx context.Context, key string, lim GCRALimit, tokens int64) (GCRAResult, error) {
	if err := lim.validate(tokens); err != nil {
		return GCRAResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return GCRAResult{}, err
	}
	args := []any{"GCRA", key, lim.MaxBurst, lim.TokensPerPeriod, strconv.FormatFloat(lim.Period.Seconds(), 'f', -1, 64)}
	if tokens != 1 {
		args = append(args, "TOKENS", tokens)
	}
	v, err := c.rdb.Do(ctx, args...).Result()
	if err != nil {
		var re redis.Error
		if errors.As(err, &re) {
			code, msg, _ := strings.Cut(re.Error(), " ")
			return GCRAResult{}, &ServerError{Code: code, Msg: msg}
		}
		return GCRAResult{}, err
	}
	return gcraResultOf(v)
}

// gcraResultOf decodes GCRA's array of five integers.
func gcraResultOf(v any) (GCRAResult, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 5 {
		return GCRAResult{}, ErrUnexpectedReply
	}
	var n [5]int64
	for i, x := range a {
		if n[i], ok = x.(int64); !ok {
			return GCRAResult{}, ErrUnexpectedReply
		}
	}
	r := GCRAResult{Limited: n[0] == 1, Limit: n[1], Remaining: n[2], ResetAfter: time.Duration(n[4]) * time.Second}
	switch {
	case n[3] < 0 && r.Limited:
		r.RetryAfter = -1
	case n[3] > 0:
		r.RetryAfter = time.Duration(n[3]) * time.Second
	}
	return r, nil
}
