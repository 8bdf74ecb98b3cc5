package throttlekit

import (
	"errors"
	"testing"
	"time"
)

// Decoding vectors: the replies of the admission commands as go-redis
// hands them over in RESP2 (arrays) and RESP3 (maps), and malformed ones.

func TestMultiDecisionOf(t *testing.T) {
	d5 := func(a, rem, retry int64) []any { return []any{a, int64(10), rem, int64(1000), retry} }
	m5 := func(a, rem, retry int64) map[any]any {
		return map[any]any{"allowed": a, "limit": int64(10), "remaining": rem, "reset_at_ms": int64(1000), "retry_after_ms": retry}
	}
	for _, tc := range []struct {
		name    string
		reply   any
		allowed bool
		retry   time.Duration
		n       int
		bad     bool
	}{
		{"resp2 allowed", []any{int64(1), d5(1, 9, 0), d5(1, 4, 0)}, true, 0, 2, false},
		{"resp2 denied", []any{int64(0), d5(1, 9, 0), d5(0, 0, 250), d5(0, 0, 700)}, false, 700 * time.Millisecond, 3, false},
		{"resp2 never", []any{int64(0), d5(0, 0, 900), d5(0, 0, -1), d5(0, 0, 5000)}, false, -1, 3, false},
		{"resp3 denied", map[any]any{"allowed": int64(0), "retry_after_ms": int64(42), "decisions": []any{m5(0, 0, 42)}}, false, 42 * time.Millisecond, 1, false},
		{"resp3 allowed", map[any]any{"allowed": int64(1), "retry_after_ms": int64(0), "decisions": []any{m5(1, 3, 0)}}, true, 0, 1, false},
		{"short array", []any{int64(1)}, false, 0, 0, true},
		{"allowed not int", []any{"1", d5(1, 9, 0)}, false, 0, 0, true},
		{"decision not five", []any{int64(1), []any{int64(1)}}, false, 0, 0, true},
		{"map without decisions", map[any]any{"allowed": int64(1), "retry_after_ms": int64(0)}, false, 0, 0, true},
		{"map without retry", map[any]any{"allowed": int64(1), "decisions": []any{}}, false, 0, 0, true},
		{"string", "OK", false, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md, err := multiDecisionOf(tc.reply)
			if tc.bad {
				if !errors.Is(err, ErrUnexpectedReply) {
					t.Fatalf("got %+v, %v; want ErrUnexpectedReply", md, err)
				}
				return
			}
			if err != nil || md.Allowed != tc.allowed || md.RetryAfter != tc.retry || len(md.Decisions) != tc.n {
				t.Fatalf("got %+v, %v", md, err)
			}
		})
	}
}

func TestReservationOf(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply any
		id    string
		bad   bool
	}{
		{"resp2 admitted", []any{int64(1), int64(10), int64(2), int64(5), int64(0), "7.1.10.60000000000"}, "7.1.10.60000000000", false},
		{"resp2 denied", []any{int64(0), int64(10), int64(2), int64(5), int64(30), nil}, "", false},
		{"resp3 admitted", map[any]any{"allowed": int64(1), "limit": int64(10), "remaining": int64(2), "reset_at_ms": int64(5), "retry_after_ms": int64(0), "id": "9.1.10.1"}, "9.1.10.1", false},
		{"resp3 denied", map[any]any{"allowed": int64(0), "limit": int64(10), "remaining": int64(2), "reset_at_ms": int64(5), "retry_after_ms": int64(3), "id": nil}, "", false},
		{"five elements", []any{int64(1), int64(10), int64(2), int64(5), int64(0)}, "", true},
		{"id not a string", []any{int64(1), int64(10), int64(2), int64(5), int64(0), int64(7)}, "", true},
		{"integer", int64(1), "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := reservationOf(tc.reply)
			if tc.bad {
				if !errors.Is(err, ErrUnexpectedReply) {
					t.Fatalf("got %+v, %v; want ErrUnexpectedReply", r, err)
				}
				return
			}
			if err != nil || r.ID != tc.id || r.Limit != 10 || r.Remaining != 2 {
				t.Fatalf("got %+v, %v", r, err)
			}
		})
	}
}

