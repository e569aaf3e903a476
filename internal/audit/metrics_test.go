package audit

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// A run that could not complete replaces a clean run's file: clean is 0,
// the outcome incomplete, no counts are left from before, and the last
// success is carried over from the earlier file.
func TestAnIncompleteRunLeavesNoCleanBehind(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay_audit.prom")
	first := time.Unix(1_800_000_000, 0)
	clean := &Report{Source: "orders", Clean: true, Totals: map[Kind]int64{}}
	if err := (&RunResult{Source: "orders", At: first, Report: clean}).WriteMetrics(path); err != nil {
		t.Fatal(err)
	}
	text := read(t, path)
	for _, want := range []string{
		`relay_audit_clean{source="orders"} 1`,
		`relay_audit_outcome{outcome="clean",source="orders"} 1`,
		`relay_audit_last_success_timestamp_seconds{source="orders"} 1.8e+09`,
		`relay_audit_findings{kind="lost",source="orders"} 0`,
	} {
		if !strings.Contains(text, want) {
			t.Fatalf("after a clean run, no %q in:\n%s", want, text)
		}
	}

	second := first.Add(24 * time.Hour)
	failed := &RunResult{Source: "orders", At: second, Err: errors.New("topic orders.valid: Broker: Topic authorization failed")}
	if err := failed.WriteMetrics(path); err != nil {
		t.Fatal(err)
	}
	text = read(t, path)
	for _, want := range []string{
		`relay_audit_clean{source="orders"} 0`,
		`relay_audit_outcome{outcome="incomplete",source="orders"} 1`,
		`relay_audit_outcome{outcome="clean",source="orders"} 0`,
		`relay_audit_last_run_timestamp_seconds{source="orders"} 1.8000864e+09`,
		`relay_audit_last_success_timestamp_seconds{source="orders"} 1.8e+09`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("after an incomplete run, no %q in:\n%s", want, text)
		}
	}
	if strings.Contains(text, "relay_audit_findings{") || strings.Contains(text, "relay_audit_records{") {
		t.Errorf("an incomplete run left counts it did not make:\n%s", text)
	}

	found := &Report{Source: "orders", Totals: map[Kind]int64{KindLost: 2}}
	if err := (&RunResult{Source: "orders", At: second.Add(time.Hour), Report: found}).WriteMetrics(path); err != nil {
		t.Fatal(err)
	}
	text = read(t, path)
	for _, want := range []string{
		`relay_audit_clean{source="orders"} 0`,
		`relay_audit_outcome{outcome="findings",source="orders"} 1`,
		`relay_audit_findings{kind="lost",source="orders"} 2`,
		`relay_audit_last_success_timestamp_seconds{source="orders"} 1.80009e+09`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("after a run with findings, no %q in:\n%s", want, text)
		}
	}
}

// A --cursor run writes how far the audit has judged; a run that does not
// complete keeps the last completed run's value, so the coverage alert
// sees the cursor age however many runs fail; a window run writes none.
func TestCursorCoverageIsCarried(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay_audit.prom")
	at := time.Unix(1_800_000_000, 0)
	oldest := at.Add(-3 * time.Hour).UTC()
	rep := &Report{Source: "orders", Clean: true, Totals: map[Kind]int64{}, Unjudged: 7, OldestUnjudged: &oldest}
	if err := (&RunResult{Source: "orders", At: at, Report: rep}).WriteMetrics(path); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`relay_audit_oldest_unjudged_timestamp_seconds{source="orders"} 1.7999892e+09`,
		`relay_audit_unjudged_records{source="orders"} 7`,
	} {
		if text := read(t, path); !strings.Contains(text, want) {
			t.Fatalf("after a cursor run, no %q in:\n%s", want, text)
		}
	}
	failed := &RunResult{Source: "orders", At: at.Add(time.Hour), Err: errors.New("no cursor")}
	if err := failed.WriteMetrics(path); err != nil {
		t.Fatal(err)
	}
	text := read(t, path)
	if !strings.Contains(text, `relay_audit_oldest_unjudged_timestamp_seconds{source="orders"} 1.7999892e+09`) || strings.Contains(text, "relay_audit_unjudged_records{") {
		t.Fatalf("after an incomplete run, want the oldest unjudged carried and no count:\n%s", text)
	}
	window := &Report{Source: "orders", Clean: true, Totals: map[Kind]int64{}}
	path = filepath.Join(t.TempDir(), "relay_audit.prom")
	if err := (&RunResult{Source: "orders", At: at, Report: window}).WriteMetrics(path); err != nil {
		t.Fatal(err)
	}
	if text := read(t, path); strings.Contains(text, "unjudged") {
		t.Fatalf("a window run wrote cursor metrics:\n%s", text)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path) //nolint:gosec // a test's own file
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Mutation run finding: a metrics file that cannot be written is an error
// naming the flag, not dropped.
func TestPublishNamesTheFlagThatFailed(t *testing.T) {
	r := &RunResult{Source: "orders", At: time.Now(), Report: &Report{Source: "orders", Clean: true, Totals: map[Kind]int64{}}}
	err := r.Publish(filepath.Join(t.TempDir(), "no-such-dir", "relay_audit.prom"), "")
	if err == nil || !strings.Contains(err.Error(), "--metrics-file") {
		t.Fatalf("Publish to a directory that is not there: %v; want an error naming --metrics-file", err)
	}
}

// A Pushgateway refuses a pushed series that carries one of the grouping
// labels ("already contains grouping label source": relay audit --push-url
// exited 3 against a real one, in make test-k8s): the pushed series carry
// no source label, the URL's grouping gives it, and the values are the
// file's.
func TestPushedSeriesLeaveTheGroupingLabelToTheGateway(t *testing.T) {
	var families []*dto.MetricFamily
	var path string
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		dec := expfmt.NewDecoder(r.Body, expfmt.ResponseFormat(r.Header))
		for {
			mf := &dto.MetricFamily{}
			if err := dec.Decode(mf); err != nil {
				break
			}
			families = append(families, mf)
		}
	}))
	defer gw.Close()
	rep := &Report{Clean: true, Totals: map[Kind]int64{}}
	if err := (&RunResult{Source: "orders", At: time.Unix(1700000000, 0), Report: rep}).Push(gw.URL); err != nil {
		t.Fatal(err)
	}
	if path != "/metrics/job/relay_audit/source/orders" {
		t.Errorf("pushed to %s", path)
	}
	clean := false
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "source" {
					t.Errorf("%s carries the grouping label source", mf.GetName())
				}
			}
			if mf.GetName() == "relay_audit_clean" && m.GetGauge().GetValue() == 1 {
				clean = true
			}
		}
	}
	if len(families) == 0 || !clean {
		t.Fatalf("relay_audit_clean 1 not pushed (%d families)", len(families))
	}
}
