package rls

import (
	"strings"
	"sync"

	"github.com/VictoriaMetrics/metrics"

	"github.com/throttlekit/throttlekit-server/policy"
)

// ruleStats are the counters of one statistics key, named as
// envoyproxy/ratelimit's Prometheus mapping names them
// (ratelimit_service_rate_limit_<stat>), labelled with the domain and the
// descriptor's statistics key (policy.Rule.MetricKey).
type ruleStats struct {
	totalHits, overLimit, nearLimit, withinLimit, shadowMode *metrics.Counter
}

type statKey struct{ domain, descriptor string }

// statsTable finds the counters of a key. Lookups take a read lock and do
// not allocate; a key seen for the first time creates its counters.
type statsTable struct {
	set *metrics.Set

	mu    sync.RWMutex
	rules map[statKey]*ruleStats

	serviceError, limiterError, domainNotFound, globalShadow *metrics.Counter
}

func newStatsTable(set *metrics.Set) *statsTable {
	return &statsTable{
		set:            set,
		rules:          map[statKey]*ruleStats{},
		serviceError:   set.GetOrCreateCounter(`ratelimit_service_should_rate_limit_error{err_type="service_error"}`),
		limiterError:   set.GetOrCreateCounter(`ratelimit_service_should_rate_limit_error{err_type="limiter_error"}`),
		domainNotFound: set.GetOrCreateCounter(`ratelimit_service_domain_not_found`),
		globalShadow:   set.GetOrCreateCounter(`ratelimit_service_global_shadow_mode`),
	}
}

func (t *statsTable) get(domain string, r *policy.Rule, entries []policy.Entry) *ruleStats {
	k := statKey{domain, r.MetricKey(entries)}
	t.mu.RLock()
	st := t.rules[k]
	t.mu.RUnlock()
	if st != nil {
		return st
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if st = t.rules[k]; st != nil {
		return st
	}
	labels := `{domain="` + escapeLabel(domain) + `",descriptor="` + escapeLabel(k.descriptor) + `"}`
	c := func(stat string) *metrics.Counter {
		return t.set.GetOrCreateCounter("ratelimit_service_rate_limit_" + stat + labels)
	}
	st = &ruleStats{
		totalHits:   c("total_hits"),
		overLimit:   c("over_limit"),
		nearLimit:   c("near_limit"),
		withinLimit: c("within_limit"),
		shadowMode:  c("shadow_mode"),
	}
	t.rules[k] = st
	return st
}

// escapeLabel escapes a Prometheus label value: '\', '"' and newline.
func escapeLabel(s string) string {
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
