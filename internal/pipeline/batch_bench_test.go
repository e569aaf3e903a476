package pipeline

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"relay/internal/hook"
	"relay/internal/txn"
)

// BenchmarkHandleBatchHook is relay's side of hook calls at once: batches
// of 256 source records of 1 KiB over 1024 keys, key ordering, each record
// through a real hook client to a local server that answers 204 at once
// (the server's CPU is in this process too). ns/op is per record.
func BenchmarkHandleBatchHook(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer srv.Close()
	m := batchMachine(b, hook.New(srv.URL, time.Second, 32, nil), 32)
	const size = 256
	recs := make([]*txn.Record, size)
	value := make([]byte, 1024)
	for i := range recs {
		recs[i] = &txn.Record{Topic: "orders", Partition: int32(i % 3), Offset: int64(i), Key: []byte(fmt.Sprintf("k-%d", i%1024)), Value: value, Timestamp: t0}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n += size {
		c := newCollect()
		m.HandleBatch(context.Background(), recs, c)
		if len(c.outs) != size {
			b.Fatalf("%d results", len(c.outs))
		}
		m.OnCommit()
	}
}
