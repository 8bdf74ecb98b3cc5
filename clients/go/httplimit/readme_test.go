package httplimit_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEGoBlocksCompile: the Go code blocks of the repository's
// README.md (```go fences) type-check and pass go vet against this module,
// so the examples there cannot rot. A block that is a whole program
// (package main) is checked as it stands; a fragment is placed in the body
// of a func(ctx context.Context) error, with the imports of the packages
// it names (readmeImports). The README must keep a block that uses this
// package, the net/http example.
//
// The blocks are checked in a temporary module that requires this one
// through a replace directive, offline (GOPROXY=off, GOFLAGS=-mod=mod):
// everything it needs is in the module cache already, since this test
// binary was built from it.
func TestREADMEGoBlocksCompile(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(string(readme))
	usesHTTPLimit := false
	for _, b := range blocks {
		usesHTTPLimit = usesHTTPLimit || strings.Contains(b.src, "httplimit.Handler(")
	}
	if !usesHTTPLimit {
		t.Fatalf("README.md has %d ```go blocks, none calls httplimit.Handler: the net/http example is gone (or this test needs updating)", len(blocks))
	}

	modRoot, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(modRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go \S+$`).Find(gomod)
	if goLine == nil {
		t.Fatal("no go line in ../go.mod")
	}
	gosum, err := os.ReadFile(filepath.Join(modRoot, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", fmt.Sprintf("module readme.example\n\n%s\n\nrequire %s v0.0.0\n\nreplace %s => %s\n",
		goLine, modulePath, modulePath, modRoot))
	write("go.sum", string(gosum))
	for i, b := range blocks {
		write(fmt.Sprintf("block%02d/main.go", i), b.program())
	}

	cmd := exec.Command("go", "vet", "./...")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off", "GOWORK=off", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	if err != nil {
		var desc bytes.Buffer
		for i, b := range blocks {
			fmt.Fprintf(&desc, "block%02d: README.md line %d\n", i, b.line)
		}
		t.Fatalf("go vet of the README's Go blocks: %v\n%s\n%s", err, out, desc.String())
	}
	t.Logf("%d Go blocks of README.md type-check and pass go vet", len(blocks))
}

const modulePath = "github.com/throttlekit/throttlekit-server/clients/go"

// readmeBlock is one ```go block of the README.
type readmeBlock struct {
	line int // of its first line of code
	src  string
}

// goBlocks returns the ```go fenced blocks of a Markdown text.
func goBlocks(md string) []readmeBlock {
	var (
		blocks []readmeBlock
		cur    *readmeBlock
		lines  []string
	)
	for i, l := range strings.Split(md, "\n") {
		switch {
		case cur == nil && strings.TrimSpace(l) == "```go":
			cur = &readmeBlock{line: i + 2}
			lines = lines[:0]
		case cur != nil && strings.TrimSpace(l) == "```":
			cur.src = strings.Join(lines, "\n") + "\n"
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			lines = append(lines, l)
		}
	}
	return blocks
}

// readmeImports are the packages a fragment may name, by the name it uses.
var readmeImports = map[string]string{
	"context":     "context",
	"errors":      "errors",
	"fmt":         "fmt",
	"http":        "net/http",
	"log":         "log",
	"strings":     "strings",
	"time":        "time",
	"redis":       "github.com/redis/go-redis/v9",
	"throttlekit": modulePath,
	"httplimit":   modulePath + "/httplimit",
}

// program returns the block as a Go file of package main.
func (b readmeBlock) program() string {
	// A line directive makes the compiler's messages name README.md lines.
	at := fmt.Sprintf("//line README.md:%d\n", b.line)
	if strings.HasPrefix(strings.TrimSpace(b.src), "package ") {
		return at + b.src
	}
	var imports []string
	for name, path := range readmeImports {
		if name != "context" && regexp.MustCompile(`\b`+name+`\.`).MatchString(b.src) {
			imports = append(imports, fmt.Sprintf("\t%s %q\n", name, path))
		}
	}
	return fmt.Sprintf("package main\n\nimport (\n\t\"context\"\n%s)\n\nfunc fragment(ctx context.Context) error {\n\t_ = ctx\n%s%s\treturn nil\n}\n\nfunc main() { _ = fragment(context.Background()) }\n",
		strings.Join(imports, ""), at, b.src)
}
