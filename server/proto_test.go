package server

import "testing"

// The parser's own tests (multibulk and inline framing, limits, protocol
// errors, resumption, ParseInt64) live in package resp and its testdata/.

func TestParsePeriod(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1000", 1_000_000_000, true},
		{"250ms", 250_000_000, true},
		{"1s", 1_000_000_000, true},
		{"2m", 120_000_000_000, true},
		{"1h", 3_600_000_000_000, true},
		{"1d", 86_400_000_000_000, true},
		{"1D", 86_400_000_000_000, true},
		{"0", 0, true},
		{"-5s", -5_000_000_000, true},
		{"s", 0, false},
		{"ms", 0, false},
		{"1w", 0, false},
		{"1.5s", 1_500_000_000, true},
		{"9223372036854775807s", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, ok := parsePeriod([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("parsePeriod(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
