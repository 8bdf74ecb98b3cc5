package resp

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestData runs the vectors in testdata/:
//
//	parse [maxargs=N] [maxbulk=N] [maxquery=N] [unauth]
//	"<Go-quoted request bytes>"   (lines are concatenated)
//	----
//	one line per command, then how the input ended
//
//	reply
//	<writer> <arguments>          (one per line)
//	----
//	the bytes each writer appends, in RESP2 and RESP3
//
// Every parse vector is also fed in every two-piece split and one byte at
// a time through a Pending, and must give the same output.
func TestData(t *testing.T) {
	for _, path := range []string{"testdata/parse", "testdata/reply"} {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "parse":
				return runParse(t, d)
			case "reply":
				return runReply(t, d)
			}
			d.Fatalf(t, "unknown directive %q", d.Cmd)
			return ""
		})
	}
}

func runParse(t *testing.T, d *datadriven.TestData) string {
	var lim Limits
	d.MaybeScanArgs(t, "maxargs", &lim.MaxArgs)
	d.MaybeScanArgs(t, "maxbulk", &lim.MaxBulkLen)
	d.MaybeScanArgs(t, "maxquery", &lim.MaxQueryBuffer)
	lim.Unauthenticated = d.HasArg("unauth")
	var in []byte
	for _, line := range strings.Split(d.Input, "\n") {
		if line == "" {
			continue
		}
		s, err := strconv.Unquote(line)
		if err != nil {
			d.Fatalf(t, "input line %s: %v", line, err)
		}
		in = append(in, s...)
	}
	whole := feed(in, lim, []int{len(in)})
	step := max(1, len(in)/512)
	for split := 1; split < len(in); split += step {
		if got := feed(in, lim, []int{split, len(in)}); got != whole {
			t.Fatalf("%s: split at %d:\n%s\nwhole:\n%s", d.Pos, split, got, whole)
		}
	}
	var bytewise []int
	for i := 1; i <= len(in); i++ {
		bytewise = append(bytewise, i)
	}
	if got := feed(in, lim, bytewise); got != whole {
		t.Fatalf("%s: byte by byte:\n%s\nwhole:\n%s", d.Pos, got, whole)
	}
	return whole
}

// feed delivers in to a Parser as it would arrive over a connection: the
// bytes up to each cut become available in turn, and every complete command
// is read as soon as it can be. It describes what came out.
func feed(in []byte, lim Limits, cuts []int) string {
	var (
		p     Parser
		pend  Pending
		out   strings.Builder
		start int // first byte of the current frame
	)
	for _, avail := range cuts {
		for start < avail {
			n, args, err := p.Next(in[start:avail], &pend, lim)
			if err != nil {
				fmt.Fprintf(&out, "error: %v\n", err)
				return out.String()
			}
			if n == 0 {
				break
			}
			describe(&out, n, args)
			start += n
		}
	}
	if start < len(in) {
		out.WriteString(incomplete(len(in)-start, pend.Need()))
	}
	return out.String()
}

// describe writes one line for a command of n bytes.
func describe(out io.Writer, n int, args [][]byte) {
	if len(args) == 0 {
		fmt.Fprintf(out, "empty n=%d\n", n)
		return
	}
	fmt.Fprintf(out, "command n=%d:", n)
	for _, a := range args {
		fmt.Fprintf(out, " %q", a)
	}
	fmt.Fprintln(out)
}

func incomplete(pending int, need int64) string {
	return fmt.Sprintf("incomplete: %d bytes, need >= %d\n", pending, need)
}

// tokens splits a writer line into words, Go-quoted strings taken whole.
func tokens(t *testing.T, d *datadriven.TestData, line string) []string {
	var out []string
	for {
		line = strings.TrimLeft(line, " ")
		if line == "" {
			return out
		}
		if line[0] == '"' {
			q, err := strconv.QuotedPrefix(line)
			if err != nil {
				d.Fatalf(t, "bad quoted string in %q: %v", line, err)
			}
			s, _ := strconv.Unquote(q)
			out = append(out, s)
			line = line[len(q):]
			continue
		}
		w, rest, _ := strings.Cut(line, " ")
		out = append(out, w)
		line = rest
	}
}

func runReply(t *testing.T, d *datadriven.TestData) string {
	var out strings.Builder
	for _, line := range strings.Split(d.Input, "\n") {
		if line == "" {
			continue
		}
		tok := tokens(t, d, line)
		atoi := func(i int) int64 {
			if len(tok) <= i {
				d.Fatalf(t, "%s: missing argument %d", line, i)
			}
			n, err := strconv.ParseInt(tok[i], 10, 64)
			if err != nil {
				d.Fatalf(t, "%s: %v", line, err)
			}
			return n
		}
		arg := func(i int) string {
			if len(tok) <= i {
				d.Fatalf(t, "%s: missing argument %d", line, i)
			}
			return tok[i]
		}
		fmt.Fprintf(&out, "%s\n", line)
		for _, resp3 := range []bool{false, true} {
			var b []byte
			switch tok[0] {
			case "ok":
				b = AppendOK(b)
			case "simple":
				b = AppendSimple(b, arg(1))
			case "error":
				b = AppendError(b, arg(1), arg(2))
			case "int":
				b = AppendInt(b, atoi(1))
			case "bulk":
				b = AppendBulk(b, []byte(arg(1)))
			case "bulkstring":
				b = AppendBulkString(b, arg(1))
			case "array":
				b = AppendArray(b, int(atoi(1)))
			case "null":
				b = AppendNull(b, resp3)
			case "nullarray":
				b = AppendNullArray(b, resp3)
			case "map":
				b = AppendMap(b, int(atoi(1)), resp3)
			case "set":
				b = AppendSet(b, int(atoi(1)), resp3)
			case "bool":
				b = AppendBool(b, arg(1) == "true", resp3)
			case "double":
				f, err := strconv.ParseFloat(arg(1), 64)
				if err != nil {
					d.Fatalf(t, "%s: %v", line, err)
				}
				b = AppendDouble(b, f, resp3)
			case "verbatim":
				b = AppendVerbatimString(b, arg(1), arg(2), resp3)
			case "protoerror":
				e := &Error{Code: ErrorCode(atoi(1))}
				if len(tok) > 2 {
					e.Byte = arg(2)[0]
				}
				b = e.AppendReply(b)
			default:
				d.Fatalf(t, "unknown writer %q", tok[0])
			}
			fmt.Fprintf(&out, "  resp%d: %q\n", map[bool]int{false: 2, true: 3}[resp3], b)
		}
	}
	return out.String()
}
