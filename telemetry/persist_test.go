package telemetry

import (
	"bytes"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/persist"
)

func TestExporterPersist(t *testing.T) {
	st := persist.Stats{
		Backend: "postgres", Mode: "async", Policy: "closed", Healthy: false,
		LagMs: 1500, DirtyKeys: 42, RowsWritten: 1000, RowsDeleted: 3, RowsExpired: 7,
		Flushes: 12, Errors: 2, Loaded: 99, LoadTime: 250 * time.Millisecond,
	}
	st.FlushSeconds.Counts[0] = 2                        // <= 1 ms
	st.FlushSeconds.Counts[3] = 1                        // <= 10 ms
	st.FlushSeconds.Counts[len(persist.FlushBounds)] = 1 // > 10 s
	st.FlushSeconds.Sum = 12.5
	var buf bytes.Buffer
	NewExporter(Sources{Persist: func() persist.Stats { return st }}).WritePrometheus(&buf)
	s := parseSamples(t, buf.String())
	for _, tc := range []struct{ sample, want string }{
		{`throttlekit_persist_info{backend="postgres",mode="async",fail="closed"}`, "1"},
		{MetricPersistHealthy, "0"},
		{MetricPersistLag, "1.5"},
		{MetricPersistDirty, "42"},
		{MetricPersistRows + `{op="upsert"}`, "1000"},
		{MetricPersistRows + `{op="delete"}`, "3"},
		{MetricPersistRows + `{op="expire"}`, "7"},
		{MetricPersistFlushes, "12"},
		{MetricPersistErrors, "2"},
		{MetricPersistFlushDur + `_bucket{le="0.001"}`, "2"},
		{MetricPersistFlushDur + `_bucket{le="0.005"}`, "2"},
		{MetricPersistFlushDur + `_bucket{le="0.01"}`, "3"},
		{MetricPersistFlushDur + `_bucket{le="10"}`, "3"},
		{MetricPersistFlushDur + `_bucket{le="+Inf"}`, "4"},
		{MetricPersistFlushDur + `_count`, "4"},
		{MetricPersistFlushDur + `_sum`, "12.5"},
		{MetricPersistLoaded, "99"},
		{MetricPersistLoadTime, "0.25"},
	} {
		if got := s[tc.sample]; got != tc.want {
			t.Errorf("%s = %q, want %q", tc.sample, got, tc.want)
		}
	}
}
