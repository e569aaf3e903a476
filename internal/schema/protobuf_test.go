package schema

import (
	"bytes"
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"relay/internal/config"
	"relay/internal/tiers"
)

// Order schemas in Protobuf: p1 is not accepted, p2 is upcast to p3 (the
// canonical version). p2 and p3 import Money from another subject.
const (
	protoMoney = `syntax = "proto3";
package it;
message Money { int64 units = 1; string currency = 2; }
`
	p1 = `syntax = "proto3";
package it;
message Order { string id = 1; }
`
	p2 = `syntax = "proto3";
package it;
import "money.proto";
message Order { string id = 1; Money amount = 2; int64 legacy = 9; }
`
	p3 = `syntax = "proto3";
package it;
import "money.proto";
message Order {
  string id = 1;
  Money amount = 2;
  string channel = 3;
  repeated Line lines = 4;
  message Line { string sku = 1; int32 qty = 2; }
}
message Other { string x = 1; }
`
)

type protoEnv struct {
	reg   *fakeRegistry
	c     *Client
	ids   []int // by version-1
	files []protoreflect.FileDescriptor
}

func setupProto(t *testing.T) (*protoEnv, *Admitter) {
	t.Helper()
	reg, srv := newFakeRegistry(t)
	e := &protoEnv{reg: reg, c: NewClient(srv.URL, 2*time.Second)}
	reg.registerAs("money-value", FormatProtobuf, protoMoney)
	ref := Reference{Name: "money.proto", Subject: "money-value", Version: 1}
	for _, s := range []string{p1, p2, p3} {
		var refs []Reference
		if s != p1 {
			refs = []Reference{ref}
		}
		id := reg.registerAs("orders-value", FormatProtobuf, s, refs...)
		e.ids = append(e.ids, id)
		sc, err := compileText(context.Background(), e.c, Text{Schema: s, Format: FormatProtobuf, References: refs})
		if err != nil {
			t.Fatal(err)
		}
		e.files = append(e.files, sc.proto)
	}
	acc, _ := config.ParseVersions("2-3")
	set := Settings{Subject: "orders-value", Accept: acc, ReaderVersion: 3, Timeout: time.Second, CacheSize: 8}
	r, err := CheckAccepted(context.Background(), e.c, set)
	if err != nil {
		t.Fatal(err)
	}
	if r.Format != FormatProtobuf || r.msg.FullName() != "it.Order" {
		t.Fatalf("canonical: %s %v", r.Format, r.msg)
	}
	a, err := NewAdmitter(e.c, set, r)
	if err != nil {
		t.Fatal(err)
	}
	return e, a
}

// message builds a message of version v (1-based) from field values by
// name; a map value builds a nested message.
func (e *protoEnv) message(t *testing.T, v int, fields map[string]any) []byte {
	t.Helper()
	m := dynamicpb.NewMessage(e.files[v-1].Messages().Get(0))
	set(t, m, fields)
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func set(t *testing.T, m protoreflect.Message, fields map[string]any) {
	for k, x := range fields {
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(k))
		if fd == nil {
			t.Fatalf("no field %s in %s", k, m.Descriptor().FullName())
		}
		if sub, ok := x.(map[string]any); ok {
			n := m.NewField(fd).Message()
			set(t, n, sub)
			m.Set(fd, protoreflect.ValueOfMessage(n))
			continue
		}
		m.Set(fd, protoreflect.ValueOf(x))
	}
}

// framed is body framed for schema id with the message-index path.
func framed(id int, path []int, body []byte) []byte {
	return append(AppendIndexes(AppendWire(nil, id, nil), path), body...)
}

