package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"relay/internal/envelope"
	"relay/internal/ledger"
	"relay/internal/schema"
	"relay/internal/tiers"
	"relay/internal/txn"
)

// scriptedAdmitter fails with the queued errors, then admits.
type scriptedAdmitter struct {
	errs  []error
	calls int
}

func (a *scriptedAdmitter) Admit(_ context.Context, v []byte) (schema.Admitted, error) {
	a.calls++
	info := schema.Info{ID: 11, Subject: "orders-value", Version: 2}
	if len(a.errs) > 0 {
		err := a.errs[0]
		a.errs = a.errs[1:]
		return schema.Admitted{Writer: info}, err
	}
	return schema.Admitted{Writer: info, Record: map[string]any{"amount": int64(1)}, Value: append([]byte("upcast:"), v...)}, nil
}

func (a *scriptedAdmitter) Encode(map[string]any) ([]byte, error) { return []byte("enc"), nil }

type countOutcomes map[string]int

func (c countOutcomes) Outcome(o ledger.Outcome, code string, n int) { c[string(o)+"/"+code] += n }

func (c countOutcomes) Ended(o ledger.Outcome, attempts int, _ time.Duration) {
	c["ended/"+string(o)] += attempts
}

func (c countOutcomes) Replayed(o string, n int) { c["replay/"+o] += n }

var t0 = time.Date(2026, 7, 31, 9, 10, 0, 0, time.UTC)

func newMachine(a Admitter, now *time.Time) (*Machine, countOutcomes) {
	routes := []Routes{{Source: "orders", Output: "orders.valid", Quarantine: "orders.quarantine", Rejected: "orders.rejected",
		Tiers: []string{"orders.retry.30s", "orders.retry.5m"}}}
	outs := countOutcomes{}
	m, err := New(Options{
		Table: NewTable(routes), Group: "relay",
		Policy: tiers.Policy{BlockingAttempts: 2, BlockingBackoff: time.Millisecond, BlockingMaxWait: time.Second,
			Tiers: []time.Duration{30 * time.Second, 5 * time.Minute}, MaxAttempts: 5, MaxElapsed: time.Hour, UnknownAttempts: 2},
		Admitter: a, Redactor: envelope.NewRedactor(nil, 256), Outcomes: outs,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return *now },
	})
	if err != nil {
		panic(err)
	}
	return m, outs
}

func source(offset int64) *txn.Record {
	return &txn.Record{Topic: "orders", Partition: 3, Offset: offset, Key: []byte("k1"), Value: []byte("raw"),
		Headers:   []txn.Header{{Key: "app", Value: []byte("a")}, {Key: envelope.TraceParent, Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}},
		Timestamp: t0.Add(-time.Minute)}
}

func one(t *testing.T) func([]txn.Output, error) (txn.Output, *envelope.Failure) {
	return func(outs []txn.Output, err error) (txn.Output, *envelope.Failure) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if len(outs) != 1 {
			t.Fatalf("%d outputs, want 1", len(outs))
		}
		f, _ := envelope.Parse(outs[0].Headers)
		return outs[0], f
	}
}

func TestMalformedIsQuarantinedAtOnce(t *testing.T) {
	now := t0
	a := &scriptedAdmitter{errs: []error{tiers.Failf(tiers.CauseWireFormat, "magic byte 0x7b")}}
	m, _ := newMachine(a, &now)
	out, f := one(t)(m.Handle(context.Background(), source(884193)))
	if out.Topic != "orders.quarantine" || f.Code != tiers.CodeWireFormatInvalid || f.Attempt != 1 || a.calls != 1 {
		t.Fatalf("out %s, envelope %+v, calls %d", out.Topic, f, a.calls)
	}
	if f.ID != "orders/3/884193" || f.Class != "invalid" || !f.NotBefore.IsZero() || string(out.Value) != "raw" || string(out.Key) != "k1" ||
		out.Partition != 3 || !out.Timestamp.Equal(t0.Add(-time.Minute)) {
		t.Fatalf("envelope %+v out %+v", f, out)
	}
	if v, _ := envelope.Lookup(out.Headers, "app"); string(v) != "a" {
		t.Fatal("original headers must be kept")
	}
	if v, _ := envelope.Lookup(out.Headers, envelope.TraceParent); len(v) == 0 {
		t.Fatal("trace context must be carried")
	}
}

