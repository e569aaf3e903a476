package integration

import (
	"strings"
	"testing"
	"time"
)

// TestWedgedSendOffsetsIsAbandoned reproduces the hang of the three-broker
// rolling restart deterministically: relay's producer never gets an answer
// to its group coordinator lookup (the proxy withholds it), as when a
// cached coordinator on a decommissioned broker is never looked up again
// (confluentinc/librdkafka#5511), and librdkafka never checks the
// coordinator request's own timeout (#5456): SendOffsetsToTransaction,
// called with RELAY_OP_TIMEOUT, does not return. Without the watchdog
// relay sits in it for as long as the lookup goes unanswered. With it,
// the call is abandoned past its bound, a new producer takes over (and,
// once lookups are answered again, commits), the wedged producer is closed
// when its call returns, and every record is processed exactly once.
func TestWedgedSendOffsetsIsAbandoned(t *testing.T) {
	if onCluster {
		t.Skip("the proxy stands before the single broker")
	}
	const partitions = 3
	proxy := startKafkaProxy(t)
	s := newScenario(t, partitions)
	s.src.produce(t, 300)
	proxy.withhold.Store(true)
	r := startRelay(t, "relay", s.env(uniq(t, "txn"),
		"RELAY_KAFKA_BOOTSTRAP_SERVERS", proxy.addr, "RELAY_OP_TIMEOUT", "2s"))
	// WedgeAfter(2s) is 9s.
	r.waitLog("librdkafka call wedged", 60*time.Second)
	if !strings.Contains(r.stderr.String(), `"op":"send offsets"`) {
		t.Fatalf("the wedged call was not send offsets:\n%s", tail(r.stderr.String(), 20))
	}
	if proxy.withheld.Load() == 0 {
		t.Fatal("the proxy withheld no lookup")
	}
	if n := proxy.unknown.Load(); n > 0 {
		t.Fatalf("the proxy met %d FindCoordinator requests of a version or header it cannot read", n)
	}
	proxy.withhold.Store(false)
	s.src.produce(t, 300)
	waitCaughtUp(t, s.group, s.src.topic, partitions, 90*time.Second)
	r.waitLog("wedged producer closed", 60*time.Second)
	assertExactlyOnce(t, s.src, s.output, s.group, partitions)
	r.stop()
}
