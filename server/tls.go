package server

// TLS: gnet has no TLS, so a second listener serves TLS clients with
// crypto/tls, one goroutine per connection, through the same command code.
//
// Each TLS connection gets a loop of its own (taken from a pool, so the
// loop's counters survive the connection and Stats keeps counting them):
// its reply buffer, parser, transform and Txn, exactly what a gnet event
// loop gives its connections. The connection's goroutine reads, calls
// loop.process with the bytes read, and writes the replies; handlers cannot
// tell which listener a client came from. What handlers need of a
// connection from other goroutines (CLIENT KILL's Close, MONITOR's
// AsyncWrite, the output buffer size) is provided by tlsConn, which
// implements those methods of gnet.Conn.
//
// The same limits apply as on the TCP listener: maxclients and protected
// mode (checked after the handshake, so the refusal is readable), the
// query buffer limit (the parser's), the output buffer limit (the bytes
// queued and not yet written), the idle timeout (measured on Config.Clock;
// a read deadline of a quarter of it, at most 1 s, wakes the connection to
// look) and the counters of Stats.
//
// Costs: a goroutine and its stack per connection, the TLS record layer
// (one encryption per write, one per record read), and a pool of loops
// as large as the most TLS connections open at once.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// TLSAuth is how the TLS listener treats client certificates, as Redis's
// tls-auth-clients.
type TLSAuth int

const (
	// TLSAuthRequire requires a client certificate signed by the CA
	// (Redis's "yes", the default).
	TLSAuthRequire TLSAuth = iota
	// TLSAuthOptional verifies a client certificate when one is given.
	TLSAuthOptional
	// TLSAuthNone asks for no client certificate.
	TLSAuthNone
)

// ParseTLSAuth parses Redis's tls-auth-clients values: "yes", "optional"
// or "no".
func ParseTLSAuth(s string) (TLSAuth, error) {
	switch strings.ToLower(s) {
	case "yes":
		return TLSAuthRequire, nil
	case "optional":
		return TLSAuthOptional, nil
	case "no":
		return TLSAuthNone, nil
	}
	return 0, fmt.Errorf("server: tls-auth-clients must be yes, no or optional, not %q", s)
}

// TLSConfig configures the TLS listener. It is off while Addr is empty.
type TLSConfig struct {
	Addr     string  // TCP address of the TLS listener, e.g. "127.0.0.1:6390"
	CertFile string  // PEM certificate chain of the server
	KeyFile  string  // PEM private key of CertFile
	CAFile   string  // PEM CA certificates that sign client certificates; required unless Auth is TLSAuthNone
	Auth     TLSAuth // client certificates
	// Protocols lists the TLS versions accepted, as Redis's tls-protocols:
	// "TLSv1.2 TLSv1.3" (the default when empty), separated by spaces.
	Protocols string
}

// tlsHandshakeTimeout bounds a TLS handshake, so that a client that
// connects and sends nothing holds no goroutine for long.
const tlsHandshakeTimeout = 10 * time.Second

// tlsReadSize is the room made for each read: one TLS record.
const tlsReadSize = 16 * 1024

// tlsState is the TLS listener, its current certificates and its
// connections.
type tlsState struct {
	cfg        TLSConfig
	log        *slog.Logger
	minV, maxV uint16

	cur atomic.Pointer[tls.Config] // replaced whole by ReloadTLS

	mu    sync.Mutex // guards ln, conns, free
	ln    net.Listener
	conns map[*tlsConn]struct{}
	free  []*loop // loops of closed TLS connections, reused
	wg    sync.WaitGroup
}

// newTLSState checks cfg and loads its files; nil without TLS.
func newTLSState(cfg TLSConfig, log *slog.Logger) (*tlsState, error) {
	if cfg.Addr == "" {
		return nil, nil
	}
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		return nil, fmt.Errorf("server: bad TLS address %q: %w", cfg.Addr, err)
	}
	if cfg.CertFile == "" || cfg.KeyFile == "" {
		return nil, errors.New("server: TLS needs a certificate file and a key file")
	}
	if cfg.Auth != TLSAuthNone && cfg.CAFile == "" {
		return nil, errors.New("server: TLS client authentication needs a CA certificate file (or tls-auth-clients no)")
	}
	minV, maxV, err := ParseTLSProtocols(cfg.Protocols)
	if err != nil {
		return nil, err
	}
	t := &tlsState{cfg: cfg, log: log, minV: minV, maxV: maxV, conns: make(map[*tlsConn]struct{})}
	c, err := t.load()
	if err != nil {
		return nil, err
	}
	t.cur.Store(c)
	return t, nil
}

