package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"relay/internal/envelope"
	"relay/internal/ledger"
	"relay/internal/tracing"
	"relay/internal/txn"
)

// This file is the machine's tracing: one process span per pass (an
// attempt at a record, with its in-place retries as events), its
// attributes after the OpenTelemetry messaging conventions, and the trace
// context every record of the pass carries on. Without a tracer
// (Options.Tracer nil) none of it runs, and records carry the trace
// context they came with, as they are.

// TracerName is the instrumentation scope of the machine's spans.
const TracerName = "relay/internal/pipeline"

// maxKeyAttr is the longest key a span carries (messaging.kafka.message.key).
const maxKeyAttr = 64

// The attributes of the span conventions and relay's own.
const (
	AttrOutcome      = attribute.Key("relay.outcome")
	AttrMessageID    = attribute.Key("relay.message.id")
	AttrFailureID    = attribute.Key("relay.failure.id")
	AttrErrorClass   = attribute.Key("relay.error.class")
	AttrErrorType    = semconv.ErrorTypeKey
	AttrAttempt      = attribute.Key("relay.attempt")
	AttrOrigin       = attribute.Key("relay.origin")
	AttrReplayID     = attribute.Key("relay.replay.id")
	AttrDestination  = semconv.MessagingDestinationNameKey
	AttrPartitionID  = semconv.MessagingDestinationPartitionIDKey
	AttrOffset       = semconv.MessagingKafkaOffsetKey
	AttrGroup        = semconv.MessagingConsumerGroupNameKey
	AttrKey          = semconv.MessagingKafkaMessageKeyKey
	AttrSystem       = semconv.MessagingSystemKey
	AttrOperation    = semconv.MessagingOperationTypeKey
	AttrOperationNam = semconv.MessagingOperationNameKey
	AttrClientID     = semconv.MessagingClientIDKey
)

// startSpan starts p's process span, a child of the trace context its
// record carries (a new root without one), and keeps in p the context its
// records carry on. ctx then holds the span, for the children (registry
// lookup, rules, hook). A record that is not sampled costs what Parent,
// the SDK's unsampled span and ContextOf cost: no context of its own, no
// formatted strings.
func (m *Machine) startSpan(ctx context.Context, p *pass) context.Context {
	rec := p.rec
	var parent trace.SpanContext
	if tp, ok := envelope.Lookup(rec.Headers, envelope.TraceParent); ok {
		ts, _ := envelope.Lookup(rec.Headers, envelope.TraceState)
		parent = tracing.Parent(tp, ts)
	}
	if !parent.IsValid() && m.spans.prop != nil {
		parent = m.spans.prop.Extract(envelope.All(rec.Headers))
	}
	opts := m.spans.process
	switch {
	case parent.IsValid():
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	case trace.SpanContextFromContext(ctx).IsValid():
		opts = m.spans.root // ctx came with a span: it is not the record's trace
	}
	ctx, span := m.tracer.Start(ctx, m.spans.name(rec.Topic), opts...)
	p.span, p.tc = span, m.spans.prop.ContextOf(span.SpanContext())
	txn.NoteSpan(ctx, span.SpanContext())
	if !span.IsRecording() {
		return ctx
	}
	p.sender = &sender{tracer: m.tracer, ctx: ctx, opts: m.spans}
	span.SetAttributes(AttrSystem.String("kafka"), AttrOperation.String("process"), AttrOperationNam.String("process"),
		AttrDestination.String(rec.Topic), AttrPartitionID.String(strconv.Itoa(int(rec.Partition))), AttrOffset.Int64(rec.Offset),
		AttrGroup.String(m.group), AttrMessageID.String(p.id), AttrAttempt.Int(p.st.Attempt), AttrOrigin.String(originName(p.origin)))
	span.SetAttributes(m.spans.consumer...)
	if len(rec.Key) > 0 && len(rec.Key) <= maxKeyAttr && utf8.Valid(rec.Key) {
		span.SetAttributes(AttrKey.String(string(rec.Key)))
	}
	if seq, ok := txn.TransactionSeq(ctx); ok {
		span.SetAttributes(txn.AttrTxnSeq.Int64(int64(seq))) //nolint:gosec // a count of transactions
	}
	if p.prev != nil && p.prev.ReplayID != "" {
		span.SetAttributes(AttrReplayID.String(p.prev.ReplayID))
	}
	return ctx
}

// spanOpts are the process spans' start options and names, made once:
// per record they would be allocations every record pays for, sampled
// or not.
type spanOpts struct {
	process []trace.SpanStartOption // a consumer span
	root    []trace.SpanStartOption // the same, the root of a new trace
	send    []trace.SpanStartOption // a producer span
	// consumer and producer are the attributes of every process and send
	// span: the broker relay was given (server.address, server.port) and
	// the client's messaging.client.id.
	consumer, producer []attribute.KeyValue
	prop               *tracing.Propagation // nil: W3C alone
	names              sync.Map             // topic → "process <topic>"
	sends              sync.Map             // topic → "send <topic>"
}

func newSpanOpts(c Clients, prop *tracing.Propagation) *spanOpts {
	kind := trace.WithSpanKind(trace.SpanKindConsumer)
	var server []attribute.KeyValue
	if host, port, err := net.SplitHostPort(c.Broker); err == nil {
		server = append(server, attribute.String("server.address", host))
		if n, err := strconv.Atoi(port); err == nil {
			server = append(server, attribute.Int("server.port", n))
		}
	}
	o := &spanOpts{process: []trace.SpanStartOption{kind}, root: []trace.SpanStartOption{kind, trace.WithNewRoot()},
		send: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)}, prop: prop}
	o.consumer = append(slices.Clip(server), AttrClientID.String(c.ConsumerID))
	o.producer = append(slices.Clip(server), AttrClientID.String(c.ProducerID))
	return o
}

