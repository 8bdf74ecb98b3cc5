package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestNewLogger(t *testing.T) {
	tests := []struct {
		level, format string
		wantLines     int    // of the four records debug..error
		wantPrefix    string // of the first line
	}{
		{"debug", "text", 4, "time="},
		{"info", "text", 3, "time="},
		{"", "", 3, "time="},
		{"WARN", "TEXT", 2, "time="},
		{"warning", "json", 2, "{"},
		{"error", "json", 1, "{"},
	}
	for _, tt := range tests {
		t.Run(tt.level+"/"+tt.format, func(t *testing.T) {
			var buf bytes.Buffer
			l, err := NewLogger(&buf, tt.level, tt.format)
			if err != nil {
				t.Fatal(err)
			}
			l.Debug("d", "k", 1)
			l.Info("i", "k", 2)
			l.Warn("w", "k", 3)
			l.Error("e", "k", 4)
			lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
			if len(lines) != tt.wantLines {
				t.Fatalf("got %d lines, want %d: %q", len(lines), tt.wantLines, buf.String())
			}
			if !strings.HasPrefix(lines[0], tt.wantPrefix) {
				t.Fatalf("first line %q does not start with %q", lines[0], tt.wantPrefix)
			}
			last := lines[len(lines)-1]
			if strings.HasPrefix(tt.wantPrefix, "{") {
				var m map[string]any
				if err := json.Unmarshal([]byte(last), &m); err != nil {
					t.Fatalf("not JSON: %q: %v", last, err)
				}
				if m["msg"] != "e" || m["level"] != "ERROR" || m["k"] != float64(4) {
					t.Fatalf("JSON record = %v", m)
				}
			} else if !strings.Contains(last, "level=ERROR msg=e k=4") {
				t.Fatalf("text record = %q", last)
			}
		})
	}
}

func TestNewLoggerBad(t *testing.T) {
	for _, tt := range [][2]string{{"loud", "text"}, {"info", "xml"}} {
		l, err := NewLogger(io.Discard, tt[0], tt[1])
		if l != nil || !errors.Is(err, ErrLogSetting) {
			t.Errorf("NewLogger(%q, %q) = %v, %v; want nil, ErrLogSetting", tt[0], tt[1], l, err)
		}
	}
}

// recorder is a slog.Handler keeping the records it is given.
type recorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func suppressedAttr(r slog.Record) int64 {
	var n int64 = -1
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "suppressed" {
			n = a.Value.Int64()
		}
		return true
	})
	return n
}

func TestLimitedHandler(t *testing.T) {
	rec := &recorder{}
	h := NewLimitedHandler(rec, 2, time.Second)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ctx := context.Background()
	emit := func(at time.Duration, level slog.Level, msg string) {
		if err := h.Handle(ctx, slog.NewRecord(t0.Add(at), level, msg, 0)); err != nil {
			t.Fatal(err)
		}
	}
	// Window [0s, 1s): 5 "conn error", 2 written, 3 dropped; another message passes.
	for i := range 5 {
		emit(time.Duration(i)*100*time.Millisecond, slog.LevelWarn, "conn error")
	}
	emit(500*time.Millisecond, slog.LevelInfo, "listening")
	emit(600*time.Millisecond, slog.LevelError, "conn error") // another level: own budget
	if got := h.Suppressed(); got != 3 {
		t.Fatalf("Suppressed = %d, want 3", got)
	}
	// Next window: the first record carries suppressed=3, the second none.
	emit(1100*time.Millisecond, slog.LevelWarn, "conn error")
	emit(1200*time.Millisecond, slog.LevelWarn, "conn error")
	emit(1300*time.Millisecond, slog.LevelWarn, "conn error") // dropped
	// A derived handler shares the budget: dropped too.
	if err := h.WithAttrs([]slog.Attr{slog.String("a", "b")}).Handle(ctx, slog.NewRecord(t0.Add(1400*time.Millisecond), slog.LevelWarn, "conn error", 0)); err != nil {
		t.Fatal(err)
	}
	emit(2500*time.Millisecond, slog.LevelWarn, "conn error")

	type got struct {
		at   time.Duration
		msg  string
		supp int64
	}
	var gots []got
	for _, r := range rec.recs {
		gots = append(gots, got{r.Time.Sub(t0), r.Message, suppressedAttr(r)})
	}
	want := []got{
		{0, "conn error", -1},
		{100 * time.Millisecond, "conn error", -1},
		{500 * time.Millisecond, "listening", -1},
		{600 * time.Millisecond, "conn error", -1},
		{1100 * time.Millisecond, "conn error", 3},
		{1200 * time.Millisecond, "conn error", -1},
		{2500 * time.Millisecond, "conn error", 2},
	}
	if fmt.Sprint(gots) != fmt.Sprint(want) {
		t.Fatalf("written records\n got %v\nwant %v", gots, want)
	}
	if got := h.Suppressed(); got != 5 {
		t.Fatalf("Suppressed = %d, want 5", got)
	}
}

func TestLimitedHandlerManyMessages(t *testing.T) {
	rec := &recorder{}
	h := NewLimitedHandler(rec, 1, time.Minute)
	t0 := time.Unix(1e9, 0)
	for i := range maxLimitKeys + 10 {
		h.Handle(context.Background(), slog.NewRecord(t0, slog.LevelInfo, fmt.Sprint("m", i), 0))
	}
	// The first 256 messages have their own budget; the other 10 share one.
	if len(rec.recs) != maxLimitKeys+1 || h.Suppressed() != 9 {
		t.Fatalf("written %d, suppressed %d; want %d, 9", len(rec.recs), h.Suppressed(), maxLimitKeys+1)
	}
}

func TestLimitedHandlerThroughLogger(t *testing.T) {
	var buf bytes.Buffer
	base, err := NewLogger(&buf, "info", "text")
	if err != nil {
		t.Fatal(err)
	}
	h := NewLimitedHandler(base.Handler(), 3, time.Hour)
	l := slog.New(h)
	l.Debug("conn error") // below level: neither written nor counted
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				l.Warn("conn error", "err", "reset by peer")
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(buf.String(), "msg=\"conn error\""); n != 3 {
		t.Fatalf("written %d lines, want 3:\n%s", n, buf.String())
	}
	if h.Suppressed() != 8*25-3 {
		t.Fatalf("Suppressed = %d, want %d", h.Suppressed(), 8*25-3)
	}
}

func BenchmarkLimitedHandlerDrop(b *testing.B) {
	h := NewLimitedHandler(slog.NewTextHandler(io.Discard, nil), 1, time.Hour)
	r := slog.NewRecord(time.Now(), slog.LevelWarn, "conn error", 0)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		h.Handle(ctx, r)
	}
}
