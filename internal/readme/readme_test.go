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
	out := string(readme)
	for i := len(blocks) - 1; i >= 0; i-- { // from the end, so offsets stay valid
		b := blocks[i]
		src, err := os.ReadFile(filepath.Join(dir, "docs", "transcripts", b.name+".txt"))
		if err != nil {
			t.Fatalf("transcript %q: %v", b.name, err)
		}
		port := testserver.Start(t).Port
		got, err := render(cli, port, string(src))
		if err != nil {
			t.Fatalf("transcript %q: %v", b.name, err)
		}
		have := out[b.start:b.end]
		if *update {
			out = out[:b.start] + got + out[b.end:]
			continue
		}
		if mask(have) != mask(got) {
			t.Errorf("README transcript %q differs from a fresh server (run `go test ./internal/readme -update`):\n%s",
				b.name, diff(mask(have), mask(got)))
		}
	}
	if *update {
		if err := os.WriteFile(readmePath, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
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

var (
	epochRe    = regexp.MustCompile(`\b[0-9]{13,}\b`)
	decisionRe = regexp.MustCompile(`(?m)^((?:\s*(?:[0-9]+\) )*[45]\) \(integer\) )|(?:reset_at_ms |retry_after_ms )|(?:[0-9]+# "(?:reset_at_ms|retry_after_ms)" => \(integer\) ))-?[0-9]+`)
	idRe       = regexp.MustCompile(`("id" => \(integer\) |^id\n)[0-9]+`)
	cmdRe      = regexp.MustCompile(`^(?:127\.0\.0\.1:[0-9]+> |\$ redis-cli .*-p [0-9]+ |\$ printf '(?:[A-Z]+\\n)*)(\S+)`)
)

// timedCommands reply with a time left, which differs on every run.
var timedCommands = map[string]bool{"TTL": true, "PTTL": true, "THROTTLE.BANNED": true}

// mask replaces what legitimately differs between runs with a marker.
func mask(s string) string {
	lines := strings.Split(s, "\n")
	throttle, timed := false, false
	for i, l := range lines {
		if m := cmdRe.FindStringSubmatch(l); m != nil {
			up := strings.ToUpper(m[1])
			throttle = strings.HasPrefix(up, "THROTTLE.")
			timed = timedCommands[up]
			lines[i] = epochRe.ReplaceAllString(l, "<time>")
			continue
		}
		l = epochRe.ReplaceAllString(l, "<time>")
		if throttle {
			l = decisionRe.ReplaceAllString(l, "${1}<time>")
		}
		if timed {
			l = numberRe.ReplaceAllString(l, "<time>")
		}
		l = idRe.ReplaceAllString(l, "${1}<id>")
		lines[i] = l
	}
	return strings.Join(lines, "\n")
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

// The masks hide times and ids and nothing else.
func TestMask(t *testing.T) {
	a := "127.0.0.1:6380> THROTTLE.CHECK k 3 1m\n1) (integer) 1\n2) (integer) 3\n3) (integer) 2\n4) (integer) 1795391015064\n5) (integer) 19992\n"
	b := "127.0.0.1:6380> THROTTLE.CHECK k 3 1m\n1) (integer) 1\n2) (integer) 3\n3) (integer) 2\n4) (integer) 1795391015999\n5) (integer) 19990\n"
	if mask(a) != mask(b) {
		t.Fatalf("times not masked:\n%s\n%s", mask(a), mask(b))
	}
	c := strings.Replace(b, "3) (integer) 2", "3) (integer) 1", 1)
	if mask(a) == mask(c) {
		t.Fatal("a changed remaining count was masked")
	}
	cell := "127.0.0.1:6380> CL.THROTTLE u 15 30 60 1\n1) (integer) 0\n2) (integer) 16\n3) (integer) 15\n4) (integer) -1\n5) (integer) 2\n"
	if mask(cell) == mask(strings.Replace(cell, "5) (integer) 2", "5) (integer) 4", 1)) {
		t.Fatal("CL.THROTTLE's reset_after is not a masked time")
	}
}
