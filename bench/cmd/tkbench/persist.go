package main

// The persistence section (-persist): THROTTLE.CHECK on servers in memory,
// with async and with sync persistence on each backend, back to back at
// each pipeline depth, then the time a server takes to start on a table
// that holds keys. tkbench starts the backends itself: Postgres through
// scripts/start-postgres.sh, DynamoDB as dynalite through
// scripts/start-dynalite.sh, and stops them when the section ends.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/throttlekit/throttlekit-server/bench/loadgen"
)

// Backends the persistence section knows, in report order.
const (
	backendPostgres = "postgres"
	backendDynamo   = "dynamodb"
)

var persistBackends = []string{backendPostgres, backendDynamo}

// persistFlag is the value of -persist: off by default; bare -persist means
// every backend; -persist=postgres,dynamodb names them.
type persistFlag struct{ list []string }

// String implements flag.Value.
func (f *persistFlag) String() string {
	if f == nil {
		return ""
	}
	return strings.Join(f.list, ",")
}

// Set implements flag.Value.
func (f *persistFlag) Set(s string) error {
	list, err := parsePersist(s)
	if err != nil {
		return err
	}
	f.list = list
	return nil
}

// IsBoolFlag lets -persist stand alone (flag package convention).
func (f *persistFlag) IsBoolFlag() bool { return true }

// parsePersist reads -persist's value: "", "false" or "none" turn the
// section off, "true" or "all" select every backend, otherwise a
// comma-separated list of backends.
func parsePersist(s string) ([]string, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "false", "none", "0":
		return nil, nil
	case "true", "all", "1":
		return slices.Clone(persistBackends), nil
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		b := strings.ToLower(strings.TrimSpace(f))
		switch b {
		case "pg", "postgresql":
			b = backendPostgres
		case "dynamo", "dynalite":
			b = backendDynamo
		}
		if !slices.Contains(persistBackends, b) {
			return nil, fmt.Errorf("unknown backend %q: want postgres or dynamodb", f)
		}
		if !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out, nil
}

// persistKeys is the keyspace of the persistence rows: 10k uniform keys.
const persistKeys = 10_000

// persistConns is the connection count of the persistence rows.
const persistConns = 50

// persistWorkload is the command of the persistence rows.
var persistWorkload = workload{id: "persist-check", title: "THROTTLE.CHECK gcra", target: targetTK,
	args: []string{"THROTTLE.CHECK", "", "1000", "1s"}, keyArg: 1, prefix: "p:"}

// persistSetup is one server configuration of the section.
type persistSetup struct {
	name    string // memory, pg-async, pg-sync, dynamo-async, dynamo-sync
	backend string // "" in memory
	mode    string // "", "async" or "sync"
}

// setupsFor lists the configurations for backends: memory first, then
// async and sync on each backend.
func setupsFor(backends []string) []persistSetup {
	out := []persistSetup{{name: "memory"}}
	short := map[string]string{backendPostgres: "pg", backendDynamo: "dynamo"}
	for _, b := range backends {
		for _, m := range []string{"async", "sync"} {
			out = append(out, persistSetup{name: short[b] + "-" + m, backend: b, mode: m})
		}
	}
	return out
}

// persistCell is one row to measure: a configuration at a pipeline depth,
// in one round.
type persistCell struct {
	setup persistSetup
	cfg   cellCfg
	round int // from 1
}

// id names the row for -run, e.g. persist/pg-sync/c50/p16/k10000/uniform.
func (c persistCell) id() string {
	return "persist/" + c.setup.name + "/" + cellID("check", c.cfg)[len("check/"):]
}

// table is the row's table: one per server.
func (c persistCell) table() string {
	return fmt.Sprintf("tkbench_%s_p%d_r%d", c.setup.mode, c.cfg.pipeline, c.round)
}

