package telemetry

import (
	"context"
	"strings"
	"testing"
	"time"

	"relay/internal/ledger"
)

// /metrics shows exactly the metrics of Instruments, with their Prometheus
// names, types and help.
func TestInstrumentsAreWhatIsExported(t *testing.T) {
	m, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Close(context.Background()) }()
	now := time.Now()
	m.Consumed(1)
	m.Committed(1, 1, time.Millisecond)
	m.Aborted("handler")
	m.Wedged("send offsets")
	m.Outcome("processed", "", 1)
	m.Ended("processed", 2, time.Second)
	m.Replayed("resolved", 1)
	m.SetQuarantine(func() ledger.Summary {
		return ledger.Summary{
			ByCode:   []ledger.CodeStats{{Code: "X", Unresolved: 1, Oldest: now}},
			Deadline: map[string]time.Time{"t.quarantine": now.Add(time.Hour)},
		}
	})
	m.SetLag(func() []Lag { return []Lag{{Topic: "orders", Partition: 0, Records: 5}} })
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]string{}
	for _, f := range families {
		exported[f.GetName()] = strings.ToLower(f.GetType().String()) + ": " + f.GetHelp()
	}
	for _, in := range Instruments {
		want := string(in.Kind) + ": " + in.Help
		if got, ok := exported[in.PrometheusName()]; !ok {
			t.Errorf("%s is not exported", in.PrometheusName())
		} else if got != want {
			t.Errorf("%s is exported as %q, Instruments says %q", in.PrometheusName(), got, want)
		}
		delete(exported, in.PrometheusName())
	}
	delete(exported, "target_info") // OpenTelemetry's resource, not a metric of relay's
	for name := range exported {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue // the Go runtime's and the process's standard collectors
		}
		t.Errorf("%s is exported but not in Instruments", name)
	}
}
