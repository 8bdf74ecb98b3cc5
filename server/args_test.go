package server

import (
	"strings"
	"testing"
	"time"
)

func TestParsePeriodDurations(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1500", 1_500_000_000, true},
		{"-1", -1_000_000, true},
		{"1h30m", 5_400_000_000_000, true},
		{"1m30s", 90_000_000_000, true},
		{"1.5s", 1_500_000_000, true},
		{"0.5ms", 500_000, true},
		{".5s", 500_000_000, true},
		{"1.s", 1_000_000_000, true},
		{"2D", 172_800_000_000_000, true},
		{"1d12h", 129_600_000_000_000, true},
		{"100us", 100_000, true},
		{"7ns", 7, true},
		{"1h1h", 7_200_000_000_000, true},
		{"1.000000000001s", 1_000_000_000, true},
		{"-1.5s", -1_500_000_000, true},
		{"1.5", 0, false},
		{"s", 0, false},
		{".s", 0, false},
		{"1x", 0, false},
		{"1 s", 0, false},
		{"1s ", 0, false},
		{"1s-1s", 0, false},
		{"--1s", 0, false},
		{"-", 0, false},
		{"1w", 0, false},
		{"106752d", 0, false},
		{"106751d23h47m16.854775807s", 9_223_372_036_854_775_807, true},
		{"106751d23h47m16.854775808s", 0, false},
		{"9223372036854775807", 0, false},
	}
	for _, tt := range tests {
		got, ok := parsePeriod([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("parsePeriod(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzParsePeriod: parsePeriod never panics, and wherever Go's
// time.ParseDuration (the config file's syntax, without "d") accepts a
// unit-carrying input, both agree to within the rounding of fractions.
func FuzzParsePeriod(f *testing.F) {
	for _, s := range []string{"1h30m", "1.5s", "250ms", "1000", "3d", "-2m", "1.000000001h", ".5us", "9999999999h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parsePeriod([]byte(s))
		if fast, fok := parseSimplePeriod([]byte(s)); fok {
			if all, aok := parsePeriodAny([]byte(s)); !aok || all != fast {
				t.Fatalf("parsePeriod(%q): fast path %d, general path %d, %v", s, fast, all, aok)
			}
		}
		if _, isInt := parseInt64([]byte(s)); isInt {
			return // bare integers are milliseconds here, seconds in the config file
		}
		want, err := time.ParseDuration(s)
		if err != nil || strings.TrimLeft(s, "+-") == "0" {
			return // "d", case, rejected by both, or Go's unitless "+0"
		}
		if !ok {
			if want > -time.Hour*2_000_000 && want < time.Hour*2_000_000 {
				t.Fatalf("parsePeriod(%q) refused; time.ParseDuration = %v", s, want)
			}
			return
		}
		if diff := got - int64(want); diff < -2 || diff > 2 {
			t.Fatalf("parsePeriod(%q) = %d; time.ParseDuration = %d", s, got, int64(want))
		}
	})
}

func TestParsePeriodZeroAlloc(t *testing.T) {
	in := []byte("1h30m15.5s")
	if n := testing.AllocsPerRun(100, func() { _, _ = parsePeriod(in) }); n != 0 {
		t.Fatalf("parsePeriod allocates %v times", n)
	}
}

// TestSimplePeriodAgrees: the fast path accepts the common spellings and
// gives what the general path gives; it leaves every other spelling to it.
func TestSimplePeriodAgrees(t *testing.T) {
	taken := []string{"1s", "1S", "1000ms", "1000MS", "1mS", "60m", "60M", "24h", "0s", "9223372036854ms", "2562047h"}
	for _, in := range taken {
		fast, ok := parseSimplePeriod([]byte(in))
		if !ok {
			t.Errorf("parseSimplePeriod(%q) refused", in)
			continue
		}
		if all, aok := parsePeriodAny([]byte(in)); !aok || all != fast {
			t.Errorf("parseSimplePeriod(%q) = %d; general path %d, %v", in, fast, all, aok)
		}
	}
	left := []string{"", "s", "1", "1000", "1.5s", "1h30m", "-1s", "+1s", "1d", "1us", "1ns", "1sx", "1 s", "1m s",
		"9999999999999999999s", "2562048h", "1000000000000000000ms", "999999999999999999ms", "9223372036855ms"}
	for _, in := range left {
		if v, ok := parseSimplePeriod([]byte(in)); ok {
			t.Errorf("parseSimplePeriod(%q) = %d; want it left to the general path", in, v)
		}
	}
}
