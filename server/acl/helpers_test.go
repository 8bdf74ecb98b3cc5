package acl

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// testCommands is a small command table with Redis 7's categories for the
// commands Redis also has, so the same rules can be checked against a real
// redis-server.
var testCommands = []Command{
	{Name: "get", Categories: []string{"read", "string", "fast"}},
	{Name: "set", Categories: []string{"write", "string", "slow"}},
	{Name: "del", Categories: []string{"keyspace", "write", "slow"}},
	{Name: "flushall", Categories: []string{"keyspace", "write", "slow", "dangerous"}},
	{Name: "select", Categories: []string{"fast", "connection"}},
	{Name: "keys", Categories: []string{"keyspace", "read", "slow", "dangerous"}},
	{Name: "ping", Categories: []string{"fast", "connection"}},
	{Name: "auth", Categories: []string{"fast", "connection"}, NoAuth: true},
	{Name: "config", Categories: []string{"slow"}, Subcommands: []Command{
		{Name: "get", Categories: []string{"admin", "slow", "dangerous"}},
		{Name: "set", Categories: []string{"admin", "slow", "dangerous"}},
		{Name: "resetstat", Categories: []string{"admin", "slow", "dangerous"}},
	}},
	{Name: "client", Categories: []string{"slow"}, Subcommands: []Command{
		{Name: "setname", Categories: []string{"slow", "connection"}},
		{Name: "list", Categories: []string{"admin", "slow", "dangerous", "connection"}},
	}},
	{Name: "throttle.check", Categories: []string{"write", "fast", "throttle"}},
	{Name: "multi", Categories: []string{"fast", "transaction"}},
	{Name: "exec", Categories: []string{"slow", "transaction"}},
}

// Indices of testCommands entries.
const (
	cGet = iota
	cSet
	cDel
	cFlushall
	cSelect
	cKeys
	cPing
	cAuth
	cConfig
	cClient
	cThrottle
	cMulti
	cExec
)

func newTestACL(t testing.TB) *ACL {
	t.Helper()
	a, err := New(testCommands)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// ruleVector is one case of testdata/rules.txt.
type ruleVector struct {
	line  int
	rules []string
	list  string
	err   string
	since string // minimum Redis version whose rendering matches, "" for any
}

func readRuleVectors(t testing.TB) []ruleVector {
	t.Helper()
	f, err := os.Open("testdata/rules.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []ruleVector
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("rules.txt:%d: no key", n)
		}
		val = strings.TrimPrefix(val, " ")
		switch key {
		case "rules":
			v := ruleVector{line: n}
			if val != "" {
				v.rules = strings.Split(val, " ")
			}
			out = append(out, v)
		case "list":
			out[len(out)-1].list = val
		case "error":
			out[len(out)-1].err = val
		case "redis":
			out[len(out)-1].since = val
		default:
			t.Fatalf("rules.txt:%d: unknown key %q", n, key)
		}
	}
	return out
}
