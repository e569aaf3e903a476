package schema

// Attacks on admission in the new formats: garbage that crashed, hung or
// misled it, and the records each check exists for.

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"relay/internal/config"
	"relay/internal/envelope"
	"relay/internal/tiers"
)

// protoAdmitter registers texts as versions 1.. of subject "s" (Protobuf),
// and builds an admitter on version reader without the start-up check.
func protoAdmitter(t *testing.T, accept string, reader int, texts ...string) (*Admitter, []int) {
	t.Helper()
	reg, srv := newFakeRegistry(t)
	c := NewClient(srv.URL, time.Second)
	var ids []int
	for _, s := range texts {
		ids = append(ids, reg.registerAs("s", FormatProtobuf, s))
	}
	acc, _ := config.ParseVersions(accept)
	set := Settings{Subject: "s", Accept: acc, ReaderVersion: reader, Timeout: time.Second, CacheSize: 8}
	a, err := NewAdmitter(c, set, readerAt(t, c, "s", reader))
	if err != nil {
		t.Fatal(err)
	}
	return a, ids
}

// D1: a deeply nested JSON body (80 KB, far under maxJSONBody) makes
// segmentio's parser quadratic: one record holds admission for many
// seconds (8 MiB: hours). Decode (console, quarantine show) is the same.
func TestJSONDeepNestingDoesNotHang(t *testing.T) {
	e, a := setupJSON(t)
	n := 40000
	body := append([]byte(`{"id":"x","addr":`), bytes.Repeat([]byte("["), n)...)
	body = append(body, bytes.Repeat([]byte("]"), n)...)
	body = append(body, '}')
	done := make(chan error, 1)
	go func() {
		_, err := a.Admit(context.Background(), AppendWire(nil, e.ids[2], body))
		done <- err
	}()
	select {
	case err := <-done:
		if causeOf(t, err) != tiers.CausePayloadMalformed {
			t.Fatalf("want PAYLOAD_MALFORMED, got %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("a %d-byte nested JSON body is still being parsed after 2s", len(body))
	}
}

// D2: the reference bounds (count, depth) are verdicts on the schema, but
// they come back as plain errors and lookup sorts them as a registry
// outage: SCHEMA_REGISTRY_UNAVAILABLE, retried forever, never cached.
func TestReferenceBoundsAreAVerdict(t *testing.T) {
	reg, srv := newFakeRegistry(t)
	c := NewClient(srv.URL, time.Second)
	var refs []Reference
	for i := range maxReferences + 1 {
		reg.registerAs(fmt.Sprintf("r%d", i), FormatProtobuf, fmt.Sprintf(`syntax = "proto3"; message M%d {}`, i))
		refs = append(refs, Reference{Name: fmt.Sprintf("r%d.proto", i), Subject: fmt.Sprintf("r%d", i), Version: 1})
	}
	// A chain deeper than maxReferenceDepth.
	for i := range maxReferenceDepth + 2 {
		var rs []Reference
		if i > 0 {
			rs = []Reference{{Name: fmt.Sprintf("c%d.proto", i-1), Subject: fmt.Sprintf("c%d", i-1), Version: 1}}
		}
		reg.registerAs(fmt.Sprintf("c%d", i), FormatProtobuf, `syntax = "proto3";`, rs...)
	}
	reg.registerAs("s", FormatProtobuf, `syntax = "proto3"; message O { string s = 1; }`)
	wide := reg.registerAs("s", FormatProtobuf, `syntax = "proto3"; message O { string s = 1; }`, refs...)
	deep := reg.registerAs("s", FormatProtobuf, `syntax = "proto3"; message O { string s = 1; }`,
		Reference{Name: "top.proto", Subject: fmt.Sprintf("c%d", maxReferenceDepth+1), Version: 1})
	acc, _ := config.ParseVersions("1-3")
	set := Settings{Subject: "s", Accept: acc, ReaderVersion: 1, Timeout: time.Second, CacheSize: 8}
	a, _ := NewAdmitter(c, set, readerAt(t, c, "s", 1))
	for name, id := range map[string]int{"too many references": wide, "references too deep": deep} {
		_, err := a.Admit(context.Background(), framed(id, []int{0}, nil))
		if got := causeOf(t, err); got != tiers.CauseSchemaUnsupported {
			t.Errorf("%s: want SCHEMA_UNSUPPORTED (a cached verdict), got %v", name, err)
		}
	}
}

// cancelAfterSchema is a registry whose Schema answer arrives just as the
// caller's context ends (a deadline, a revoked partition, shutdown).
type cancelAfterSchema struct {
	Registry
	cancel context.CancelFunc
}

func (r *cancelAfterSchema) Schema(ctx context.Context, id int) (Text, error) {
	t, err := r.Registry.Schema(ctx, id)
	r.cancel()
	return t, err
}

// D3: protocompile returns ctx.Err() when the lookup's context ends;
// compileProto wraps it, compileText makes it a *compileError, and lookup
// caches SCHEMA_UNSUPPORTED for the id: every later record of a good
// version is quarantined until the entry is evicted or relay restarts.
func TestCancelledCompileIsNotCached(t *testing.T) {
	reg, srv := newFakeRegistry(t)
	c := NewClient(srv.URL, time.Second)
	reg.registerAs("s", FormatProtobuf, `syntax = "proto3"; message O { string s = 1; }`)
	reg.registerAs("s", FormatProtobuf, `syntax = "proto3"; message O { string s = 1; int32 x = 2; }`)
	acc, _ := config.ParseVersions("1-2")
	set := Settings{Subject: "s", Accept: acc, ReaderVersion: 2, Timeout: time.Second, CacheSize: 8}
	r := readerAt(t, c, "s", 2)
	old, _, _ := c.ByVersion(context.Background(), "s", 1)
	ctx, cancel := context.WithCancel(context.Background())
	a, _ := NewAdmitter(&cancelAfterSchema{Registry: c, cancel: cancel}, set, r)
	_, err := a.Admit(ctx, framed(old, []int{0}, nil))
	if err != nil && causeOf(t, err) != tiers.CauseRegistryUnavailable {
		t.Errorf("cancelled lookup: want SCHEMA_REGISTRY_UNAVAILABLE, got %v", err)
	}
	a.reg = c // the registry is fine now
	if _, err := a.Admit(context.Background(), framed(old, []int{0}, nil)); err != nil {
		t.Fatalf("a cancelled lookup was cached as a verdict: %v", err)
	}
}

// D4: protoReadable compares wire types only: a version that changed a
// field's kind within one wire type (sint32 -> int32, string -> message)
// or made a packed repeated field singular passes the start-up check and
// its records are accepted with wrong or lost values.
func TestProtoKindChangeIsNotSilentlyMisread(t *testing.T) {
	for _, tc := range []struct {
		name, writer, canonical string
		body                    []byte
	}{
		{"sint32 -1 read as int32", `syntax = "proto3"; message O { sint32 n = 1; }`, `syntax = "proto3"; message O { int32 n = 1; }`,
			protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), protowire.EncodeZigZag(-1))},
		{"packed [1 2 3] read as a singular int32", `syntax = "proto3"; message O { repeated int32 n = 1; }`, `syntax = "proto3"; message O { int32 n = 1; }`,
			protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{1, 2, 3})},
		{"a string read as a message", `syntax = "proto3"; message O { string n = 1; }`, `syntax = "proto3"; message O { S n = 1; } message S { int32 a = 1; }`,
			protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\x08\x05")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg, srv := newFakeRegistry(t)
			c := NewClient(srv.URL, time.Second)
			old := reg.registerAs("s", FormatProtobuf, tc.writer)
			reg.registerAs("s", FormatProtobuf, tc.canonical)
			acc, _ := config.ParseVersions("1-2")
			set := Settings{Subject: "s", Accept: acc, ReaderVersion: 2, Timeout: time.Second, CacheSize: 8}
			if _, err := CheckAccepted(context.Background(), c, set); err != nil {
				return // refused at start-up: fine
			}
			a, _ := NewAdmitter(c, set, readerAt(t, c, "s", 2))
			got, err := a.Admit(context.Background(), framed(old, []int{0}, tc.body))
			if err == nil {
				t.Fatalf("start-up check passed and the record was accepted as %v", got.Record)
			}
			if causeOf(t, err) != tiers.CauseFieldMissing {
				t.Fatalf("want FIELD_MISSING, got %v", err)
			}
		})
	}
}

