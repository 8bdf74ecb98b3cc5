package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRunExitStatus(t *testing.T) {
	dir := t.TempDir()
	badFile := filepath.Join(dir, "bad.conf")
	if err := os.WriteFile(badFile, []byte("maxclients 10\nno-such-setting 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want int
		out  string // in stdout
		err  string // in stderr
	}{
		{"version", []string{"--version"}, nil, 0, "throttlekit-server dev", ""},
		{"help", []string{"--help"}, nil, 0, "--maxclients", ""},
		{"help lists the healthcheck mode", []string{"--help"}, nil, 0, "throttlekit-server healthcheck", ""},
		{"bad flag value", []string{"--maxclients", "x"}, nil, 2, "", "maxclients"},
		{"unknown flag", []string{"--nope"}, nil, 2, "", "nope"},
		{"bad environment value", nil, map[string]string{"THROTTLEKIT_MAXKEYS": "lots"}, 2, "", "THROTTLEKIT_MAXKEYS"},
		{"bad config file", []string{"--config", badFile}, nil, 2, "", "no-such-setting"},
		{"upstream with persist", []string{"--upstream", "redis://127.0.0.1:1", "--persist", "postgres://u@127.0.0.1:1/db"}, nil, 2, "", "--upstream and --persist exclude each other"},
		{"bad upstream URL", []string{"--upstream", "http://x"}, nil, 2, "", "upstream"},
		{"missing config file", []string{"--config", filepath.Join(dir, "absent.conf")}, nil, 2, "", "absent.conf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			got := run(tt.args, func(k string) string { return tt.env[k] }, &stdout, &stderr)
			if got != tt.want {
				t.Fatalf("status %d, want %d (stderr %q)", got, tt.want, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.out) || !strings.Contains(stderr.String(), tt.err) {
				t.Fatalf("stdout %q stderr %q", stdout.String(), stderr.String())
			}
			if tt.want == 2 && strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
				t.Fatalf("want one line on stderr, got %q", stderr.String())
			}
		})
	}
}

// TestRunServesAndStopsOnSIGTERM starts the whole program on a free port,
// talks to it, sends SIGTERM to this process (caught by run) and expects
// status 0.
func TestRunServesAndStopsOnSIGTERM(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"--addr", addr, "--metrics-addr", "", "--loops", "1"},
			func(string) string { return "" }, &bytes.Buffer{}, &stderr)
	}()
	var c net.Conn
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err = net.Dial("tcp", addr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not up: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if _, err := c.Read(buf); err != nil || string(buf) != "+PONG\r\n" {
		t.Fatalf("PING: %q %v", buf, err)
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit status %d, want 0; log: %s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after SIGTERM")
	}
}