// Clients names the Kafka clients of relay's spans: the first bootstrap
// server (host:port), and the consumer's and producer's client.id.
type Clients struct {
	Broker                 string
	ConsumerID, ProducerID string
}

func (o *spanOpts) name(topic string) string { return cachedName(&o.names, "process ", topic) }

func (o *spanOpts) sendName(topic string) string { return cachedName(&o.sends, "send ", topic) }

// cachedName is prefix+topic, made once per topic (the topics are relay's
// sources, tiers and their outputs: a bounded set).
func cachedName(names *sync.Map, prefix, topic string) string {
	if n, ok := names.Load(topic); ok {
		return n.(string) //nolint:forcetypeassert // only strings are stored
	}
	n, _ := names.LoadOrStore(topic, prefix+topic)
	return n.(string) //nolint:forcetypeassert // only strings are stored
}

func originName(o Origin) string {
	switch {
	case o.Replay:
		return "replay"
	case o.Tier >= 0:
		return "tier"
	default:
		return "source"
	}
}

// traceOutcome notes on p's span what its pass came to; a failure (code
// set) makes the span's status Error with the redacted message.
func (p *pass) traceOutcome(outcome ledger.Outcome, class, code, msg string) {
	if p.span == nil || !p.span.IsRecording() {
		return
	}
	p.span.SetAttributes(AttrOutcome.String(string(outcome)))
	if code == "" {
		return
	}
	p.span.SetAttributes(AttrFailureID.String(p.id), AttrErrorClass.String(class), AttrErrorType.String(code))
	tracing.Fail(p.span, code, msg)
}

// traceRetry notes an in-place retry on p's span, as an event.
func (m *Machine) traceRetry(p *pass, v verdict) {
	if p.span == nil || !p.span.IsRecording() {
		return
	}
	p.span.AddEvent("retry in place", trace.WithAttributes(AttrAttempt.Int(p.st.Attempt), AttrErrorType.String(v.Code),
		AttrErrorClass.String(v.Class.String()), attribute.Int64("relay.retry.delay_ms", v.Delay.Milliseconds()),
		attribute.String("exception.message", m.redactor.Redact(v.cause.Error()))))
}

// endSpan ends p's span; err is the pass's error, if any (a record that
// is not due, or one relay cannot decide now).
func (m *Machine) endSpan(p *pass, err error) {
	if err != nil && p.span.IsRecording() {
		var notDue *txn.NotDueError
		if errors.As(err, &notDue) {
			p.span.AddEvent("not due", trace.WithAttributes(attribute.String("relay.not_before", notDue.Error())))
		} else {
			p.span.SetAttributes(AttrErrorType.String("_OTHER"))
			tracing.Fail(p.span, fmt.Sprintf("%T", err), m.redactor.Redact(err.Error()))
		}
	}
	p.span.End()
}

// appendTrace carries the trace context to p's next record, in topic and
// partition: with p's span recorded, that of a send span, its child, for
// the record (the messaging conventions' producer span); with p's span
// not sampled, p's span's own (a child would not be sampled either);
// without a tracer, the one its record came with.
func appendTrace(dst []txn.Header, p *pass, topic string, partition int32) []txn.Header {
	tc := p.tc
	if p.sender != nil {
		tc = p.send(topic, partition)
	}
	if tc.Parent != nil {
		dst = append(dst, txn.Header{Key: envelope.TraceParent, Value: tc.Parent})
		if tc.State != nil {
			dst = append(dst, txn.Header{Key: envelope.TraceState, Value: tc.State})
		}
		if tc.Foreign != nil { // the source record's own are its producer's context, not this hop's
			dst = slices.DeleteFunc(dst, func(h txn.Header) bool { return tc.Replaces(h.Key) })
			for _, h := range tc.Foreign {
				dst = append(dst, txn.Header{Key: h.Key, Value: h.Value})
			}
		}
		return dst
	}
	for _, k := range []string{envelope.TraceParent, envelope.TraceState} {
		if v, ok := envelope.Lookup(p.rec.Headers, k); ok {
			dst = append(dst, txn.Header{Key: k, Value: v})
		}
	}
	return dst
}

// send records the span of p's record sent to topic: a producer span,
// child of p's process span, that ends when the record is built for the
// transaction (the commit span of the same relay.transaction.seq says
// whether and when it became visible).
func (p *pass) send(topic string, partition int32) tracing.Context {
	_, span := p.sender.tracer.Start(p.sender.ctx, p.sender.opts.sendName(topic), p.sender.opts.send...)
	span.SetAttributes(AttrSystem.String("kafka"), AttrOperation.String("send"), AttrOperationNam.String("send"),
		AttrDestination.String(topic), AttrMessageID.String(p.id))
	span.SetAttributes(p.sender.opts.producer...)
	if partition >= 0 { // else the producer's partitioner picks it
		span.SetAttributes(AttrPartitionID.String(strconv.Itoa(int(partition))))
	}
	span.End()
	return p.sender.opts.prop.ContextOf(span.SpanContext())
}

// sender is what a recorded pass needs for its send spans.
type sender struct {
	tracer trace.Tracer
	ctx    context.Context //nolint:containedctx // the pass's context with its process span, for the send spans' parent
	opts   *spanOpts
}
