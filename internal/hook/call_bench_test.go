package hook

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkCall is one hook call for a record of about 1 KiB against a
// local server that answers 204 at once: the CPU of a call, both ends in
// this process (docs/PERFORMANCE.md, "Hook calls at once").
func BenchmarkCall(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer srv.Close()
	c := New(srv.URL, time.Second, 8, nil, nil)
	key := "k-17"
	req := &Request{MessageID: "orders/0/17", Topic: "orders", Partition: 0, Offset: 17, Key: &key,
		Record: map[string]any{"id": "order-000017", "amount": int64(4200), "payload": make([]byte, 984), "currency": "EUR"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Call(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
