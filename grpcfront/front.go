package grpcfront

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TLSConfig is the TLS of the gRPC listener, from the server's certificate
// settings (tls-cert-file, tls-key-file, tls-ca-cert-file,
// tls-auth-clients, tls-protocols). The files are read by New and again by
// Front.ReloadTLS.
type TLSConfig struct {
	CertFile, KeyFile string
	CAFile            string             // CA certificates that sign client certificates; "" = none
	ClientAuth        tls.ClientAuthType // tls.NoClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert
	MinVersion        uint16             // crypto/tls version numbers; 0 = TLS 1.2
	MaxVersion        uint16             // 0 = the highest crypto/tls supports
}

// Config configures a Front.
type Config struct {
	// Addr is the TCP address of the gRPC listener, e.g. "127.0.0.1:8081".
	Addr string
	// TLS, if not nil, serves gRPC over TLS with these files.
	TLS *TLSConfig
	// Logger; nil discards.
	Logger *slog.Logger
	// Metrics receives throttlekit_grpc_requests_total and
	// throttlekit_grpc_errors_total; nil keeps them private (Stats reads
	// them either way).
	Metrics *metrics.Set
}

// Service is a gRPC service the front serves: rls.Service, and the RLQS
// service the same way.
type Service interface {
	Register(g *grpc.Server)
}

// Front is the gRPC listener with its services. Create it with New, run it
// with Serve, stop it with Stop.
type Front struct {
	cfg    Config
	log    *slog.Logger
	g      *grpc.Server
	health *health.Server
	names  []string // the services reported by the health server

	tlsCur atomic.Pointer[tls.Config]

	requests, errors *metrics.Counter

	mu      sync.Mutex
	ln      net.Listener
	ready   chan struct{}
	stopped bool
}

// Stats are the front's counters since New.
type Stats struct {
	Requests int64 // unary calls answered
	Errors   int64 // calls answered with a gRPC error status
}

// New checks cfg, loads the TLS files and returns a Front serving svcs.
// health is the health server the services report through (rls.Service's
// Health); its status for "" and for each name in names is set SERVING by
// Serve and NOT_SERVING by Stop.
func New(cfg Config, health *health.Server, names []string, svcs ...Service) (*Front, error) {
	if cfg.Addr == "" {
		return nil, errors.New("grpcfront: empty address")
	}
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		return nil, fmt.Errorf("grpcfront: bad address %q: %w", cfg.Addr, err)
	}
	if health == nil {
		return nil, errors.New("grpcfront: nil health server")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewSet()
	}
	f := &Front{cfg: cfg, log: cfg.Logger, health: health, names: names, ready: make(chan struct{}),
		requests: cfg.Metrics.GetOrCreateCounter("throttlekit_grpc_requests_total"),
		errors:   cfg.Metrics.GetOrCreateCounter("throttlekit_grpc_errors_total")}
	opts := []grpc.ServerOption{grpc.ChainUnaryInterceptor(f.count)}
	if cfg.TLS != nil {
		c, err := loadTLS(cfg.TLS)
		if err != nil {
			return nil, err
		}
		f.tlsCur.Store(c)
		// Each handshake takes the current configuration, so ReloadTLS
		// applies to the connections accepted after it.
		base := &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return f.tlsCur.Load(), nil }}
		opts = append(opts, grpc.Creds(credentials.NewTLS(base)))
	}
	f.g = grpc.NewServer(opts...)
	for _, s := range svcs {
		s.Register(f.g)
	}
	f.setHealth(healthpb.HealthCheckResponse_NOT_SERVING)
	return f, nil
}

// loadTLS reads the certificate, key and CA files.
func loadTLS(t *TLSConfig) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("grpcfront: TLS certificate: %w", err)
	}
	c := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   max(t.MinVersion, tls.VersionTLS12),
		MaxVersion:   t.MaxVersion,
		ClientAuth:   t.ClientAuth,
		NextProtos:   []string{"h2"},
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("grpcfront: TLS CA certificates: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("grpcfront: TLS CA certificates: no PEM certificate in %s", t.CAFile)
		}
		c.ClientCAs = pool
	}
	if c.ClientAuth >= tls.VerifyClientCertIfGiven && c.ClientCAs == nil {
		return nil, errors.New("grpcfront: TLS client authentication needs a CA certificate file")
	}
	return c, nil
}

// ReloadTLS reads the TLS files again; handshakes after it use them. On
// error the files in use stay. Without TLS it does nothing.
func (f *Front) ReloadTLS() error {
	if f.cfg.TLS == nil {
		return nil
	}
	c, err := loadTLS(f.cfg.TLS)
	if err != nil {
		f.log.Error("gRPC TLS reload failed; keeping the certificates in use", "err", err)
		return err
	}
	f.tlsCur.Store(c)
	return nil
}

// count is the unary interceptor behind Stats.
func (f *Front) count(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	f.requests.Inc()
	if err != nil {
		f.errors.Inc()
	}
	return resp, err
}

// Stats returns the front's counters.
func (f *Front) Stats() Stats {
	return Stats{Requests: int64(f.requests.Get()), Errors: int64(f.errors.Get())}
}

// setHealth sets the status of the server ("") and of every named service.
func (f *Front) setHealth(st healthpb.HealthCheckResponse_ServingStatus) {
	f.health.SetServingStatus("", st)
	for _, n := range f.names {
		f.health.SetServingStatus(n, st)
	}
}

// Listen opens the listener on Config.Addr, so that a caller sees an
// address in use before it starts anything else; Serve calls it if the
// caller did not.
func (f *Front) Listen() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", f.cfg.Addr)
	if err != nil {
		return fmt.Errorf("grpcfront: %w", err)
	}
	f.ln = ln
	return nil
}

// Serve serves on the listener (opening it if Listen was not called) until
// Stop. It returns nil after Stop, or the error that kept it from
// listening or serving.
func (f *Front) Serve() error {
	if err := f.Listen(); err != nil {
		return err
	}
	f.mu.Lock()
	ln, stopped := f.ln, f.stopped
	f.mu.Unlock()
	if stopped {
		ln.Close()
		return nil
	}
	f.setHealth(healthpb.HealthCheckResponse_SERVING)
	close(f.ready)
	f.log.Info("gRPC listening", "addr", ln.Addr().String(), "tls", f.cfg.TLS != nil)
	if err := f.g.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// Ready is closed once Serve listens.
func (f *Front) Ready() <-chan struct{} { return f.ready }

// Addr returns the listener's address once Listen or Serve has opened it (useful with port
// 0), or nil.
func (f *Front) Addr() net.Addr {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ln == nil {
		return nil
	}
	return f.ln.Addr()
}

// Stop reports NOT_SERVING, then stops gracefully: no new calls are
// accepted and the calls in progress finish. If ctx ends first, the
// remaining calls are cancelled (grpc.Server.Stop) and ctx's error is
// returned.
func (f *Front) Stop(ctx context.Context) error {
	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
	f.setHealth(healthpb.HealthCheckResponse_NOT_SERVING)
	done := make(chan struct{})
	go func() { f.g.GracefulStop(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		f.g.Stop()
		<-done
		return ctx.Err()
	}
}
