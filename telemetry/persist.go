package telemetry

import (
	"fmt"
	"io"
	"strconv"

	"github.com/throttlekit/throttlekit-server/persist"
)

// Persistence metric names (written when Sources.Persist is set).
const (
	MetricPersistInfo     = "throttlekit_persist_info"                   // {backend,mode,fail} 1
	MetricPersistHealthy  = "throttlekit_persist_healthy"                // gauge 1/0
	MetricPersistLag      = "throttlekit_persist_lag_seconds"            // gauge
	MetricPersistDirty    = "throttlekit_persist_dirty_keys"             // gauge
	MetricPersistRows     = "throttlekit_persist_rows_total"             // {op="upsert"|"delete"|"expire"}
	MetricPersistFlushes  = "throttlekit_persist_flushes_total"          // counter
	MetricPersistErrors   = "throttlekit_persist_errors_total"           // counter
	MetricPersistFlushDur = "throttlekit_persist_flush_duration_seconds" // histogram
	MetricPersistLoaded   = "throttlekit_persist_loaded_keys"            // gauge
	MetricPersistLoadTime = "throttlekit_persist_load_duration_seconds"  // gauge
)

// writePersist writes the persistence families from one Stats snapshot.
func writePersist(w io.Writer, st persist.Stats) {
	header(w, MetricPersistInfo)
	sample(w, MetricPersistInfo, `{backend="`+escapeLabel(st.Backend)+`",mode="`+escapeLabel(st.Mode)+
		`",fail="`+escapeLabel(st.Policy)+`"}`, 1)
	var healthy int64
	if st.Healthy {
		healthy = 1
	}
	single(w, MetricPersistHealthy, healthy)
	header(w, MetricPersistLag)
	fmt.Fprintf(w, "%s %s\n", MetricPersistLag, strconv.FormatFloat(float64(nonNeg(st.LagMs))/1e3, 'g', -1, 64))
	single(w, MetricPersistDirty, st.DirtyKeys)
	header(w, MetricPersistRows)
	sample(w, MetricPersistRows, `{op="upsert"}`, st.RowsWritten)
	sample(w, MetricPersistRows, `{op="delete"}`, st.RowsDeleted)
	sample(w, MetricPersistRows, `{op="expire"}`, st.RowsExpired)
	single(w, MetricPersistFlushes, st.Flushes)
	single(w, MetricPersistErrors, st.Errors)
	header(w, MetricPersistFlushDur)
	var cum uint64
	for i, c := range st.FlushSeconds.Counts {
		cum += c
		le := "+Inf"
		if i < len(persist.FlushBounds) {
			le = strconv.FormatFloat(persist.FlushBounds[i], 'g', -1, 64)
		}
		fmt.Fprintf(w, "%s_bucket{le=%q} %d\n", MetricPersistFlushDur, le, cum)
	}
	fmt.Fprintf(w, "%s_sum %s\n", MetricPersistFlushDur, strconv.FormatFloat(st.FlushSeconds.Sum, 'g', -1, 64))
	fmt.Fprintf(w, "%s_count %d\n", MetricPersistFlushDur, cum)
	single(w, MetricPersistLoaded, st.Loaded)
	header(w, MetricPersistLoadTime)
	fmt.Fprintf(w, "%s %s\n", MetricPersistLoadTime, strconv.FormatFloat(st.LoadTime.Seconds(), 'g', -1, 64))
}
