package server_test

import (
	"strings"
	"testing"

	"github.com/throttlekit/throttlekit-server/server"
	"github.com/throttlekit/throttlekit-server/shard"
)

// TestNewChecksConnectionSettings: New refuses a query buffer that cannot
// hold one bulk of ProtoMaxBulkLen with its headers, and bad TLS settings,
// with an error that names the problem.
func TestNewChecksConnectionSettings(t *testing.T) {
	p := newTestPKI(t)
	okTLS := server.TLSConfig{Addr: "127.0.0.1:0", CertFile: p.certFile, KeyFile: p.keyFile, CAFile: p.caFile}
	tests := []struct {
		name   string
		mutate func(*server.Config)
		want   string // "" = accepted
	}{
		{"defaults", func(*server.Config) {}, ""},
		{"bulk at the default fits the default buffer", func(c *server.Config) { c.ProtoMaxBulkLen = server.DefaultProtoMaxBulkLen }, ""},
		{"larger bulk raises the default buffer", func(c *server.Config) { c.ProtoMaxBulkLen = 512 << 20 }, ""},
		{"buffer exactly bulk plus headers", func(c *server.Config) {
			c.ProtoMaxBulkLen = 1 << 20
			c.QueryBufferLimit = 1<<20 + server.QueryHeaderRoom
		}, ""},
		{"buffer below bulk plus headers", func(c *server.Config) {
			c.ProtoMaxBulkLen = 1 << 20
			c.QueryBufferLimit = 1<<20 + server.QueryHeaderRoom - 1
		}, "cannot hold a bulk"},
		{"tls", func(c *server.Config) { c.TLS = okTLS }, ""},
		{"tls without a key", func(c *server.Config) { c.TLS = okTLS; c.TLS.KeyFile = "" }, "certificate file and a key file"},
		{"tls auth without a CA", func(c *server.Config) { c.TLS = okTLS; c.TLS.CAFile = "" }, "needs a CA"},
		{"tls no auth without a CA", func(c *server.Config) { c.TLS = okTLS; c.TLS.CAFile = ""; c.TLS.Auth = server.TLSAuthNone }, ""},
		{"tls missing cert file", func(c *server.Config) { c.TLS = okTLS; c.TLS.CertFile = p.dir + "/nope.crt" }, "TLS certificate"},
		{"tls bad protocol", func(c *server.Config) { c.TLS = okTLS; c.TLS.Protocols = "TLSv1.2 SSLv3" }, "unknown TLS protocol"},
		{"tls bad address", func(c *server.Config) { c.TLS = okTLS; c.TLS.Addr = "nope" }, "bad TLS address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := server.Config{Addr: "127.0.0.1:0"}
			tt.mutate(&cfg)
			_, err := server.New(cfg, shard.New(shard.Config{}))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("New = %v, want accepted", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("New = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestParseTLS(t *testing.T) {
	for _, tt := range []struct {
		in     string
		lo, hi uint16
		ok     bool
	}{
		{"", 0x0303, 0x0304, true},
		{"TLSv1.2 TLSv1.3", 0x0303, 0x0304, true},
		{"tlsv1.3", 0x0304, 0x0304, true},
		{"TLSv1 TLSv1.1", 0x0301, 0x0302, true},
		{"TLSv1.4", 0, 0, false},
	} {
		lo, hi, err := server.ParseTLSProtocols(tt.in)
		if (err == nil) != tt.ok || lo != tt.lo || hi != tt.hi {
			t.Errorf("ParseTLSProtocols(%q) = %#x, %#x, %v", tt.in, lo, hi, err)
		}
	}
	for in, want := range map[string]server.TLSAuth{"yes": server.TLSAuthRequire, "OPTIONAL": server.TLSAuthOptional, "no": server.TLSAuthNone} {
		if got, err := server.ParseTLSAuth(in); err != nil || got != want {
			t.Errorf("ParseTLSAuth(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := server.ParseTLSAuth("maybe"); err == nil {
		t.Errorf("ParseTLSAuth(maybe) accepted")
	}
}
