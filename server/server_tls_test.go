package server_test

// The TLS listener: go-redis and redis-cli over TLS with a CA made in the
// test, client certificates per tls-auth-clients, a plaintext client on the
// TLS port, certificate reload, the shared store and limits, and Shutdown.

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttlekit-server/internal/clock"
	"github.com/throttlekit/throttlekit-server/internal/testdeps"
	"github.com/throttlekit/throttlekit-server/server"
)

// testPKI is a CA and the certificates it signed, written as PEM files.
type testPKI struct {
	dir               string
	ca                *x509.Certificate
	caKey             *ecdsa.PrivateKey
	serial            atomic.Int64
	caFile            string
	certFile, keyFile string // the server's
	clientCert        tls.Certificate
	clientPool        *x509.CertPool // trusts the CA
	clientCertFile    string
	clientKeyFile     string
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir()}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "throttlekit test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p.ca, _ = x509.ParseCertificate(der)
	p.caKey = key
	p.serial.Store(1)
	p.caFile = filepath.Join(p.dir, "ca.crt")
	writePEM(t, p.caFile, "CERTIFICATE", der)
	p.clientPool = x509.NewCertPool()
	p.clientPool.AddCert(p.ca)
	p.certFile, p.keyFile = p.issue(t, "server", "server", x509.ExtKeyUsageServerAuth)
	p.clientCertFile, p.clientKeyFile = p.issue(t, "client", "client", x509.ExtKeyUsageClientAuth)
	p.clientCert, err = tls.LoadX509KeyPair(p.clientCertFile, p.clientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// issue writes a certificate for cn signed by the CA and its key, as
// name.crt and name.key, and returns the two paths.
func (p *testPKI) issue(t testing.TB, name, cn string, usage x509.ExtKeyUsage) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial.Add(1)),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// clientTLS is a client configuration trusting the test CA, with the
// client certificate when withCert.
func (p *testPKI) clientTLS(withCert bool) *tls.Config {
	c := &tls.Config{RootCAs: p.clientPool, ServerName: "localhost"}
	if withCert {
		c.Certificates = []tls.Certificate{p.clientCert}
	}
	return c
}

// startTLSServer starts a server with a TLS listener on a free port.
func startTLSServer(t testing.TB, p *testPKI, auth server.TLSAuth, mutate func(*server.Config)) *testServer {
	t.Helper()
	return startServer(t, func(c *server.Config) {
		c.TLS = server.TLSConfig{Addr: "127.0.0.1:0", CertFile: p.certFile, KeyFile: p.keyFile, CAFile: p.caFile, Auth: auth}
		if mutate != nil {
			mutate(c)
		}
	})
}

func tlsAddr(t testing.TB, ts *testServer) string {
	t.Helper()
	a := ts.Srv.TLSAddr()
	if a == nil {
		t.Fatal("no TLS listener")
	}
	return a.String()
}

func TestTLSGoRedisClientCertificates(t *testing.T) {
	p := newTestPKI(t)
	tests := []struct {
		auth     server.TLSAuth
		withCert bool
		wantOK   bool
	}{
		{server.TLSAuthRequire, true, true},
		{server.TLSAuthRequire, false, false},
		{server.TLSAuthOptional, true, true},
		{server.TLSAuthOptional, false, true},
		{server.TLSAuthNone, false, true},
		{server.TLSAuthNone, true, true},
	}
	for _, tc := range tests {
		name := map[server.TLSAuth]string{server.TLSAuthRequire: "yes", server.TLSAuthOptional: "optional", server.TLSAuthNone: "no"}[tc.auth]
		if tc.withCert {
			name += "/with-cert"
		} else {
			name += "/without-cert"
		}
		t.Run(name, func(t *testing.T) {
			ts := startTLSServer(t, p, tc.auth, nil)
			for _, proto := range []int{2, 3} {
				c := newClient(t, tlsAddr(t, ts), proto, func(o *redis.Options) { o.TLSConfig = p.clientTLS(tc.withCert) })
				ctx := context.Background()
				err := c.Ping(ctx).Err()
				if !tc.wantOK {
					if err == nil {
						t.Fatalf("RESP%d: PING without a client certificate succeeded", proto)
					}
					return
				}
				if err != nil {
					t.Fatalf("RESP%d: PING: %v", proto, err)
				}
				d, err := toDecision(mustDo(t, ctx, c, "THROTTLE.CHECK", "k", "10", "1h"), proto)
				if err != nil || d.Allowed != 1 || d.Limit != 10 {
					t.Fatalf("RESP%d: THROTTLE.CHECK = %+v, %v", proto, d, err)
				}
			}
		})
	}
}

