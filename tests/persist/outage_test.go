package persisttests

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/internal/pgtest"
	"github.com/throttlekit/throttlekit-server/persist"
)

// TestOutagePostgres stops Postgres under load and starts it again, with
// the open and the closed failure policy in sync mode: open keeps
// answering from memory, closed answers TRYAGAIN to new changes; once
// Postgres is back the lag returns to 0 without a restart, and a SIGKILL
// afterwards loses nothing that was acknowledged.
func TestOutagePostgres(t *testing.T) {
	for _, policy := range []string{"open", "closed"} {
		t.Run(policy, func(t *testing.T) {
			pg := pgtest.Start(t)
			url := pg.URL + "&table=outage_" + policy
			args := []string{"--persist", url, "--persist-mode", "sync", "--persist-fail", policy}
			began := time.Now()
			srv := startServer(t, args...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			const conns, depth, keys = 8, 4, 2000
			ldc := make(chan *load, 1)
			go func() { ldc <- runLoad(ctx, srv.Addr, conns, depth, keys) }()
			// The load handle is only returned at the end; count progress
			// through INFO's rows written before the outage.
			waitFor(t, srv.Addr, "rows written before the outage", func(m map[string]string) bool {
				n, _ := strconv.Atoi(m["persist_rows_written"])
				return n > 1000
			})

			pg.Stop(t)
			waitFor(t, srv.Addr, "unhealthy after Postgres stopped", func(m map[string]string) bool { return m["persist_healthy"] == "0" })
			if policy == "open" {
				// Answers go on: a fresh connection's changes are answered.
				c, err := dial(srv.Addr)
				if err != nil {
					t.Fatal(err)
				}
				for range 100 {
					_ = c.c.SetDeadline(time.Now().Add(30 * time.Second))
					r, err := c.do("THROTTLE.CHECK", "probe", strconv.Itoa(limit), period)
					if err != nil || len(r.ints) != 5 {
						t.Fatalf("open policy during the outage: %+v %v", r, err)
					}
				}
				c.c.Close()
			} else {
				// New changes are refused with TRYAGAIN. A probe applied
				// just before the failure was noticed waits for its write:
				// try again on a fresh connection.
				deadline := time.Now().Add(90 * time.Second)
				for {
					r, err := probe(srv.Addr)
					if err == nil && strings.HasPrefix(r.err, "TRYAGAIN") {
						break
					}
					if err == nil && r.err != "" {
						t.Fatalf("closed policy during the outage: %q", r.err)
					}
					if time.Now().After(deadline) {
						t.Fatal("no TRYAGAIN within 90s of the outage")
					}
				}
				// Reads still answer.
				c, err := dial(srv.Addr)
				if err != nil {
					t.Fatal(err)
				}
				_ = c.c.SetDeadline(time.Now().Add(30 * time.Second))
				if r, err := c.do("THROTTLE.PEEK", key(0), strconv.Itoa(limit), period); err != nil || len(r.ints) != 5 {
					t.Fatalf("PEEK during the outage: %+v %v", r, err)
				}
				c.c.Close()
			}

			pg.Restart(t)
			m := waitFor(t, srv.Addr, "lag back to 0 after Postgres returned", func(m map[string]string) bool {
				return m["persist_healthy"] == "1" && m["persist_lag_ms"] == "0"
			})
			t.Logf("%s: after the outage: errors %s, rows written %s", policy, m["persist_errors"], m["persist_rows_written"])
			time.Sleep(500 * time.Millisecond) // more load after the recovery (not a correctness wait)
			srv.Stop()                         // SIGKILL under load
			ld := <-ldc
			cancel()
			waitUnlocked(t, url, persist.Options{})
			srv2 := startServer(t, args...)
			after := consumed(t, srv2.Addr, keys)
			lost, lkeys := compare(ld.acked, after, regained(began))
			t.Logf("%s: %d replies (%d TRYAGAIN, %d other errors), %d units acknowledged (%.0f per key); lost %d on %d keys",
				policy, ld.ops.Load(), ld.tryAgain.Load(), ld.other.Load(), total(ld.acked), perKey(ld.acked), lost, lkeys)
			if x, xk := excess(ld.sent, after); x > 0 {
				t.Errorf("%d units on %d keys consumed after the restart beyond the commands sent", x, xk)
			}
			if lost > 0 {
				t.Errorf("%s: lost %d acknowledged units on %d keys after the outage", policy, lost, lkeys)
			}
		})
	}
}

// probe sends one change on a fresh connection and reads its reply, or
// returns an error if none comes within a few seconds (it is held).
func probe(addr string) (reply, error) {
	c, err := dial(addr)
	if err != nil {
		return reply{}, err
	}
	defer c.c.Close()
	_ = c.c.SetDeadline(time.Now().Add(3 * time.Second))
	return c.do("THROTTLE.CHECK", "probe", strconv.Itoa(limit), period)
}
