package telemetry

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// exported lists every metric family the Exporter writes.
func exported() map[string]bool {
	m := map[string]bool{}
	for name := range help {
		m[name] = true
	}
	return m
}

var metricRef = regexp.MustCompile(`\bthrottlekit_[a-z_]+`)

// family maps a sample name to its family (histogram suffixes removed).
func family(name string) string {
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, suf); ok && help[b][0] == "histogram" {
			return b
		}
	}
	return name
}

// TestDeployFilesUseExportedNames reads the dashboard, the alerting rules and
// the deploy README and checks that every throttlekit_ metric they name is one
// the Exporter writes, and that the dashboard and README cover all of them.
func TestDeployFilesUseExportedNames(t *testing.T) {
	want := exported()
	for _, tt := range []struct {
		file   string
		covers bool // must mention every family
	}{
		{"../deploy/grafana-dashboard.json", true},
		{"../deploy/alerts.yml", false},
		{"../deploy/alerts_test.yml", false},
		{"../deploy/README.md", true},
	} {
		data, err := os.ReadFile(tt.file)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, ref := range metricRef.FindAllString(string(data), -1) {
			f := family(ref)
			if !want[f] {
				t.Errorf("%s names %s, which is not exported", tt.file, ref)
			}
			seen[f] = true
		}
		if !tt.covers {
			continue
		}
		for name := range want {
			if !seen[name] && name != MetricBuildInfo {
				t.Errorf("%s does not show %s", tt.file, name)
			}
		}
	}
}

// TestDashboardShape checks the dashboard JSON is what Grafana imports: every
// panel has a unique id and a grid position, and every query a data source
// from the dashboard's datasource variable.
func TestDashboardShape(t *testing.T) {
	data, err := os.ReadFile("../deploy/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID        string `json:"uid"`
		Templating struct {
			List []struct{ Name, Type string } `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID      int            `json:"id"`
			Type    string         `json:"type"`
			Title   string         `json:"title"`
			GridPos map[string]int `json:"gridPos"`
			Targets []struct {
				Expr       string            `json:"expr"`
				RefID      string            `json:"refId"`
				Datasource map[string]string `json:"datasource"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("uid %q, %d panels", d.UID, len(d.Panels))
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" || vars["instance"] != "query" {
		t.Fatalf("templating variables = %v", vars)
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos["w"] == 0 || p.GridPos["h"] == 0 {
			t.Errorf("panel %q has no size", p.Title)
		}
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if q.Datasource["uid"] != "${datasource}" || q.RefID == "" || q.Expr == "" {
				t.Errorf("panel %q query %+v", p.Title, q)
			}
		}
	}
}
