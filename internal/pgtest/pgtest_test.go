package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

func query(t *testing.T, url string) error {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var n int
	return conn.QueryRow(context.Background(), "SELECT 1").Scan(&n)
}

// TestStartStopRestart: the server answers, stops, and comes back on the
// same URL.
func TestStartStopRestart(t *testing.T) {
	s := Start(t)
	if err := query(t, s.URL); err != nil {
		t.Fatalf("query %s: %v", s.URL, err)
	}
	s.Stop(t)
	if err := query(t, s.URL); err == nil {
		t.Fatal("query succeeded on a stopped server")
	}
	s.Restart(t)
	if err := query(t, s.URL); err != nil {
		t.Fatalf("query after restart: %v", err)
	}
}
