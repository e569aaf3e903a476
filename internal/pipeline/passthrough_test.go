package pipeline

import (
	"bytes"
	"context"
	"testing"
	"time"

	"relay/internal/envelope"
	"relay/internal/txn"
)

func TestPassthroughKeepsRecordAndAddsIdentity(t *testing.T) {
	ts := time.Date(2026, 7, 31, 9, 10, 0, 0, time.UTC)
	rec := &txn.Record{
		Topic: "orders", Partition: 3, Offset: 42,
		Key: []byte("k1"), Value: []byte{0, 1, 2},
		Headers:   []txn.Header{{Key: "traceparent", Value: []byte("00-abc-def-01")}, {Key: envelope.MessageID, Value: []byte("stale")}},
		Timestamp: ts,
	}
	p := Passthrough{OutputTopic: func(s string) string { return s + ".valid" }}
	outs, err := p.Handle(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 1 {
		t.Fatalf("got %d outputs, want 1", len(outs))
	}
	o := outs[0]
	if o.Topic != "orders.valid" || o.Partition != 3 || !bytes.Equal(o.Key, rec.Key) || !bytes.Equal(o.Value, rec.Value) || !o.Timestamp.Equal(ts) {
		t.Errorf("output %+v does not keep the source record", o)
	}
	var ids []string
	var trace bool
	for _, h := range o.Headers {
		switch h.Key {
		case envelope.MessageID:
			ids = append(ids, string(h.Value))
		case "traceparent":
			trace = true
		}
	}
	if len(ids) != 1 || ids[0] != "orders/3/42" {
		t.Errorf("relay.message.id headers = %q, want exactly [orders/3/42]", ids)
	}
	if !trace {
		t.Error("source header traceparent was dropped")
	}
}