func TestTransientRecoversInPlace(t *testing.T) {
	now := t0
	unavailable := tiers.Failf(tiers.CauseRegistryUnavailable, "503")
	a := &scriptedAdmitter{errs: []error{unavailable, unavailable}}
	m, outs := newMachine(a, &now)
	out, f := one(t)(m.Handle(context.Background(), source(7)))
	if out.Topic != "orders.valid" || f != nil || a.calls != 3 || string(out.Value) != "upcast:raw" {
		t.Fatalf("out %+v calls %d", out, a.calls)
	}
	if id, _ := envelope.Lookup(out.Headers, envelope.MessageID); string(id) != "orders/3/7" {
		t.Fatalf("message id %q", id)
	}
	if len(outs) != 0 {
		t.Fatal("outcomes are reported only on commit")
	}
	m.OnCommit()
	if outs["processed/"] != 1 {
		t.Fatalf("outcomes %v", outs)
	}
}

func TestRetryThroughTiersThenQuarantine(t *testing.T) {
	now := t0
	unavailable := tiers.Failf(tiers.CauseRegistryUnavailable, "dial tcp 10.0.0.1:8081: connect: connection refused")
	a := &scriptedAdmitter{errs: []error{unavailable, unavailable, unavailable}}
	m, _ := newMachine(a, &now)
	// Blocking budget spent: exactly one record, to the first tier.
	out, f := one(t)(m.Handle(context.Background(), source(42)))
	if out.Topic != "orders.retry.30s" || f.Attempt != 3 || f.Code != tiers.CodeSchemaRegistryUnavailable || !f.NotBefore.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("first hop %s %+v", out.Topic, f)
	}
	// Read back from the tier before it is due: the loop must wait.
	tierRec := &txn.Record{Topic: out.Topic, Partition: out.Partition, Offset: 0, Key: out.Key, Value: out.Value, Headers: out.Headers, Timestamp: out.Timestamp}
	_, err := m.Handle(context.Background(), tierRec)
	var nd *txn.NotDueError
	if !errors.As(err, &nd) || !nd.Until.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("not due: %v", err)
	}
	// Due, fails again: the next tier, same identity.
	now = t0.Add(31 * time.Second)
	a.errs = []error{unavailable}
	out, f = one(t)(m.Handle(context.Background(), tierRec))
	if out.Topic != "orders.retry.5m" || f.Attempt != 4 || f.ID != "orders/3/42" || f.SourceTopic != "orders" || f.SourceOffset != 42 ||
		!f.FirstFailedAt.Equal(t0) {
		t.Fatalf("second hop %s %+v", out.Topic, f)
	}
	// Last attempt fails: quarantine, exhausted, original coordinates.
	now = t0.Add(7 * time.Minute)
	a.errs = []error{unavailable}
	tierRec = &txn.Record{Topic: out.Topic, Partition: out.Partition, Offset: 9, Key: out.Key, Value: out.Value, Headers: out.Headers, Timestamp: out.Timestamp}
	out, f = one(t)(m.Handle(context.Background(), tierRec))
	if out.Topic != "orders.quarantine" || f.Code != "SCHEMA_REGISTRY_UNAVAILABLE_EXHAUSTED" || f.Attempt != 5 || f.SourceOffset != 42 ||
		!f.LastFailedAt.Equal(now) || string(out.Value) != "raw" {
		t.Fatalf("quarantine %s %+v", out.Topic, f)
	}
	if n := len(out.Headers); n > 25 {
		t.Fatalf("headers grow hop by hop: %d", n)
	}
	// A tier record that succeeds keeps the source identity.
	now = t0.Add(8 * time.Minute)
	out, _ = one(t)(m.Handle(context.Background(), tierRec))
	if id, _ := envelope.Lookup(out.Headers, envelope.MessageID); out.Topic != "orders.valid" || string(id) != "orders/3/42" {
		t.Fatalf("processed from tier: %s id %q", out.Topic, id)
	}
	if _, err := envelope.Parse(out.Headers); !errors.Is(err, envelope.ErrNoEnvelope) {
		t.Fatal("a processed record carries no failure envelope")
	}
}

