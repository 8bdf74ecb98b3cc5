package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUpstreamSettings(t *testing.T) {
	c, err := Load([]string{"--upstream", "redis-cluster://a:1,b:2", "--upstream-mode", "cached-deny",
		"--upstream-mode-prefix=hot:=leased,bill:=strict", "--upstream-fail", "open", "--upstream-batch", "20"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.UpstreamMode != "cached-deny" || c.UpstreamFail != "open" || c.UpstreamBatch != "20" {
		t.Fatalf("%+v", c)
	}
	p, m, err := ModePrefixes(c.UpstreamModePrefix)
	if err != nil || strings.Join(p, " ") != "hot: bill:" || strings.Join(m, " ") != "leased strict" {
		t.Fatalf("prefixes %q %q %v", p, m, err)
	}
	for _, bad := range [][]string{
		{"--upstream-mode", "eventual"},
		{"--upstream-mode-prefix", "hot:"},
		{"--upstream-mode-prefix", "hot:=fast"},
		{"--upstream-batch", "0"},
		{"--upstream-batch", "many"},
	} {
		if _, err := Load(bad, nil, nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v, want an invalid configuration", bad, err)
		}
	}
}

func TestUpstreamModePrefixFile(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "t.conf")
	conf := "upstream redis://127.0.0.1:6379\nupstream-mode-prefix \"hot:\" leased\nupstream-mode-prefix 'a b' cached-deny\nupstream-mode-prefix plain strict\n"
	if err := os.WriteFile(f, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load([]string{"--config", f}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.UpstreamModePrefix != "hot:=leased,a b=cached-deny,plain=strict" {
		t.Fatalf("upstream-mode-prefix %q", c.UpstreamModePrefix)
	}
	if err := os.WriteFile(f, []byte("upstream-mode-prefix \"hot:\" turbo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load([]string{"--config", f}, nil, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad mode in file: %v", err)
	}
}