// D5: protoSubset ignores UTF-8 validation, which differs between proto2
// and proto3 (and editions' utf8_validation): a proto3 writer's invalid
// string is accepted through a proto2 canonical message; a proto2
// writer's valid record is PAYLOAD_MALFORMED through a proto3 one.
func TestProtoSubsetUTF8(t *testing.T) {
	bad := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0xff, 0xfe})
	for _, tc := range []struct {
		name, writer, canonical string
		want                    tiers.Cause
	}{
		{"proto3 writer, proto2 canonical: the body breaks its writer", `syntax = "proto3"; message O { string s = 1; }`,
			`syntax = "proto2"; message O { optional string s = 1; optional int32 x = 2; }`, tiers.CausePayloadMalformed},
		{"proto2 writer, proto3 canonical: a valid record the canonical cannot read", `syntax = "proto2"; message O { optional string s = 1; }`,
			`syntax = "proto3"; message O { string s = 1; int32 x = 2; }`, tiers.CauseFieldMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, ids := protoAdmitter(t, "1-2", 2, tc.writer, tc.canonical)
			got, err := a.Admit(context.Background(), framed(ids[0], []int{0}, bad))
			if err == nil {
				t.Fatalf("want %v, accepted as %q", tc.want, got.Record["s"])
			}
			if c := causeOf(t, err); c != tc.want {
				t.Fatalf("want %v, got %v", tc.want, err)
			}
		})
	}
}

