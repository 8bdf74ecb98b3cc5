package resp

import (
	"strconv"
	"testing"
)

// BenchmarkNext reads a pipeline of small commands: the per-command cost of
// the parser on the hot path.
func BenchmarkNext(b *testing.B) {
	var in []byte
	for range 64 {
		in = append(in, "*4\r\n$14\r\nTHROTTLE.CHECK\r\n$6\r\nuser:1\r\n$3\r\n100\r\n$2\r\n1s\r\n"...)
	}
	var p Parser
	var pend Pending
	b.ReportAllocs()
	b.SetBytes(int64(len(in) / 64))
	for i := 0; i < b.N; i += 64 {
		for buf := in; len(buf) > 0; {
			n, _, err := p.Next(buf, &pend, testLimits)
			if err != nil || n == 0 {
				b.Fatal("pipeline did not parse")
			}
			buf = buf[n:]
		}
	}
}

// BenchmarkResume feeds one frame in 64 KiB pieces, each time passing the
// frame from its start as a connection's buffer would: a 16 MiB argument
// and a command of 1M arguments. The cost per byte must not grow with the
// frame (it would, 256-fold at 16 MiB, if each piece rescanned the frame).
func BenchmarkResume(b *testing.B) {
	big := []byte("*2\r\n$4\r\nECHO\r\n$16777216\r\n")
	big = append(big, make([]byte, 16<<20)...)
	big = append(big, "\r\n"...)
	many := []byte("*1000001\r\n$4\r\nECHO\r\n")
	for i := range 1000000 {
		a := strconv.Itoa(10000000 + i)
		many = append(many, "$8\r\n"+a+"\r\n"...)
	}
	for _, bc := range []struct {
		name  string
		frame []byte
	}{{"arg=16MiB", big}, {"args=1M", many}} {
		b.Run(bc.name, func(b *testing.B) {
			lim := Limits{MaxArgs: 2 << 20, MaxBulkLen: 64 << 20}
			var p Parser
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.frame)))
			for range b.N {
				var pend Pending
				for avail := 64 << 10; ; avail += 64 << 10 {
					avail = min(avail, len(bc.frame))
					n, _, err := p.Next(bc.frame[:avail], &pend, lim)
					if err != nil {
						b.Fatal(err)
					}
					if n == len(bc.frame) {
						break
					}
				}
			}
		})
	}
}

// BenchmarkAppendInt writes the integers of a THROTTLE.CHECK reply (a flag,
// a limit, a remaining count, two times in milliseconds) with AppendInt
// ("own") and with strconv.AppendInt between the prefix and the CRLF
// ("strconv"), the writer AppendInt replaced.
func BenchmarkAppendInt(b *testing.B) {
	vals := []int64{0, 1000000, 999999, 1000, 1_764_201_600_123}
	dst := make([]byte, 0, 256)
	b.Run("strconv", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			d := dst[:0]
			for _, v := range vals {
				d = append(d, ':')
				d = strconv.AppendInt(d, v, 10)
				d = append(d, '\r', '\n')
			}
			dst = d
		}
	})
	b.Run("own", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			dst = appendInts(dst[:0], vals)
		}
	})
}

// appendInts writes vals with one AppendInt call each.
func appendInts(d []byte, vals []int64) []byte {
	for _, v := range vals {
		d = AppendInt(d, v)
	}
	return d
}

// BenchmarkDecisionReply writes a THROTTLE.CHECK reply's five integers
// (a flag, a limit, a remaining count, a time in milliseconds and a wait)
// behind its array header, one writer call per value ("each") and with
// AppendIntFields ("fields").
func BenchmarkDecisionReply(b *testing.B) {
	vals := []int64{1, 1000000, 999999, 1_764_201_600_123, 0}
	dst := make([]byte, 0, 256)
	b.Run("each", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			dst = appendInts(AppendArray(dst[:0], 5), vals)
		}
	})
	b.Run("fields", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			dst = AppendIntFields(dst[:0], 5, false, nil, vals)
		}
	})
}
