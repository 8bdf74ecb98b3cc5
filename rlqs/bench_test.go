package rlqs

import (
	"strconv"
	"sync"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
)

// benchReport is a report of 10 allowed requests for one of the bench
// buckets (one per stream, all under one rule).
func benchReport(domain string, i int) *rlqsv3.RateLimitQuotaUsageReports {
	u := usage(id("route", "checkout", "user", "u"+strconv.Itoa(i)), 10, 0)
	u.TimeElapsed = nil
	return &rlqsv3.RateLimitQuotaUsageReports{Domain: domain, BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{u}}
}

const benchPolicy = `
domain: edge
descriptors:
  - key: route
    value: checkout
    descriptors:
      - key: user
        rate_limit: {unit: second, requests_per_unit: 1000}
`

// BenchmarkReports measures usage reports answered per second: "grpc"
// with 8 streams over a loopback listener, each sending a report and
// waiting for its answer, as Envoys do; "direct" calls the service's
// handler without gRPC (its own cost). Every report says 10 requests were
// admitted, and the clock moves 100 us per report, so the mix holds fresh
// leases, repeated assignments and DENY_ALL once a window is spent.
func BenchmarkReports(b *testing.B) {
	b.Run("direct", func(b *testing.B) {
		e := startEnv(b, benchPolicy, nil)
		st := &stream{buckets: map[string]*bucket{}}
		if _, err := e.svc.handle(st, benchReport("edge", 0)); err != nil {
			b.Fatal(err)
		}
		msg := benchReport("", 0)
		b.ReportAllocs()
		for b.Loop() {
			e.clock.Advance(100 * int64(time.Microsecond))
			if _, err := e.svc.handle(st, msg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("grpc-8streams", func(b *testing.B) {
		const streams = 8
		e := startEnv(b, benchPolicy, nil)
		ss := make([]*testStream, streams)
		for i := range ss {
			ss[i] = e.open()
			ss[i].exchange("edge", benchReport("edge", i).BucketQuotaUsages...)
		}
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for i, s := range ss {
			n := b.N / streams
			if i < b.N%streams {
				n++
			}
			wg.Add(1)
			go func(s *testStream, msg *rlqsv3.RateLimitQuotaUsageReports) {
				defer wg.Done()
				for j := 0; j < n; j++ {
					e.clock.Advance(100 * int64(time.Microsecond))
					if err := s.s.Send(msg); err != nil {
						b.Error(err)
						return
					}
					if _, err := s.s.Recv(); err != nil {
						b.Error(err)
						return
					}
				}
			}(s, benchReport("", i))
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "reports/s")
	})
}
