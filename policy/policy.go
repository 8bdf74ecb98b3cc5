package policy

import (
	"fmt"
	"sort"
	"time"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/limits"
)

// Unit is a rate_limit's unit, as envoyproxy/ratelimit names them. UnitNone
// marks a rule whose window came from the period extension.
type Unit uint8

// Units. Their durations follow envoyproxy/ratelimit's
// src/utils/utilities.go (UnitToDivider): a month is 30 days and a year 365
// days, both windows aligned on the Unix epoch, not calendar months.
const (
	UnitNone Unit = iota
	UnitSecond
	UnitMinute
	UnitHour
	UnitDay
	UnitWeek
	UnitMonth
	UnitYear
)

var unitNames = [...]string{"", "second", "minute", "hour", "day", "week", "month", "year"}

var unitDurations = [...]time.Duration{
	0, time.Second, time.Minute, time.Hour, 24 * time.Hour, 7 * 24 * time.Hour,
	30 * 24 * time.Hour, 365 * 24 * time.Hour,
}

// String returns the unit's name as the configuration spells it.
func (u Unit) String() string {
	if int(u) < len(unitNames) {
		return unitNames[u]
	}
	return fmt.Sprintf("unit(%d)", u)
}

// Duration returns the length of one unit (0 for UnitNone).
func (u Unit) Duration() time.Duration {
	if int(u) < len(unitDurations) {
		return unitDurations[u]
	}
	return 0
}

// Mode is a descriptor's enforcement mode once an upstream cluster is
// configured (--upstream, package upstream/tier): strict asks the upstream
// on every request, cached-deny answers denials from a local cache, leased
// spends credits leased from the upstream window. The loader validates and
// stores it; the fronts pass it with each check as the operation's hint
// (OpMode, limits.Op.Mode), which the upstream tier honours before its
// prefix table. Without an upstream it is ignored.
type Mode uint8

// Modes. ModeDefault means the descriptor named none.
const (
	ModeDefault Mode = iota
	ModeStrict
	ModeCachedDeny
	ModeLeased
)

var modeNames = [...]string{"", "strict", "cached-deny", "leased"}

// OpMode returns m as the core's operation hint (limits.Op.Mode):
// ModeDefault leaves the choice to the backend.
func (m Mode) OpMode() limits.Mode {
	switch m {
	case ModeStrict:
		return limits.ModeStrict
	case ModeCachedDeny:
		return limits.ModeCachedDeny
	case ModeLeased:
		return limits.ModeLeased
	}
	return limits.ModeDefault
}

// String returns the mode as the configuration spells it ("" for ModeDefault).
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", m)
}

// Entry is one key/value pair of a request descriptor.
type Entry struct {
	Key, Value string
}

// Level describes one level of the configuration path that leads to a Rule:
// the descriptor at that depth.
type Level struct {
	Key   string
	Value string // the configured value or pattern; "" matches any value
	// Wildcard is set when Value contains '*'.
	Wildcard bool
	// Share is share_threshold: every value matching the pattern counts
	// against one counter (keyed by the pattern).
	Share bool
	// ValueToMetric is value_to_metric: the request's value goes into the
	// metric name even where the configuration gives none.
	ValueToMetric bool
}

// Rule is one rate_limit block with everything its descriptor says about
// it. A Rule belongs to one Set and is never modified after loading.
type Rule struct {
	Domain string
	// Path is the rule's statistics key below the domain, as
	// envoyproxy/ratelimit names it: the configured levels joined by '.',
	// each "key" or "key_value" ("message_type_marketing.to_number").
	Path string
	// Levels are the descriptors from the top of the domain to this rule.
	Levels []Level

	Name     string   // rate_limit.name ("" if none)
	Replaces []string // rate_limit.replaces[*].name

	// Unlimited is rate_limit.unlimited: always OK, never counted.
	Unlimited bool
	// Block is set when requests_per_unit is 0: every request is over the
	// limit (envoyproxy/ratelimit's README, example 3), and no counter is kept.
	Block bool

	RequestsPerUnit uint32
	Unit            Unit          // UnitNone when period was given
	Period          time.Duration // the window: the unit's length, or period
	Algorithm       engine.Kind   // default engine.KindFixed
	Burst           int64         // configured burst; 0 = requests_per_unit
	// Limit is the engine limit; valid unless Unlimited or Block.
	Limit engine.Limit

	ShadowMode     bool
	QuotaMode      bool
	DetailedMetric bool
	Mode           Mode
	// Metadata is the descriptor's metadata block, as YAML decoded it.
	Metadata map[string]any

	File string // the file it came from
	Line int    // the line of its rate_limit block

	tag           string // counter key suffix: algorithm and period
	dynamicMetric bool   // the metric key depends on request values
	metric        string // SanitizeStatName(Path), for rules whose key does not
}

// String describes the rule in one line, for THROTTLE.POLICIES and logs:
// domain, path, name and the limit.
func (r *Rule) String() string {
	s := r.Domain + " " + r.Path
	if r.Name != "" {
		s += " name=" + r.Name
	}
	switch {
	case r.Unlimited:
		s += " unlimited"
	case r.Block:
		s += " blocked (0 per " + r.window() + ")"
	default:
		s += fmt.Sprintf(" %d per %s %s", r.RequestsPerUnit, r.window(), r.Algorithm.String())
		if r.Burst != 0 {
			s += fmt.Sprintf(" burst=%d", r.Burst)
		}
	}
	if r.ShadowMode {
		s += " shadow"
	}
	if r.Mode != ModeDefault {
		s += " mode=" + r.Mode.String()
	}
	return s
}

func (r *Rule) window() string {
	if r.Unit != UnitNone {
		return r.Unit.String()
	}
	return r.Period.String()
}

// Set is one loaded, validated configuration: every domain of a file or a
// directory. A Set is immutable and safe for concurrent use.
type Set struct {
	domains map[string]*domain
	files   []string
}

type domain struct {
	name  string
	file  string
	root  *node
	rules []*Rule
	names map[string][]*Rule
}

// Domains returns the loaded domains, sorted.
func (s *Set) Domains() []string {
	out := make([]string, 0, len(s.domains))
	for d := range s.domains {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// HasDomain reports whether the domain is loaded.
func (s *Set) HasDomain(name string) bool {
	_, ok := s.domains[name]
	return ok
}

// Files returns the files the Set was loaded from.
func (s *Set) Files() []string { return append([]string(nil), s.files...) }

// Rules returns every rule, sorted by domain and then path: the listing of
// THROTTLE.POLICIES.
func (s *Set) Rules() []*Rule {
	var out []*Rule
	for _, d := range s.Domains() {
		out = append(out, s.domains[d].rules...)
	}
	return out
}

// Lookup returns the rule named name in domain, for THROTTLE.CHECK key
// POLICY domain/name. An unknown domain is ErrUnknownDomain, an unknown name
// ErrUnknownName; a name given to several rules of the domain (the format
// allows it, since replaces drops every rule of a name) is ErrAmbiguousName.
func (s *Set) Lookup(domainName, name string) (*Rule, error) {
	d, ok := s.domains[domainName]
	if !ok {
		return nil, ErrUnknownDomain
	}
	rs := d.names[name]
	switch {
	case name == "" || len(rs) == 0:
		return nil, ErrUnknownName
	case len(rs) > 1:
		return nil, ErrAmbiguousName
	}
	return rs[0], nil
}