func TestRuleRejects(t *testing.T) {
	now := t0
	m, _ := newMachine(&scriptedAdmitter{}, &now)
	m.rules = rulesFunc(func(map[string]any) error { return &tiers.Error{Cause: tiers.CauseRuleReject, Name: "NEGATIVE_AMOUNT"} })
	out, f := one(t)(m.Handle(context.Background(), source(1)))
	if out.Topic != "orders.rejected" || f.Code != "REJECTED_NEGATIVE_AMOUNT" || f.Class != "rejected" || f.SchemaVersion != 2 {
		t.Fatalf("%s %+v", out.Topic, f)
	}
}

type rulesFunc func(map[string]any) error

func (r rulesFunc) Check(_ context.Context, rec map[string]any) error { return r(rec) }

// TestSensitiveDataNeverWritten pins redaction at the unit level.
func TestSensitiveDataNeverWritten(t *testing.T) {
	now := t0
	secret := errors.New(`Get "https://svc:hunter2@registry.internal/schemas/ids/9": 401, token=abc.def.ghi for jane@example.com card 4111111111111111`)
	m, _ := newMachine(&scriptedAdmitter{errs: []error{tiers.Fail(tiers.CauseSchemaNotFound, secret)}}, &now)
	m.compat = envelope.Compat{Spring: true, Connect: true}
	out, _ := one(t)(m.Handle(context.Background(), source(1)))
	for _, h := range out.Headers {
		for _, s := range []string{"hunter2", "abc.def.ghi", "jane@example.com", "4111111111111111"} {
			if strings.Contains(string(h.Value), s) {
				t.Errorf("header %s leaks %q: %s", h.Key, s, h.Value)
			}
		}
	}
}

func TestForgedTierRecordIsQuarantined(t *testing.T) {
	now := t0
	m, _ := newMachine(&scriptedAdmitter{}, &now)
	out, f := one(t)(m.Handle(context.Background(), &txn.Record{Topic: "orders.retry.30s", Partition: 0, Offset: 5, Value: []byte("x")}))
	if out.Topic != "orders.quarantine" || f.Code != CodeEnvelopeInvalid {
		t.Fatalf("%s %+v", out.Topic, f)
	}
}

// TestWaitInPlace is the partition policy: a record whose retries are not
// done waits at its place (NotDueError) with the tier delays as waits, is
// tried again when due with its attempt count, and is quarantined when the
// budget ends; nothing is written to a tier.
func TestWaitInPlace(t *testing.T) {
	now := t0
	unavailable := tiers.Failf(tiers.CauseRegistryUnavailable, "503")
	a := &scriptedAdmitter{errs: []error{unavailable, unavailable, unavailable}}
	m, _ := newMachine(a, &now)
	m.waitInPlace = true
	rec := source(42)
	_, err := m.Handle(context.Background(), rec)
	var nd *txn.NotDueError
	if !errors.As(err, &nd) || !nd.Until.Equal(t0.Add(30*time.Second)) || a.calls != 3 {
		t.Fatalf("first pass: %v, %d calls", err, a.calls)
	}
	// Back early (after a rewind): still waiting, no attempt made.
	now = t0.Add(time.Second)
	if _, err := m.Handle(context.Background(), rec); !errors.As(err, &nd) || a.calls != 3 {
		t.Fatalf("early: %v, %d calls", err, a.calls)
	}
	// Due, fails again: waits the second delay.
	now = t0.Add(31 * time.Second)
	a.errs = []error{unavailable}
	if _, err := m.Handle(context.Background(), rec); !errors.As(err, &nd) || !nd.Until.Equal(now.Add(5*time.Minute)) || a.calls != 4 {
		t.Fatalf("second wait: %v, %d calls", err, a.calls)
	}
	// Last attempt fails: quarantined, exhausted, attempt 5.
	now = now.Add(5 * time.Minute)
	a.errs = []error{unavailable}
	out, f := one(t)(m.Handle(context.Background(), rec))
	if out.Topic != "orders.quarantine" || f.Attempt != 5 || f.Code != "SCHEMA_REGISTRY_UNAVAILABLE_EXHAUSTED" || !f.FirstFailedAt.Equal(t0) {
		t.Fatalf("%s %+v", out.Topic, f)
	}
	m.OnCommit()
	if m.waits.len() != 0 {
		t.Fatal("a resolved record must not stay in the waiting state once its end is committed")
	}
	// Another record of the partition is not mistaken for the waiting one.
	a.errs = []error{unavailable, unavailable, unavailable}
	_, _ = m.Handle(context.Background(), source(50))
	out, _ = one(t)(m.Handle(context.Background(), source(51)))
	m.OnCommit()
	if out.Topic != "orders.valid" || m.waits.len() != 0 {
		t.Fatalf("a later offset, committed, drops the old wait: %s, %d waiting", out.Topic, m.waits.len())
	}
}

