package quarantine

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/envelope"
	"relay/internal/ledger"
	"relay/internal/statetopic"
)

// benchTopic is the quarantine topic of the benchmarks' failures.
const benchTopic = "orders.quarantine"

// benchFailure is failure i as relay writes it: its open change in the
// state topic (m) and its quarantine record (q), without a value.
func benchFailure(i int, t0 time.Time) (m, q *kafka.Message) {
	topic := benchTopic
	id := fmt.Sprintf("orders/%d/%d", i%3, i)
	e := &ledger.Event{ID: id, State: ledger.Open, At: t0.Add(time.Duration(i) * time.Millisecond), Actor: "relay", Reason: "quarantined",
		Code: "WIRE_FORMAT_INVALID", Source: ledger.Source{Topic: "orders", Partition: int32(i % 3), Offset: int64(i)}, Topic: topic, RecordTime: t0}
	m = statetopic.EventMessage("relay.state", e)
	m.TopicPartition.Offset = kafka.Offset(i)
	f := &envelope.Failure{ID: id, SourceTopic: "orders", SourcePartition: int32(i % 3), SourceOffset: int64(i), Class: "permanent",
		Code: "WIRE_FORMAT_INVALID", Message: "the value does not start with the magic byte", Attempt: 1, FirstFailedAt: t0, LastFailedAt: t0}
	q = &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: int32(i % 3), Offset: kafka.Offset(i)},
		Key: fmt.Appendf(nil, "k-%d", i), Headers: envelope.AppendFailure([]kafka.Header(nil), f), Timestamp: t0}
	return m, q
}

// BenchmarkIndexMemory is the index's live heap per failure, each with
// its open change and its quarantine record, as relay writes them; and
// the time to fold one.
func BenchmarkIndexMemory(b *testing.B) {
	const n = 200_000
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	msgs := make([]*kafka.Message, 0, 2*n)
	for i := range n {
		m, q := benchFailure(i, t0)
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
				x.addRecord(m, benchTopic, "orders")
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

// BenchmarkCatchUpGC folds failures into an index as a catch-up does,
// each change and record made as it is read (garbage, as the consumer's
// are), at the collector's target of a catch-up (catchUpGC) and, in the
// same run, at 25 %; it reports the time per failure at each and their
// ratio. go test -run - -bench CatchUpGC -benchtime 3x ./internal/quarantine
func BenchmarkCatchUpGC(b *testing.B) {
	const n = 300_000
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	fold := func(gc int) time.Duration {
		runtime.GC()
		defer debug.SetGCPercent(debug.SetGCPercent(gc))
		x := NewIndex()
		start := time.Now()
		for i := range n {
			m, q := benchFailure(i, t0)
			q.Value = make([]byte, 100)
			x.applyLedger(m)
			x.addRecord(q, benchTopic, "orders")
		}
		took := time.Since(start)
		runtime.KeepAlive(x)
		return took
	}
	var at, base time.Duration
	for b.Loop() {
		// Alternating, so that the machine's noise falls on both.
		at += fold(catchUpGC)
		base += fold(25)
	}
	b.ReportMetric(float64(at.Nanoseconds())/float64(b.N*n), "ns/failure")
	b.ReportMetric(float64(base.Nanoseconds())/float64(b.N*n), "ns/failure@25%")
	b.ReportMetric(float64(at)/float64(base), "ratio")
}
