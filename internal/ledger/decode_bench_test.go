package ledger

import (
	"testing"
	"time"
)

func BenchmarkDecode(b *testing.B) {
	e := &Event{ID: "orders/2/123456", State: Open, At: time.Now(), Actor: "relay", Reason: "quarantined", Code: "WIRE_FORMAT_INVALID",
		Source: Source{Topic: "orders", Partition: 2, Offset: 123456}, Topic: "orders.quarantine", RecordTime: time.Now(), Attempt: 1, FirstFailedAt: time.Now()}
	v, k := e.Value(), e.Key()
	b.SetBytes(int64(len(v)))
	for b.Loop() {
		if _, ok, err := Decode(k, v); !ok || err != nil {
			b.Fatal(err)
		}
	}
}
