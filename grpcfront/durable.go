package grpcfront

import (
	"context"
	"errors"
	"sync"
)

// Durability is the persistence layer as the Envoy services see it: the
// same three questions the RESP front asks (server.Durability), so the
// program hands both fronts one value.
//
//   - Refusing: changes must be refused now (--persist-fail closed while
//     the backend fails); a call that would change a counter then fails
//     with ErrPersistRefused and changes nothing.
//   - Commit: after a call changed counters, the ticket to wait for, and
//     whether to wait at all (sync mode; not while an open policy rides
//     out an outage). It must not block.
//   - Released: whether the changes of a ticket are durable (or the
//     policy gives up waiting).
type Durability interface {
	Refusing() bool
	Commit() (ticket uint64, hold bool)
	Released(ticket uint64) bool
}

// Errors of the durability checks. The services answer both with gRPC
// UNAVAILABLE, the status Envoy treats as a failed rate limit service, so
// its filter's failure_mode_deny decides what the request gets (see the
// package doc).
var (
	// ErrPersistRefused: persistence is failing under the closed policy,
	// so the call was refused before it changed anything (the RESP front
	// answers "-TRYAGAIN persistence unavailable").
	ErrPersistRefused = errors.New("grpcfront: persistence unavailable; nothing was changed")
	// ErrNotDurable: the call changed counters, and persistence began
	// failing under the closed policy before those changes were durable.
	ErrNotDurable = errors.New("grpcfront: persistence unavailable; the change is not durable")
)

// durable is a Limiter's side of Durability: the wake-up the persistence
// layer gives (Limiter.NotifyDurable) to calls waiting for their ticket.
type durable struct {
	d    Durability
	mu   sync.Mutex
	wake chan struct{} // closed by notify; nil while nobody waits
}

// refusing reports whether a change must be refused now.
func (w *durable) refusing() bool { return w.d != nil && w.d.Refusing() }

// notify wakes every waiting call.
func (w *durable) notify() {
	w.mu.Lock()
	if w.wake != nil {
		close(w.wake)
		w.wake = nil
	}
	w.mu.Unlock()
}

// wait commits the changes made so far and returns once they are durable,
// the policy stops waiting, persistence refuses changes (ErrNotDurable)
// or ctx ends (its error).
func (w *durable) wait(ctx context.Context) error {
	if w.d == nil {
		return nil
	}
	t, hold := w.d.Commit()
	if !hold {
		return nil
	}
	for {
		w.mu.Lock()
		if w.wake == nil {
			w.wake = make(chan struct{})
		}
		wake := w.wake
		w.mu.Unlock()
		// Checked after taking the channel, so a notify between the
		// check and the select is not lost.
		if w.d.Released(t) {
			return nil
		}
		if w.d.Refusing() {
			return ErrNotDurable
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