// planPersist lists the rows in execution order: at pipeline 16, then 1,
// rounds times every configuration back to back, so drift hits them alike
// and each round's rows can be compared with that round's memory row.
func planPersist(backends []string, rounds int, filter *regexp.Regexp) []persistCell {
	var out []persistCell
	for _, depth := range []int{16, 1} {
		for r := 1; r <= max(rounds, 1); r++ {
			for _, s := range setupsFor(backends) {
				c := persistCell{setup: s, cfg: cellCfg{persistConns, depth, persistKeys, loadgen.Uniform, 0}, round: r}
				if filter == nil || filter.MatchString(c.id()) {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// backendURL is the --persist URL of table on a backend whose base is a
// Postgres URL or a DynamoDB endpoint.
func backendURL(backend, base, table string) string {
	if backend == backendDynamo {
		return "dynamodb://" + table + "?region=us-east-1&endpoint=" + url.QueryEscape(base)
	}
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "table=" + table
}

// persistArgs are the server flags of a configuration.
func persistArgs(mode, url string, interval time.Duration) []string {
	switch mode {
	case "async":
		return []string{"--persist", url, "--persist-mode", "async", "--persist-interval", interval.String()}
	case "sync":
		return []string{"--persist", url, "--persist-mode", "sync"}
	}
	return nil
}

// persistRow is a measured row.
type persistRow struct {
	setup         persistSetup
	round         int
	cell          cellResult
	rows, flushes int64   // persist_rows_written, persist_flushes over the measured interval
	dels          int64   // persist_rows_deleted over the measured interval
	rowsPerSec    float64 // rows / measured seconds
	delsPerSec    float64 // dels / measured seconds
	startErr      string  // the server or its backend did not start
	stopErr       string  // the server did not exit cleanly
}

// startupResult is a start-up load measurement on one backend.
type startupResult struct {
	backend  string
	keys     int
	fill     time.Duration // from the first CHECK to every row written
	fillErrs int64         // error replies while filling
	toPing   time.Duration // process start to the first PING answered
	toLoaded time.Duration // process start to INFO loading:0
	loadMs   int64         // persist_load_time_ms, the server's own figure
	loaded   int64         // persist_loaded_keys
	check    string        // a loaded key's state, as THROTTLE.PEEK shows it
	err      string
}

// persistSection is everything the section measured.
type persistSection struct {
	backends []string
	interval time.Duration // --persist-interval of the async servers
	duration time.Duration // measured time per row
	rounds   int           // rounds of the rows
	pin      string
	rows     []persistRow
	startup  []startupResult
	notes    []string
}

// Bounds of the section's waits; they bound failures only.
const (
	startupFillBudget = 60 * time.Second // fill and write a start-up table within this, or skip it
	persistStopGrace  = 60 * time.Second // a server's final flush
	loadWaitLimit     = 5 * time.Minute  // a start-up load
)

// startupArgs fill the start-up tables: one unit of 100 a day, so that no
// state expires before the next server loads it.
var startupArgs = []string{"THROTTLE.CHECK", "", "100", "1d"}

// backendHandle is a running backend.
type backendHandle struct {
	base string // Postgres URL or DynamoDB endpoint
	stop func()
}

// runPersist runs the persistence section. It never fails as a whole: what
// could not be measured is recorded in the section.
func runPersist(ctx context.Context, o options, root, tkBin, tmp string, filter *regexp.Regexp) *persistSection {
	sec := &persistSection{backends: o.persist.list, interval: o.persistInterval, duration: o.duration, rounds: o.persistRounds}
	if o.persistDuration > 0 {
		sec.duration = o.persistDuration
	}
	pin := newPinning(o.pin)
	if pin.on {
		restore, err := pinSelf(clientCPU)
		if err != nil {
			pin = pinning{note: "Not pinned: " + err.Error()}
		} else {
			defer func() {
				if err := restore(); err != nil {
					logf("persist: restoring CPU affinity: %v", err)
				}
			}()
		}
	}
	sec.pin = pin.note
	logf("persist: %s", pin.note)

	handles := map[string]*backendHandle{}
	startErrs := map[string]string{}
	for _, b := range sec.backends {
		var h *backendHandle
		var err error
		switch b {
		case backendPostgres:
			h, err = startPostgres(ctx, root, pin.wrap)
		case backendDynamo:
			h, err = startDynalite(ctx, root, tmp, pin.wrap)
		}
		if err != nil {
			startErrs[b] = err.Error()
			sec.notes = append(sec.notes, fmt.Sprintf("%s not started: %v", b, err))
			logf("persist: %s not started: %v", b, err)
			continue
		}
		defer h.stop()
		handles[b] = h
		logf("persist: %s at %s", b, h.base)
	}

	cells := planPersist(sec.backends, o.persistRounds, filter)
	ro := o
	if o.persistDuration > 0 {
		ro.duration = o.persistDuration
	}
	for i, pc := range cells {
		if ctx.Err() != nil {
			break
		}
		row := persistRow{setup: pc.setup, round: pc.round}
		row.cell = cellResult{id: pc.id(), workload: pc.setup.name, target: targetTK, cfg: pc.cfg}
		var extra []string
		if pc.setup.backend != "" {
			h := handles[pc.setup.backend]
			if h == nil {
				row.startErr = startErrs[pc.setup.backend]
				sec.rows = append(sec.rows, row)
				continue
			}
			extra = persistArgs(pc.setup.mode, backendURL(pc.setup.backend, h.base, pc.table()), o.persistInterval)
		}
		args := append(strings.Fields(o.serverArgs), extra...)
		srv, err := startThrottlekitVia(pin.wrap, tkBin, tmp, args)
		if err == nil {
			err = waitLoaded(ctx, srv, loadWaitLimit)
		}
		if err != nil {
			row.startErr = err.Error()
			srv.stop()
			sec.rows = append(sec.rows, row)
			logf("persist [%d/%d] %s: %v", i+1, len(cells), row.cell.id, err)
			continue
		}
		var c0 persistCount
		row.cell = runCell(ctx, ro, srv, plannedCell{w: &persistWorkload, cfg: pc.cfg}, nil, func(start bool) {
			c := persistCounters(srv.addr)
			if start {
				c0 = c
			} else {
				row.rows, row.dels, row.flushes = c.rows-c0.rows, c.dels-c0.dels, c.flushes-c0.flushes
			}
		})
		row.cell.id, row.cell.workload = pc.id(), pc.setup.name
		if err := srv.stopWithin(persistStopGrace); err != nil {
			row.stopErr = err.Error()
		}
		if s := row.cell.elapsed.Seconds(); s > 0 {
			row.rowsPerSec, row.delsPerSec = float64(row.rows)/s, float64(row.dels)/s
		}
		sec.rows = append(sec.rows, row)
		c := &row.cell
		logf("persist [%d/%d] r%d %-42s %9.0f ops/s  p50 %7.1fµs p99 %8.1fµs  rows/s %8.0f  errors %d %s%s",
			i+1, len(cells), pc.round, c.id, c.tput, c.p50, c.p99, row.rowsPerSec, c.errors, c.lastError+c.runErr, row.stopErr)
	}

	for _, b := range sec.backends {
		h := handles[b]
		if h == nil || ctx.Err() != nil {
			continue
		}
		for _, n := range loadKeyCounts(o.persistLoadKeys) {
			if ctx.Err() != nil {
				break
			}
			if filter != nil && !filter.MatchString(fmt.Sprintf("persist-start/%s/k%d", b, n)) {
				continue
			}
			r := measureStartup(ctx, o, pin.wrap, tkBin, tmp, b, h.base, n)
			sec.startup = append(sec.startup, r)
			logf("persist start-up %-8s %8d keys: fill %v, first PING %v, loaded %v (%d keys, server %d ms) %s %s",
				b, n, r.fill.Round(time.Millisecond), r.toPing.Round(time.Millisecond), r.toLoaded.Round(time.Millisecond),
				r.loaded, r.loadMs, r.check, r.err)
		}
	}
	return sec
}

// loadKeyCounts parses -persist-load-keys ("none" or "" gives nothing).
func loadKeyCounts(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// persistCount is a sample of INFO persistence's counters.
type persistCount struct{ rows, dels, flushes int64 }

// persistCounters reads persist_rows_written, persist_rows_deleted and
// persist_flushes from INFO persistence (0 when absent, as in memory).
func persistCounters(addr string) persistCount {
	r, err := call(addr, "INFO", "persistence")
	if err != nil {
		return persistCount{}
	}
	var c persistCount
	c.rows, _ = strconv.ParseInt(infoField(r, "persist_rows_written"), 10, 64)
	c.dels, _ = strconv.ParseInt(infoField(r, "persist_rows_deleted"), 10, 64)
	c.flushes, _ = strconv.ParseInt(infoField(r, "persist_flushes"), 10, 64)
	return c
}

// waitLoaded polls INFO persistence until the server reports loading:0.
func waitLoaded(ctx context.Context, s *server, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if s.exited() {
			return s.exitError()
		}
		if r, err := call(s.addr, "INFO", "persistence"); err == nil && infoField(r, "loading") == "0" {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still loading after %v", limit)
		}
		time.Sleep(time.Millisecond)
	}
}

// measureStartup fills a table of n long-lived keys through an async
// server, stops it (SIGTERM: its final flush), starts a new server on the
// same table and times it from process start to the first PING answered
// and to loading:0. A table that cannot be filled and written within
// startupFillBudget is skipped.
func measureStartup(ctx context.Context, o options, wrap []string, tkBin, tmp, backend, base string, n int) startupResult {
	r := startupResult{backend: backend, keys: n}
	u := backendURL(backend, base, fmt.Sprintf("tkbench_start_%d", n))
	args := append(strings.Fields(o.serverArgs), persistArgs("async", u, o.persistInterval)...)
	s, err := startThrottlekitVia(wrap, tkBin, tmp, args)
	if err == nil {
		err = waitLoaded(ctx, s, loadWaitLimit)
	}
	if err != nil {
		s.stop()
		r.err = "first server: " + err.Error()
		return r
	}
	fctx, cancel := context.WithTimeout(ctx, startupFillBudget)
	defer cancel()
	began := time.Now()
	fr, err := loadgen.Fill(fctx, s.addr, loadgen.NewCommand(startupArgs, 1, "s:"), n, 8, 64)
	r.fillErrs = fr.Errors
	written := int64(0)
	for err == nil {
		var rr string
		if rr, err = call(s.addr, "INFO", "persistence"); err == nil {
			written, _ = strconv.ParseInt(infoField(rr, "persist_rows_written"), 10, 64)
			if written >= int64(n) && infoField(rr, "persist_dirty_keys") == "0" && infoField(rr, "persist_lag_ms") == "0" {
				break
			}
		}
		if fctx.Err() != nil {
			err = fctx.Err()
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err != nil {
		_ = s.stopWithin(time.Second)
		if errors.Is(err, context.DeadlineExceeded) {
			r.err = fmt.Sprintf("skipped: %d CHECKs sent and %d rows written in %v", fr.Sent, written, startupFillBudget)
		} else {
			r.err = "fill: " + err.Error()
		}
		return r
	}
	r.fill = time.Since(began)
	if err := s.stopWithin(persistStopGrace); err != nil {
		r.err = "first server's exit: " + err.Error()
		return r
	}

	argv, addr, _, err := throttlekitArgv(wrap, tkBin, args)
	if err != nil {
		r.err = err.Error()
		return r
	}
	t0 := time.Now()
	s2, err := launch("throttlekit", argv, addr, tmp)
	if err != nil {
		r.err = err.Error()
		return r
	}
	defer func() {
		if err := s2.stopWithin(persistStopGrace); err != nil && r.err == "" {
			r.err = "second server's exit: " + err.Error()
		}
	}()
	deadline := t0.Add(loadWaitLimit)
	for r.toPing == 0 {
		if _, err := call(addr, "PING"); err == nil || isReplyError(err) {
			r.toPing = time.Since(t0)
			break
		}
		if s2.exited() {
			r.err = s2.exitError().Error()
			return r
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			r.err = "no PING answered"
			return r
		}
		time.Sleep(time.Millisecond)
	}
	if err := waitLoaded(ctx, s2, time.Until(deadline)); err != nil {
		r.err = err.Error()
		return r
	}
	r.toLoaded = time.Since(t0)
	if rr, err := call(addr, "INFO", "persistence"); err == nil {
		r.loaded, _ = strconv.ParseInt(infoField(rr, "persist_loaded_keys"), 10, 64)
		r.loadMs, _ = strconv.ParseInt(infoField(rr, "persist_load_time_ms"), 10, 64)
	}
	peek := slices.Clone(startupArgs)
	peek[0], peek[1] = "THROTTLE.PEEK", "s:"+strconv.Itoa(n-1)
	if rr, err := call(addr, peek...); err == nil {
		r.check = peekSummary(rr)
	} else {
		r.check = "PEEK: " + err.Error()
	}
	return r
}

// peekSummary reads a THROTTLE.PEEK reply of a start-up key (RESP2: allowed,
// limit, remaining, retry_after, reset_after) as "remaining R of L": a key
// that was loaded has used its unit (remaining 99 of 100), a missing one
// shows 100.
func peekSummary(reply string) string {
	var ints []int64
	for _, l := range strings.Split(reply, "\r\n") {
		if v, ok := strings.CutPrefix(l, ":"); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				ints = append(ints, n)
			}
		}
	}
	if len(ints) != 5 {
		return "PEEK: " + oneLine(strings.ReplaceAll(reply, "\r\n", " "))
	}
	return fmt.Sprintf("remaining %d of %d", ints[2], ints[1])
}

// startPostgres starts a throw-away Postgres through
// scripts/start-postgres.sh (under wrap, if any) in a new directory.
func startPostgres(ctx context.Context, root string, wrap []string) (*backendHandle, error) {
	script := filepath.Join(root, "scripts", "start-postgres.sh")
	dir, err := os.MkdirTemp("", "tkbench-pg-")
	if err != nil {
		return nil, err
	}
	argv := append(slices.Clone(wrap), script, "start", dir)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	stop := func() {
		_ = exec.Command(script, "stop", dir).Run()
		_ = os.RemoveAll(dir)
	}
	if err != nil {
		stop()
		return nil, fmt.Errorf("%s: %v: %s", script, err, strings.TrimSpace(stderr.String()))
	}
	return &backendHandle{base: strings.TrimSpace(string(out)), stop: stop}, nil
}

// startDynalite runs scripts/start-dynalite.sh (under wrap, if any) in a
// process group of its own, reads the endpoint it prints and waits until
// it accepts connections.
func startDynalite(ctx context.Context, root, tmp string, wrap []string) (*backendHandle, error) {
	script := filepath.Join(root, "scripts", "start-dynalite.sh")
	argv := append(slices.Clone(wrap), script)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	logPath := filepath.Join(tmp, "dynalite.log")
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	cmd.Stderr = lf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", script, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	fail := func(format string, args ...any) (*backendHandle, error) {
		stop()
		b, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf(format+": %s", append(args, strings.TrimSpace(string(b)))...)
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- strings.TrimSpace(sc.Text())
		}
		close(line)
	}()
	deadline := time.After(2 * time.Minute) // a first install fetches the package
	var endpoint string
	select {
	case endpoint = <-line:
	case <-exited:
		return fail("%s exited", script)
	case <-deadline:
		return fail("%s printed no endpoint in 2 minutes", script)
	case <-ctx.Done():
		return fail("%s: %v", script, ctx.Err())
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return fail("%s printed %q, not an endpoint", script, endpoint)
	}
	for {
		if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
			c.Close()
			return &backendHandle{base: endpoint, stop: stop}, nil
		}
		select {
		case <-exited:
			return fail("dynalite exited")
		case <-deadline:
			return fail("dynalite on %s not accepting connections in 2 minutes", u.Host)
		case <-ctx.Done():
			return fail("dynalite: %v", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