func TestSlotOf(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply any
		want  Slot
		bad   bool
	}{
		{"resp2 acquired", []any{int64(1), int64(4), int64(2), "1.77", int64(0)}, Slot{true, 4, 2, "1.77", 0}, false},
		{"resp2 full", []any{int64(0), int64(4), int64(4), nil, int64(1500)}, Slot{false, 4, 4, "", 1500 * time.Millisecond}, false},
		{"resp3 acquired", map[any]any{"acquired": int64(1), "limit": int64(4), "in_flight": int64(1), "token": "0.5", "retry_after_ms": int64(0)}, Slot{true, 4, 1, "0.5", 0}, false},
		{"resp3 full", map[any]any{"acquired": int64(0), "limit": int64(1), "in_flight": int64(1), "token": nil, "retry_after_ms": int64(9)}, Slot{false, 1, 1, "", 9 * time.Millisecond}, false},
		{"missing field", map[any]any{"acquired": int64(1), "limit": int64(4), "token": "0.5", "retry_after_ms": int64(0)}, Slot{}, true},
		{"token not a string", []any{int64(1), int64(4), int64(2), int64(3), int64(0)}, Slot{}, true},
		{"four elements", []any{int64(1), int64(4), int64(2), "1.77"}, Slot{}, true},
		{"nil", nil, Slot{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := slotOf(tc.reply)
			if tc.bad {
				if !errors.Is(err, ErrUnexpectedReply) {
					t.Fatalf("got %+v, %v; want ErrUnexpectedReply", s, err)
				}
				return
			}
			if err != nil || s != tc.want {
				t.Fatalf("got %+v, %v; want %+v", s, err, tc.want)
			}
		})
	}
}

// replyFrom builds a reply value from fuzz bytes, in the shapes go-redis
// hands a decoder: integers, strings, nil, arrays, maps keyed by the
// admission commands' field names, and RESP3's booleans and doubles,
// nested. A byte's low three bits choose the kind and its high five bits a
// number n:
//
//	0  an integer of the next n%9 bytes, big-endian, sign-extended
//	1  a string of the next n bytes
//	2  nil
//	3  an array of n%8 values
//	4  a map of n%8 entries, each a byte naming the key (replyNames) and a value
//	5  the boolean n odd
//	6  the double n
//	7  the integer n
//
// Arrays and maps deeper than 3 levels are the integer n. encodeReply is
// the inverse, for the seed corpus.
func replyFrom(b []byte, depth int) (any, []byte) {
	if len(b) == 0 {
		return nil, b
	}
	op, b := b[0], b[1:]
	n := int(op >> 3)
	switch op & 7 {
	case 0:
		k := min(n%9, len(b))
		var u uint64
		for _, c := range b[:k] {
			u = u<<8 | uint64(c)
		}
		v := int64(u)
		if k > 0 && k < 8 {
			shift := 64 - 8*k
			v = int64(u<<shift) >> shift
		}
		return v, b[k:]
	case 1:
		k := min(n, len(b))
		return string(b[:k]), b[k:]
	case 2:
		return nil, b
	case 3:
		if depth > 3 {
			return int64(n), b
		}
		arr := make([]any, 0, n%8)
		for i := 0; i < n%8; i++ {
			var v any
			v, b = replyFrom(b, depth+1)
			arr = append(arr, v)
		}
		return arr, b
	case 4:
		if depth > 3 {
			return int64(n), b
		}
		m := make(map[any]any, n%8)
		for i := 0; i < n%8 && len(b) > 0; i++ {
			k := replyNames[int(b[0])%len(replyNames)]
			var v any
			v, b = replyFrom(b[1:], depth+1)
			m[k] = v
		}
		return m, b
	case 5:
		return n%2 == 1, b
	case 6:
		return float64(n), b
	default:
		return int64(n), b
	}
}

// replyNames are the map keys replyFrom can make.
var replyNames = []string{"allowed", "limit", "remaining", "reset_at_ms", "retry_after_ms", "decisions", "id", "acquired", "in_flight", "token"}

// FuzzAdmissionReplies checks that no reply shape makes a decoder panic
// and that every rejection is ErrUnexpectedReply. Its seeds are the files
// of testdata/fuzz/FuzzAdmissionReplies, written from admissionSeeds
// (TestAdmissionSeedCorpus).
func FuzzAdmissionReplies(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		v, _ := replyFrom(b, 0)
		for _, dec := range admissionDecoders {
			if err := dec.decode(v); err != nil && !errors.Is(err, ErrUnexpectedReply) {
				t.Fatalf("%s(%#v): %v", dec.name, v, err)
			}
		}
	})
}

// admissionDecoders are the decoders FuzzAdmissionReplies feeds.
var admissionDecoders = []struct {
	name   string
	decode func(any) error
}{
	{"multiDecisionOf", func(v any) error { _, err := multiDecisionOf(v); return err }},
	{"reservationOf", func(v any) error { _, err := reservationOf(v); return err }},
	{"slotOf", func(v any) error { _, err := slotOf(v); return err }},
	{"boolOf", func(v any) error { _, err := boolOf(v); return err }},
	{"durationOf", func(v any) error { _, err := durationOf(v); return err }},
}
