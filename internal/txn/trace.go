package txn

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// This file is the loop's tracing: a commit span per transaction, from
// its begin to its commit or abort, with the transaction's sequence
// number (relay.transaction.seq, counted per instance from 1), which the
// Handler's spans of the same transaction carry too (TransactionSeq), and
// links to the first MaxLinks of them (NoteSpan). Without a tracer
// (Settings.Tracer nil) none of it runs.

// MaxLinks bounds the links of a commit span to the spans of its records.
const MaxLinks = 128

// The commit span's attributes.
const (
	AttrTxnSeq        = attribute.Key("relay.transaction.seq")
	AttrTxnRecords    = attribute.Key("relay.transaction.records")
	AttrBatchCount    = semconv.MessagingBatchMessageCountKey
	AttrTxnOutputs    = attribute.Key("relay.transaction.outputs")
	AttrTxnPartitions = attribute.Key("relay.transaction.partitions")
	AttrTxnOutcome    = attribute.Key("relay.transaction.outcome")
)

// The outcomes of a transaction, as its commit span says.
const (
	TxnCommitted = "committed"
	TxnAborted   = "aborted"
	// TxnUnknown: the commit's outcome was not known; a new producer
	// settled it, and the committed offsets say which it was.
	TxnUnknown = "unknown"
	// TxnAbandoned: relay stopped on a fatal error with the transaction
	// open; the coordinator aborts it (at transaction.timeout.ms, or when
	// the next producer with the transactional id starts).
	TxnAbandoned = "abandoned"
)

// txnTrace is the tracing state of the open transaction.
type txnTrace struct {
	seq   uint64
	links []trace.Link
	spans int // spans noted, linked or not
	// ctx is the Handler's context with the transaction's tracing, made
	// once per transaction from parent.
	ctx, parent context.Context
}

type txnTraceKey struct{}

// TransactionSeq is the sequence number of the transaction a Handler's
// ctx belongs to; false without tracing.
func TransactionSeq(ctx context.Context) (uint64, bool) {
	if t, ok := ctx.Value(txnTraceKey{}).(*txnTrace); ok {
		return t.seq, true
	}
	return 0, false
}

// NoteSpan tells the loop about a span of a record of the transaction of
// ctx: the commit span links to it (the first MaxLinks sampled ones; a
// link to a span no backend has would lead nowhere). Without tracing it
// does nothing.
func NoteSpan(ctx context.Context, sc trace.SpanContext) {
	t, ok := ctx.Value(txnTraceKey{}).(*txnTrace)
	if !ok || !sc.IsValid() {
		return
	}
	t.spans++
	if sc.IsSampled() && len(t.links) < MaxLinks {
		t.links = append(t.links, trace.Link{SpanContext: sc})
	}
}

// traceBegin starts the tracing of a transaction that begins.
func (l *Loop) traceBegin() {
	if l.set.Tracer == nil {
		return
	}
	l.seq++
	l.tr = &txnTrace{seq: l.seq}
}

// handlerCtx is ctx for the Handler: with the transaction's tracing state.
func (l *Loop) handlerCtx(ctx context.Context) context.Context {
	t := l.tr
	if t == nil {
		return ctx
	}
	if t.parent != ctx {
		t.ctx, t.parent = context.WithValue(ctx, txnTraceKey{}, t), ctx
	}
	return t.ctx
}

// traceEnd records the commit span of the transaction that ends, with
// outcome; nothing when it was recorded already. It is
// called as soon as the transaction's end is known, so that the span does
// not take in what follows (a new producer, a rewind, the backoff).
func (l *Loop) traceEnd(outcome string, partitions int) {
	t := l.tr
	if t == nil {
		return
	}
	l.tr = nil
	_, span := l.set.Tracer.Start(context.Background(), "commit", trace.WithNewRoot(), trace.WithTimestamp(l.started),
		trace.WithLinks(t.links...), trace.WithAttributes(AttrTxnSeq.Int64(int64(t.seq)), //nolint:gosec // a count of transactions
			AttrTxnRecords.Int(l.records), AttrTxnOutputs.Int(l.outputs), AttrTxnPartitions.Int(partitions),
			AttrTxnOutcome.String(outcome), attribute.Int("relay.transaction.spans", t.spans),
			// The messaging conventions: committing offsets settles the
			// records the transaction consumed.
			semconv.MessagingSystemKafka, semconv.MessagingOperationTypeSettle,
			semconv.MessagingOperationName("commit"), AttrBatchCount.Int(l.records)))
	if outcome != TxnCommitted {
		// The conventions' exception event (txn imports nothing of tracing).
		span.AddEvent("exception", trace.WithAttributes(attribute.String("exception.type", "transaction "+outcome),
			attribute.String("exception.message", "transaction "+outcome)))
		span.SetStatus(codes.Error, "transaction "+outcome)
	}
	span.End(trace.WithTimestamp(time.Now()))
}
