package txn

import (
	"context"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
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
	if attr(cs, AttrTxnOutcome).AsString() != TxnCommitted || attr(cs, AttrTxnRecords).AsInt64() != 2 || attr(cs, AttrBatchCount).AsInt64() != 2 ||
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

// onEnd is a span processor that lets a test look at the loop as each
// span ends.
type onEnd struct {
	sdktrace.SpanProcessor
	note func(sdktrace.ReadOnlySpan)
}

func (p onEnd) OnEnd(s sdktrace.ReadOnlySpan) { p.note(s); p.SpanProcessor.OnEnd(s) }

// commitSpans runs h with a tracer and gives, for each commit span, its
// outcome and how many producers the loop had made when it ended.
func commitSpans(t *testing.T, h *harness, script ...kafka.Event) (outcomes []string, made []int, err error) {
	t.Helper()
	note := func(s sdktrace.ReadOnlySpan) {
		if s.Name() == "commit" {
			outcomes, made = append(outcomes, attr(s, AttrTxnOutcome).AsString()), append(made, h.made)
		}
	}
	h.set.Tracer = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(onEnd{tracetest.NewSpanRecorder(), note})).Tracer("test")
	err = h.run(script...)
	return outcomes, made, err
}

// A commit whose outcome is unknown ends its span when the old producer
// is closed, before the new one starts: an outage that holds the new
// producer back is not the transaction's time.
func TestCommitSpanOfAnUnknownOutcomeEndsWithTheOldProducer(t *testing.T) {
	first, second := newFakeProducer(), newFakeProducer()
	first.commitErrs = []error{errOdd}
	h := newHarness(t, first, second)
	c := h.c
	outcomes, made, err := commitSpans(t, h, c.assign(0), c.msg(0, 7))
	if err != nil {
		t.Fatal(err)
	}
	if len(outcomes) == 0 || outcomes[0] != TxnUnknown || made[0] != 1 {
		t.Fatalf("commit spans %v, ended with %v producers made; want the first unknown, ended before the second producer", outcomes, made)
	}
}

// A fatal error with the transaction open (a zombie fenced, here in the
// shutdown's commit) still records its commit span, as abandoned, before
// Run returns.
func TestFatalExitRecordsTheOpenTransactionAsAbandoned(t *testing.T) {
	p := newFakeProducer()
	p.commitErrs = []error{errFenced}
	h := newHarness(t, p)
	h.set.TxnTimeout = time.Hour // young: another instance's fence
	c := h.c
	outcomes, _, err := commitSpans(t, h, c.assign(0), c.msg(0, 7))
	if err == nil {
		t.Fatal("a fenced producer did not stop the loop")
	}
	if len(outcomes) != 1 || outcomes[0] != TxnAbandoned {
		t.Fatalf("commit spans %v, want one, abandoned", outcomes)
	}
}
