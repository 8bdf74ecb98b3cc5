package readme

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/throttlekit/throttlekit-server/internal/testdeps"
	"github.com/throttlekit/throttlekit-server/internal/testserver"
)

var update = flag.Bool("update", false, "rewrite README.md from a fresh server")

// shownPort is the port the README shows; the test runs on a free one.
const shownPort = "6380"

// frozenAt is the instant (Unix ms, 2026-11-24T00:33:55.141Z) every
// transcript runs at: each server is started with DEBUG allowed to local
// clients and its clock frozen there before the first command, so that the
// times in the replies are the same on every run and no window rolls over
// between two commands however slowly they run.
const frozenAt = "1795480435141"

func TestReadmeTranscripts(t *testing.T) {
	cli := testdeps.Require(t, "redis-cli")[0]
	dir := testserver.Root(t)
	readmePath := filepath.Join(dir, "README.md")
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	blocks := findBlocks(string(readme))
	if len(blocks) == 0 {
		t.Fatal("README.md has no transcript blocks")
	}
	// Every source has its block and every block its source: a block
	// deleted from the README (or a source deleted) must not go unnoticed.
	sources, err := filepath.Glob(filepath.Join(dir, "docs", "transcripts", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	inReadme := map[string]int{}
	for _, b := range blocks {
		inReadme[b.name]++
	}
	for _, src := range sources {
		name := strings.TrimSuffix(filepath.Base(src), ".txt")
		if inReadme[name] == 0 {
			t.Errorf("docs/transcripts/%s.txt has no <!-- transcript %s --> block in README.md", name, name)
		}
		delete(inReadme, name)
	}
	for name := range inReadme {
		t.Errorf("README.md has a transcript block %q without docs/transcripts/%s.txt", name, name)
	}
	out := string(readme)
	for i := len(blocks) - 1; i >= 0; i-- { // from the end, so offsets stay valid
		b := blocks[i]
		src, err := os.ReadFile(filepath.Join(dir, "docs", "transcripts", b.name+".txt"))
		if err != nil {
			t.Fatalf("transcript %q: %v", b.name, err)
		}
		port := testserver.Start(t, append([]string{"--enable-debug-command", "local"}, serverArgs(dir, string(src))...)...).Port
		if out, err := exec.Command(cli, "-p", port, "DEBUG", "SET-CLOCK", frozenAt).CombinedOutput(); err != nil ||
			strings.TrimSpace(string(out)) != "OK" {
			t.Fatalf("transcript %q: DEBUG SET-CLOCK: %v %s", b.name, err, out)
		}
		got, err := render(cli, port, string(src))
		if err != nil {
			t.Fatalf("transcript %q: %v", b.name, err)
		}
		have := out[b.start:b.end]
		if *update {
			out = out[:b.start] + got + out[b.end:]
			continue
		}
		if have != got {
			t.Errorf("README transcript %q differs from a fresh server (run `go test ./internal/readme -update`):\n%s",
				b.name, diff(have, got))
		}
	}
	if *update {
		if err := os.WriteFile(readmePath, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// serverArgs returns the flags of a source's "server" lines, which start its
// server with more settings (--policies docs/transcripts/...); a path
// starting with docs/ is taken from the repository's root.
func serverArgs(root, src string) []string {
	var args []string
	for _, line := range strings.Split(src, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "server "); ok {
			for _, a := range strings.Fields(rest) {
				if strings.HasPrefix(a, "docs/") {
					a = filepath.Join(root, a)
				}
				args = append(args, a)
			}
		}
	}
	return args
}

type block struct {
	name       string
	start, end int // the text between the marker lines
}

var beginRe = regexp.MustCompile(`(?m)^<!-- transcript ([a-z0-9-]+) -->\n`)

const endMarker = "<!-- end transcript -->"

func findBlocks(s string) []block {
	var bs []block
	for _, m := range beginRe.FindAllStringSubmatchIndex(s, -1) {
		e := strings.Index(s[m[1]:], endMarker)
		if e < 0 {
			continue
		}
		bs = append(bs, block{name: s[m[2]:m[3]], start: m[1], end: m[1] + e})
	}
	return bs
}

// render runs a transcript source and returns its README text.
func render(cli, port, src string) (string, error) {
	var b strings.Builder
	style := "prompt"
	var flags []string
	var prev []string
	fence := false
	var piped []string // commands of a pipe ... end group
	inPipe := false
	sc := bufio.NewScanner(strings.NewReader(src))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case line == "pipe":
			inPipe, piped = true, nil
			continue
		case line == "end" && inPipe:
			inPipe = false
			text, err := runPiped(cli, port, flags, piped)
			if err != nil {
				return "", err
			}
			if !fence {
				b.WriteString("```\n")
				fence = true
			}
			shown := append([]string{"redis-cli"}, flags...)
			shown = append(shown, "-p", shownPort)
			b.WriteString("$ printf '" + strings.Join(piped, "\\n") + "\\n' | " + strings.Join(shown, " ") + "\n")
			b.WriteString(text + "\n")
			continue
		case inPipe:
			piped = append(piped, line)
			continue
		case strings.HasPrefix(line, "server "):
			continue // serverArgs
		case strings.HasPrefix(line, "style "):
			style = strings.TrimSpace(strings.TrimPrefix(line, "style "))
			continue
		case strings.HasPrefix(line, "flags"):
			flags = strings.Fields(strings.TrimPrefix(line, "flags"))
			continue
		}
		cmdText, notes, _ := strings.Cut(line, " | ")
		cmdText = substitute(cmdText, prev)
		args, err := splitWords(cmdText)
		if err != nil {
			return "", fmt.Errorf("%q: %v", line, err)
		}
		full := append(append([]string{"-p", port}, flags...), args...)
		out, err := exec.Command(cli, full...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("redis-cli %s: %v\n%s", strings.Join(full, " "), err, out)
		}
		text := strings.TrimRight(string(out), "\n")
		prev = strings.Split(text, "\n")
		if !fence {
			b.WriteString("```\n")
			fence = true
		}
		switch style {
		case "shell":
			shown := append([]string{"redis-cli"}, flags...)
			shown = append(shown, "-p", shownPort, cmdText)
			b.WriteString("$ " + strings.Join(shown, " ") + "\n")
		default:
			b.WriteString("127.0.0.1:" + shownPort + "> " + cmdText + "\n")
		}
		var ns []string
		if notes != "" {
			ns = strings.Split(notes, ",")
		}
		for i, l := range prev {
			if i < len(ns) && strings.TrimSpace(ns[i]) != "" {
				l = fmt.Sprintf("%-30s %s", l, strings.TrimSpace(ns[i]))
			}
			b.WriteString(l + "\n")
		}
	}
	if fence {
		b.WriteString("```\n")
	}
	return b.String(), sc.Err()
}

// runPiped sends commands to one redis-cli over its standard input, so that
// they share a connection (MULTI ... EXEC), and returns what it printed.
func runPiped(cli, port string, flags, cmds []string) (string, error) {
	args := append([]string{"-p", port}, flags...)
	c := exec.Command(cli, args...)
	c.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	out, err := c.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("redis-cli %s < %q: %v\n%s", strings.Join(args, " "), cmds, err, out)
	}
	return strings.TrimRight(string(out), "\n"), nil
}

var placeholder = regexp.MustCompile(`\{([0-9]+)\}`)
var (
	numberRe = regexp.MustCompile(`-?[0-9]+`)
	quotedRe = regexp.MustCompile(`"([^"]*)"`)
)

func substitute(s string, prev []string) string {
	return placeholder.ReplaceAllStringFunc(s, func(m string) string {
		n, _ := strconv.Atoi(m[1 : len(m)-1])
		if n < 1 || n > len(prev) {
			return m
		}
		if q := quotedRe.FindStringSubmatch(prev[n-1]); q != nil {
			return q[1]
		}
		nums := numberRe.FindAllString(prev[n-1], -1)
		if len(nums) == 0 {
			return m
		}
		return nums[len(nums)-1]
	})
}

// splitWords splits a command line as a shell would for plain words and
// single- or double-quoted strings.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unbalanced quotes")
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

func diff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var sb strings.Builder
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			fmt.Fprintf(&sb, "line %d:\n  README: %q\n  server: %q\n", i+1, x, y)
		}
	}
	return sb.String()
}
