package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/config"
	"github.com/throttlekit/throttlekit-server/server"
)

func TestTLSConfigFromSettings(t *testing.T) {
	tlsConfig := func(c config.Config) (server.TLSConfig, error) {
		w, err := c.Wire()
		return w.Server.TLS, err
	}
	c := config.Default()
	if got, err := tlsConfig(c); err != nil || got.Addr != "" {
		t.Fatalf("tls-port 0: %+v, %v; want TLS off", got, err)
	}
	c.Addr, c.TLSPort, c.TLSCertFile, c.TLSKeyFile, c.TLSCACertFile = "0.0.0.0:6380", 6390, "c.crt", "c.key", "ca.crt"
	c.TLSAuthClients, c.TLSProtocols = "optional", "TLSv1.3"
	want := server.TLSConfig{Addr: "0.0.0.0:6390", CertFile: "c.crt", KeyFile: "c.key", CAFile: "ca.crt",
		Auth: server.TLSAuthOptional, Protocols: "TLSv1.3"}
	if got, err := tlsConfig(c); err != nil || got != want {
		t.Fatalf("tlsConfig = %+v, %v; want %+v", got, err, want)
	}
}

// writeSelfSigned writes a self-signed certificate for 127.0.0.1 named cn
// and its key to certFile and keyFile.
func writeSelfSigned(t *testing.T, certFile, keyFile, cn string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRunServesTLSAndReloadsOnSIGHUP runs the program with a TLS listener,
// talks to it over TLS, replaces the certificate, sends SIGHUP and expects
// new connections to see the new certificate.
func TestRunServesTLSAndReloadsOnSIGHUP(t *testing.T) {
	free := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	addr, tlsAddr := free(), free()
	_, tlsPort, _ := net.SplitHostPort(tlsAddr)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeSelfSigned(t, certFile, keyFile, "first")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		done <- runContext(ctx, []string{"--addr", addr, "--metrics-addr", "", "--loops", "1",
			"--tls-port", tlsPort, "--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-auth-clients", "no"},
			func(string) string { return "" }, &bytes.Buffer{}, &stderr)
	}()
	// The clients trust whatever certificate the server shows and report
	// its name.
	insecure := &tls.Config{InsecureSkipVerify: true}
	serverCN := func() string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			c, err := tls.Dial("tcp", tlsAddr, insecure)
			if err == nil {
				defer c.Close()
				if _, err := c.Write([]byte("PING\r\n")); err != nil {
					t.Fatal(err)
				}
				line, err := bufio.NewReader(c).ReadString('\n')
				if err != nil || line != "+PONG\r\n" {
					t.Fatalf("PING over TLS: %q, %v", line, err)
				}
				return c.ConnectionState().PeerCertificates[0].Subject.CommonName
			}
			if time.Now().After(deadline) {
				t.Fatalf("TLS listener not up: %v (stderr %s)", err, stderr.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if cn := serverCN(); cn != "first" {
		t.Fatalf("certificate %q, want first", cn)
	}
	writeSelfSigned(t, certFile, keyFile, "second")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for cn := serverCN(); cn != "second"; cn = serverCN() {
		if time.Now().After(deadline) {
			t.Fatalf("after SIGHUP the certificate is still %q", cn)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if st := <-done; st != 0 {
		t.Fatalf("exit status %d, stderr %s", st, stderr.String())
	}
}
