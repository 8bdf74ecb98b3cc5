package policy

import (
	"regexp"
	"strings"
	"time"

	"github.com/throttlekit/throttlekit-server/engine"
)

// Match finds the rule for one request descriptor of domain, exactly as
// envoyproxy/ratelimit's GetLimit does (src/config/config_impl.go), and
// returns nil when none applies (unknown domain, no matching descriptor, or
// a descriptor whose depth differs from the rule's). See "Matching" in the
// package doc. It does not allocate.
func (s *Set) Match(domainName string, entries []Entry) *Rule {
	d := s.domains[domainName]
	if d == nil || len(entries) == 0 {
		return nil
	}
	cur := d.root
	for i := range entries {
		e := &entries[i]
		next := cur.exact[e.Key][e.Value]
		if next == nil {
			for j := range cur.wild {
				w := &cur.wild[j]
				if w.key == e.Key && wildcardMatch(w.parts, e.Value) {
					next = w.n
					break
				}
			}
		}
		if next == nil {
			next = cur.any[e.Key]
		}
		if next == nil {
			return nil
		}
		if i == len(entries)-1 {
			return next.rule
		}
		if next.leaf {
			return nil // the request is deeper than the configuration
		}
		cur = next
	}
	return nil
}

// wildcardMatch reports whether value matches the pattern split on '*':
// every '*' matches any run of bytes, the literal parts match in order.
func wildcardMatch(parts []string, value string) bool {
	if len(parts) == 1 {
		return parts[0] == value
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(value) < len(first)+len(last) || !strings.HasPrefix(value, first) || !strings.HasSuffix(value, last) {
		return false
	}
	rest := value[len(first) : len(value)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}

// AppendKey appends the counter key of the rule for entries (which must be
// the entries Match was given for r) to dst and returns it. See "Counter
// keys" in the package doc. It allocates only if dst must grow.
func (r *Rule) AppendKey(dst []byte, entries []Entry) []byte {
	dst = append(dst, "rls:"...)
	dst = appendEscaped(dst, r.Domain)
	for i := range entries {
		dst = append(dst, ':')
		dst = appendEscaped(dst, entries[i].Key)
		dst = append(dst, '=')
		if i < len(r.Levels) && r.Levels[i].Share {
			dst = appendEscaped(dst, r.Levels[i].Value)
		} else {
			dst = appendEscaped(dst, entries[i].Value)
		}
	}
	dst = append(dst, '#')
	return append(dst, r.tag...)
}

// appendEscaped appends s with '\', ':', '=' and '#' escaped by a '\'.
func appendEscaped(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', ':', '=', '#':
			dst = append(dst, '\\', c)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// MetricKey returns the statistics key of the rule below its domain for
// entries, as envoyproxy/ratelimit builds it: Path, unless the rule has
// detailed_metric (every level as key_value with the request's value, a
// shared wildcard level with its pattern) or a level has value_to_metric
// (that level's request value added to its key). The result is sanitised
// as envoyproxy/ratelimit sanitises stat names (':' and '|' become '_', so
// do the dots of an IPv4 address). It allocates only for rules whose key
// depends on the request.
func (r *Rule) MetricKey(entries []Entry) string {
	if !r.dynamicMetric {
		return r.metricStatic()
	}
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteByte('.')
		}
		var lv Level
		if i < len(r.Levels) {
			lv = r.Levels[i]
		}
		v := ""
		switch {
		case lv.Share:
			v = lv.Value
		case r.DetailedMetric:
			v = "_" + e.Value // always key_value, even for an empty value
		case lv.Wildcard && lv.ValueToMetric:
			v = e.Value
		case lv.Value != "":
			v = lv.Value
		case lv.ValueToMetric:
			v = e.Value
		}
		b.WriteString(e.Key)
		if v != "" && !(r.DetailedMetric && !lv.Share) {
			b.WriteByte('_')
		}
		b.WriteString(v)
	}
	return SanitizeStatName(b.String())
}

func (r *Rule) metricStatic() string {
	if r.metric == "" {
		return SanitizeStatName(r.Path)
	}
	return r.metric
}

var ipv4 = regexp.MustCompile(`\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}`)

// SanitizeStatName rewrites a statistics key as envoyproxy/ratelimit does
// (src/utils/utilities.go, SanitizeStatName): ':' and '|' become '_', and
// so do the dots inside anything shaped like an IPv4 address.
func SanitizeStatName(s string) string {
	if strings.ContainsAny(s, ":|") {
		s = strings.NewReplacer(":", "_", "|", "_").Replace(s)
	}
	if !strings.Contains(s, ".") {
		return s
	}
	return ipv4.ReplaceAllStringFunc(s, func(ip string) string { return strings.ReplaceAll(ip, ".", "_") })
}

// UnitMultiple expresses the rule's window as a whole number of the largest
// unit that divides it, for the RLS response's current_limit (unit and
// unit_multiplier): 90s is 90 seconds, 2h is 2 hours. A window that is not
// whole seconds gives UnitNone.
func (r *Rule) UnitMultiple() (Unit, uint32) {
	if r.Unit != UnitNone {
		return r.Unit, 1
	}
	for u := UnitYear; u >= UnitSecond; u-- {
		d := u.Duration()
		if r.Period%d == 0 && r.Period/d <= 1<<32-1 {
			return u, uint32(r.Period / d)
		}
	}
	return UnitNone, 0
}

// Override returns a rule for a limit the request itself carries (Envoy's
// descriptor limit override): requests_per_unit per unit, fixed window, no
// name, no shadow mode, as envoyproxy/ratelimit applies one. Its counter
// key and statistics key come from the request's entries. Override
// allocates; it is meant for the rare requests that carry an override.
func Override(domainName string, entries []Entry, requestsPerUnit uint32, unit Unit) (*Rule, error) {
	if unit < UnitSecond || unit > UnitYear {
		return nil, &Error{Code: CodeUnit, Path: domainName, Msg: "override with an unknown unit"}
	}
	levels := make([]Level, len(entries))
	for i, e := range entries {
		levels[i] = Level{Key: e.Key, Value: e.Value}
	}
	r := &Rule{Domain: domainName, Levels: levels, Path: staticPath(levels), RequestsPerUnit: requestsPerUnit,
		Unit: unit, Period: unit.Duration(), Algorithm: engine.KindFixed}
	r.tag = r.Algorithm.String() + ":" + r.Period.String()
	if requestsPerUnit == 0 {
		r.Block = true
		return r, nil
	}
	lim, err := engine.NewLimit(engine.KindFixed, int64(requestsPerUnit), int64(r.Period), 0)
	if err != nil {
		return nil, &Error{Code: CodeRate, Path: domainName, Msg: err.Error()}
	}
	r.Limit = lim
	return r, nil
}

// WindowEnd returns the end (ns since the epoch) of the window of the
// rule's period that holds now, windows being aligned on the epoch, as
// envoyproxy/ratelimit computes duration_until_reset (src/utils/utilities.go,
// CalculateReset, at second resolution). rls uses it for fixed-window and
// blocking rules.
func (r *Rule) WindowEnd(now int64) int64 {
	p := int64(r.Period)
	if p <= 0 {
		p = int64(time.Second)
	}
	return (now/p + 1) * p
}
