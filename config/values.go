package config

import (
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// reason is the error type of the parse and check functions: only its text
// is used, as the Reason of an *Error.
type reason string

func (r reason) Error() string { return string(r) }

// setInt parses a decimal integer in [lo, hi] into dst.
func setInt(dst *int, v string, lo, hi int) error {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < int64(lo) || n > int64(hi) {
		return intReason(lo, hi)
	}
	*dst = int(n)
	return nil
}

func checkInt(n, lo, hi int) error {
	if n < lo || n > hi {
		return intReason(lo, hi)
	}
	return nil
}

func intReason(lo, hi int) error {
	if hi == math.MaxInt32 {
		return reason(fmt.Sprintf("must be an integer >= %d", lo))
	}
	return reason(fmt.Sprintf("must be an integer from %d to %d", lo, hi))
}

// sizeUnits are the suffixes redis.conf accepts for memory sizes.
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10},
	{"g", 1e9}, {"m", 1e6}, {"k", 1e3}, {"b", 1},
}

// ParseSize parses a byte size as redis.conf does: a non-negative integer
// with an optional case-insensitive suffix k (1000), kb (1024), m (1000²),
// mb (1024²), g (1000³), gb (1024³) or b (1).
func ParseSize(v string) (int64, error) {
	s := strings.ToLower(strings.TrimSpace(v))
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(s[:len(s)-len(u.suffix)]), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, errSize
	}
	if n > math.MaxInt64/mult {
		return 0, reason("size is too large")
	}
	return n * mult, nil
}

// errSize is the reason given for text that is not a size.
const errSize = reason("must be a size such as 1048576, 512mb or 64kb")

func setSize(dst *int64, v string, min int64) error {
	n, err := ParseSize(v)
	if err != nil {
		return err
	}
	if err := checkSize(n, min); err != nil {
		return err
	}
	*dst = n
	return nil
}

func checkSize(n, min int64) error {
	if n < 0 {
		return errSize
	}
	if n < min {
		return reason(fmt.Sprintf("must be at least %s", formatSize(min)))
	}
	return nil
}

// formatSize writes n with the largest binary suffix that divides it exactly.
func formatSize(n int64) string {
	switch {
	case n == 0:
		return "0"
	case n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + "gb"
	case n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "mb"
	case n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "kb"
	}
	return strconv.FormatInt(n, 10)
}

// ParseDuration parses a plain non-negative integer as seconds (as Redis's
// timeout) and anything else as a Go duration ("500ms", "1m30s").
func ParseDuration(v string) (time.Duration, error) {
	s := strings.TrimSpace(v)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return 0, reason("must not be negative")
		}
		if n > math.MaxInt64/int64(time.Second) {
			return 0, reason("duration is too large")
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, reason("must be a number of seconds or a duration such as 500ms, 30s, 5m")
	}
	if d < 0 {
		return 0, reason("must not be negative")
	}
	return d, nil
}

func setDuration(dst *time.Duration, v string, min time.Duration) error {
	d, err := ParseDuration(v)
	if err != nil {
		return err
	}
	if err := checkDuration(d, min); err != nil {
		return err
	}
	*dst = d
	return nil
}

func checkDuration(d, min time.Duration) error {
	if d < 0 {
		return reason("must not be negative")
	}
	if d < min {
		return reason(fmt.Sprintf("must be at least %s", min))
	}
	return nil
}

func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return d.String()
}

// setAddr checks a host:port TCP address. With optional set, "" and "off"
// store "" (disabled).
func setAddr(dst *string, v string, optional bool) error {
	s := strings.TrimSpace(v)
	if optional && (s == "" || strings.EqualFold(s, "off")) {
		*dst = ""
		return nil
	}
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return reason("must be host:port, e.g. 127.0.0.1:6380 or :6380")
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p > math.MaxUint16 {
		return reason("port must be a number from 0 to 65535")
	}
	*dst = s
	return nil
}

// splitAddr splits a host:port address; ok is false if it is not one.
func splitAddr(addr string) (host, port string, ok bool) {
	host, port, err := net.SplitHostPort(addr)
	return host, port, err == nil
}

// setEnum stores v lower-cased if it is one of the allowed values.
func setEnum(dst *string, v string, allowed ...string) error {
	s := strings.ToLower(strings.TrimSpace(v))
	if err := checkEnum(s, allowed...); err != nil {
		return err
	}
	*dst = s
	return nil
}

func checkEnum(s string, allowed ...string) error {
	if slices.Contains(allowed, s) {
		return nil
	}
	return reason("must be one of " + strings.Join(allowed, ", "))
}
