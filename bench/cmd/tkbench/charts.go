package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/throttlekit/throttlekit-server/bench/loadgen"
)

// chartFiles are the charts a run writes under bench/charts, in report order.
var chartFiles = []struct{ name, title string }{
	{"throughput_p16.png", "Throughput vs connections, pipeline 16, 1M uniform keys"},
	{"throughput_p1.png", "Throughput vs connections, pipeline 1, 1M uniform keys"},
	{"latency_p1.png", "Latency percentiles, 50 connections, pipeline 1, 1M uniform keys"},
	{"latency_p16.png", "Latency percentiles, 50 connections, pipeline 16, 1M uniform keys"},
	{"bytes_per_key.png", "Bytes per GCRA key"},
}

// chartWorkloads are the workloads drawn, in legend order.
var chartWorkloads = []string{"redis-ping", "redis-incr", "redis-fixed-lua", "redis-gcra-lua", "tk-ping", "tk-check", "tk-mcheck", "tk-cl", "tk-lease", "cmp-check"}

func writeCharts(r *results) error {
	dir := filepath.Join(r.opts.out, "bench", "charts")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, pipe := range []int{16, 1} {
		if err := throughputChart(r, pipe, filepath.Join(dir, fmt.Sprintf("throughput_p%d.png", pipe))); err != nil {
			return err
		}
		if err := latencyChart(r, pipe, filepath.Join(dir, fmt.Sprintf("latency_p%d.png", pipe))); err != nil {
			return err
		}
	}
	return memoryChart(r, filepath.Join(dir, "bytes_per_key.png"))
}

// evenTicks labels 0..top at a round step (1, 2 or 5 times a power of
// ten) that gives four to ten labels.
func evenTicks(top float64) plot.ConstantTicks {
	if !(top > 0) {
		return plot.ConstantTicks{{Value: 0, Label: "0"}}
	}
	step := math.Pow(10, math.Floor(math.Log10(top)))
	for _, f := range []float64{0.1, 0.2, 0.5, 1} {
		if top/(step*f) <= 10 {
			step *= f
			break
		}
	}
	var ticks []plot.Tick
	for i := 0; float64(i)*step <= top*(1+1e-9); i++ {
		v := float64(i) * step
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 4, 64)})
	}
	return ticks
}

// chartLabel names workload w in a chart: the -compare-args server's check
// is labelled with its extra flags.
func chartLabel(w string, r *results) string {
	if w == "cmp-check" && r.opts.compareArgs != "" {
		return "tk-check " + r.opts.compareArgs
	}
	return w
}

// throughputChart draws ops/s against connections, one line per workload.
func throughputChart(r *results, pipe int, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Throughput vs connections (pipeline %d, 1M uniform keys)", pipe)
	p.X.Label.Text = "connections"
	p.Y.Label.Text = "ops/s (thousands)"
	p.X.Scale = plot.LogScale{}
	p.X.Min, p.X.Max = 0.8, 250 // fixed, so an empty chart is still valid on a log axis
	p.X.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 1, Label: "1"}, {Value: 50, Label: "50"}, {Value: 200, Label: "200"}})
	p.Legend.Top = true
	p.Legend.Left = true
	var args []any
	for _, w := range chartWorkloads {
		var pts plotter.XYs
		for _, conns := range []int{1, 50, 200} {
			var c *cellResult
			if strings.HasSuffix(w, "-ping") {
				c = r.findPing(w, conns, pipe)
			} else {
				c = r.find(w, cellCfg{conns, pipe, 1_000_000, loadgen.Uniform, 0})
			}
			if c != nil && c.errors == 0 && c.tput > 0 {
				pts = append(pts, plotter.XY{X: float64(conns), Y: c.tput / 1e3})
			}
		}
		if len(pts) > 0 {
			args = append(args, chartLabel(w, r), pts)
		}
	}
	if len(args) > 0 {
		if err := plotutil.AddLinePoints(p, args...); err != nil {
			return err
		}
	}
	p.Y.Min = 0
	p.Y.Max = max(p.Y.Max*1.25, 1) // room for the legend
	p.Y.Tick.Marker = evenTicks(p.Y.Max)
	p.Add(plotter.NewGrid())
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// latencyChart draws p50, p99 and p99.9 per workload as grouped bars.
func latencyChart(r *results, pipe int, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Latency (50 connections, pipeline %d, 1M uniform keys)", pipe)
	p.Y.Label.Text = "µs"
	var names []string
	var v50, v99, v999 plotter.Values
	for _, w := range chartWorkloads {
		var c *cellResult
		if strings.HasSuffix(w, "-ping") {
			c = r.findPing(w, 50, pipe)
		} else {
			c = r.find(w, cellCfg{50, pipe, 1_000_000, loadgen.Uniform, 0})
		}
		if c == nil || c.errors > 0 || c.ops == 0 {
			continue
		}
		names = append(names, chartLabel(w, r))
		v50, v99, v999 = append(v50, c.p50), append(v99, c.p99), append(v999, c.p999)
	}
	if len(names) == 0 {
		return p.Save(8*vg.Inch, 5*vg.Inch, path)
	}
	if err := addBars(p, vg.Points(14), false, []series{{"p50", v50}, {"p99", v99}, {"p99.9", v999}}); err != nil {
		return err
	}
	p.Legend.Top = true
	p.Y.Max = maxOf(v999) * 1.3                      // room for the legend
	p.X.Min, p.X.Max = -0.6, float64(len(names))-0.4 // room for the outer bars of each group
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = 0.5
	p.X.Tick.Label.XAlign = -0.9
	return p.Save(9*vg.Inch, 5*vg.Inch, path)
}

