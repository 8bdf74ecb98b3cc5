package telemetry_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/throttlekit/throttlekit-server/server"
	"github.com/throttlekit/throttlekit-server/telemetry"
)

// A flood of one message is cut to the burst; the next line written after the
// interval reports how many were dropped.
func ExampleLimitedHandler() {
	// A text handler without the time attribute, so the output is stable.
	noTime := slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})
	h := telemetry.NewLimitedHandler(noTime, 2, time.Second)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 5 {
		r := slog.NewRecord(t0.Add(time.Duration(i)*time.Millisecond), slog.LevelWarn, "connection error", 0)
		h.Handle(context.Background(), r)
	}
	h.Handle(context.Background(), slog.NewRecord(t0.Add(2*time.Second), slog.LevelWarn, "connection error", 0))
	fmt.Println("suppressed:", h.Suppressed())
	// Output:
	// level=WARN msg="connection error"
	// level=WARN msg="connection error"
	// level=WARN msg="connection error" suppressed=3
	// suppressed: 3
}

// NewLogger builds the logger from the --log-level and --log-format settings.
func ExampleNewLogger() {
	logger, err := telemetry.NewLogger(os.Stderr, "warn", "json")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(logger.Enabled(context.Background(), slog.LevelInfo), logger.Enabled(context.Background(), slog.LevelWarn))
	_, err = telemetry.NewLogger(os.Stderr, "info", "xml")
	fmt.Println(err)
	// Output:
	// false true
	// telemetry: bad log setting: log format "xml" (want text or json)
}

// The exporter reads the server's snapshot at scrape time.
func ExampleExporter() {
	exp := telemetry.NewExporter(telemetry.Sources{
		Server: func() server.Stats {
			return server.Stats{
				Commands:      map[string]int64{"throttle.check": 3},
				Allowed:       2,
				Denied:        1,
				LatencyBounds: []int64{10_000, 100_000},
				LatencyCounts: []int64{2, 1, 0},
				LatencySumNs:  40_000,
				LatencyCount:  3,
			}
		},
	})
	var b strings.Builder
	exp.WritePrometheus(&b)
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "throttlekit_commands") || strings.HasPrefix(line, "throttlekit_decisions") ||
			strings.HasPrefix(line, "throttlekit_command_duration") {
			fmt.Println(line)
		}
	}
	// Output:
	// throttlekit_commands_total{cmd="throttle.check"} 3
	// throttlekit_decisions_total{result="allowed"} 2
	// throttlekit_decisions_total{result="denied"} 1
	// throttlekit_command_duration_seconds_bucket{le="1e-05"} 2
	// throttlekit_command_duration_seconds_bucket{le="0.0001"} 3
	// throttlekit_command_duration_seconds_bucket{le="+Inf"} 3
	// throttlekit_command_duration_seconds_sum 4e-05
	// throttlekit_command_duration_seconds_count 3
}
