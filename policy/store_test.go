package policy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

const cfgA = `
domain: app
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10, name: per_user}
  - key: ip
    rate_limit: {unit: second, requests_per_unit: 5}
`

// cfgB changes ip's window and keeps user's rule as it was.
const cfgB = `
domain: app
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10, name: per_user}
  - key: ip
    rate_limit: {unit: minute, requests_per_unit: 5}
`

// writeAtomic replaces path by renaming a complete file into place.
func writeAtomic(t *testing.T, path, data string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestStoreReload(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "app.yaml")
	writeAtomic(t, file, cfgA)
	ms := metrics.NewSet()
	var reports []error
	s, err := Open(file, StoreOptions{Metrics: ms, OnReload: func(_ *Set, err error) { reports = append(reports, err) }})
	if err != nil {
		t.Fatal(err)
	}
	old := s.Current()
	user, ip := e("user", "u1"), e("ip", "198.51.100.7")
	oldUserKey := string(old.Match("app", user).AppendKey(nil, user))
	oldIPKey := string(old.Match("app", ip).AppendKey(nil, ip))

	// An invalid change: rejected, the old set stays, a failure is counted.
	writeAtomic(t, file, strings.Replace(cfgA, "minute", "fortnight", 1))
	err = s.Reload()
	if err == nil || s.Current() != old || s.Failures() != 1 || s.LastError() == nil {
		t.Fatalf("invalid reload: err %v, same set %v, failures %d", err, s.Current() == old, s.Failures())
	}
	if !strings.Contains(err.Error(), "app.yaml:5") || !strings.Contains(err.Error(), "fortnight") {
		t.Errorf("reason %q does not name file, line and value", err)
	}
	var buf strings.Builder
	ms.WritePrometheus(&buf)
	if !strings.Contains(buf.String(), "ratelimit_service_config_load_error 1") ||
		!strings.Contains(buf.String(), "ratelimit_service_config_load_success 1") {
		t.Errorf("metrics:\n%s", buf.String())
	}

	// A valid change: swapped whole; the unchanged rule keeps its counter key.
	writeAtomic(t, file, cfgB)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	cur := s.Current()
	if cur == old || s.Loads() != 2 || s.LastError() != nil {
		t.Fatalf("valid reload: same set %v, loads %d, last error %v", cur == old, s.Loads(), s.LastError())
	}
	if k := string(cur.Match("app", user).AppendKey(nil, user)); k != oldUserKey {
		t.Errorf("unchanged rule's key moved: %q -> %q", oldUserKey, k)
	}
	if k := string(cur.Match("app", ip).AppendKey(nil, ip)); k == oldIPKey {
		t.Errorf("rule with a new window kept its key %q", k)
	}
	if len(reports) != 2 || reports[0] == nil || reports[1] != nil {
		t.Errorf("OnReload reports %v", reports)
	}
}

// TestStoreWatch drives reloads through the file system watcher: each step
// waits for the reload the change causes (no sleeps), an invalid file is
// rejected with the old set kept, and a valid one applies.
func TestStoreWatch(t *testing.T) {
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "app.yaml"), cfgA)
	type report struct {
		set *Set
		err error
	}
	ch := make(chan report, 64)
	s, err := Open(dir, StoreOptions{OnReload: func(set *Set, err error) { ch <- report{set, err} }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() { done <- s.watch(ctx, ready) }()
	<-ready
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	first := s.Current()
	// wait returns the first report for which ok holds; a report may repeat
	// for one change (write, rename and chmod events each reload).
	wait := func(ok func(report) bool) report {
		t.Helper()
		timeout := time.After(time.Minute) // a hang guard, never reached when the watcher works
		for {
			select {
			case r := <-ch:
				if ok(r) {
					return r
				}
			case <-timeout:
				t.Fatal("no reload reported")
			}
		}
	}
	writeAtomic(t, filepath.Join(dir, "app.yaml"), "domain: app\ndescriptors: [{key: x, rate_limit: {unit: nope}}]\n")
	r := wait(func(r report) bool { return r.err != nil })
	if r.set != first || s.Current() != first {
		t.Error("invalid file replaced the set")
	}
	writeAtomic(t, filepath.Join(dir, "app.yaml"), cfgB)
	wait(func(r report) bool { return r.err == nil })
	if s.Current() == first || s.Current().Match("app", e("ip", "1")).Unit != UnitMinute {
		t.Error("valid file not applied")
	}
	// A second file with the same domain is rejected as a whole.
	before := s.Current()
	writeAtomic(t, filepath.Join(dir, "dup.yaml"), "domain: app\n")
	r = wait(func(r report) bool { return r.err != nil })
	var pe *Error
	if !errors.As(r.err, &pe) || pe.Code != CodeDuplicateDomain || s.Current() != before {
		t.Errorf("duplicate domain: %v", r.err)
	}
	// Files that are not YAML do not reload.
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "dup.yaml")); err != nil {
		t.Fatal(err)
	}
	r = wait(func(r report) bool { return r.err == nil })
	if r.set.Match("app", e("ip", "1")) == nil {
		t.Error("set after removing dup.yaml has no ip rule")
	}
}

func TestRelevant(t *testing.T) {
	cases := []struct {
		name, only string
		want       bool
	}{
		{"/d/a.yaml", "", true},
		{"/d/a.yml", "", true},
		{"/d/a.txt", "", false},
		{"/d/.a.yaml.swp", "", false},
		{"/d/..data", "", true},
		{"/d/a.yaml", "/d/a.yaml", true},
		{"/d/b.yaml", "/d/a.yaml", false},
		{"/d/..data", "/d/a.yaml", true},
	}
	for _, c := range cases {
		if got := relevant(c.name, c.only); got != c.want {
			t.Errorf("relevant(%q, %q) = %v", c.name, c.only, got)
		}
	}
}
