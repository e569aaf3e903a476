package cli

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// -o yaml is -o json's document: the same names in the same order, and
// the same values when read back (a string that YAML would read as a
// boolean, a number or null stays a string).
func TestWriteYAMLIsTheJSONDocument(t *testing.T) {
	v := struct {
		Zeta   string         `json:"zeta"`
		Alpha  string         `json:"alpha"`
		Null   string         `json:"nullish"`
		N      int64          `json:"n"`
		Lines  string         `json:"lines"`
		Colon  string         `json:"colon"`
		Empty  []string       `json:"empty"`
		Nested map[string]any `json:"nested"`
	}{"true", "0123", "null", 1 << 53, "a\nb", "a: b #c", []string{}, map[string]any{"k": []any{1, "x", nil}}}
	var j, y bytes.Buffer
	if err := WriteJSON(&j, v); err != nil {
		t.Fatal(err)
	}
	if err := WriteYAML(&y, v); err != nil {
		t.Fatal(err)
	}
	var fromJSON, fromYAML any
	if err := json.Unmarshal(j.Bytes(), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(y.Bytes(), &fromYAML); err != nil {
		t.Fatal(err)
	}
	// JSON reads numbers as float64, YAML as int: compare through JSON.
	back, _ := json.Marshal(fromYAML)
	var again any
	_ = json.Unmarshal(back, &again)
	if !reflect.DeepEqual(again, fromJSON) {
		t.Errorf("yaml reads back as %v, json as %v:\n%s", again, fromJSON, y.String())
	}
	if !strings.HasPrefix(y.String(), "zeta: \"true\"\nalpha: \"0123\"\n") || strings.ContainsAny(y.String()[:10], "{") {
		t.Errorf("not in the JSON's order, or not block style:\n%s", y.String())
	}
}
