package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the log settings: what NewLogger gives for an empty level or
// format.
const (
	DefaultLogLevel  = "info"
	DefaultLogFormat = "text"
)

// ErrLogSetting reports an unknown log level or format.
var ErrLogSetting = errors.New("telemetry: bad log setting")

// ParseLevel maps "debug", "info", "warn" (or "warning") and "error",
// case-insensitive, to a slog.Level.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("%w: log level %q (want debug, info, warn or error)", ErrLogSetting, s)
}

// NewLogger returns a logger writing to w at the given level ("debug", "info",
// "warn", "error") in the given format ("text" for logfmt-style key=value
// lines, "json" for one JSON object per line). An empty level or format means
// info and text.
func NewLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	lv, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(strings.TrimSpace(format)) {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("%w: log format %q (want text or json)", ErrLogSetting, format)
}

// Defaults for NewLimitedHandler on connection-error logs: ten lines of one
// message per second.
const (
	DefaultLogBurst    = 10
	DefaultLogInterval = time.Second
)

// maxLimitKeys bounds the number of distinct messages a LimitedHandler tracks;
// further messages share one budget.
const maxLimitKeys = 256

// LimitedHandler is a slog.Handler that passes at most Burst records with the
// same level and message per Interval to the handler it wraps and drops the
// rest. The first record let through after drops carries an attribute
// suppressed=N with the number of records of that message dropped since the
// last one written. Use it to keep a storm of identical events (a client
// flood of connection errors) from filling the log while rare messages pass
// untouched.
//
// Messages should be constant strings with the details in attributes: each
// distinct message has its own budget, up to 256 of them; beyond that, new
// messages share one budget.
//
// The window follows the record's time (slog.Record.Time, set by the Logger),
// so the handler reads no clock of its own. It is safe for concurrent use and
// costs one mutex acquisition per record that reaches its level.
type LimitedHandler struct {
	inner slog.Handler
	st    *limitState
}

type limitState struct {
	burst      int
	interval   time.Duration
	mu         sync.Mutex
	windows    map[limitKey]*window
	overflow   window
	suppressed atomic.Int64
}

type limitKey struct {
	level slog.Level
	msg   string
}

type window struct {
	start   time.Time
	n       int   // records written in the window starting at start
	dropped int64 // records dropped since the last one written
}

// NewLimitedHandler wraps inner so that at most burst records with the same
// level and message are written per interval. burst < 1 is taken as 1.
func NewLimitedHandler(inner slog.Handler, burst int, interval time.Duration) *LimitedHandler {
	if burst < 1 {
		burst = 1
	}
	return &LimitedHandler{inner: inner, st: &limitState{
		burst:    burst,
		interval: interval,
		windows:  make(map[limitKey]*window),
	}}
}

// Suppressed returns how many records have been dropped since the handler was
// made, across all handlers derived from it with WithAttrs or WithGroup.
func (h *LimitedHandler) Suppressed() int64 { return h.st.suppressed.Load() }

// Enabled reports whether the wrapped handler handles records at level.
func (h *LimitedHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

// Handle writes r through the wrapped handler unless its message has used up
// its budget for the current interval.
func (h *LimitedHandler) Handle(ctx context.Context, r slog.Record) error {
	now := r.Time
	if now.IsZero() {
		now = time.Now()
	}
	st := h.st
	st.mu.Lock()
	k := limitKey{r.Level, r.Message}
	w := st.windows[k]
	if w == nil {
		if len(st.windows) < maxLimitKeys {
			w = &window{start: now}
			st.windows[k] = w
		} else {
			w = &st.overflow
		}
	}
	if now.Sub(w.start) >= st.interval {
		w.start, w.n = now, 0
	}
	if w.n >= st.burst {
		w.dropped++
		st.mu.Unlock()
		st.suppressed.Add(1)
		return nil
	}
	w.n++
	dropped := w.dropped
	w.dropped = 0
	st.mu.Unlock()
	if dropped > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int64("suppressed", dropped))
	}
	return h.inner.Handle(ctx, r)
}

// WithAttrs returns a handler sharing this one's budgets.
func (h *LimitedHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &LimitedHandler{inner: h.inner.WithAttrs(attrs), st: h.st}
}

// WithGroup returns a handler sharing this one's budgets.
func (h *LimitedHandler) WithGroup(name string) slog.Handler {
	return &LimitedHandler{inner: h.inner.WithGroup(name), st: h.st}
}
