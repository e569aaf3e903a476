package helm_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
)

// tabled are the values sections the README's values table lists, key
// by key.
var tabled = []string{"sourcePartitions", "tests", "audit", "topicsJob", "strimzi", "keda"}

// The README's values table has a row for every value of those sections
// in values.yaml, with its default, and none for a value that is not
// there.
func TestChartREADMEValues(t *testing.T) {
	vals, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // key -> default column
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\| ([^|]+) \\|").FindAllStringSubmatch(string(readme), -1) {
		rows[m[1]] = strings.TrimSpace(m[2])
	}
	want := map[string]string{}
	for _, s := range tabled {
		leaves(s, vals[s], want)
	}
	for key, def := range want {
		got, ok := rows[key]
		switch {
		case !ok:
			t.Errorf("README: no row for %s", key)
		case def != "" && got != "`"+def+"`":
			t.Errorf("README: %s defaults to %s, values.yaml to `%s`", key, got, def)
		}
	}
	for key := range rows {
		if _, ok := want[key]; !ok && slices.Contains(tabled, strings.Split(key, ".")[0]) {
			t.Errorf("README: a row for %s, which values.yaml has not", key)
		}
	}
}

// leaves adds the values under key to out with their defaults as the
// README writes them; resources are one value, their default in
// values.yaml ("").
func leaves(key string, v any, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 0 {
			out[key] = "{}"
			return
		}
		if strings.HasSuffix(key, ".resources") {
			out[key] = ""
			return
		}
		for k, sub := range v {
			leaves(key+"."+k, sub, out)
		}
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = fmt.Sprint(e)
		}
		out[key] = "[" + strings.Join(parts, ", ") + "]"
	case nil:
		out[key] = "null"
	case string:
		if v == "" {
			v = `""`
		}
		out[key] = v
	default:
		out[key] = fmt.Sprint(v)
	}
}
