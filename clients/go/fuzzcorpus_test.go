package throttlekit

import (
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz/FuzzAdmissionReplies from admissionSeeds")

// admissionSeeds are the seed corpus of FuzzAdmissionReplies: every reply
// shape of MCHECK, RESERVE, ACQUIRE and the integer replies, in RESP2
// (arrays) and RESP3 (maps), and malformed ones. Each is written to
// testdata/fuzz/FuzzAdmissionReplies/<name> by go test -run
// TestAdmissionSeedCorpus -update-corpus.
var admissionSeeds = []struct {
	name  string
	reply any
}{
	// THROTTLE.MCHECK
	{"mcheck-resp2-allowed", []any{int64(1), seedDecision(1, 9, 0), seedDecision(1, 4, 0)}},
	{"mcheck-resp2-denied", []any{int64(0), seedDecision(1, 9, 0), seedDecision(0, 0, 250), seedDecision(0, 0, 700)}},
	{"mcheck-resp2-never", []any{int64(0), seedDecision(0, 0, 900), seedDecision(0, 0, -1)}},
	{"mcheck-resp3-allowed", map[any]any{"allowed": int64(1), "retry_after_ms": int64(0), "decisions": []any{seedDecisionMap(1, 3, 0), seedDecisionMap(1, 7, 0)}}},
	{"mcheck-resp3-denied", map[any]any{"allowed": int64(0), "retry_after_ms": int64(42), "decisions": []any{seedDecisionMap(0, 0, 42)}}},
	{"mcheck-short-array", []any{int64(1)}},
	{"mcheck-decision-of-four", []any{int64(1), []any{int64(1), int64(10), int64(9), int64(1000)}}},
	{"mcheck-allowed-a-string", []any{"1", seedDecision(1, 9, 0)}},
	{"mcheck-resp3-no-decisions", map[any]any{"allowed": int64(1), "retry_after_ms": int64(0)}},
	{"mcheck-resp3-decision-array", map[any]any{"allowed": int64(1), "retry_after_ms": int64(0), "decisions": []any{seedDecision(1, 9, 0)}}},
	{"mcheck-double", []any{int64(1), []any{int64(1), int64(10), float64(9), int64(1000), int64(0)}}},

	// THROTTLE.RESERVE
	{"reserve-resp2-admitted", []any{int64(1), int64(10), int64(2), int64(5), int64(0), "7.1.10.60000000000"}},
	{"reserve-resp2-denied", []any{int64(0), int64(10), int64(2), int64(5), int64(30), nil}},
	{"reserve-resp3-admitted", map[any]any{"allowed": int64(1), "limit": int64(10), "remaining": int64(2), "reset_at_ms": int64(5), "retry_after_ms": int64(0), "id": "9.1.10.1"}},
	{"reserve-resp3-denied", map[any]any{"allowed": int64(0), "limit": int64(10), "remaining": int64(2), "reset_at_ms": int64(5), "retry_after_ms": int64(3), "id": nil}},
	{"reserve-five", []any{int64(1), int64(10), int64(2), int64(5), int64(0)}},
	{"reserve-id-an-integer", []any{int64(1), int64(10), int64(2), int64(5), int64(0), int64(7)}},

	// THROTTLE.ACQUIRE
	{"acquire-resp2-acquired", []any{int64(1), int64(4), int64(2), "1.77", int64(0)}},
	{"acquire-resp2-full", []any{int64(0), int64(4), int64(4), nil, int64(1500)}},
	{"acquire-resp3-acquired", map[any]any{"acquired": int64(1), "limit": int64(4), "in_flight": int64(1), "token": "0.5", "retry_after_ms": int64(0)}},
	{"acquire-resp3-full", map[any]any{"acquired": int64(0), "limit": int64(1), "in_flight": int64(1), "token": nil, "retry_after_ms": int64(9)}},
	{"acquire-resp3-no-in-flight", map[any]any{"acquired": int64(1), "limit": int64(4), "token": "0.5", "retry_after_ms": int64(0)}},
	{"acquire-resp3-boolean", map[any]any{"acquired": true, "limit": int64(4), "in_flight": int64(1), "token": "0.5", "retry_after_ms": int64(0)}},

	// Integer replies: SETTLE, RELEASE, REFRESH, UNBAN (booleans) and
	// BANNED (a duration).
	{"int-one", int64(1)},
	{"int-zero", int64(0)},
	{"int-minus-one", int64(-1)},
	{"int-ms", int64(86_400_000)},
	{"int-max", int64(math.MaxInt64)},
	{"int-min", int64(math.MinInt64)},
	{"resp3-true", true},
	{"double", float64(3)},
	{"status", "OK"},
	{"nil", nil},
	{"nested", []any{[]any{[]any{[]any{int64(1)}}}}},
}

func seedDecision(allowed, remaining, retry int64) []any {
	return []any{allowed, int64(10), remaining, int64(1000), retry}
}

func seedDecisionMap(allowed, remaining, retry int64) map[any]any {
	return map[any]any{"allowed": allowed, "limit": int64(10), "remaining": remaining, "reset_at_ms": int64(1000), "retry_after_ms": retry}
}

// encodeReply is the inverse of replyFrom: the bytes it decodes to v.
func encodeReply(v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return []byte{2}, nil
	case bool:
		if x {
			return []byte{5 | 1<<3}, nil
		}
		return []byte{5}, nil
	case float64:
		if x != math.Trunc(x) || x < 0 || x > 31 {
			return nil, fmt.Errorf("double %v: only whole 0..31", x)
		}
		return []byte{6 | byte(x)<<3}, nil
	case int64:
		if x >= 0 && x < 32 {
			return []byte{7 | byte(x)<<3}, nil
		}
		for k := 1; k <= 8; k++ { // the fewest bytes that sign-extend to x
			shift := 64 - 8*k
			if k == 8 || int64(uint64(x)<<shift)>>shift == x {
				out := []byte{byte(k) << 3}
				for i := k - 1; i >= 0; i-- {
					out = append(out, byte(uint64(x)>>(8*i)))
				}
				return out, nil
			}
		}
	case string:
		if len(x) > 31 {
			return nil, fmt.Errorf("string %q: longer than 31 bytes", x)
		}
		return append([]byte{1 | byte(len(x))<<3}, x...), nil
	case []any:
		if len(x) > 7 {
			return nil, fmt.Errorf("array of %d: more than 7", len(x))
		}
		out := []byte{3 | byte(len(x))<<3}
		for _, e := range x {
			b, err := encodeReply(e)
			if err != nil {
				return nil, err
			}
			out = append(out, b...)
		}
		return out, nil
	case map[any]any:
		if len(x) > 7 {
			return nil, fmt.Errorf("map of %d: more than 7", len(x))
		}
		var idx []int
		for k := range x {
			i := slices.Index(replyNames, fmt.Sprint(k))
			if _, ok := k.(string); !ok || i < 0 {
				return nil, fmt.Errorf("map key %#v: not one of replyNames", k)
			}
			idx = append(idx, i)
		}
		slices.Sort(idx)
		out := []byte{4 | byte(len(x))<<3}
		for _, i := range idx {
			b, err := encodeReply(x[replyNames[i]])
			if err != nil {
				return nil, err
			}
			out = append(append(out, byte(i)), b...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%T: no encoding", v)
}

// corpusFile is a seed in the go test fuzz corpus format for a []byte
// argument.
func corpusFile(b []byte) string {
	return fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
}

// parseCorpusFile reads a corpus file of one []byte argument.
func parseCorpusFile(s string) ([]byte, error) {
	rest, ok := strings.CutPrefix(s, "go test fuzz v1\n")
	if !ok {
		return nil, errors.New("no go test fuzz v1 header")
	}
	rest = strings.TrimSpace(rest)
	lit, ok := strings.CutPrefix(rest, "[]byte(")
	if !ok || !strings.HasSuffix(lit, ")") {
		return nil, fmt.Errorf("not one []byte argument: %q", rest)
	}
	u, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
	return []byte(u), err
}

// TestAdmissionSeedCorpus: testdata/fuzz/FuzzAdmissionReplies holds every
// seed of admissionSeeds (written by -update-corpus), each decodes back to
// its reply, and the corpus reaches both sides of every decoder: each
// accepts some seed and rejects some seed.
func TestAdmissionSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzAdmissionReplies")
	if *updateCorpus {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, sd := range admissionSeeds {
		b, err := encodeReply(sd.reply)
		if err != nil {
			t.Fatalf("%s: %v", sd.name, err)
		}
		if v, rest := replyFrom(b, 0); !reflect.DeepEqual(v, sd.reply) || len(rest) != 0 {
			t.Fatalf("%s: %x decodes to %#v (%d bytes left), want %#v", sd.name, b, v, len(rest), sd.reply)
		}
		path := filepath.Join(dir, sd.name)
		if *updateCorpus {
			if err := os.WriteFile(path, []byte(corpusFile(b)), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test -run TestAdmissionSeedCorpus -update-corpus writes it)", err)
		}
		if string(got) != corpusFile(b) {
			t.Errorf("%s differs from its seed (go test -run TestAdmissionSeedCorpus -update-corpus rewrites it):\n%s\nwant\n%s", path, got, corpusFile(b))
		}
	}

	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	accepted, rejected := map[string]int{}, map[string]int{}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		b, err := parseCorpusFile(string(data))
		if err != nil {
			t.Fatalf("%s: %v", f.Name(), err)
		}
		v, _ := replyFrom(b, 0)
		for _, dec := range admissionDecoders {
			if dec.decode(v) == nil {
				accepted[dec.name]++
			} else {
				rejected[dec.name]++
			}
		}
	}
	for _, dec := range admissionDecoders {
		if accepted[dec.name] == 0 || rejected[dec.name] == 0 {
			t.Errorf("%s: the corpus has %d replies it accepts and %d it rejects, want some of each", dec.name, accepted[dec.name], rejected[dec.name])
		}
	}
}

// TestFuzzTargetsHaveCorpus: every fuzz target in this module has seed
// files in testdata/fuzz/<name> beside its test file, so go test runs
// them and go test -fuzz starts from them.
func TestFuzzTargetsHaveCorpus(t *testing.T) {
	fset := token.NewFileSet()
	var targets int
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			name := funcName(decl)
			if !strings.HasPrefix(name, "Fuzz") {
				continue
			}
			targets++
			dir := filepath.Join(filepath.Dir(path), "testdata", "fuzz", name)
			seeds, err := os.ReadDir(dir)
			if err != nil || len(seeds) == 0 {
				t.Errorf("%s (%s) has no seed corpus in %s", name, path, dir)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if targets < 2 {
		t.Fatalf("found %d fuzz targets, want at least FuzzAdmissionReplies and httplimit's FuzzClientIP", targets)
	}
}

func funcName(d ast.Decl) string {
	if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
		return fd.Name.Name
	}
	return ""
}
