package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"relay/internal/hook"
	"relay/internal/schema"
	"relay/internal/txn"
)

// BenchmarkHandleBatchHook is relay's side of hook calls at once: batches
// of 256 source records of 1 KiB over 1024 keys, key ordering, each record
// through a real hook client to a local server that answers 204 at once
// (the server's CPU is in this process too). ns/op is per record.
func BenchmarkHandleBatchHook(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer srv.Close()
	benchBatches(b, batchMachine(b, hook.New(srv.URL, time.Second, 32, nil, nil), 32))
}

// benchBatches hands m batches of 256 source records of an Avro-like
// record of 1 KiB over 1024 keys; ns/op is per record.
func benchBatches(b *testing.B, m *Machine) {
	m.admitter = benchAdmitter{}
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

// BenchmarkHandleBatchHookBatched is BenchmarkHandleBatchHook through the
// batch protocol: 64 records per request, 256 calls at once.
func BenchmarkHandleBatchHookBatched(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Records []json.RawMessage `json:"records"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		var out bytes.Buffer
		out.WriteString(`{"results":[`)
		for i := range req.Records {
			if i > 0 {
				out.WriteByte(',')
			}
			out.WriteString(`{"status":204}`)
		}
		out.WriteString(`]}`)
		_, _ = w.Write(out.Bytes())
	}))
	defer srv.Close()
	m := batchMachine(b, hook.NewBatcher(hook.New(srv.URL, time.Second, 256, nil, nil), 64, 256), 256)
	benchBatches(b, m)
}

// benchAdmitter admits every value as a decoded record like the bench's:
// an id, an amount and 984 bytes of payload.
type benchAdmitter struct{ plainAdmitter }

func (benchAdmitter) Admit(_ context.Context, v []byte) (schema.Admitted, error) {
	return schema.Admitted{Writer: schema.Info{ID: 11, Subject: "orders-value", Version: 2},
		Record: map[string]any{"id": "order-000017", "amount": int64(4200), "payload": v[:984], "currency": "EUR"}, Value: v}, nil
}
