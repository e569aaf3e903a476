package telemetry

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

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
	m.HookStarted()
	m.HookEnded("ok", 3*time.Millisecond)
	m.Outcome("processed", "", 1)
	m.Ended("processed", 2, time.Second)
	m.Replayed("resolved", 1)
	m.SetQuarantine(func() ledger.Summary {
		return ledger.Summary{
			ByCode:   []ledger.CodeStats{{Code: "X", Unresolved: 1, Oldest: now}},
			Deadline: map[string]time.Time{"t.quarantine": now.Add(time.Hour)},
			ByTopic:  map[string]int{"t.quarantine": 7},
		}
	})
	m.SetOwners([]Ownership{{Topic: "t.quarantine", Owner: "payments-team", Threshold: 5}})
	m.SetLag(func() []Lag { return []Lag{{Topic: "orders", Partition: 0, Records: 5}} })
	m.SetParked(func() Parked {
		return Parked{Records: 2, Bytes: 900, Behind: []Lag{{Topic: "orders", Partition: 0, Records: 40}}, Refused: map[string]int64{"records": 1}}
	})
	m.SetFeatures(func() map[string]bool { return map[string]bool{"park": true} })
	stats, err := os.ReadFile("testdata/rdkafka-stats.json")
	if err != nil {
		t.Fatal(err)
	}
	m.Statistics("producer", string(stats))
	m.Statistics("consumer", string(stats))
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]string{}
	for _, f := range families {
		exported[f.GetName()] = strings.ToLower(f.GetType().String()) + ": " + f.GetHelp()
		// The owner's gauges carry the owner, for alerts to route on.
		switch f.GetName() {
		case "relay_quarantine_topic_unresolved", "relay_quarantine_alert_threshold":
			want := map[string]float64{"relay_quarantine_topic_unresolved": 7, "relay_quarantine_alert_threshold": 5}[f.GetName()]
			ms := f.GetMetric()
			if len(ms) != 1 || ms[0].GetGauge().GetValue() != want || !hasLabel(ms[0].GetLabel(), "owner", "payments-team") || !hasLabel(ms[0].GetLabel(), "topic", "t.quarantine") {
				t.Errorf("%s: %v, want %g with owner payments-team, topic t.quarantine", f.GetName(), ms, want)
			}
		}
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

func hasLabel(ls []*dto.LabelPair, name, value string) bool {
	for _, l := range ls {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