func TestProtobufAdmission(t *testing.T) {
	e, a := setupProto(t)
	ctx := context.Background()
	order3 := e.message(t, 3, map[string]any{"id": "o3", "channel": "web", "amount": map[string]any{"units": int64(12), "currency": "EUR"}})
	order2 := e.message(t, 2, map[string]any{"id": "o2", "legacy": int64(77), "amount": map[string]any{"units": int64(-5)}})
	unknown := protowire.AppendVarint(protowire.AppendTag(append([]byte{}, order3...), 15, protowire.VarintType), 1)

	for _, tc := range []struct {
		name  string
		value []byte
		cause tiers.Cause // 0 means accepted
	}{
		{"canonical version, [0] shorthand", framed(e.ids[2], []int{0}, order3), 0},
		{"canonical version, full index array", append(AppendWire(nil, e.ids[2], []byte{2, 0}), order3...), 0},
		{"older accepted version", framed(e.ids[1], []int{0}, order2), 0},
		{"zero-length body: every field at its default", framed(e.ids[2], []int{0}, nil), 0},
		{"version outside the accepted set", framed(e.ids[0], []int{0}, e.message(t, 1, map[string]any{"id": "o1"})), tiers.CauseSchemaUnsupported},
		{"another top-level message", framed(e.ids[2], []int{1}, nil), tiers.CauseSchemaUnsupported},
		{"a nested message", framed(e.ids[2], []int{0, 0}, nil), tiers.CauseSchemaUnsupported},
		{"an index past the file's messages", framed(e.ids[2], []int{2}, order3), tiers.CauseWireFormat},
		{"a nested index past the message's", framed(e.ids[2], []int{0, 1}, order3), tiers.CauseWireFormat},
		{"a truncated index varint", AppendWire(nil, e.ids[2], []byte{2, 0x80}), tiers.CauseWireFormat},
		{"a count and no index", AppendWire(nil, e.ids[2], []byte{4}), tiers.CauseWireFormat},
		{"nothing after the schema id", AppendWire(nil, e.ids[2], nil), tiers.CauseWireFormat},
		{"a negative count", AppendWire(nil, e.ids[2], []byte{1}), tiers.CauseWireFormat},
		{"garbage body", framed(e.ids[2], []int{0}, []byte{0xff, 0xff, 0xff, 0xff}), tiers.CausePayloadMalformed},
		{"a field the writer does not declare", framed(e.ids[2], []int{0}, unknown), tiers.CausePayloadMalformed},
		{"a string that is not UTF-8", framed(e.ids[2], []int{0}, []byte{0x0a, 0x02, 0xff, 0xfe}), tiers.CausePayloadMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := a.Admit(ctx, tc.value)
			if tc.cause == 0 {
				if err != nil {
					t.Fatalf("want accepted, got %v", err)
				}
				return
			}
			if c := causeOf(t, err); c != tc.cause {
				t.Fatalf("want %v, got %v: %v", tc.cause, c, err)
			}
			_ = got
		})
	}

	// The canonical version keeps its bytes; the older one is written
	// again as the canonical message, by field number, its unknown field
	// dropped, framed with the canonical id and the [0] shorthand.
	same, err := a.Admit(ctx, framed(e.ids[2], []int{0}, order3))
	if err != nil || !bytes.Equal(same.Value, framed(e.ids[2], []int{0}, order3)) {
		t.Fatalf("canonical record changed: %v", err)
	}
	if same.Record["channel"] != "web" || same.Record["amount"].(map[string]any)["units"] != int64(12) {
		t.Fatalf("record: %v", same.Record)
	}
	up, err := a.Admit(ctx, framed(e.ids[1], []int{0}, order2))
	if err != nil {
		t.Fatal(err)
	}
	id, body, _ := ParseWire(up.Value)
	path, msg, err := ParseIndexes(body)
	if err != nil || id != e.ids[2] || len(path) != 1 || path[0] != 0 {
		t.Fatalf("upcast framing: id %d path %v err %v", id, path, err)
	}
	m, err := decodeProto(e.files[2].Messages().Get(0), msg, false)
	if err != nil {
		t.Fatalf("upcast body does not parse strictly as the canonical message: %v", err)
	}
	if r, _ := protoRecord(m, false, len(msg)); r["id"] != "o2" || r["channel"] != "" || r["amount"].(map[string]any)["units"] != int64(-5) {
		t.Fatalf("upcast record: %v", r)
	}
	if _, ok := up.Record["legacy"]; ok || up.Record["channel"] != "" {
		t.Fatalf("the record rules see is the canonical one: %v", up.Record)
	}
}

// TestProtobufStartUpCheck: an accepted version that changed a field's
// wire type cannot be read by field number, and relay refuses to start.
func TestProtobufStartUpCheck(t *testing.T) {
	reg, srv := newFakeRegistry(t)
	c := NewClient(srv.URL, time.Second)
	reg.registerAs("s", FormatProtobuf, `syntax = "proto3"; message Order { string id = 1; string amount = 2; }`)
	reg.registerAs("s", FormatProtobuf, `syntax = "proto3"; message Order { string id = 1; int64 amount = 2; }`)
	reg.registerAs("s", FormatProtobuf, `syntax = "proto3"; message Order { int64 amount = 2; }`)
	reg.registerAs("s", FormatProtobuf, `syntax = "proto3"; message Order { string id = 1; int64 amount = 2; } message`)
	reg.registerAs("s", FormatAvro, v3)
	reg.registerAs("s", FormatProtobuf, `syntax = "proto3"; message Renamed { string id = 1; }`)
	for _, tc := range []struct {
		accept, want string
	}{
		{"1-2", "field 2 is amount string in the writer and amount int64"},
		{"2-3", ""},
		{"2,4", "accepted version 4"},
		{"2,5", "AVRO schema"},
		{"2,6", "declares no message Order"},
	} {
		acc, _ := config.ParseVersions(tc.accept)
		_, err := CheckAccepted(context.Background(), c, Settings{Subject: "s", Accept: acc, ReaderVersion: 2, Timeout: time.Second, CacheSize: 8})
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !contains(err.Error(), tc.want)) {
			t.Errorf("accept %s: want %q, got %v", tc.accept, tc.want, err)
		}
	}
}

