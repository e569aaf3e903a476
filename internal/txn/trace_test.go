package txn

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// unsampled is a span of a record that is not sampled.
var unsampled = trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}})

// Each transaction has a commit span, linked to the sampled spans of its
// records, which know its sequence number; an aborted one says so.
func TestCommitSpanFindsTheRecordsSpans(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)).Tracer("test")
	p := newFakeProducer()
	h := newHarness(t, p)
	h.set.Tracer = tracer
	h.handler = HandlerFunc(func(ctx context.Context, r *Record) ([]Output, error) {
		ctx, span := tracer.Start(ctx, "process")
		seq, ok := TransactionSeq(ctx)
		if !ok {
			t.Error("the handler's context has no transaction")
		}
		span.SetAttributes(AttrTxnSeq.Int64(int64(seq)))
		NoteSpan(ctx, span.SpanContext())
		NoteSpan(ctx, unsampled) // counted, not linked
		span.End()
		return []Output{{Topic: "out", Partition: r.Partition, Value: r.Value}}, nil
	})
	c := h.c
	if err := h.run(c.assign(0, 1), c.msg(0, 10), c.msg(1, 5)); err != nil {
		t.Fatal(err)
	}
	var commits, process []sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.Name() == "commit" {
			commits = append(commits, s)
		} else {
			process = append(process, s)
		}
	}
	if len(commits) != 1 || len(process) != 2 {
		t.Fatalf("%d commit spans, %d process spans", len(commits), len(process))
	}
	cs := commits[0]
	if attr(cs, AttrTxnOutcome).AsString() != TxnCommitted || attr(cs, AttrTxnRecords).AsInt64() != 2 ||
		attr(cs, AttrTxnOutputs).AsInt64() != 2 || attr(cs, AttrTxnPartitions).AsInt64() != 2 ||
		attr(cs, "relay.transaction.spans").AsInt64() != 4 || len(cs.Links()) != 2 {
		t.Fatalf("commit span attributes %v", cs.Attributes())
	}
	seq := attr(cs, AttrTxnSeq).AsInt64()
	for i, s := range process {
		if attr(s, AttrTxnSeq).AsInt64() != seq || cs.Links()[i].SpanContext.SpanID() != s.SpanContext().SpanID() {
			t.Fatalf("process span %d: seq %d (commit %d), links %v", i, attr(s, AttrTxnSeq).AsInt64(), seq, cs.Links())
		}
	}
}

func TestAbortedTransactionHasAnAbortedCommitSpan(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	p := newFakeProducer()
	p.commitErrs = []error{errAbortable}
	h := newHarness(t, p)
	h.set.Tracer = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)).Tracer("test")
	c := h.c
	if err := h.run(c.assign(0), c.msg(0, 7)); err != nil {
		t.Fatal(err)
	}
	ended := spans.Ended()
	if len(ended) == 0 || attr(ended[0], AttrTxnOutcome).AsString() != TxnAborted {
		t.Fatalf("spans %v", ended)
	}
}