// memoryChart draws bytes per key for each server and key count.
func memoryChart(r *results, path string) error {
	p := plot.New()
	p.Title.Text = "Bytes per GCRA key (lower is better)"
	p.Y.Label.Text = "bytes per key"
	var names []string
	var redisRSS, redisUsed, tkRSS plotter.Values
	seen := map[int]bool{}
	for _, m := range r.memory {
		if seen[m.keys] {
			continue
		}
		seen[m.keys] = true
		var rr, tr memResult
		for _, x := range r.memory {
			if x.keys == m.keys && x.target == targetRedis {
				rr = x
			}
			if x.keys == m.keys && x.target == targetTK {
				tr = x
			}
		}
		names = append(names, keysLabel(m.keys)+" keys")
		redisRSS, redisUsed, tkRSS = append(redisRSS, rr.rssPerKey()), append(redisUsed, rr.usedPerKey()), append(tkRSS, tr.rssPerKey())
	}
	if len(names) == 0 {
		return p.Save(6*vg.Inch, 4*vg.Inch, path)
	}
	if err := addBars(p, vg.Points(30), true, []series{{"Redis RSS", redisRSS}, {"Redis used_memory", redisUsed}, {"throttlekit RSS", tkRSS}}); err != nil {
		return err
	}
	p.Legend.Top = true
	p.Y.Max = max(maxOf(redisRSS), maxOf(redisUsed), maxOf(tkRSS)) * 1.3 // room for the legend
	p.X.Min, p.X.Max = -0.6, float64(len(names))-0.4                     // room for the outer bars of each group
	p.NominalX(names...)
	return p.Save(7*vg.Inch, 5*vg.Inch, path)
}

// series is one labelled set of bars.
type series struct {
	label string
	v     plotter.Values
}

// addBars adds the series to p as grouped bars of width w, each group
// centred on its x position, with a legend entry per series and, if values
// is set, the value printed above each bar.
func addBars(p *plot.Plot, w vg.Length, values bool, ss []series) error {
	for i, s := range ss {
		b, err := plotter.NewBarChart(s.v, w)
		if err != nil {
			return err
		}
		b.Color = plotutil.Color(i)
		b.LineStyle.Width = 0
		b.Offset = vg.Length(i-1) * w
		p.Add(b)
		p.Legend.Add(s.label, b)
		if !values {
			continue
		}
		labels, err := plotter.NewLabels(plotter.XYLabels{XYs: barXYs(s.v), Labels: fmtLabels(s.v)})
		if err == nil {
			labels.Offset = vg.Point{X: vg.Length(i-1)*w - w/3, Y: 2}
			p.Add(labels)
		}
	}
	return nil
}

func barXYs(v plotter.Values) plotter.XYs {
	xy := make(plotter.XYs, len(v))
	for i := range v {
		xy[i] = plotter.XY{X: float64(i), Y: v[i]}
	}
	return xy
}

func fmtLabels(v plotter.Values) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = fmt.Sprintf("%.0f", x)
	}
	return out
}

func maxOf(v plotter.Values) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