// D6: the subset path reads the body as the canonical message only: a
// field the writer does not declare but the canonical one does is
// accepted, where the non-subset path (decodeProto on the writer) refuses
// it as PAYLOAD_MALFORMED.
func TestProtoSubsetRefusesFieldsItsWriterLacks(t *testing.T) {
	a, ids := protoAdmitter(t, "1-2", 2, `syntax = "proto3"; message O { string s = 1; }`, `syntax = "proto3"; message O { string s = 1; int32 x = 2; }`)
	body := protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 7)
	got, err := a.Admit(context.Background(), framed(ids[0], []int{0}, body))
	if err == nil {
		t.Fatalf("version 1 declares no field 2, yet the record was accepted as %v", got.Record)
	}
	if c := causeOf(t, err); c != tiers.CausePayloadMalformed {
		t.Fatalf("want PAYLOAD_MALFORMED, got %v", err)
	}
}

// D7: protoRecord emits every declared field of every message, so a body
// of empty elements of a repeated message field allocates (fields x
// elements): 100 fields, 40 KB of body -> ~130 MB; a 1 MiB record, GBs.
func TestProtoRecordAllocationIsBounded(t *testing.T) {
	var fields []string
	for i := 1; i <= 100; i++ {
		fields = append(fields, fmt.Sprintf("int32 f%d = %d;", i, i))
	}
	a, ids := protoAdmitter(t, "1", 1, `syntax = "proto3"; message O { repeated S s = 1; } message S { `+strings.Join(fields, " ")+` }`)
	// Few messages of many default fields: the record's values are
	// bounded by its size.
	var body []byte
	for range 2000 {
		body = protowire.AppendBytes(protowire.AppendTag(body, 1, protowire.BytesType), nil)
	}
	if _, err := a.Admit(context.Background(), framed(ids[0], []int{0}, body)); causeOf(t, err) != tiers.CausePayloadMalformed {
		t.Fatalf("4000 bytes expanding to 200,000 fields: want PAYLOAD_MALFORMED, got %v", err)
	}
	// Many empty messages: refused before any is built.
	body = body[:0]
	for range maxProtoMessages + 1 {
		body = protowire.AppendBytes(protowire.AppendTag(body, 1, protowire.BytesType), nil)
	}
	in := framed(ids[0], []int{0}, body)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	_, err := a.Admit(context.Background(), in)
	runtime.ReadMemStats(&m1)
	if causeOf(t, err) != tiers.CausePayloadMalformed {
		t.Fatalf("%d empty messages: want PAYLOAD_MALFORMED, got %v", maxProtoMessages+1, err)
	}
	if per := (m1.TotalAlloc - m0.TotalAlloc) / uint64(len(in)); per > 16 {
		t.Fatalf("%d bytes of record allocate %d KB before the refusal", len(in), (m1.TotalAlloc-m0.TotalAlloc)>>10)
	}
}

