package persist

import (
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in                 string
		table, method      string // postgres
		region, endpoint   string // dynamodb
		segments, parallel int
	}{
		{in: "postgres://u:p@h:5432/db", table: DefaultTable, method: WriteUnnest},
		{in: "postgresql://h/db?table=limits&write=copy&sslmode=disable", table: "limits", method: WriteCopy},
		{in: "dynamodb://limits?region=eu-west-1", table: "limits", region: "eu-west-1", segments: 4, parallel: 8},
		{in: "dynamodb://tbl?endpoint=http%3A%2F%2F127.0.0.1%3A8000&segments=2&parallel=3", table: "tbl", endpoint: "http://127.0.0.1:8000", segments: 2, parallel: 3},
		{in: "dynamodb:", table: DefaultTable, segments: 4, parallel: 8},
	} {
		got, err := parseURL(tc.in)
		if err != nil {
			t.Errorf("parseURL(%q): %v", tc.in, err)
			continue
		}
		switch {
		case got.pg != nil:
			if got.pg.table != tc.table || got.pg.method != tc.method {
				t.Errorf("parseURL(%q) = table %q method %q", tc.in, got.pg.table, got.pg.method)
			}
			if _, ok := got.pg.pool.ConnConfig.RuntimeParams["table"]; ok {
				t.Errorf("parseURL(%q): table passed on to the server", tc.in)
			}
		case got.dyn != nil:
			d := got.dyn
			if d.table != tc.table || d.region != tc.region || d.endpoint != tc.endpoint || d.segments != tc.segments || d.parallel != tc.parallel {
				t.Errorf("parseURL(%q) = %+v", tc.in, *d)
			}
		}
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"postgres://u:p@h:1/db?table=x&write=copy", "postgresql://h/db?sslmode=require",
		"dynamodb://t?region=r&endpoint=http://h:1&segments=3", "dynamodb:t", "x://", "%", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseURL(s)
		if err != nil {
			if CodeOf(err) != CodeBadURL || !strings.HasPrefix(err.Error(), "persist: ") {
				t.Fatalf("parseURL(%q): %v is not a %s error", s, err, CodeBadURL)
			}
			return
		}
		if (got.pg == nil) == (got.dyn == nil) {
			t.Fatalf("parseURL(%q) = %+v: want exactly one backend", s, got)
		}
		name := ""
		if got.pg != nil {
			name = got.pg.table
		} else {
			name = got.dyn.table
		}
		if !validTable(name) {
			t.Fatalf("parseURL(%q) accepted table %q", s, name)
		}
	})
}