// TestConnectHeadersParseAsAConnectDLQ reads a quarantine record's
// RELAY_COMPAT_HEADERS=connect headers as tools that parse Kafka Connect
// dead-letter queues do: every header Connect's reporter writes is there,
// task id and partition parse as ints and the offset as a long, the stage
// is one of Connect's stage names, and the stack trace carries the cause
// chain, redacted like relay.error.message.
func TestConnectHeadersParseAsAConnectDLQ(t *testing.T) {
	now := t0
	inner := errors.New("dial tcp 10.0.0.7:8081: connect: connection refused (password=hunter2)")
	cause := fmt.Errorf("lookup schema 9: %w", inner)
	m, _ := newMachine(&scriptedAdmitter{errs: []error{tiers.Fail(tiers.CauseSchemaNotFound, cause)}}, &now)
	m.compat = envelope.Compat{Connect: true}
	out, f := one(t)(m.Handle(context.Background(), source(7)))
	get := func(name string) string {
		t.Helper()
		v, ok := envelope.Lookup(out.Headers, "__connect.errors."+name)
		if !ok {
			t.Fatalf("no __connect.errors.%s header", name)
		}
		return string(v)
	}
	for _, name := range []string{"topic", "connector.name", "class.name", "exception.class.name", "exception.message"} {
		if get(name) == "" {
			t.Errorf("__connect.errors.%s is empty", name)
		}
	}
	if _, err := strconv.ParseInt(get("task.id"), 10, 32); err != nil {
		t.Errorf("task.id does not parse as an int: %v", err)
	}
	if p, err := strconv.ParseInt(get("partition"), 10, 32); err != nil || int32(p) != f.SourcePartition {
		t.Errorf("partition %q: %v", get("partition"), err)
	}
	if o, err := strconv.ParseInt(get("offset"), 10, 64); err != nil || o != f.SourceOffset {
		t.Errorf("offset %q: %v", get("offset"), err)
	}
	stages := []string{"KEY_CONVERTER", "VALUE_CONVERTER", "HEADER_CONVERTER", "TRANSFORMATION", "TASK_PUT", "TASK_POLL", "KAFKA_PRODUCE", "KAFKA_CONSUME"}
	if !slices.Contains(stages, get("stage")) {
		t.Errorf("stage %q is none of Connect's", get("stage"))
	}
	trace := get("exception.stacktrace")
	lines := strings.Split(trace, "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], get("exception.class.name")+": ") ||
		!strings.HasPrefix(lines[1], "Caused by: lookup schema 9") || !strings.HasPrefix(lines[2], "Caused by: dial tcp") {
		t.Errorf("stack trace does not carry the cause chain:\n%s", trace)
	}
	if strings.Contains(trace, "hunter2") {
		t.Errorf("stack trace leaks a secret:\n%s", trace)
	}
}
