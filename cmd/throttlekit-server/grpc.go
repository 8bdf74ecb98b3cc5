package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/VictoriaMetrics/metrics"
	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/throttlekit/throttlekit-server/config"
	"github.com/throttlekit/throttlekit-server/grpcfront"
	"github.com/throttlekit/throttlekit-server/policy"
	"github.com/throttlekit/throttlekit-server/rlqs"
	"github.com/throttlekit/throttlekit-server/rls"
	"github.com/throttlekit/throttlekit-server/server"
)

// envoyFront is the Envoy side of the program: the policies (--policies),
// watched for changes, and the gRPC front (--grpc-addr) serving the RLS
// service over the RESP server's core, so Envoy and Redis clients share
// counters. Its counters (ratelimit_service_*, the policy reloads, the
// gRPC requests, RLQS's rlqs_* counters) live in one metrics.Set that
// /metrics writes. The RLQS service is registered beside RLS in start.
type envoyFront struct {
	policies *policy.Store                   // nil without --policies
	front    atomic.Pointer[grpcfront.Front] // nil without --grpc-addr; set while INFO may read it
	metrics  *metrics.Set
	addr     string
	tls      bool

	stopWatch context.CancelFunc // ends the policy watcher; nil before start
	watchDone chan struct{}      // closed when the watcher has returned

	// durability is the persistence the Envoy services wait for (sync
	// mode) and are refused by (closed policy while failing), as RESP
	// commands are; nil without --persist. Set before start.
	durability grpcfront.Durability
	limiter    atomic.Pointer[grpcfront.Limiter] // set by start, woken by notifyDurable
}

// notifyDurable wakes the gRPC calls waiting for their changes to be
// durable; persistence calls it after each write, as it calls the RESP
// server's NotifyDurable. It never blocks.
func (e *envoyFront) notifyDurable() {
	if l := e.limiter.Load(); l != nil {
		l.NotifyDurable()
	}
}

// openPolicies loads the policies named by w.Policies; an invalid file is
// an error, which stops the start. Without --policies it returns an
// envoyFront with no Store.
func openPolicies(w *config.Wiring, logger *slog.Logger) (*envoyFront, error) {
	e := &envoyFront{metrics: metrics.NewSet(), addr: w.GRPC.Addr, tls: w.GRPC.TLS != nil}
	if w.Policies == "" {
		return e, nil
	}
	st, err := policy.Open(w.Policies, policy.StoreOptions{
		Metrics: e.metrics,
		OnReload: func(cur *policy.Set, err error) {
			if err != nil {
				logger.Error("policies: change rejected; the loaded set stays", "path", w.Policies, "err", err)
				return
			}
			logger.Info("policies: reloaded", "path", w.Policies, "domains", len(cur.Domains()), "rules", len(cur.Rules()))
		},
	})
	if err != nil {
		return nil, fmt.Errorf("policies: %w", err)
	}
	e.policies = st
	logger.Info("policies loaded", "path", w.Policies, "domains", len(st.Current().Domains()), "rules", len(st.Current().Rules()))
	return e, nil
}

// start watches the policies until ctx ends and, with --grpc-addr, opens
// the gRPC listener (an address in use is an error here, before the RESP
// server starts) and serves RLS on it.
func (e *envoyFront) start(ctx context.Context, w *config.Wiring, srv *server.Server, now func() int64, logger *slog.Logger) error {
	if e.policies == nil {
		return nil
	}
	// The watcher ends with stop (or ctx), and stop waits for it, so it
	// never logs after the program has returned.
	wctx, cancel := context.WithCancel(ctx)
	e.stopWatch, e.watchDone = cancel, make(chan struct{})
	go func() {
		defer close(e.watchDone)
		if err := e.policies.Watch(wctx); err != nil && wctx.Err() == nil {
			logger.Error("policies: cannot watch for changes", "path", e.policies.Path(), "err", err)
		}
	}()
	if w.GRPC.Addr == "" {
		return nil
	}
	lim := grpcfront.NewDurableLimiter(srv.Backend(), e.durability)
	e.limiter.Store(lim)
	opts := w.RLS
	opts.Policies, opts.Limiter, opts.Now, opts.Metrics = e.policies, lim, now, e.metrics
	svc, err := rls.New(opts)
	if err != nil {
		return err
	}
	// RLQS hands Envoys quota assignments leased from the same counters
	// (window-coupled leases of each rule's fixed window).
	quota, err := rlqs.New(rlqs.Options{Policies: e.policies, Leaser: lim, Now: now, Metrics: e.metrics})
	if err != nil {
		return err
	}
	gc := w.GRPC
	gc.Logger, gc.Metrics = logger, e.metrics
	names := []string{rlsv3.RateLimitService_ServiceDesc.ServiceName, rlqsv3.RateLimitQuotaService_ServiceDesc.ServiceName}
	f, err := grpcfront.New(gc, svc.Health(), names, svc, quota)
	if err != nil {
		return err
	}
	if err := f.Listen(); err != nil {
		return err
	}
	e.front.Store(f)
	if gc.TLS != nil {
		// SIGHUP reloads the gRPC certificates as it does the RESP
		// listener's (main.go).
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		go func() {
			defer signal.Stop(hup)
			for {
				select {
				case <-hup:
					_ = f.ReloadTLS() // logs a failure and keeps the old files
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() {
		if err := f.Serve(); err != nil {
			logger.Error("gRPC listener stopped", "err", err)
		}
	}()
	return nil
}

// stop stops the gRPC front gracefully: health NOT_SERVING, then the calls
// in progress finish (or are cancelled when ctx ends).
func (e *envoyFront) stop(ctx context.Context) error {
	if e.stopWatch != nil {
		e.stopWatch()
		<-e.watchDone
	}
	f := e.front.Load()
	if f == nil {
		return nil
	}
	return f.Stop(ctx)
}

// info is INFO's grpc section: the listener, its counters, the policies
// and the last reload.
func (e *envoyFront) info() [][2]string {
	var out [][2]string
	kv := func(k, v string) { out = append(out, [2]string{k, v}) }
	addr := ""
	if f := e.front.Load(); f != nil {
		if a := f.Addr(); a != nil {
			addr = a.String()
		}
		st := f.Stats()
		kv("grpc_enabled", "1")
		kv("grpc_addr", addr)
		kv("grpc_tls", strconv.Itoa(b2i(e.tls)))
		kv("grpc_requests", strconv.FormatInt(st.Requests, 10))
		kv("grpc_errors", strconv.FormatInt(st.Errors, 10))
	} else {
		kv("grpc_enabled", "0")
	}
	if e.policies == nil {
		kv("policies_loaded", "0")
		return out
	}
	set := e.policies.Current()
	kv("policies_loaded", "1")
	kv("policies_path", e.policies.Path())
	kv("policies_domains", strconv.Itoa(len(set.Domains())))
	kv("policies_rules", strconv.Itoa(len(set.Rules())))
	kv("policies_loads", strconv.FormatUint(e.policies.Loads(), 10))
	kv("policies_load_errors", strconv.FormatUint(e.policies.Failures(), 10))
	if err := e.policies.LastError(); err != nil {
		kv("policies_last_reload", "error")
		kv("policies_last_error", strings.Map(oneLine, err.Error())) // persist.go
	} else {
		kv("policies_last_reload", "ok")
	}
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
