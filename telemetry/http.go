package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Handler returns the HTTP handler of the metrics listener:
//
//	GET /metrics  the Prometheus text format from e (404 if e is nil)
//	GET /healthz  200 "ok" while the process can answer HTTP at all
//	GET /readyz   200 "ready" when ready() is true (or ready is nil), else 503 "not ready"
//
// Other paths answer 404.
func Handler(e *Exporter, ready func() bool) http.Handler {
	mux := http.NewServeMux()
	if e != nil {
		mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
			e.WritePrometheus(w)
		})
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if ready != nil && !ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "not ready\n")
			return
		}
		io.WriteString(w, "ready\n")
	})
	return mux
}

// DefaultMetricsAddr is the address of the metrics listener when none is
// configured: loopback only, so that metrics are not exposed by accident.
const DefaultMetricsAddr = "127.0.0.1:9121"

// Listen opens the metrics listener on addr ("host:port"; port 0 picks a
// free port). A port already in use or a malformed address is an error at
// once ("telemetry: metrics listener: ..."), so that a bad --metrics-addr
// stops the process at start-up, before anything is served. Pass the
// listener to Serve.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("telemetry: metrics listener: %w", err)
	}
	return ln, nil
}

// shutdownGrace bounds how long Serve waits for scrapes in flight once its
// context is done.
const shutdownGrace = 5 * time.Second

// Serve serves h on ln until ctx is done, then shuts the HTTP server down
// (waiting up to 5s for requests in flight) and returns nil. It closes ln.
// The caller opens ln (with Listen), so that a bad --metrics-addr stops the
// process at start-up, before anything is served, and a test can listen on
// port 0.
// A listener that fails while serving is returned as an error at once.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("telemetry: metrics listener: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-done; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("telemetry: metrics listener shutdown: %w", err)
	}
	return nil
}

// HealthURL returns the /healthz address to probe for a --metrics-addr value:
// an empty or unspecified host (":9121", "0.0.0.0:9121", "[::]:9121") becomes
// the loopback address. It fails when metricsAddr is empty (metrics disabled)
// or malformed.
func HealthURL(metricsAddr string) (string, error) {
	if metricsAddr == "" {
		return "", errors.New("telemetry: the metrics listener is disabled (--metrics-addr is empty), nothing to probe")
	}
	host, port, err := net.SplitHostPort(metricsAddr)
	if err != nil {
		return "", fmt.Errorf("telemetry: metrics address %q: %w", metricsAddr, err)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}

// healthTimeout bounds one HealthCheck request.
const healthTimeout = 3 * time.Second

// HealthCheck GETs url and returns the exit status a container HEALTHCHECK
// expects: 0 when the answer is 200, 1 otherwise (refused, timed out after 3s,
// any other status), writing the reason to stderr. It lets a final image
// without curl or wget probe /healthz with the server binary itself.
func HealthCheck(url string, stderr io.Writer) int {
	if stderr == nil {
		stderr = io.Discard
	}
	client := &http.Client{Timeout: healthTimeout}
	resp, err := client.Get(url)
	if err != nil {
		fmt.Fprintf(stderr, "healthcheck: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "healthcheck: %s: %s\n", url, resp.Status)
		return 1
	}
	return 0
}
