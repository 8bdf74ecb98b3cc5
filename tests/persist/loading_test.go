package persisttests

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/internal/pgtest"
	"github.com/throttlekit/throttlekit-server/internal/testserver"
	"github.com/throttlekit/throttlekit-server/persist"
)

// TestServesOnlyAfterLoading starts the binary on a table of many keys
// while another session holds a lock the start-up load must wait for (a
// REINDEX of the table's key index in an open transaction: the backend
// opens, since CREATE INDEX IF NOT EXISTS needs only a share lock on the
// table, but the load's SELECT cannot be planned), so the load is in
// progress for as long as the test wants, without relying on its speed.
// Meanwhile the server listens: INFO says loading:1, /readyz answers 503,
// PING answers, and a command that touches a key gets Redis's
// "-LOADING Redis is loading the dataset in memory". Once the lock goes,
// the load ends: loading:0, /readyz 200, every key loaded with its state.
func TestServesOnlyAfterLoading(t *testing.T) {
	const keys = 50_000
	pg := pgtest.Start(t)
	const table = "loading_gate"
	url := pg.URL + "&table=" + table
	ctx := context.Background()

	// The table: every key with one unit of the load's limit consumed.
	l, err := engine.NewLimit(engine.KindGCRA, limit, int64(365*24*time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixNano()
	st, _, ttl, err := l.Check(engine.State{}, now, 1)
	if err != nil {
		t.Fatal(err)
	}
	be, err := persist.Open(ctx, url, persist.Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]persist.Record, 0, 5000)
	for lo := 0; lo < keys; lo += cap(recs) {
		recs = recs[:0]
		for i := lo; i < min(lo+cap(recs), keys); i++ {
			recs = append(recs, persist.Record{Key: []byte(key(i)), State: st, ExpireAt: now + ttl})
		}
		if err := be.Write(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	if err := be.Close(); err != nil { // folds the journal into the table
		t.Fatal(err)
	}

	lock, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close(ctx)
	tx, err := lock.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // committed below unless the test failed
	index := pgx.Identifier{table + "_key_sha256"}.Sanitize()
	if _, err := tx.Exec(ctx, "REINDEX INDEX "+index); err != nil {
		t.Fatal(err)
	}

	metrics := testserver.FreeAddr(t)
	srv := testserver.Start(t, "--persist", url, "--metrics-addr", metrics)
	// The load is waiting for the lock: from here on it cannot end until
	// the transaction does.
	deadline := time.Now().Add(90 * time.Second)
	for {
		var n int
		err := lock.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = $1::regclass`, index).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the load never waited for the lock; server log:\n%s", srv.Log())
		}
		time.Sleep(10 * time.Millisecond)
	}

	m, err := info(srv.Addr)
	if err != nil || m["loading"] != "1" {
		t.Fatalf("INFO while loading: %v %v, want loading:1", m, err)
	}
	if code := httpStatus(t, "http://"+metrics+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz while loading: %d, want 503", code)
	}
	if code := httpStatus(t, "http://"+metrics+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while loading: %d, want 200", code)
	}
	c, err := dial(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.c.Close()
	_ = c.c.SetDeadline(time.Now().Add(30 * time.Second))
	if r, err := c.do("PING"); err != nil || r.str != "PONG" {
		t.Errorf("PING while loading: %+v %v, want PONG", r, err)
	}
	for _, cmd := range [][]string{
		{"THROTTLE.CHECK", key(0), strconv.Itoa(limit), period},
		{"THROTTLE.PEEK", key(1), strconv.Itoa(limit), period},
		{"DEL", key(2)},
	} {
		const want = "LOADING Redis is loading the dataset in memory"
		if r, err := c.do(cmd...); err != nil || r.err != want {
			t.Errorf("%s while loading: %+v %v, want -%s", cmd[0], r, err, want)
		}
	}

	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	m = waitFor(t, srv.Addr, "the load to end", func(m map[string]string) bool { return m["loading"] == "0" })
	if m["persist_loaded_keys"] != strconv.Itoa(keys) {
		t.Errorf("loaded %s keys, want %d", m["persist_loaded_keys"], keys)
	}
	if code := httpStatus(t, "http://"+metrics+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after the load: %d, want 200", code)
	}
	after := consumed(t, srv.Addr, keys)
	for i, n := range after {
		if n != 1 {
			t.Fatalf("key %s: %d units consumed after the load, want the 1 stored", key(i), n)
		}
	}
}

// httpStatus returns the status code of a GET of url.
func httpStatus(t *testing.T, url string) int {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
