package main

import (
	"strconv"

	"errors"
	throttlekit "github.com/throttlekit/throttlekit-server/clients/go"
	"strings"

	"github.com/throttlekit/throttlekit-server/config"
	"github.com/throttlekit/throttlekit-server/limits"
	"github.com/throttlekit/throttlekit-server/server"
	"github.com/throttlekit/throttlekit-server/upstream"
	"github.com/throttlekit/throttlekit-server/upstream/tier"
)

// scaleOut is the upstream tier of a server started with --upstream.
type scaleOut struct {
	client  *upstream.Client
	backend *tier.Backend
}

// openUpstream dials the upstream of cfg and returns the server's
// UpstreamConfig; the backend is built when server.New calls it. It
// connects lazily: an unreachable upstream is the failure policy's
// business, not a start-up error.
func openUpstream(cfg *config.Config, now func() int64) (*scaleOut, server.UpstreamConfig, error) {
	mode, err := tier.ParseMode(cfg.UpstreamMode)
	if err != nil {
		return nil, server.UpstreamConfig{}, err
	}
	prefixes, modes, err := config.ModePrefixes(cfg.UpstreamModePrefix)
	if err != nil {
		return nil, server.UpstreamConfig{}, err
	}
	var pm []tier.PrefixMode
	for i := range prefixes {
		m, err := tier.ParseMode(modes[i])
		if err != nil {
			return nil, server.UpstreamConfig{}, err
		}
		pm = append(pm, tier.PrefixMode{Prefix: prefixes[i], Mode: m})
	}
	// --upstream-batch auto: the Go client's EOQ learner, the same code.
	var batch int64
	var sizer throttlekit.Sizer
	if cfg.UpstreamBatch == "auto" {
		sizer = &throttlekit.AdaptiveSizer{}
	} else if batch, err = strconv.ParseInt(cfg.UpstreamBatch, 10, 64); err != nil {
		return nil, server.UpstreamConfig{}, err
	}
	c, err := upstream.Dial(cfg.Upstream, upstream.Options{Timeout: cfg.UpstreamTimeout, PoolSize: cfg.UpstreamPoolSize})
	if err != nil {
		// One line: the URL parser's message spans two.
		return nil, server.UpstreamConfig{}, errors.New(strings.ReplaceAll(err.Error(), "\n", ": "))
	}
	so := &scaleOut{client: c}
	uc := server.UpstreamConfig{
		New: func(local *limits.Local) (limits.Backend, error) {
			b, err := tier.New(tier.Config{Client: c, Local: local, Mode: mode, Prefixes: pm,
				FailOpen: cfg.UpstreamFail == "open", Timeout: cfg.UpstreamTimeout, Workers: cfg.UpstreamPoolSize, Pipeline: cfg.UpstreamPipeline,
				Batch: batch, Sizer: sizer, IdleReturn: cfg.UpstreamIdleReturn, Clock: now})
			if err != nil {
				return nil, err
			}
			so.backend = b
			return b, nil
		},
		Info: func() [][2]string {
			if so.backend == nil {
				return nil
			}
			return so.backend.InfoFields()
		},
	}
	if c.Cluster() {
		uc.SameSlot = func(keys [][]byte) bool {
			s := upstream.Slot(string(keys[0]))
			for _, k := range keys[1:] {
				if upstream.Slot(string(k)) != s {
					return false
				}
			}
			return true
		}
	}
	return so, uc, nil
}

// close stops the workers and closes the connections.
func (so *scaleOut) close() {
	if so.backend != nil {
		so.backend.Close()
	}
	_ = so.client.Close()
}
