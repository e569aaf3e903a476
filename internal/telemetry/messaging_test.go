package telemetry

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// The semantic conventions' messaging metrics count what relay's own do,
// with messaging.system kafka, their operation, the consumer group, and a
// failed hook call's outcome as error.type.
func TestMessagingMetrics(t *testing.T) {
	m, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	m.SetConsumerGroup("relay-orders")
	m.Consumed(3)
	m.Committed(3, 5, time.Millisecond)
	m.HookStarted()
	m.HookEnded("ok", 10*time.Millisecond)
	m.HookStarted()
	m.HookEnded("timeout", 2*time.Second)
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels := func(mm *dto.Metric) map[string]string {
		out := map[string]string{}
		for _, l := range mm.GetLabel() {
			out[l.GetName()] = l.GetValue()
		}
		return out
	}
	seen := map[string]bool{}
	for _, f := range families {
		for _, mm := range f.GetMetric() {
			l := labels(mm)
			switch f.GetName() {
			case "messaging_client_consumed_messages_total":
				if mm.GetCounter().GetValue() != 3 || l["messaging_system"] != "kafka" || l["messaging_operation_name"] != "poll" || l["messaging_consumer_group_name"] != "relay-orders" {
					t.Errorf("consumed: %v %v", mm.GetCounter().GetValue(), l)
				}
			case "messaging_client_sent_messages_total":
				if mm.GetCounter().GetValue() != 5 || l["messaging_system"] != "kafka" || l["messaging_operation_name"] != "send" {
					t.Errorf("sent: %v %v", mm.GetCounter().GetValue(), l)
				}
			case "messaging_process_duration_seconds":
				if mm.GetHistogram().GetSampleCount() != 1 || l["messaging_operation_name"] != "process" || l["messaging_consumer_group_name"] != "relay-orders" {
					t.Errorf("process: %v %v", mm.GetHistogram().GetSampleCount(), l)
				}
				if l["error_type"] == "timeout" && mm.GetHistogram().GetSampleSum() != 2 {
					t.Errorf("the failed call: %v s", mm.GetHistogram().GetSampleSum())
				}
			default:
				continue
			}
			seen[f.GetName()+"/"+l["error_type"]] = true
		}
	}
	for _, want := range []string{"messaging_client_consumed_messages_total/", "messaging_client_sent_messages_total/", "messaging_process_duration_seconds/", "messaging_process_duration_seconds/timeout"} {
		if !seen[want] {
			t.Errorf("no %s", want)
		}
	}
}
