package quarantine

import (
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/envelope"
	"relay/internal/ledger"
)

func TestSpecBuildNamesEveryProblem(t *testing.T) {
	sp := Spec{States: "lost", MinAge: "ages", SchemaVersions: "x", Partition: -2, Since: "1h", Until: "2h"}
	_, err := sp.Build(time.Now())
	for _, want := range []string{"--state", "--min-age", "--schema-version", "--partition", "the window is empty"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: want %q", err, want)
		}
	}
	f, err := (&Spec{Partition: -1}).Build(time.Now())
	if err != nil || len(f.States) != 3 || f.Narrowed() {
		t.Fatalf("default: %+v %v", f, err)
	}
}

func TestFilterMatchesAndItems(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	x := NewIndex()
	x.mu.Lock()
	x.apply(&ledger.Event{ID: "o/0/1", State: ledger.Open, Code: "A", At: now.Add(-2 * time.Hour), Source: ledger.Source{Topic: "o", Offset: 1}}, loc{})
	x.apply(&ledger.Event{ID: "o/1/1", State: ledger.Resolved, Code: "A", At: now.Add(-time.Hour), Source: ledger.Source{Topic: "o", Partition: 1, Offset: 1}}, loc{})
	x.mu.Unlock()
	topic := "o.quarantine"
	x.addRecord(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 1, Offset: 7},
		Headers: envelope.AppendFailure([]kafka.Header(nil), &envelope.Failure{ID: "o/1/1", SourceTopic: "o", SourcePartition: 1, SourceOffset: 1})}, topic, "o")
	f, _ := (&Spec{Codes: "A", MinAge: "90m", Partition: -1, States: "all"}).Build(now)
	items := x.Items(f, now)
	if len(items) != 1 || items[0].ID != "o/0/1" || items[0].Record != Gone {
		t.Fatalf("items %+v", items)
	}
	f, _ = (&Spec{Partition: 1, States: "all"}).Build(now)
	if items := x.Items(f, now); len(items) != 1 || items[0].Record != "o.quarantine/1/7" {
		t.Fatalf("by partition: %+v", items)
	}
	// Retention deleted the record: the ledger remains.
	x.low[x.names.id(topic)] = []int64{0, 8}
	if items := x.Items(f, now); len(items) != 1 || items[0].Record != Gone {
		t.Fatalf("past retention: %+v", items)
	}
}

func TestParseFailureID(t *testing.T) {
	if tp, p, o, err := ParseFailureID("a/b/3/4"); err != nil || tp != "a/b" || p != 3 || o != 4 {
		t.Fatal(tp, p, o, err)
	}
	for _, bad := range []string{"x", "--help", "t/-1/2", "t/1/x", "/1/2"} {
		if _, _, _, err := ParseFailureID(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestDiscardCheck(t *testing.T) {
	err := (&Discard{IDs: []string{"x"}}).Check()
	for _, want := range []string{"--reason is required", "not a failure id"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: want %q", err, want)
		}
	}
	if err := (&Discard{Reason: "r"}).Check(); err == nil || !strings.Contains(err.Error(), "no failure id") {
		t.Errorf("%v", err)
	}
}