// TestTLSSharesStoreAndLimits: the TLS listener serves the same store, with
// the same maxclients and the same counters as the TCP one.
func TestTLSSharesStoreAndLimits(t *testing.T) {
	p := newTestPKI(t)
	ts := startTLSServer(t, p, server.TLSAuthRequire, func(c *server.Config) { c.MaxClients = 2 })
	plain := dialRaw(t, ts.Addr)
	for range 2 {
		if d, err := toDecision(plain.do(t, "THROTTLE.CHECK", "shared", "3", "1h"), 2); err != nil || d.Allowed != 1 {
			t.Fatalf("over TCP: %+v, %v", d, err)
		}
	}
	sec := dialTLS(t, tlsAddr(t, ts), p.clientTLS(true))
	d, err := toDecision(sec.do(t, "THROTTLE.CHECK", "shared", "3", "1h"), 2)
	if err != nil || d.Allowed != 1 || d.Remaining != 0 {
		t.Fatalf("over TLS, third of the budget: %+v, %v", d, err)
	}
	if d, err = toDecision(plain.do(t, "THROTTLE.CHECK", "shared", "3", "1h"), 2); err != nil || d.Allowed != 0 {
		t.Fatalf("over TCP after TLS spent the budget: %+v, %v", d, err)
	}
	st := ts.Srv.Stats()
	if st.Commands["throttle.check"] != 4 || st.ConnsCurrent != 2 {
		t.Fatalf("stats: %d checks, %d connections; want 4, 2", st.Commands["throttle.check"], st.ConnsCurrent)
	}
	third := dialTLS(t, tlsAddr(t, ts), p.clientTLS(true))
	if v, ok := third.read(t).(respErr); !ok || !strings.Contains(string(v), "max number of clients") {
		t.Fatalf("third client: %#v; want the maxclients error", v)
	}
	third.expectClosed(t)
	// CLIENT KILL from TCP closes the TLS client.
	id, ok := sec.do(t, "CLIENT", "ID").(int64)
	if !ok {
		t.Fatalf("CLIENT ID over TLS is not an integer")
	}
	if v := plain.do(t, "CLIENT", "KILL", "ID", strconv.FormatInt(id, 10)); v != int64(1) {
		t.Fatalf("CLIENT KILL ID %d = %#v", id, v)
	}
	sec.expectClosed(t)
}

// TestTLSMonitor: MONITOR lines reach a TLS client.
func TestTLSMonitor(t *testing.T) {
	p := newTestPKI(t)
	ts := startTLSServer(t, p, server.TLSAuthNone, nil)
	mon := dialTLS(t, tlsAddr(t, ts), p.clientTLS(false))
	if v := mon.do(t, "MONITOR"); v != "OK" {
		t.Fatalf("MONITOR = %#v", v)
	}
	plain := dialRaw(t, ts.Addr)
	plain.do(t, "PING")
	if v, ok := mon.read(t).(string); !ok || !strings.Contains(v, `"PING"`) {
		t.Fatalf("MONITOR line = %#v", v)
	}
}

