package quarantine

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/envelope"
	"relay/internal/ledger"
	"relay/internal/statetopic"
)

// BenchmarkIndexMemory is the index's live heap per failure, each with
// its open change and its quarantine record, as relay writes them; and
// the time to fold one.
func BenchmarkIndexMemory(b *testing.B) {
	const n = 200_000
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	topic, state := "orders.quarantine", "relay.state"
	msgs := make([]*kafka.Message, 0, 2*n)
	for i := range n {
		id := fmt.Sprintf("orders/%d/%d", i%3, i)
		e := &ledger.Event{ID: id, State: ledger.Open, At: t0.Add(time.Duration(i) * time.Millisecond), Actor: "relay", Reason: "quarantined",
			Code: "WIRE_FORMAT_INVALID", Source: ledger.Source{Topic: "orders", Partition: int32(i % 3), Offset: int64(i)}, Topic: topic, RecordTime: t0}
		m := statetopic.EventMessage(state, e)
		m.TopicPartition.Offset = kafka.Offset(i)
		f := &envelope.Failure{ID: id, SourceTopic: "orders", SourcePartition: int32(i % 3), SourceOffset: int64(i), Class: "permanent",
			Code: "WIRE_FORMAT_INVALID", Message: "the value does not start with the magic byte", Attempt: 1, FirstFailedAt: t0, LastFailedAt: t0}
		q := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: int32(i % 3), Offset: kafka.Offset(i)},
			Key: []byte(fmt.Sprintf("k-%d", i)), Headers: envelope.AppendFailure([]kafka.Header(nil), f), Timestamp: t0}
		msgs = append(msgs, m, q)
	}
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		x := NewIndex()
		start := time.Now()
		for i, m := range msgs {
			if i%2 == 0 {
				x.applyLedger(m)
			} else {
				x.addRecord(m, topic, "orders")
			}
		}
		x.Items(&Filter{Partition: -1}, time.Now())
		took := time.Since(start)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/failure")
		b.ReportMetric(float64(took.Nanoseconds())/n, "ns/failure")
		runtime.KeepAlive(x)
	}
}