// D8: segmentio's syntax errors quote up to 32 bytes of the body after
// the error; the failure message carries them into the envelope (and
// payload.Render's note), where the name that would get them masked is
// not beside them.
func TestJSONParseErrorDoesNotEchoTheBody(t *testing.T) {
	e, a := setupJSON(t)
	_, err := a.Admit(context.Background(), AppendWire(nil, e.ids[2], []byte(`{"id":"x","password" "hunter2"}`)))
	if msg := envelope.NewRedactor(nil, 512).Redact(err.Error()); strings.Contains(msg, "hunter2") {
		t.Fatalf("the redacted failure message shows the record's secret: %s", msg)
	}
}

// D9: a reference the registry no longer has is SCHEMA_NOT_FOUND, the
// code for an id the registry does not know; the id is known (the schema
// cannot be compiled): SCHEMA_UNSUPPORTED, as a schema that does not
// compile is.
func TestMissingReferenceIsNotSchemaNotFound(t *testing.T) {
	reg, srv := newFakeRegistry(t)
	c := NewClient(srv.URL, time.Second)
	reg.registerAs("s", FormatProtobuf, `syntax = "proto3"; message O { string s = 1; }`)
	id := reg.registerAs("s", FormatProtobuf, `syntax = "proto3"; import "gone.proto"; message O { string s = 1; }`,
		Reference{Name: "gone.proto", Subject: "gone", Version: 1})
	acc, _ := config.ParseVersions("1-2")
	a, _ := NewAdmitter(c, Settings{Subject: "s", Accept: acc, ReaderVersion: 1, Timeout: time.Second, CacheSize: 8}, readerAt(t, c, "s", 1))
	_, err := a.Admit(context.Background(), framed(id, []int{0}, nil))
	if causeOf(t, err) == tiers.CauseSchemaNotFound {
		t.Fatalf("schema id %d is known; its reference is missing: %v", id, err)
	}
}

// D10: jsonschema/v6 ignores big.Rat.SetString's failure on a number with
// a huge exponent (validator.go:521) and dereferences nil at :527 for
// minimum/maximum/multipleOf: a 16-byte record panics the try, relay's
// crash handler stops the loop, and the record is read again after the
// restart (a crash loop on one poison record). The hook's replacement
// (encodeJSON) goes through the same Validate.
func TestJSONHugeExponentDoesNotPanic(t *testing.T) {
	reg, srv := newFakeRegistry(t)
	c := NewClient(srv.URL, time.Second)
	id := reg.registerAs("s", FormatJSON, `{"type":"object","properties":{"n":{"type":"number","minimum":0}}}`)
	acc, _ := config.ParseVersions("1")
	a, _ := NewAdmitter(c, Settings{Subject: "s", Accept: acc, ReaderVersion: 1, Timeout: time.Second, CacheSize: 8}, readerAt(t, c, "s", 1))
	defer func() {
		if v := recover(); v != nil {
			t.Fatalf("Admit panicked on {\"n\":1e9999999}: %v", v)
		}
	}()
	_, err := a.Admit(context.Background(), AppendWire(nil, id, []byte(`{"n":1e9999999}`)))
	if err == nil || causeOf(t, err) != tiers.CausePayloadMalformed {
		t.Fatalf("want PAYLOAD_MALFORMED, got %v", err)
	}
}
