package server

// Data-driven command tests: each file in testdata/commands/ is a script of
// commands and the exact replies expected, one file per command family.
//
// Directives:
//
//	server [requirepass=<password>] [configget] [debug=no|yes|local] [addr=<ip:port>] [policies=<path>]
//	    a fresh server and connection (each file starts with one);
//	    configget wires a CONFIG GET hook with three settings; debug sets
//	    enable-debug-command, and the server's clock (which DEBUG moves)
//	    then follows the run lines' at=; addr is the client's address;
//	    policies loads a policy file or directory (relative to testdata/)
//	    for POLICY and THROTTLE.POLICIES.
//	run [proto=2|3] [at=<ms>] [mask]
//	    sends each input line as one command, at the clock reading <ms>
//	    milliseconds after 2023-11-14T22:14:00Z (default 0), in the given
//	    protocol (default 2, switched before the first line; HELLO inside
//	    the block switches too); on a debug server, at the server's clock
//	    read before each line, which follows <ms> until DEBUG moves it.
//	    The output is the replies' bytes with "\r\n" shown as a newline;
//	    mask turns every run of digits into N, for replies with times or
//	    ids that are not the injected clock's.
//
// An input line is split at spaces; a word in double quotes is a Go string
// literal, so "a b" and "\r\n" are one argument. Update the expected output
// after a deliberate change with: go test ./server -run TestDataDriven -rewrite

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/cockroachdb/datadriven"
	"github.com/tidwall/match"

	"github.com/throttlekit/throttlekit-server/policy"
)

// ddEpochMs is the data-driven tests' clock origin: a whole minute, in ms.
const ddEpochMs = int64(1_700_000_040_000)

var ddDigits = regexp.MustCompile(`[0-9]+`)

func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/commands", func(t *testing.T, path string) {
		var src int64 // the clock a debug server follows: the run line's at=, in Unix ns
		debug := false
		tl := newDDLoop(t, "", false, nil)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "server":
				var pass, dbg, addr, pol string
				if d.HasArg("requirepass") {
					d.ScanArgs(t, "requirepass", &pass)
				}
				if d.HasArg("debug") {
					d.ScanArgs(t, "debug", &dbg)
				}
				debug = dbg != "" && dbg != "no"
				if d.HasArg("policies") {
					d.ScanArgs(t, "policies", &pol)
				}
				tl = newDDLoop(t, pass, d.HasArg("configget"), func(c *Config) {
					if pol != "" {
						st, err := policy.Open(filepath.Join("testdata", pol), policy.StoreOptions{})
						if err != nil {
							d.Fatalf(t, "%v", err)
						}
						c.Policies = st
					}
					if dbg == "" {
						return
					}
					mode, err := ParseDebugCommand(dbg)
					if err != nil {
						d.Fatalf(t, "%v", err)
					}
					c.EnableDebugCommand = mode
					c.Clock = func() int64 { return src }
				})
				if d.HasArg("addr") {
					d.ScanArgs(t, "addr", &addr)
					tl.cl.addr = addr
				}
				return ""
			case "run":
				proto, at := 2, int64(0)
				if d.HasArg("proto") {
					d.ScanArgs(t, "proto", &proto)
				}
				if d.HasArg("at") {
					d.ScanArgs(t, "at", &at)
				}
				tl.cl.resp3 = proto == 3
				now := (ddEpochMs + at) * 1_000_000
				src = now
				var out strings.Builder
				for _, line := range strings.Split(d.Input, "\n") {
					if strings.TrimSpace(line) == "" {
						continue
					}
					args, err := splitDDLine(line)
					if err != nil {
						d.Fatalf(t, "%s: %v", line, err)
					}
					if debug {
						now = tl.srv.now()
					}
					tl.l.process(tl.cl, []byte(cmd(args...)), now)
					out.WriteString(strings.ReplaceAll(tl.take(), "\r\n", "\n"))
				}
				s := out.String()
				if d.HasArg("mask") {
					s = ddDigits.ReplaceAllString(s, "N")
				}
				return s
			}
			d.Fatalf(t, "unknown directive %q", d.Cmd)
			return ""
		})
	})
}

// newDDLoop is a test loop whose client is registered with the server, so
// that CLIENT LIST sees it.
func newDDLoop(t *testing.T, pass string, configGet bool, mutate func(*Config)) *testLoop {
	tl := newTestLoop(t, func(c *Config) {
		if mutate != nil {
			mutate(c)
		}
		c.RequirePass = pass
		if configGet {
			settings := [][2]string{{"maxclients", "10000"}, {"timeout", "0"}, {"proto-max-bulk-len", "1048576"}}
			c.ConfigGet = func(pattern string) [][2]string {
				var out [][2]string
				for _, kv := range settings {
					if match.Match(kv[0], strings.ToLower(pattern)) {
						out = append(out, kv)
					}
				}
				return out
			}
		}
	})
	tl.srv.clients[tl.cl.id] = tl.cl
	tl.srv.loops = append(tl.srv.loops, tl.l) // so that Stats and INFO see its counters
	return tl
}

// splitDDLine splits a script line into arguments: words separated by
// spaces, or Go string literals in double quotes.
func splitDDLine(line string) ([]string, error) {
	var args []string
	for s := strings.TrimLeftFunc(line, unicode.IsSpace); s != ""; s = strings.TrimLeftFunc(s, unicode.IsSpace) {
		if s[0] == '"' {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return nil, err
			}
			a, _ := strconv.Unquote(q)
			args = append(args, a)
			s = s[len(q):]
			continue
		}
		end := strings.IndexFunc(s, unicode.IsSpace)
		if end < 0 {
			end = len(s)
		}
		args = append(args, s[:end])
		s = s[end:]
	}
	return args, nil
}
