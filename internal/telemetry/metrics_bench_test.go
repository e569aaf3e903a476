package telemetry

import "testing"

// BenchmarkObserverPerRecord is what the loop's Observer costs a record:
// an Alive per round and a Consumed per handled record.
func BenchmarkObserverPerRecord(b *testing.B) {
	m, err := New(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = m.Close(b.Context()) }()
	b.ReportAllocs()
	for b.Loop() {
		m.Alive()
		m.Consumed(1)
	}
}
