package telemetry

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestHandlerHealthReady(t *testing.T) {
	var ready atomic.Bool
	ts := httptest.NewServer(Handler(NewExporter(Sources{}), ready.Load))
	defer ts.Close()

	tests := []struct {
		path     string
		ready    bool
		code     int
		bodyPart string
	}{
		{"/healthz", false, 200, "ok"},
		{"/readyz", false, 503, "not ready"},
		{"/readyz", true, 200, "ready"},
		{"/healthz", true, 200, "ok"},
		{"/metrics", true, 200, "throttlekit_metrics_scrapes_total"},
		{"/nosuch", true, 404, ""},
		{"/", true, 404, ""},
	}
	for _, tt := range tests {
		ready.Store(tt.ready)
		code, body := get(t, ts.URL+tt.path)
		if code != tt.code || !strings.Contains(body, tt.bodyPart) {
			t.Errorf("GET %s (ready=%v) = %d %q, want %d containing %q", tt.path, tt.ready, code, body, tt.code, tt.bodyPart)
		}
	}
	resp, err := http.Post(ts.URL+"/healthz", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /healthz = %d, want 405", resp.StatusCode)
	}
}

func TestHandlerNilExporterAndReady(t *testing.T) {
	ts := httptest.NewServer(Handler(nil, nil))
	defer ts.Close()
	if code, _ := get(t, ts.URL+"/metrics"); code != 404 {
		t.Errorf("/metrics without exporter = %d, want 404", code)
	}
	if code, _ := get(t, ts.URL+"/readyz"); code != 200 {
		t.Errorf("/readyz without ready func = %d, want 200", code)
	}
}

func TestServeStopsWithContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, Handler(nil, nil)) }()

	if code := HealthCheck(url+"/healthz", io.Discard); code != 0 {
		t.Fatalf("HealthCheck on a live listener = %d, want 0", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve after cancel = %v, want nil", err)
	}
	var stderr bytes.Buffer
	if code := HealthCheck(url+"/healthz", &stderr); code != 1 {
		t.Fatalf("HealthCheck after shutdown = %d, want 1", code)
	}
	if !strings.Contains(stderr.String(), "healthcheck:") {
		t.Fatalf("HealthCheck wrote %q", stderr.String())
	}
}

// TestServeBadAddr: a metrics address that cannot be served is an error at
// once, never a listener that blocks: a port in use, a malformed address,
// and a listener that can no longer accept.
func TestServeBadAddr(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if ln, err := Listen(busy.Addr().String()); err == nil || !strings.Contains(err.Error(), "metrics listener") {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("Listen on a busy port = %v", err)
	}
	for _, addr := range []string{"nonsense", "127.0.0.1", "127.0.0.1:notaport", "127.0.0.1:70000"} {
		if ln, err := Listen(addr); err == nil || !strings.Contains(err.Error(), "metrics listener") {
			if ln != nil {
				ln.Close()
			}
			t.Errorf("Listen on the malformed address %q = %v", addr, err)
		}
	}
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatalf("Listen on port 0: %v", err)
	}
	ln.Close()
	// The listener cannot accept: Serve must fail at once instead of blocking.
	err = Serve(context.Background(), ln, Handler(nil, nil))
	if err == nil || !strings.Contains(err.Error(), "metrics listener") {
		t.Fatalf("Serve on a closed listener = %v", err)
	}
}

func TestHealthCheckStatus(t *testing.T) {
	var ready atomic.Bool
	ts := httptest.NewServer(Handler(nil, ready.Load))
	defer ts.Close()
	var stderr bytes.Buffer
	if code := HealthCheck(ts.URL+"/readyz", &stderr); code != 1 || !strings.Contains(stderr.String(), "503") {
		t.Fatalf("HealthCheck on 503 = %d, %q; want 1 mentioning 503", code, stderr.String())
	}
	ready.Store(true)
	if code := HealthCheck(ts.URL+"/readyz", nil); code != 0 {
		t.Fatalf("HealthCheck on 200 = %d, want 0", code)
	}
}

func TestHealthURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"127.0.0.1:9121", "http://127.0.0.1:9121/healthz"},
		{":9121", "http://127.0.0.1:9121/healthz"},
		{"0.0.0.0:9121", "http://127.0.0.1:9121/healthz"},
		{"[::]:9121", "http://[::1]:9121/healthz"},
		{"10.0.0.5:80", "http://10.0.0.5:80/healthz"},
		{"", ""},
		{"nope", ""},
	}
	for _, tt := range tests {
		got, err := HealthURL(tt.in)
		if got != tt.want || (err != nil) != (tt.want == "") {
			t.Errorf("HealthURL(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
