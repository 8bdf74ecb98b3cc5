package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/throttlekit/throttlekit-server/config"
	"github.com/throttlekit/throttlekit-server/persist"
	"github.com/throttlekit/throttlekit-server/server"
	"github.com/throttlekit/throttlekit-server/shard"
)

// persistence is the wiring of package persist: the Persister and the
// server's view of it (server.Durability).
type persistence struct {
	p    *persist.Persister
	sync bool
	open bool // failure policy open
}

// persistConfig turns the settings into the Persister's mode and policy;
// config has already checked the words.
func persistConfig(cfg *config.Config) (persist.Mode, persist.Policy, error) {
	mode, err := persist.ParseMode(cfg.PersistMode)
	if err != nil {
		return 0, 0, err
	}
	pol, err := persist.ParsePolicy(cfg.PersistFail)
	if err != nil {
		return 0, 0, err
	}
	return mode, pol, nil
}

// openPersistence opens the backend cfg.Persist names and builds the
// Persister over store. notify is called after every completed or failed
// write (it wakes the event loops holding replies); it must not block.
// The returned error is the one line the command prints.
func openPersistence(ctx context.Context, cfg *config.Config, store *shard.Store, now func() int64,
	logger *slog.Logger, notify func(), flushed func(time.Duration)) (*persistence, error) {
	mode, pol, err := persistConfig(cfg)
	if err != nil {
		return nil, err
	}
	be, err := persist.Open(ctx, cfg.Persist, persist.Options{Owner: cfg.PersistOwner})
	if err != nil {
		return nil, err
	}
	p := persist.New(be, store, persist.Config{
		Mode:      mode,
		Policy:    pol,
		Interval:  cfg.PersistInterval,
		Now:       now,
		OnCommit:  func(uint64) { notify() },
		OnFlushed: flushed,
		OnError: func(err error) {
			logger.Warn("persistence write failed", "err", err)
			notify()
		},
	})
	return &persistence{p: p, sync: mode == persist.ModeSync, open: pol == persist.FailOpen}, nil
}

// Refusing implements server.Durability.
func (ps *persistence) Refusing() bool { return ps.p.Refusing() }

// Commit implements server.Durability: sync mode waits for the write,
// except with the open policy while the backend fails.
func (ps *persistence) Commit() (uint64, bool) {
	if !ps.sync {
		return 0, false
	}
	t := ps.p.Commit()
	if ps.open && !ps.p.Healthy() {
		return t, false
	}
	return t, true
}

// Released implements server.Durability.
func (ps *persistence) Released(ticket uint64) bool {
	return ps.p.Durable() >= ticket || (ps.open && !ps.p.Healthy())
}

// InfoFields implements server.Durability: INFO persistence's lines.
func (ps *persistence) InfoFields() [][2]string {
	st := ps.p.Stats()
	b := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	return [][2]string{
		{"persist_backend", st.Backend},
		{"persist_mode", st.Mode},
		{"persist_fail", st.Policy},
		{"persist_healthy", b(st.Healthy)},
		{"persist_lag_ms", i(st.LagMs)},
		{"persist_dirty_keys", i(st.DirtyKeys)},
		{"persist_rows_written", i(st.RowsWritten)},
		{"persist_rows_deleted", i(st.RowsDeleted)},
		{"persist_flushes", i(st.Flushes)},
		{"persist_errors", i(st.Errors)},
		{"persist_last_error", strings.Map(oneLine, st.LastError)},
		{"persist_loaded_keys", i(st.Loaded)},
		{"persist_load_time_ms", i(st.LoadTime.Milliseconds())},
	}
}

// oneLine keeps an INFO value on its line.
func oneLine(r rune) rune {
	if r == '\r' || r == '\n' {
		return ' '
	}
	return r
}

// load fills the store before commands are served: the listener may be up
// (INFO answers loading:1, other commands -LOADING) while it runs.
func (ps *persistence) load(ctx context.Context, srv *server.Server, now func() int64, logger *slog.Logger) error {
	srv.SetLoading(true)
	defer srv.SetLoading(false)
	ls, err := ps.p.LoadAll(ctx, now())
	if err != nil {
		return fmt.Errorf("persist: load: %w", err)
	}
	logger.Info("persistent state loaded", "keys", ls.Keys, "skipped", ls.Skipped, "took", ls.Took.String())
	return nil
}

var _ server.Durability = (*persistence)(nil)
