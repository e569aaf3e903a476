package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"go.yaml.in/yaml/v3"
)

const (
	rulesFile     = "prometheus/relay-alerts.yml"
	ruleTestsFile = "prometheus/relay-alerts.test.yml"
	runbookFile   = "../docs/RUNBOOK.md"
	// runbookURL starts every runbook_url: the placeholder base operators
	// replace with where they browse the repository (docs/OPERATIONS.md, "Dashboard
	// and alerts"), then the runbook.
	runbookURL = "https://relay.invalid/docs/RUNBOOK.md#"
)

// severities are the values of the severity label, as monitoring mixins
// name them: wake someone, or work on it in working hours.
var severities = []string{"critical", "warning"}

type rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

// ruleTests is the part of promtool's test file the checks below read.
type ruleTests struct {
	Tests []struct {
		Name        string `yaml:"name"`
		InputSeries []struct {
			Series string `yaml:"series"`
		} `yaml:"input_series"`
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func alerts(t *testing.T) []rule {
	t.Helper()
	var f ruleFile
	readYAML(t, rulesFile, &f)
	var out []rule
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a rule that is not an alert (%q): the file holds alerts only", g.Name, r.Record)
				continue
			}
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no alerts", rulesFile)
	}
	return out
}

// Every metric the rules use is one relay exports.
func TestRulesUseMetricsRelayExports(t *testing.T) {
	e := exported(t)
	for _, r := range alerts(t) {
		checkNames(t, e, rulesFile+": "+r.Alert, r.Expr)
	}
}

// The unit tests feed the rules series relay exports: a test on a name
// relay does not have would prove nothing.
func TestRuleTestsUseMetricsRelayExports(t *testing.T) {
	e := exported(t)
	var f ruleTests
	readYAML(t, ruleTestsFile, &f)
	for _, tc := range f.Tests {
		for _, in := range tc.InputSeries {
			name, _, _ := strings.Cut(in.Series, "{")
			if why := e.missing(strings.TrimSpace(name)); why != "" {
				t.Errorf("%s, test %q: %s", ruleTestsFile, tc.Name, why)
			}
		}
	}
}

// Every alert fires in a unit test, and is shown not firing too.
func TestEveryAlertHasAFiringAndAQuietTest(t *testing.T) {
	var f ruleTests
	readYAML(t, ruleTestsFile, &f)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range f.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for _, r := range alerts(t) {
		if !fires[r.Alert] {
			t.Errorf("%s: no test in %s where it fires", r.Alert, ruleTestsFile)
		}
		if !quiet[r.Alert] {
			t.Errorf("%s: no test in %s where it does not fire", r.Alert, ruleTestsFile)
		}
	}
}

// Every alert has a severity, a summary, a description, and a runbook_url
// to its own section of the runbook, which exists.
func TestEveryAlertHasItsRunbookSection(t *testing.T) {
	anchors := markdownAnchors(t, runbookFile)
	for _, r := range alerts(t) {
		if !slices.Contains(severities, r.Labels["severity"]) {
			t.Errorf("%s: severity %q, want one of %q", r.Alert, r.Labels["severity"], severities)
		}
		for _, a := range []string{"summary", "description"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
		url := r.Annotations["runbook_url"]
		anchor, ok := strings.CutPrefix(url, runbookURL)
		switch {
		case !ok:
			t.Errorf("%s: runbook_url %q does not start with %s", r.Alert, url, runbookURL)
		case anchor != slug(r.Alert):
			t.Errorf("%s: runbook_url %q, want its own section, #%s", r.Alert, url, slug(r.Alert))
		case !anchors[anchor]:
			t.Errorf("%s: %s has no section with the anchor #%s (a heading \"### %s\")", r.Alert, runbookFile, anchor, r.Alert)
		}
	}
}

// mdLink is a Markdown link to a section: [text](path#anchor), the path
// empty for the same file.
var mdLink = regexp.MustCompile(`\]\(([^)#\s]*)#([^)\s]+)\)`)

// The links to sections of the README and the docs, from them, resolve:
// the runbook's sections, which the alerts link to, above all.
func TestLinksToSectionsResolve(t *testing.T) {
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{}
	for _, doc := range append(docs, "../README.md") {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			target := doc
			if m[1] != "" {
				target = filepath.Join(filepath.Dir(doc), m[1])
			}
			if !strings.HasSuffix(target, ".md") {
				continue
			}
			if anchors[target] == nil {
				anchors[target] = markdownAnchors(t, target)
			}
			if !anchors[target][m[2]] {
				t.Errorf("%s links to %s#%s, which is no section of it", doc, m[1], m[2])
			}
		}
	}
}

// markdownAnchors returns the anchors GitHub gives the headings of a
// Markdown file (code blocks left out): lower case, spaces to "-",
// punctuation dropped; a repeated anchor gets -1, -2, ...
func markdownAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	anchors, seen := map[string]bool{}, map[string]int{}
	fenced := false
	for line := range strings.Lines(string(b)) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		text := strings.TrimLeft(line, "#")
		if fenced || text == line || len(line)-len(text) > 6 || !strings.HasPrefix(text, " ") {
			continue
		}
		a := slug(strings.TrimSpace(text))
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// slug is GitHub's anchor of a heading.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func TestSlugIsGitHubs(t *testing.T) {
	for heading, want := range map[string]string{
		"Upgrades: changing tiers and ordering": "upgrades-changing-tiers-and-ordering",
		"0. Before anything goes wrong":         "0-before-anything-goes-wrong",
		"RelayCommitsStalled":                   "relaycommitsstalled",
		"The `code` label (a_b)":                "the-code-label-a_b",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}
