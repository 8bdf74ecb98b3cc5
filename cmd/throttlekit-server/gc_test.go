package main

import (
	"context"
	"io"
	"runtime/debug"
	"testing"
)

// TestGCPercent checks the collector default of the package doc: with GOGC
// unset, run sets DefaultGCPercent; with GOGC set, it leaves the runtime's
// value alone.
func TestGCPercent(t *testing.T) {
	unset := func(string) string { return "" }
	set := func(k string) string {
		if k == "GOGC" {
			return "100"
		}
		return ""
	}
	if got := gcPercent(unset); got != DefaultGCPercent {
		t.Errorf("gcPercent with GOGC unset = %d, want %d", got, DefaultGCPercent)
	}
	if got := gcPercent(set); got != -1 {
		t.Errorf("gcPercent with GOGC=100 = %d, want -1 (keep)", got)
	}
	orig := debug.SetGCPercent(100)
	defer debug.SetGCPercent(orig)
	if code := runContext(context.Background(), []string{"--version"}, unset, io.Discard, io.Discard); code != 0 {
		t.Fatalf("--version exited %d", code)
	}
	if got := debug.SetGCPercent(100); got != DefaultGCPercent {
		t.Errorf("after run with GOGC unset the collector runs at GOGC=%d, want %d", got, DefaultGCPercent)
	}
	debug.SetGCPercent(77)
	runContext(context.Background(), []string{"--version"}, set, io.Discard, io.Discard)
	if got := debug.SetGCPercent(100); got != 77 {
		t.Errorf("with GOGC set, run changed the collector's GOGC to %d", got)
	}
}
