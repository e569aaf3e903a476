package rules

import (
	"context"
	"testing"
)

// BenchmarkCheck measures two rules that do not match, the common case.
func BenchmarkCheck(b *testing.B) {
	s, err := Parse("r.yaml", []byte("rules:\n  - name: NEGATIVE_AMOUNT\n    expr: record.amount < 0\n  - name: HUGE_AMOUNT\n    expr: record.amount > 1000000000\n"))
	if err != nil {
		b.Fatal(err)
	}
	rec := map[string]any{"id": "order-000001", "amount": int64(4200), "payload": make([]byte, 980), "currency": "EUR"}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Check(context.Background(), rec); err != nil {
			b.Fatal(err)
		}
	}
}
