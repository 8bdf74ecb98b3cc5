package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/throttlekit/throttlekit-server/engine"
)

// Load reads a file, or every *.yaml and *.yml file of a directory (not its
// subdirectories; names starting with '.' are skipped, which also skips the
// "..data" links of a Kubernetes ConfigMap volume), and returns the Set.
// Each file holds one domain; a domain in two files is an error, as in
// envoyproxy/ratelimit without MERGE_DOMAIN_CONFIG. A directory with no
// such file gives an empty Set.
func Load(path string) (*Set, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, &Error{Code: CodeIO, File: path, Msg: err.Error()}
	}
	if !fi.IsDir() {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, &Error{Code: CodeIO, File: path, Msg: err.Error()}
		}
		return Parse(map[string][]byte{path: data})
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, &Error{Code: CodeIO, File: path, Msg: err.Error()}
	}
	files := map[string][]byte{}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			continue
		}
		full := filepath.Join(path, name)
		fi, err := os.Stat(full) // follows symlinks
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed while listing
			}
			return nil, &Error{Code: CodeIO, File: full, Msg: err.Error()}
		}
		if fi.IsDir() {
			continue
		}
		data, err := os.ReadFile(full)
		if err != nil {
			return nil, &Error{Code: CodeIO, File: full, Msg: err.Error()}
		}
		files[full] = data
	}
	return Parse(files)
}

// Parse builds a Set from file contents keyed by file name (the names
// appear in errors). Files are loaded in name order, so the first of two
// files defining a domain is the one an error does not name.
func Parse(files map[string][]byte) (*Set, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	s := &Set{domains: map[string]*domain{}, files: names}
	for _, n := range names {
		d, err := parseFile(n, files[n])
		if err != nil {
			return nil, err
		}
		if prev, ok := s.domains[d.name]; ok {
			return nil, &Error{Code: CodeDuplicateDomain, File: n, Path: d.name,
				Msg: fmt.Sprintf("duplicate domain %q (also in %s)", d.name, prev.file)}
		}
		s.domains[d.name] = d
	}
	return s, nil
}

// node is one descriptor of the configuration tree.
type node struct {
	exact map[string]map[string]*node // key -> value -> node
	any   map[string]*node            // key -> node, for descriptors without a value
	wild  []wildNode                  // descriptors whose value has '*', in file order
	rule  *Rule
	leaf  bool // no nested descriptors
}

type wildNode struct {
	key   string
	parts []string // the value split on '*'
	n     *node
}

type loader struct {
	file string
	dom  *domain
}

func (l *loader) errf(code Code, n *yaml.Node, path, format string, args ...any) error {
	e := &Error{Code: code, File: l.file, Path: path, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line = n.Line
	}
	return e
}

func parseFile(file string, data []byte) (*domain, error) {
	l := &loader{file: file}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &Error{Code: CodeSyntax, File: file, Msg: err.Error()}
	}
	var root *yaml.Node
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		root = doc.Content[0]
	}
	if root == nil || isNull(root) {
		return nil, &Error{Code: CodeDomain, File: file, Msg: "config file cannot have empty domain"}
	}
	fields, err := l.mapping(root, "", rootKeys)
	if err != nil {
		return nil, err
	}
	var name string
	if n := fields["domain"]; n != nil {
		if name, err = l.str(n, ""); err != nil {
			return nil, err
		}
	}
	if name == "" {
		return nil, l.errf(CodeDomain, root, "", "config file cannot have empty domain")
	}
	l.dom = &domain{name: name, file: file, names: map[string][]*Rule{}}
	l.dom.root = &node{}
	if err := l.descriptors(l.dom.root, fields["descriptors"], name, nil); err != nil {
		return nil, err
	}
	sort.SliceStable(l.dom.rules, func(i, j int) bool { return l.dom.rules[i].Path < l.dom.rules[j].Path })
	return l.dom, nil
}

