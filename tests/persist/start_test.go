package persisttests

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/internal/dynatest"
	"github.com/throttlekit/throttlekit-server/internal/pgtest"
	"github.com/throttlekit/throttlekit-server/internal/testserver"
	"github.com/throttlekit/throttlekit-server/persist"
)

// TestSecondServerRefused: a second server on a table another server
// writes exits with status 1 and one line naming the table, on Postgres
// (the advisory lock) and on DynamoDB (the lease; each server has its own
// default owner).
func TestSecondServerRefused(t *testing.T) {
	for _, b := range []struct {
		name string
		url  func(t *testing.T, table string) string
	}{
		{"postgres", func(t *testing.T, table string) string { return pgtest.Start(t).URL + "&table=" + table }},
		{"dynamodb", func(t *testing.T, table string) string { return dynatest.Start(t).URL(table) }},
	} {
		t.Run(b.name, func(t *testing.T) {
			url := b.url(t, "shared_table")
			startServer(t, "--persist", url)
			cmd := exec.Command(testserver.Binary(t), "--addr", "127.0.0.1:0", "--metrics-addr=", "--persist", url)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 1 {
				t.Fatalf("second server: %v, want exit status 1; stderr:\n%s", err, stderr.String())
			}
			want := `throttlekit-server: persist: table "shared_table" is in use by another server` + "\n"
			if stderr.String() != want {
				t.Errorf("second server's stderr:\n%q\nwant\n%q", stderr.String(), want)
			}
		})
	}
}

// TestBadPersistURL: a URL naming no backend is a configuration error
// (status 2, one line).
func TestBadPersistURL(t *testing.T) {
	cmd := exec.Command(testserver.Binary(t), "--addr", "127.0.0.1:0", "--metrics-addr=", "--persist", "redis://x")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 || strings.Count(stderr.String(), "\n") != 1 {
		t.Fatalf("bad URL: %v, want exit status 2 and one line; stderr:\n%s", err, stderr.String())
	}
}

// TestLoadAtStart writes keys through a server, waits until they are all
// written, kills it and checks that a new server loads every one and
// reports the load. TK_PERSIST_BENCH=1 makes it a million keys and logs
// the load time.
func TestLoadAtStart(t *testing.T) {
	n := 20_000
	if os.Getenv("TK_PERSIST_BENCH") != "" {
		n = 1_000_000
	}
	pg := pgtest.Start(t)
	url := pg.URL + "&table=load_at_start"
	args := []string{"--persist", url, "--persist-mode", "async", "--maxkeys", strconv.Itoa(2 * n)}
	srv := startServer(t, args...)
	c, err := dial(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	const page = 1000
	for lo := 0; lo < n; lo += page {
		for i := lo; i < min(lo+page, n); i++ {
			c.add("THROTTLE.CHECK", key(i), "1", period) // one unit a year: the state lasts a year
		}
		if err := c.flush(); err != nil {
			t.Fatal(err)
		}
		for i := lo; i < min(lo+page, n); i++ {
			if r, err := c.read(); err != nil || len(r.ints) != 5 || r.ints[0] != 1 {
				t.Fatalf("THROTTLE.CHECK %s: %+v %v", key(i), r, err)
			}
		}
	}
	c.c.Close()
	waitFor(t, srv.Addr, "every key written", func(m map[string]string) bool {
		w, _ := strconv.Atoi(m["persist_rows_written"])
		return w >= n && m["persist_lag_ms"] == "0"
	})
	srv.Stop()
	waitUnlocked(t, url, persist.Options{})
	began := time.Now()
	srv2 := startServer(t, args...)
	ready := time.Since(began)
	m, err := info(srv2.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if m["persist_loaded_keys"] != strconv.Itoa(n) {
		t.Errorf("loaded %s keys, want %d", m["persist_loaded_keys"], n)
	}
	t.Logf("%d keys: load took %s ms (persist_load_time_ms); start to loading:0 %v", n, m["persist_load_time_ms"], ready.Round(time.Millisecond))
	// A loaded key's state is the one written: its single unit is used.
	c2, err := dial(srv2.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.c.Close()
	if r, err := c2.do("THROTTLE.CHECK", key(n-1), "1", period); err != nil || len(r.ints) != 5 || r.ints[0] != 0 {
		t.Errorf("THROTTLE.CHECK of a loaded key: %+v %v, want denied", r, err)
	}
}
