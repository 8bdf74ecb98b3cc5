package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"github.com/throttlekit/throttlekit-server/telemetry"
)

func TestHealthcheckMode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- telemetry.Serve(ctx, ln, telemetry.Handler(nil, nil)) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	tests := []struct {
		name string
		args []string
		env  map[string]string
		code int
		msg  string // substring of stderr
	}{
		{"env address, unspecified host", nil, map[string]string{"THROTTLEKIT_METRICS_ADDR": "0.0.0.0:" + port}, 0, ""},
		{"flag address", []string{"--metrics-addr", "127.0.0.1:" + port}, nil, 0, ""},
		{"metrics disabled", nil, map[string]string{"THROTTLEKIT_METRICS_ADDR": "off"}, 1, "disabled"},
		{"bad config is 1, not 2", []string{"--maxclients", "0"}, nil, 1, "maxclients"},
		{"nothing listening", []string{"--metrics-addr", "127.0.0.1:1"}, nil, 1, "healthcheck:"},
		{"help", []string{"--help"}, nil, 0, "--metrics-addr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := healthcheck(tt.args, env(tt.env), &stderr); code != tt.code {
				t.Errorf("code = %d, want %d (stderr %q)", code, tt.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.msg) || (tt.msg == "" && stderr.Len() > 0) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.msg)
			}
		})
	}
}