var (
	rootKeys       = []string{"domain", "descriptors"}
	descriptorKeys = []string{"key", "value", "rate_limit", "descriptors", "shadow_mode", "quota_mode",
		"detailed_metric", "value_to_metric", "share_threshold", "metadata", "mode"}
	rateLimitKeys = []string{"unit", "requests_per_unit", "unlimited", "name", "replaces",
		"algorithm", "burst", "period"}
	replacesKeys = []string{"name"}
)

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// mapping checks that n is a mapping whose keys are all in allowed and
// returns its values by key. A key given twice is an error.
func (l *loader) mapping(n *yaml.Node, path string, allowed []string) (map[string]*yaml.Node, error) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return nil, l.errf(CodeType, n, path, "expected a mapping, found %s", kindName(n))
	}
	out := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			return nil, l.errf(CodeType, k, path, "config error, key is not of type string: %v", k.Value)
		}
		ok := false
		for _, a := range allowed {
			if k.Value == a {
				ok = true
				break
			}
		}
		if !ok {
			return nil, l.errf(CodeUnknownKey, k, path, "config error, unknown key '%s' (here: %s)", k.Value, strings.Join(allowed, ", "))
		}
		if _, dup := out[k.Value]; dup {
			return nil, l.errf(CodeUnknownKey, k, path, "key '%s' given twice", k.Value)
		}
		if v.Kind == yaml.AliasNode {
			v = v.Alias
		}
		if isNull(v) {
			continue // "key:" with nothing is absent, as in envoyproxy/ratelimit
		}
		out[k.Value] = v
	}
	return out, nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "an alias"
}

func (l *loader) str(n *yaml.Node, path string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", l.errf(CodeType, n, path, "expected a string, found %s", kindName(n))
	}
	return n.Value, nil
}

func (l *loader) boolean(n *yaml.Node, path, key string) (bool, error) {
	if n == nil {
		return false, nil
	}
	var b bool
	if n.Kind != yaml.ScalarNode || n.Decode(&b) != nil {
		return false, l.errf(CodeType, n, path, "%s must be true or false, found %s", key, kindName(n))
	}
	return b, nil
}

func (l *loader) descriptors(parent *node, list *yaml.Node, path string, levels []Level) error {
	if list == nil {
		parent.leaf = true
		return nil
	}
	if list.Kind != yaml.SequenceNode {
		return l.errf(CodeType, list, path, "descriptors must be a list, found %s", kindName(list))
	}
	if len(list.Content) == 0 {
		parent.leaf = true
	}
	for _, item := range list.Content {
		if err := l.descriptor(parent, item, path, levels); err != nil {
			return err
		}
	}
	return nil
}

