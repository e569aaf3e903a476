package rules

import (
	"context"
	"errors"
	"strings"
	"testing"

	"relay/internal/tiers"
)

const good = `rules:
  - name: NEGATIVE_AMOUNT
    expr: record.amount < 0
  - name: BLOCKED_TENANT
    expr: record.tenant in ["t-666"]
    action: quarantine
`

func TestCheck(t *testing.T) {
	s, err := Parse("rules.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		rec  map[string]any
		code string
	}{
		{map[string]any{"amount": int64(5), "tenant": "t-1"}, ""},
		{map[string]any{"amount": int64(-1), "tenant": "t-1"}, "REJECTED_NEGATIVE_AMOUNT"},
		{map[string]any{"amount": 3, "tenant": "t-666"}, "RULE_BLOCKED_TENANT"},
	}
	for _, tc := range cases {
		err := s.Check(context.Background(), tc.rec)
		if tc.code == "" {
			if err != nil {
				t.Errorf("%v: %v", tc.rec, err)
			}
			continue
		}
		if _, code := tiers.Classify(err); code != tc.code {
			t.Errorf("%v: code %s, want %s (%v)", tc.rec, code, tc.code, err)
		}
	}
	// A run-time failure is not a rejection.
	err = s.Check(context.Background(), map[string]any{"tenant": "t-1"})
	var te *tiers.Error
	if err == nil || errors.As(err, &te) || !strings.Contains(err.Error(), "NEGATIVE_AMOUNT") {
		t.Fatalf("missing field: %v", err)
	}
}

func TestParseErrorsNameFileRuleAndPosition(t *testing.T) {
	bad := `rules:
  - name: OK_RULE
    expr: record.a > 1
  - name: BROKEN
    expr: record.amount <
  - name: lower case
    expr: "true"
  - name: NOT_BOOL
    expr: 1 + 2
  - name: BAD_ACTION
    expr: "true"
    action: drop
`
	_, err := Parse("/etc/relay/rules.yaml", []byte(bad))
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	for _, want := range []string{"/etc/relay/rules.yaml:4: rule 2 (BROKEN)", "1:16", "rules.yaml:6", "upper-snake", "NOT_BOOL", "must give a bool", "BAD_ACTION", `"drop"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	for _, in := range []string{"", "rules: []", "rulez:\n  - name: A\n", ":::"} {
		if _, err := Parse("r.yaml", []byte(in)); err == nil {
			t.Errorf("Parse(%q) accepted", in)
		}
	}
}
