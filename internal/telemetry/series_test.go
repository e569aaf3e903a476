package telemetry

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"relay/internal/ledger"
)

// A fresh /metrics already shows the counters a dashboard sums, at 0, the
// build, and the Go runtime and process collectors.
func TestSeriesExistFromTheStart(t *testing.T) {
	m, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Close(context.Background()) }()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	for _, f := range families {
		series[f.GetName()] = len(f.GetMetric())
	}
	for _, name := range []string{"relay_records_consumed_total", "relay_records_committed_total", "relay_outputs_committed_total",
		"relay_transactions_committed_total", "relay_build_info", "go_goroutines", "process_resident_memory_bytes"} {
		if series[name] == 0 {
			t.Errorf("%s is missing from a fresh /metrics", name)
		}
	}
	if got := series["relay_records_outcome_total"]; got != len(ledger.RecordOutcomes) {
		t.Errorf("relay_records_outcome_total has %d series at start, want one per outcome (%d)", got, len(ledger.RecordOutcomes))
	}
}

// The code label takes at most maxCodeLabels values; later codes are
// "other", and a code seen before keeps its own value.
func TestCodeLabelsAreBounded(t *testing.T) {
	c := newCodeLabels(3)
	for i := range 3 {
		if got := c.label(fmt.Sprint("C", i)); got != fmt.Sprint("C", i) {
			t.Fatalf("code %d labelled %q", i, got)
		}
	}
	if got := c.label("REJECTED_FROM_HOOK_" + strings.Repeat("X", 10)); got != OtherCode {
		t.Errorf("a code past the bound is labelled %q, want %q", got, OtherCode)
	}
	if got := c.label("C1"); got != "C1" {
		t.Errorf("a code seen before is labelled %q", got)
	}
}