func (l *loader) descriptor(parent *node, item *yaml.Node, path string, levels []Level) error {
	f, err := l.mapping(item, path, descriptorKeys)
	if err != nil {
		return err
	}
	var key, value string
	if n := f["key"]; n != nil {
		if key, err = l.str(n, path); err != nil {
			return err
		}
	}
	if key == "" {
		return l.errf(CodeKey, item, path, "descriptor has empty key")
	}
	if n := f["value"]; n != nil {
		if value, err = l.str(n, path); err != nil {
			return err
		}
	}
	here := path + "/" + key
	if value != "" {
		here += "=" + value
	}
	lv := Level{Key: key, Value: value, Wildcard: strings.Contains(value, "*")}
	if lv.Share, err = l.boolean(f["share_threshold"], here, "share_threshold"); err != nil {
		return err
	}
	if lv.ValueToMetric, err = l.boolean(f["value_to_metric"], here, "value_to_metric"); err != nil {
		return err
	}
	if lv.Share && !lv.Wildcard {
		return l.errf(CodeShareThreshold, f["share_threshold"], here,
			"share_threshold can only be used with wildcard values (containing '*'), but found value %q", value)
	}
	n := &node{}
	if value == "" {
		if parent.any == nil {
			parent.any = map[string]*node{}
		}
		if _, dup := parent.any[key]; dup {
			return l.errf(CodeDuplicateDescriptor, item, here, "duplicate descriptor composite key '%s'", key)
		}
		parent.any[key] = n
	} else {
		if parent.exact == nil {
			parent.exact = map[string]map[string]*node{}
		}
		if parent.exact[key] == nil {
			parent.exact[key] = map[string]*node{}
		}
		if _, dup := parent.exact[key][value]; dup {
			return l.errf(CodeDuplicateDescriptor, item, here, "duplicate descriptor composite key '%s_%s'", key, value)
		}
		parent.exact[key][value] = n
		if lv.Wildcard {
			parent.wild = append(parent.wild, wildNode{key: key, parts: strings.Split(value, "*"), n: n})
		}
	}
	levels = append(levels[:len(levels):len(levels)], lv)

	var shadow, quota, detailed bool
	if shadow, err = l.boolean(f["shadow_mode"], here, "shadow_mode"); err != nil {
		return err
	}
	if quota, err = l.boolean(f["quota_mode"], here, "quota_mode"); err != nil {
		return err
	}
	if detailed, err = l.boolean(f["detailed_metric"], here, "detailed_metric"); err != nil {
		return err
	}
	var mode Mode
	if m := f["mode"]; m != nil {
		s, err := l.str(m, here)
		if err != nil {
			return err
		}
		switch s {
		case "strict":
			mode = ModeStrict
		case "cached-deny":
			mode = ModeCachedDeny
		case "leased":
			mode = ModeLeased
		default:
			return l.errf(CodeMode, m, here, "unknown mode %q: want strict, cached-deny or leased", s)
		}
		if f["rate_limit"] == nil {
			return l.errf(CodeMode, m, here, "mode applies to a rate_limit, and this descriptor has none")
		}
	}
	var meta map[string]any
	if m := f["metadata"]; m != nil {
		if m.Kind != yaml.MappingNode {
			return l.errf(CodeType, m, here, "metadata must be a mapping, found %s", kindName(m))
		}
		if err := m.Decode(&meta); err != nil {
			return l.errf(CodeType, m, here, "error parsing metadata: %v", err)
		}
		if !jsonLike(meta) {
			return l.errf(CodeType, m, here, "error parsing metadata: values must be strings, numbers, booleans, null, lists or mappings with string keys")
		}
	}
	if rl := f["rate_limit"]; rl != nil {
		r, err := l.rateLimit(rl, here, levels)
		if err != nil {
			return err
		}
		r.ShadowMode, r.QuotaMode, r.DetailedMetric, r.Mode, r.Metadata = shadow, quota, detailed, mode, meta
		r.dynamicMetric = detailed
		for _, lv := range levels {
			if lv.ValueToMetric {
				r.dynamicMetric = true
			}
		}
		n.rule = r
		l.dom.rules = append(l.dom.rules, r)
		if r.Name != "" {
			l.dom.names[r.Name] = append(l.dom.names[r.Name], r)
		}
	}
	return l.descriptors(n, f["descriptors"], here, levels)
}

