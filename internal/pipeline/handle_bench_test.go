package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"relay/internal/envelope"
	"relay/internal/tiers"
	"relay/internal/tracing"
	"relay/internal/txn"
)

// BenchmarkHandle measures one record's way through the machine: a source
// record that passes (the common case, also at a far offset), a tier
// record that passes (its envelope is read), and a source record that is
// quarantined at once.
func BenchmarkHandle(b *testing.B) {
	ctx := context.Background()
	b.Run("processed", func(b *testing.B) {
		now := t0
		m, _ := newMachine(nil, &now)
		rec := source(7)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.Handle(ctx, rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("processed-far", func(b *testing.B) {
		// The same at an offset and partition of a long-lived topic,
		// whose identity has numbers of many digits.
		now := t0
		m, _ := newMachine(nil, &now)
		rec := source(884193001)
		rec.Partition = 112
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.Handle(ctx, rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("from-tier", func(b *testing.B) {
		now := t0
		m, _ := newMachine(&scriptedAdmitter{errs: []error{tiers.Failf(tiers.CauseRegistryUnavailable, "503"),
			tiers.Failf(tiers.CauseRegistryUnavailable, "503"), tiers.Failf(tiers.CauseRegistryUnavailable, "503")}}, &now)
		outs, err := m.Handle(ctx, source(7))
		if err != nil || len(outs) != 1 {
			b.Fatal(outs, err)
		}
		now = now.Add(time.Hour)
		m, _ = newMachine(nil, &now)
		rec := &txn.Record{Topic: outs[0].Topic, Partition: 3, Offset: 1, Key: outs[0].Key, Value: outs[0].Value,
			Headers: outs[0].Headers, Timestamp: outs[0].Timestamp}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.Handle(ctx, rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("quarantined", func(b *testing.B) {
		now := t0
		a := &scriptedAdmitter{}
		m, _ := newMachine(a, &now)
		rec := source(7)
		b.ReportAllocs()
		for b.Loop() {
			a.errs = append(a.errs[:0], tiers.Failf(tiers.CauseWireFormat, "magic byte 0x7b"))
			if _, err := m.Handle(ctx, rec); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkHandleTraced is BenchmarkHandle's processed record with tracing
// on: every pass sampled, its span through a batch processor to an
// exporter that drops it (the cost of the span, not of the export).
func BenchmarkHandleTraced(b *testing.B) {
	ctx := context.Background()
	tp := tracing.NewWith(sdktrace.NewBatchSpanProcessor(tracetest.NewNoopExporter()))
	defer func() { _ = tp.Shutdown(ctx) }()
	now := t0
	m, _ := newMachine(nil, &now)
	m.tracer = tp.Tracer(TracerName)
	rec := source(7)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Handle(ctx, rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandleTracedUnsampled is BenchmarkHandleTraced at the sampler
// high-volume users run, parent-based 1 %: nearly every pass unsampled,
// so this is what tracing costs a record that is not traced.
func BenchmarkHandleTracedUnsampled(b *testing.B) {
	ctx := context.Background()
	tp := tracing.NewWith(sdktrace.NewBatchSpanProcessor(tracetest.NewNoopExporter()),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))))
	defer func() { _ = tp.Shutdown(ctx) }()
	now := t0
	m, _ := newMachine(nil, &now)
	m.tracer = tp.Tracer(TracerName)
	rec := source(7)
	rec.Headers = rec.Headers[:1] // no traceparent: relay starts the trace, and samples 1 %
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Handle(ctx, rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFingerprintShare is the cost of relay.source.fingerprint (a
// SHA-256 of the key and value) against the whole of a passing record's
// way through the machine, which includes it: both timed in the same loop,
// the share reported as fingerprint/handle, at three value sizes.
func BenchmarkFingerprintShare(b *testing.B) {
	ctx := context.Background()
	for _, size := range []int{100, 1 << 10, 16 << 10} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			now := t0
			m, _ := newMachine(nil, &now)
			rec := source(7)
			rec.Value = bytes.Repeat([]byte{'v'}, size)
			var handle, fp time.Duration
			for b.Loop() {
				t := time.Now()
				if _, err := m.Handle(ctx, rec); err != nil {
					b.Fatal(err)
				}
				handle += time.Since(t)
				t = time.Now()
				_ = envelope.Fingerprint(rec.Key, rec.Value)
				fp += time.Since(t)
			}
			b.ReportMetric(float64(fp)/float64(handle), "fingerprint/handle")
			b.ReportMetric(float64(fp.Nanoseconds())/float64(b.N), "fingerprint-ns/op")
		})
	}
}
