package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const dashboardFile = "grafana/relay-dashboard.json"

// The data source every panel and query uses: the dashboard's variable.
const datasourceUID = "${datasource}"

// filters are the matchers every selector of a panel carries, so that the
// job and instance variables narrow every panel.
var filters = []string{`job=~"$job"`, `instance=~"$instance"`}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID          int         `json:"id"`
	Type        string      `json:"type"`
	Title       string      `json:"title"`
	Description string      `json:"description"`
	Datasource  *datasource `json:"datasource"`
	GridPos     struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID      string      `json:"refId"`
		Datasource *datasource `json:"datasource"`
		Expr       string      `json:"expr"`
	} `json:"targets"`
}

type variable struct {
	Name  string          `json:"name"`
	Type  string          `json:"type"`
	Query json.RawMessage `json:"query"`
}

type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// query is one PromQL query of the dashboard: a panel's target, or the
// selector of a variable's label_values().
type query struct {
	where, expr string
}

var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$`)

func queries(t *testing.T, d dashboard) []query {
	t.Helper()
	var out []query
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("variable %s: query: %v", v.Name, err)
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(<selector>, <label>)", v.Name, q.Query)
			continue
		}
		out = append(out, query{"variable " + v.Name, m[1]})
	}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, query{fmt.Sprintf("panel %d %q, query %s", p.ID, p.Title, tg.RefID), tg.Expr})
		}
	}
	return out
}

// Every metric the dashboard queries is one relay exports.
func TestDashboardUsesMetricsRelayExports(t *testing.T) {
	e := exported(t)
	for _, q := range queries(t, readDashboard(t)) {
		checkNames(t, e, dashboardFile+": "+q.where, q.expr)
	}
}

// The dashboard asks for its Prometheus data source and its job and
// instance, and every panel follows them.
func TestDashboardFollowsItsVariables(t *testing.T) {
	d := readDashboard(t)
	if d.Title == "" || d.UID == "" {
		t.Errorf("title %q, uid %q: both are needed", d.Title, d.UID)
	}
	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if v := vars["datasource"]; v.Type != "datasource" || string(v.Query) != `"prometheus"` {
		t.Errorf("variable datasource: type %q, query %s; want a Prometheus data source variable", v.Type, v.Query)
	}
	for _, name := range []string{"job", "instance"} {
		if vars[name].Type != "query" {
			t.Errorf("variable %s: type %q, want query", name, vars[name].Type)
		}
	}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if p.Title == "" || p.Description == "" {
			t.Errorf("panel %d: title %q, description %q: both are needed", p.ID, p.Title, p.Description)
		}
		if p.Datasource == nil || p.Datasource.UID != datasourceUID || p.Datasource.Type != "prometheus" {
			t.Errorf("panel %d %q: data source %v, want prometheus %s", p.ID, p.Title, p.Datasource, datasourceUID)
		}
		for _, tg := range p.Targets {
			if tg.Datasource == nil || tg.Datasource.UID != datasourceUID {
				t.Errorf("panel %d %q, query %s: data source %v, want %s", p.ID, p.Title, tg.RefID, tg.Datasource, datasourceUID)
			}
			checkFilters(t, fmt.Sprintf("panel %d %q, query %s", p.ID, p.Title, tg.RefID), tg.Expr)
		}
	}
}

func checkFilters(t *testing.T, where, expr string) {
	t.Helper()
	sels, err := selectors(expr)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	for _, s := range sels {
		for _, f := range filters {
			if !strings.Contains(s.matchers, f) {
				t.Errorf("%s: %s lacks %s", where, s.name, f)
			}
		}
	}
}

// Panels have distinct ids and fit the 24-column grid without overlapping.
func TestDashboardLayout(t *testing.T) {
	d := readDashboard(t)
	ids := map[int]bool{}
	for i, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("panel %d %q: gridPos %+v does not fit the 24 columns", p.ID, p.Title, g)
		}
		for _, q := range d.Panels[:i] {
			o := q.GridPos
			if g.X < o.X+o.W && o.X < g.X+g.W && g.Y < o.Y+o.H && o.Y < g.Y+g.H {
				t.Errorf("panels %d and %d overlap", q.ID, p.ID)
			}
		}
	}
}

// grafanaVariable is a variable in a query: $name, ${name}, ${name:format}.
var grafanaVariable = regexp.MustCompile(`\$(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)`)

// promQL is a dashboard query as Prometheus would get it: Grafana's
// interval variables become a duration, the others a value.
func promQL(expr string) string {
	return grafanaVariable.ReplaceAllStringFunc(expr, func(v string) string {
		if strings.Contains(v, "__") {
			return "5m" // $__rate_interval, $__interval, $__range
		}
		return "x"
	})
}

// promtool parses every dashboard query: each becomes a recording rule of
// a rules file that `promtool check rules` reads. RELAY_PROMTOOL names
// the binary; make rules and make test set it.
func TestDashboardQueriesParse(t *testing.T) {
	promtool := os.Getenv("RELAY_PROMTOOL")
	if promtool == "" {
		t.Skip("RELAY_PROMTOOL is not set (make rules and make test set it)")
	}
	type record struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var recs []record
	for i, q := range queries(t, readDashboard(t)) {
		t.Logf("dashboard:query_%d is %s", i, q.where)
		recs = append(recs, record{fmt.Sprintf("dashboard:query_%d", i), promQL(q.expr)})
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": recs}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput()
	if err != nil {
		t.Errorf("promtool check rules on the dashboard's queries: %v\n%s", err, out)
	}
}