func (l *loader) rateLimit(rl *yaml.Node, path string, levels []Level) (*Rule, error) {
	f, err := l.mapping(rl, path+"/rate_limit", rateLimitKeys)
	if err != nil {
		return nil, err
	}
	r := &Rule{Domain: l.dom.name, Levels: levels, File: l.file, Line: rl.Line, Algorithm: engine.KindFixed}
	r.Path = staticPath(levels)
	r.metric = SanitizeStatName(r.Path)
	if r.Unlimited, err = l.boolean(f["unlimited"], path, "unlimited"); err != nil {
		return nil, err
	}
	if n := f["name"]; n != nil {
		if r.Name, err = l.str(n, path); err != nil {
			return nil, err
		}
	}
	if rp := f["replaces"]; rp != nil {
		if rp.Kind != yaml.SequenceNode {
			return nil, l.errf(CodeType, rp, path, "replaces must be a list, found %s", kindName(rp))
		}
		for _, item := range rp.Content {
			rf, err := l.mapping(item, path+"/rate_limit/replaces", replacesKeys)
			if err != nil {
				return nil, err
			}
			name := ""
			if n := rf["name"]; n != nil {
				if name, err = l.str(n, path); err != nil {
					return nil, err
				}
			}
			if name == "" {
				return nil, l.errf(CodeReplaces, item, path, "should not have an empty replaces entry")
			}
			if name == r.Name {
				return nil, l.errf(CodeReplaces, item, path, "replaces should not contain name of same descriptor")
			}
			r.Replaces = append(r.Replaces, name)
		}
	}
	unitNode, periodNode := f["unit"], f["period"]
	if unitNode != nil {
		s, err := l.str(unitNode, path)
		if err != nil {
			return nil, err
		}
		for u := UnitSecond; u <= UnitYear; u++ {
			if strings.EqualFold(s, u.String()) {
				r.Unit = u
			}
		}
		if r.Unit == UnitNone {
			if r.Unlimited {
				// envoyproxy/ratelimit ignores an invalid unit beside unlimited.
				unitNode = nil
			} else {
				return nil, l.errf(CodeUnit, unitNode, path, "invalid rate limit unit '%s'", s)
			}
		}
	}
	if r.Unlimited {
		for _, k := range []string{"requests_per_unit", "algorithm", "burst", "period"} {
			if f[k] != nil {
				return nil, l.errf(CodeUnit, f[k], path, "should not specify %s when unlimited", k)
			}
		}
		if unitNode != nil {
			return nil, l.errf(CodeUnit, unitNode, path, "should not specify rate limit unit when unlimited")
		}
		r.tag = "unlimited"
		return r, nil
	}
	switch {
	case unitNode != nil && periodNode != nil:
		return nil, l.errf(CodePeriod, periodNode, path, "give unit or period, not both")
	case periodNode != nil:
		s, err := l.str(periodNode, path)
		if err != nil {
			return nil, err
		}
		d, ok := parsePeriod(s)
		if !ok {
			return nil, l.errf(CodePeriod, periodNode, path, "period %q is not a positive duration such as 90s, 1.5h or 2d", s)
		}
		r.Period = d
	case unitNode != nil:
		r.Period = r.Unit.Duration()
	default:
		return nil, l.errf(CodeUnit, rl, path, "invalid rate limit unit ''")
	}
	if n := f["requests_per_unit"]; n != nil {
		var v uint32
		if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil {
			return nil, l.errf(CodeType, n, path, "requests_per_unit must be an integer from 0 to 4294967295, found %s", kindName(n))
		}
		r.RequestsPerUnit = v
	}
	if n := f["algorithm"]; n != nil {
		s, err := l.str(n, path)
		if err != nil {
			return nil, err
		}
		switch s {
		case "gcra":
			r.Algorithm = engine.KindGCRA
		case "token":
			r.Algorithm = engine.KindToken
		case "fixed":
			r.Algorithm = engine.KindFixed
		case "sliding":
			r.Algorithm = engine.KindSliding
		default:
			return nil, l.errf(CodeAlgorithm, n, path, "unknown algorithm %q: want gcra, token, fixed or sliding", s)
		}
	}
	if n := f["burst"]; n != nil {
		var b int64
		if n.Kind != yaml.ScalarNode || n.Decode(&b) != nil || b <= 0 {
			return nil, l.errf(CodeBurst, n, path, "burst must be a positive integer, found %s", kindName(n))
		}
		if r.Algorithm != engine.KindGCRA && r.Algorithm != engine.KindToken {
			return nil, l.errf(CodeBurst, n, path, "burst applies only to algorithm gcra and token")
		}
		r.Burst = b
	}
	r.tag = r.Algorithm.String() + ":" + r.Period.String()
	if r.RequestsPerUnit == 0 {
		r.Block = true
		return r, nil
	}
	lim, err := engine.NewLimit(r.Algorithm, int64(r.RequestsPerUnit), int64(r.Period), r.Burst)
	if err != nil {
		return nil, l.errf(CodeRate, rl, path, "%d per %s cannot be enforced: %v", r.RequestsPerUnit, r.window(), err)
	}
	r.Limit = lim
	return r, nil
}

// parsePeriod accepts a Go duration ("90s", "1h30m") or a whole number of
// days ("2d"); the result must be positive.
func parsePeriod(s string) (time.Duration, bool) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n <= 0 || n > int64(1<<62)/int64(24*time.Hour) {
			return 0, false
		}
		return time.Duration(n) * 24 * time.Hour, true
	}
	d, err := time.ParseDuration(s)
	return d, err == nil && d > 0
}

// staticPath is envoyproxy/ratelimit's statistics key of a rule below its
// domain: each level as "key" or "key_value", joined by '.'.
func staticPath(levels []Level) string {
	var b strings.Builder
	for i, lv := range levels {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(lv.Key)
		if lv.Value != "" {
			b.WriteByte('_')
			b.WriteString(lv.Value)
		}
	}
	return b.String()
}

// jsonLike reports whether v holds only what a protobuf Struct can carry,
// as envoyproxy/ratelimit converts metadata to one.
func jsonLike(v any) bool {
	switch v := v.(type) {
	case nil, bool, int, int64, uint64, float64, string:
		return true
	case map[string]any:
		for _, x := range v {
			if !jsonLike(x) {
				return false
			}
		}
		return true
	case []any:
		for _, x := range v {
			if !jsonLike(x) {
				return false
			}
		}
		return true
	}
	return false
}
