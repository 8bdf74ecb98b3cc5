package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/throttlekit/throttlekit-server/config"
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

// shutdownGrace bounds how long Serve waits for scrapes in flight once its
// context is done.
const shutdownGrace = 5 * time.Second

// Serve listens on addr and serves h until ctx is done, then shuts the HTTP
// server down (waiting up to 5s for requests in flight) and returns nil. A
// failure to listen is returned at once, so a bad --metrics-addr stops the
// process at startup.
func Serve(ctx context.Context, addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("telemetry: metrics listener: %w", err)
	}
	return ServeListener(ctx, ln, h)
}

// ServeListener is Serve on a listener the caller opened (for example on port
// 0 in a test). It closes ln.
func ServeListener(ctx context.Context, ln net.Listener, h http.Handler) error {
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

// HealthCheckCommand is the "throttlekit-server healthcheck [flags]" mode
// used by the container HEALTHCHECK: it loads the configuration the server
// would load from args and getenv (so it follows THROTTLEKIT_METRICS_ADDR),
// probes HealthURL(MetricsAddr) and returns 0 when /healthz answers 200, 1
// otherwise, including for a bad configuration (Docker reserves status 2).
func HealthCheckCommand(args []string, getenv func(string) string, stderr io.Writer) int {
	if stderr == nil {
		stderr = io.Discard
	}
	cfg, err := config.LoadTo(args, getenv, stderr)
	if err != nil {
		if config.Exit(err, stderr) == 0 {
			return 0 // --help or --version
		}
		return 1
	}
	url, err := HealthURL(cfg.MetricsAddr)
	if err != nil {
		fmt.Fprintf(stderr, "healthcheck: %v\n", err)
		return 1
	}
	return HealthCheck(url, stderr)
}