// dialTLS opens a TLS connection for raw RESP.
func dialTLS(t testing.TB, addr string, cfg *tls.Config) *rawConn {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatalf("TLS dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{Conn: c, r: bufio.NewReaderSize(c, 64<<10)}
}

func TestTLSPlaintextClientClosed(t *testing.T) {
	p := newTestPKI(t)
	ts := startTLSServer(t, p, server.TLSAuthNone, nil)
	c := dialRaw(t, tlsAddr(t, ts))
	c.send(t, encodeCommand("PING"))
	_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
	got, err := io.ReadAll(c.r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("plaintext connection still open after 15s")
	}
	if strings.Contains(string(got), "PONG") {
		t.Fatalf("plaintext client was answered: %q", got)
	}
}

func TestTLSReload(t *testing.T) {
	p := newTestPKI(t)
	ts := startTLSServer(t, p, server.TLSAuthNone, nil)
	serverCN := func() string {
		t.Helper()
		c, err := tls.Dial("tcp", tlsAddr(t, ts), p.clientTLS(false))
		if err != nil {
			t.Fatalf("TLS dial: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if cn := serverCN(); cn != "server" {
		t.Fatalf("first certificate CN = %q", cn)
	}
	old := dialTLS(t, tlsAddr(t, ts), p.clientTLS(false))
	// A new certificate in the same files.
	cert, key := p.issue(t, "renewed", "server-renewed", x509.ExtKeyUsageServerAuth)
	for _, f := range [][2]string{{cert, p.certFile}, {key, p.keyFile}} {
		b, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := ts.Srv.ReloadTLS(); err != nil {
		t.Fatalf("ReloadTLS: %v", err)
	}
	if cn := serverCN(); cn != "server-renewed" {
		t.Fatalf("after reload, CN = %q, want server-renewed", cn)
	}
	if v := old.do(t, "PING"); v != "PONG" {
		t.Fatalf("a connection opened before the reload: PING = %#v", v)
	}
	// A broken certificate file is refused and the renewed one stays.
	if err := os.WriteFile(p.certFile, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ts.Srv.ReloadTLS(); err == nil {
		t.Fatalf("ReloadTLS accepted a broken certificate")
	}
	if cn := serverCN(); cn != "server-renewed" {
		t.Fatalf("after a failed reload, CN = %q, want server-renewed", cn)
	}
}

func TestTLSRedisCLI(t *testing.T) {
	bins := testdeps.Require(t, "redis-cli")
	help, _ := exec.Command(bins[0], "--help").CombinedOutput()
	if !strings.Contains(string(help), "--tls") {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-cli was built without TLS")
		}
		t.Skip("SKIPPED LOUDLY: redis-cli was built without TLS (no --tls in --help)")
	}
	p := newTestPKI(t)
	ts := startTLSServer(t, p, server.TLSAuthRequire, nil)
	_, port, _ := net.SplitHostPort(tlsAddr(t, ts))
	out, err := exec.Command(bins[0], "-h", "127.0.0.1", "-p", port, "--tls", "--cacert", p.caFile,
		"--cert", p.clientCertFile, "--key", p.clientKeyFile, "THROTTLE.CHECK", "cli", "5", "1h").CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli: %v: %s", err, out)
	}
	if lines := strings.Fields(string(out)); len(lines) != 5 || lines[0] != "1" || lines[1] != "5" || lines[2] != "4" {
		t.Fatalf("redis-cli THROTTLE.CHECK = %q", out)
	}
	// Without a client certificate the handshake is refused.
	out, err = exec.Command(bins[0], "-h", "127.0.0.1", "-p", port, "--tls", "--cacert", p.caFile, "PING").CombinedOutput()
	if err == nil && strings.Contains(string(out), "PONG") {
		t.Fatalf("redis-cli without a certificate was answered: %s", out)
	}
}

// TestTLSShutdownFlushes: a TLS client's replies are all written before
// its connection closes at Shutdown.
func TestTLSShutdownFlushes(t *testing.T) {
	const n = 2000 // replies the kernel buffers hold while the client does not read
	p := newTestPKI(t)
	ts := startTLSServer(t, p, server.TLSAuthNone, nil)
	c := dialTLS(t, tlsAddr(t, ts), p.clientTLS(false))
	c.send(t, strings.Repeat(encodeCommand("THROTTLE.CHECK", "k", "1000000", "1h"), n))
	waitFor(t, "the server to run every command", func() bool {
		return ts.Srv.Stats().Commands["throttle.check"] == n
	})
	stopped := make(chan error, 1)
	go func() { stopped <- ts.stop(t) }()
	waitFor(t, "Shutdown to start", func() bool { return !ts.Srv.Ready() })
	for i := range n {
		v, err := readReply(c.r)
		if err != nil {
			t.Fatalf("reply %d of %d: %v", i+1, n, err)
		}
		if d, err := toDecision(v, 2); err != nil || d.Allowed != 1 {
			t.Fatalf("reply %d: %+v, %v", i+1, d, err)
		}
	}
	if _, err := c.r.ReadByte(); err == nil {
		t.Fatalf("data after the last reply")
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Serve after Shutdown: %v", err)
	}
}

// TestTLSConnectionLimits: the idle timeout and the query buffer limit
// apply to TLS clients as to TCP ones. The idle timeout follows
// Config.Clock, which stands still until the test moves it: the connection
// cannot time out before its PING however slowly the handshake runs.
func TestTLSConnectionLimits(t *testing.T) {
	p := newTestPKI(t)
	var mono atomic.Int64
	ts := startTLSServer(t, p, server.TLSAuthNone, func(c *server.Config) {
		c.Clock = clock.NewFrom(1_700_000_000_000_000_000, mono.Load).Now
		c.IdleTimeout = time.Hour
		c.QueryBufferLimit = 1 << 20
		c.ProtoMaxBulkLen = 1<<20 - server.QueryHeaderRoom
	})
	t.Run("idle timeout", func(t *testing.T) {
		c := dialTLS(t, tlsAddr(t, ts), p.clientTLS(false))
		if v := c.do(t, "PING"); v != "PONG" {
			t.Fatalf("PING = %#v", v)
		}
		mono.Add(int64(2 * time.Hour))
		c.expectClosed(t) // the connection looks at its idle time every second; fails if still open after 10s
	})
	t.Run("query buffer limit", func(t *testing.T) {
		c := dialTLS(t, tlsAddr(t, ts), p.clientTLS(false))
		bulk := "$500000\r\n" + strings.Repeat("b", 500000) + "\r\n"
		c.send(t, "*4\r\n$4\r\nECHO\r\n"+bulk+bulk+"$500000\r\nabc")
		if v := c.read(t); v != respErr("ERR Protocol error: client reached max query buffer length") {
			t.Fatalf("reply %#v", v)
		}
		c.expectClosed(t)
	})
}
