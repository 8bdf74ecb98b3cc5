package policy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
	"github.com/fsnotify/fsnotify"
)

// Store holds the current Set of a file or directory and replaces it
// whole when the files change. Readers call Current once per request and
// use that Set throughout, so a request sees the old set or the new one,
// never a mix. An invalid change leaves the current Set in place, counts a
// failure and reports the reason.
type Store struct {
	path string
	opts StoreOptions

	cur      atomic.Pointer[Set]
	mu       sync.Mutex // serialises reloads
	loads    *metrics.Counter
	failures *metrics.Counter
	lastErr  atomic.Pointer[error]
}

// StoreOptions configures a Store. The zero value is usable.
type StoreOptions struct {
	// OnReload is called after every reload attempt that Watch or Reload
	// makes: with the new Set and a nil error, or with the current Set and
	// the reason the change was rejected (to log it). It runs on the
	// goroutine that reloaded and must not call Reload.
	OnReload func(current *Set, err error)
	// Metrics receives ratelimit_service_config_load_success and
	// ratelimit_service_config_load_error (the names of envoyproxy/ratelimit's
	// Prometheus mapping); nil keeps the counters private.
	Metrics *metrics.Set
}

// Open loads path (a file or a directory, see Load) and returns a Store
// holding it. The first load must succeed.
func Open(path string, opts StoreOptions) (*Store, error) {
	set, err := Load(path)
	if err != nil {
		return nil, err
	}
	ms := opts.Metrics
	if ms == nil {
		ms = metrics.NewSet()
	}
	s := &Store{
		path:     path,
		opts:     opts,
		loads:    ms.GetOrCreateCounter("ratelimit_service_config_load_success"),
		failures: ms.GetOrCreateCounter("ratelimit_service_config_load_error"),
	}
	s.loads.Inc()
	s.cur.Store(set)
	return s, nil
}

// Current returns the Set in force. It is one atomic load.
func (s *Store) Current() *Set { return s.cur.Load() }

// Path returns the file or directory the Store reads.
func (s *Store) Path() string { return s.path }

// Loads returns the number of successful loads, the first included.
func (s *Store) Loads() uint64 { return s.loads.Get() }

// Failures returns the number of rejected reloads.
func (s *Store) Failures() uint64 { return s.failures.Get() }

// LastError returns the reason of the most recent rejected reload, or nil
// if the most recent reload succeeded.
func (s *Store) LastError() error {
	if p := s.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Reload loads the files again. On success the new Set replaces the
// current one in a single atomic store; on error nothing changes, the
// failure counter grows and the error is returned (and kept for
// LastError).
func (s *Store) Reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	set, err := Load(s.path)
	if err != nil {
		s.failures.Inc()
		s.lastErr.Store(&err)
		if s.opts.OnReload != nil {
			s.opts.OnReload(s.cur.Load(), err)
		}
		return err
	}
	s.cur.Store(set)
	s.loads.Inc()
	s.lastErr.Store(nil)
	if s.opts.OnReload != nil {
		s.opts.OnReload(set, nil)
	}
	return nil
}

// Watch reloads whenever the watched files change, until ctx ends. It
// watches the directory (for a file: the directory that holds it, since
// editors and Kubernetes replace files by renaming, which a watch on the
// file itself would lose) and reloads on every write, create, remove,
// rename or chmod of a YAML file or of a name starting with "..", the links
// a ConfigMap volume swaps. Each event reloads at once: write files by
// renaming a complete file into place, or a reader may catch a half-written
// file (rejected if it does not parse; the write that completes it
// triggers the next reload). A path that is itself a symbolic link is
// resolved once: swapping the link to another directory (envoyproxy/ratelimit's
// RUNTIME_WATCH_ROOT style) is not seen; point the Store at a directory
// whose contents change instead. It returns the watcher's setup error, or
// nil when ctx ends.
func (s *Store) Watch(ctx context.Context) error { return s.watch(ctx, nil) }

// watch is Watch; it closes ready (if not nil) once the watch is in place.
func (s *Store) watch(ctx context.Context, ready chan<- struct{}) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	dir, only := s.path, ""
	if fi, err := os.Stat(s.path); err == nil && !fi.IsDir() {
		dir, only = filepath.Dir(s.path), filepath.Clean(s.path)
	}
	if err := w.Add(dir); err != nil {
		return err
	}
	if ready != nil {
		close(ready)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if relevant(ev.Name, only) {
				_ = s.Reload() // reported through OnReload, LastError and the counter
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			if s.opts.OnReload != nil {
				s.opts.OnReload(s.cur.Load(), errors.Join(errors.New("policy watcher"), err))
			}
		}
	}
}

func relevant(name, only string) bool {
	base := filepath.Base(name)
	if only != "" {
		return filepath.Clean(name) == only || base == "..data"
	}
	if len(base) >= 2 && base[:2] == ".." {
		return true
	}
	ext := filepath.Ext(base)
	return base[0] != '.' && (ext == ".yaml" || ext == ".yml")
}
