package replay

import (
	"context"
	"testing"
	"time"

	"relay/internal/schema"
	"relay/internal/tiers"
)

type fakeAdmitter map[string]error

func (f fakeAdmitter) Admit(_ context.Context, v []byte) (schema.Admitted, error) {
	return schema.Admitted{Record: map[string]any{"v": string(v)}}, f[string(v)]
}

type fakeRules struct{}

func (fakeRules) Check(_ context.Context, rec map[string]any) error {
	if rec["v"] == "big" {
		return &tiers.Error{Cause: tiers.CauseRuleReject, Name: "BIG"}
	}
	return nil
}

// The judge takes the pipeline's order (admission, then rules on the
// decoded record) and its decide table, as a first attempt.
func TestJudgeVerdicts(t *testing.T) {
	j := &Judge{
		Admitter: fakeAdmitter{"junk": tiers.Failf(tiers.CauseWireFormat, "junk"), "down": tiers.Failf(tiers.CauseRegistryUnavailable, "down")},
		Rules:    fakeRules{}, Policy: tiers.Policy{BlockingAttempts: 1, BlockingBackoff: time.Second, BlockingMaxWait: time.Second, MaxAttempts: 5, MaxElapsed: time.Hour, UnknownAttempts: 2},
	}
	for _, tc := range []struct {
		value string
		pass  bool
		kind  tiers.Kind
	}{
		{"ok", true, 0},
		{"junk", false, tiers.Quarantine},
		{"big", false, tiers.Reject},
		{"down", false, tiers.RetryInPlace},
	} {
		pass, d := j.Verdict(context.Background(), []byte(tc.value), time.Now())
		if pass != tc.pass || (!pass && d.Kind != tc.kind) {
			t.Errorf("%s: pass %v, %v; want %v, %v", tc.value, pass, d.Kind, tc.pass, tc.kind)
		}
	}
	if pass, _ := (&Judge{Rules: fakeRules{}}).Verdict(context.Background(), []byte("big"), time.Now()); !pass {
		t.Error("without admission the pipeline checks nothing, rules included")
	}
}