func contains(s, sub string) bool { return bytes.Contains([]byte(s), []byte(sub)) }

func TestProtobufEncodeAndDecode(t *testing.T) {
	e, a := setupProto(t)
	// A hook's replacement, as JSON gives it: numbers, names, base64.
	v, err := a.Encode(map[string]any{"id": "r", "channel": "hook", "amount": map[string]any{"units": 42.0, "currency": "CHF"},
		"lines": []any{map[string]any{"sku": "A", "qty": 2.0}}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.Admit(context.Background(), v)
	if err != nil || got.Record["channel"] != "hook" || len(got.Record["lines"].([]any)) != 1 {
		t.Fatalf("replacement does not read back: %v %v", got.Record, err)
	}
	if _, err := a.Encode(map[string]any{"id": "r", "nope": 1}); err == nil {
		t.Fatal("a field the canonical message does not declare must be refused")
	}
	// The console reads any version by its own schema.
	d, err := Decode(context.Background(), e.c, framed(e.ids[1], []int{0}, e.message(t, 2, map[string]any{"id": "x", "legacy": int64(3)})))
	if err != nil || d.Format != FormatProtobuf || d.Record["legacy"] != int64(3) {
		t.Fatalf("decode: %v %v", d, err)
	}
}

// FuzzParseIndexes: the index parser never panics and agrees with
// AppendIndexes on what it accepts.
func FuzzParseIndexes(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{2, 0})
	f.Add([]byte{4, 2, 4, 0xff})
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		path, rest, err := ParseIndexes(b)
		if err != nil {
			return
		}
		again, rest2, err := ParseIndexes(append(AppendIndexes(nil, path), rest...))
		if err != nil || len(again) != len(path) || !bytes.Equal(rest, rest2) {
			t.Fatalf("round trip of %x: %v %v", b, again, err)
		}
	})
}

// TestProtobufSubsetKeepsBytes: a version that only lacks fields of the
// canonical one writes the canonical message's bytes: its records are
// checked as the canonical message and kept, framed again.
func TestProtobufSubsetKeepsBytes(t *testing.T) {
	reg, srv := newFakeRegistry(t)
	c := NewClient(srv.URL, time.Second)
	old := reg.registerAs("s", FormatProtobuf, `syntax = "proto3"; message Order { string id = 1; repeated int64 n = 3; }`)
	reg.registerAs("s", FormatProtobuf, `syntax = "proto3"; message Order { string id = 1; int64 amount = 2; repeated int64 n = 3; }`)
	acc, _ := config.ParseVersions("1-2")
	set := Settings{Subject: "s", Accept: acc, ReaderVersion: 2, Timeout: time.Second, CacheSize: 8}
	r, err := CheckAccepted(context.Background(), c, set)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := NewAdmitter(c, set, r)
	body := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "o")
	body = protowire.AppendBytes(protowire.AppendTag(body, 3, protowire.BytesType), protowire.AppendVarint(protowire.AppendVarint(nil, 1), 2))
	got, err := a.Admit(context.Background(), framed(old, []int{0}, body))
	if err != nil || !bytes.Equal(got.Value, framed(r.ID, []int{0}, body)) {
		t.Fatalf("upcast of a subset: %x %v", got.Value, err)
	}
	if got.Record["amount"] != int64(0) || len(got.Record["n"].([]any)) != 2 {
		t.Fatalf("record: %v", got.Record)
	}
	w, _ := a.writer(context.Background(), old)
	if !w.subset {
		t.Fatal("the older version is a subset")
	}
	bad := protowire.AppendVarint(protowire.AppendTag(append([]byte{}, body...), 7, protowire.VarintType), 1)
	if _, err := a.Admit(context.Background(), framed(old, []int{0}, bad)); causeOf(t, err) != tiers.CausePayloadMalformed {
		t.Fatalf("a field neither version declares: %v", err)
	}
	// p2 has a field p3 lacks: not a subset.
	e, pa := setupProto(t)
	if w, _ := pa.writer(context.Background(), e.ids[1]); w == nil || w.subset {
		t.Fatal("a version with a field the canonical one lacks is not a subset")
	}
}
