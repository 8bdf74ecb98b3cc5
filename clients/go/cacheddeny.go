package throttlekit

// ModeCachedDeny: the server decides every admission; a denial is
// remembered until its retry-after and answers the calls that come before.

import (
	"context"
	"hash/maphash"
	"time"
)

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
	d, err := l.c.Check(ctx, key, l.opts.Rate, cost)
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