// ParseTLSProtocols parses Redis's tls-protocols, versions separated by
// spaces ("TLSv1.2 TLSv1.3"), and returns the lowest and highest named, as
// crypto/tls version numbers. Empty text means TLS 1.2 and 1.3.
func ParseTLSProtocols(s string) (lo, hi uint16, err error) {
	if strings.TrimSpace(s) == "" {
		return tls.VersionTLS12, tls.VersionTLS13, nil
	}
	for _, f := range strings.Fields(s) {
		var v uint16
		switch strings.ToLower(f) {
		case "tlsv1":
			v = tls.VersionTLS10
		case "tlsv1.1":
			v = tls.VersionTLS11
		case "tlsv1.2":
			v = tls.VersionTLS12
		case "tlsv1.3":
			v = tls.VersionTLS13
		default:
			return 0, 0, fmt.Errorf("server: unknown TLS protocol %q (want TLSv1, TLSv1.1, TLSv1.2 or TLSv1.3)", f)
		}
		if lo == 0 || v < lo {
			lo = v
		}
		hi = max(hi, v)
	}
	return lo, hi, nil
}

// load reads the certificate, key and CA files into a tls.Config.
func (t *tlsState) load() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(t.cfg.CertFile, t.cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("server: TLS certificate: %w", err)
	}
	c := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   t.minV,
		MaxVersion:   t.maxV,
		ClientAuth:   tls.NoClientCert,
	}
	if t.cfg.CAFile != "" {
		pem, err := os.ReadFile(t.cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("server: TLS CA certificates: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("server: TLS CA certificates: no PEM certificate in %s", t.cfg.CAFile)
		}
		c.ClientCAs = pool
	}
	switch t.cfg.Auth {
	case TLSAuthRequire:
		c.ClientAuth = tls.RequireAndVerifyClientCert
	case TLSAuthOptional:
		c.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return c, nil
}

// ReloadTLS reads the TLS certificate, key and CA files again; connections
// accepted afterwards use them, open ones keep theirs. If a file cannot be
// read or parsed, the certificates in use stay and the error is logged and
// returned. Without TLS it does nothing.
func (s *Server) ReloadTLS() error {
	if s.tls == nil {
		return nil
	}
	c, err := s.tls.load()
	if err != nil {
		s.log.Error("TLS reload failed; keeping the current certificates", "err", err)
		return err
	}
	s.tls.cur.Store(c)
	s.log.Info("TLS certificates reloaded", "cert", s.tls.cfg.CertFile)
	return nil
}

// TLSAddr returns the address of the TLS listener once Serve has opened it
// (useful with port 0), or nil.
func (s *Server) TLSAddr() net.Addr {
	if s.tls == nil {
		return nil
	}
	s.tls.mu.Lock()
	defer s.tls.mu.Unlock()
	if s.tls.ln == nil {
		return nil
	}
	return s.tls.ln.Addr()
}

// listen opens the TLS listener and starts accepting.
func (t *tlsState) listen(s *Server) error {
	ln, err := net.Listen("tcp", t.cfg.Addr)
	if err != nil {
		return fmt.Errorf("server: TLS listener: %w", err)
	}
	t.mu.Lock()
	t.ln = ln
	t.mu.Unlock()
	s.log.Info("TLS listening", "addr", ln.Addr().String())
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		base := &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return t.cur.Load(), nil }}
		for {
			raw, err := ln.Accept()
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					continue
				}
				return // closed by Shutdown
			}
			t.wg.Add(1)
			go func() {
				defer t.wg.Done()
				s.serveTLS(raw, tls.Server(raw, base))
			}()
		}
	}()
	return nil
}

// closeListener stops accepting TLS connections.
func (t *tlsState) closeListener() {
	t.mu.Lock()
	if t.ln != nil {
		_ = t.ln.Close()
	}
	t.mu.Unlock()
}

// drain stops accepting, lets every TLS connection finish the batch in hand
// and write its queued replies, and waits for them to close; when ctx ends
// first it closes the ones left and returns ctx's error.
func (t *tlsState) drain(ctx context.Context) error {
	t.closeListener()
	t.mu.Lock()
	for c := range t.conns {
		_ = c.raw.SetReadDeadline(time.Unix(1, 0)) // wake a blocked Read; the goroutine sees drainCh
	}
	t.mu.Unlock()
	done := make(chan struct{})
	go func() { t.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		t.closeAll()
		<-done
		return ctx.Err()
	}
}

// stop closes the listener and every TLS connection and waits for their
// goroutines.
func (t *tlsState) stop() {
	t.closeListener()
	t.closeAll()
	t.wg.Wait()
}

// closeAll closes every TLS connection at once.
func (t *tlsState) closeAll() {
	t.mu.Lock()
	for c := range t.conns {
		_ = c.Close()
	}
	t.mu.Unlock()
}

// takeLoop returns a loop for a new TLS connection.
func (t *tlsState) takeLoop(s *Server) *loop {
	t.mu.Lock()
	if n := len(t.free); n > 0 {
		l := t.free[n-1]
		t.free = t.free[:n-1]
		t.mu.Unlock()
		return l
	}
	t.mu.Unlock()
	l := newLoop(s)
	s.loopsMu.Lock()
	s.loops = append(s.loops, l) // Stats folds it with the others
	s.loopsMu.Unlock()
	return l
}
