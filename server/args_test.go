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
