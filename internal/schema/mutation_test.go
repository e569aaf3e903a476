package schema

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"relay/internal/config"
	"relay/internal/tiers"
)

// Cases a mutation review found no test for: each fails if the check it
// names is dropped.
func TestFormatChecksEachHaveATest(t *testing.T) {
	ctx := context.Background()
	t.Run("a field the older writer does not declare, on the rewrite path", func(t *testing.T) {
		e, a := setupProto(t)
		body := protowire.AppendVarint(protowire.AppendTag(e.message(t, 2, map[string]any{"id": "x"}), 15, protowire.VarintType), 1)
		if _, err := a.Admit(ctx, framed(e.ids[1], []int{0}, body)); causeOf(t, err) != tiers.CausePayloadMalformed {
			t.Fatalf("want PAYLOAD_MALFORMED, got %v", err)
		}
	})
	t.Run("proto2 required fields", func(t *testing.T) {
		a, ids := protoAdmitter(t, "1-2", 2,
			`syntax = "proto2"; message O { optional string id = 1; optional int32 n = 2; }`,
			`syntax = "proto2"; message O { required string id = 1; optional int32 n = 2; }`)
		noID := protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 3)
		if _, err := a.Admit(ctx, framed(ids[1], []int{0}, noID)); causeOf(t, err) != tiers.CausePayloadMalformed {
			t.Errorf("canonical version without its required field: want PAYLOAD_MALFORMED, got %v", err)
		}
		if _, err := a.Admit(ctx, framed(ids[0], []int{0}, noID)); causeOf(t, err) != tiers.CauseFieldMissing {
			t.Errorf("older version without the field the canonical one requires: want FIELD_MISSING, got %v", err)
		}
		withID := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "x")
		if _, err := a.Admit(ctx, framed(ids[0], []int{0}, withID)); err != nil {
			t.Errorf("older version with it: %v", err)
		}
	})
	t.Run("an import of another schema type", func(t *testing.T) {
		reg, srv := newFakeRegistry(t)
		c := NewClient(srv.URL, time.Second)
		reg.registerAs("j", FormatJSON, `{"type":"object"}`)
		reg.registerAs("s", FormatProtobuf, `syntax = "proto3"; message O { string s = 1; }`)
		bad := reg.registerAs("s", FormatProtobuf, `syntax = "proto3"; import "j.proto"; message O { string s = 1; }`, Reference{Name: "j.proto", Subject: "j", Version: 1})
		acc, _ := config.ParseVersions("1-2")
		a, _ := NewAdmitter(c, Settings{Subject: "s", Accept: acc, ReaderVersion: 1, Timeout: time.Second, CacheSize: 8}, readerAt(t, c, "s", 1))
		if _, err := a.Admit(ctx, framed(bad, []int{0}, nil)); causeOf(t, err) != tiers.CauseSchemaUnsupported {
			t.Fatalf("want SCHEMA_UNSUPPORTED, got %v", err)
		}
		reg.registerAs("p", FormatProtobuf, `syntax = "proto3"; message P {}`)
		_, err := compileJSON(Text{Schema: `{"$ref":"p.json"}`, Format: FormatJSON}, &referenced{names: []string{"p.json"}, texts: map[string]Text{"p.json": {Schema: "{}", Format: FormatProtobuf}}})
		if err == nil {
			t.Fatal("a JSON Schema referring to a Protobuf schema compiled")
		}
	})
	t.Run("a $ref to a JSON file is not read", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "x.json")
		if err := os.WriteFile(f, []byte(`{"type":"object"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := compileJSON(Text{Schema: `{"properties":{"a":{"$ref":"file://` + f + `"}}}`, Format: FormatJSON}, &referenced{texts: map[string]Text{}}); err == nil {
			t.Fatal("a $ref to a JSON file compiled: the file was read")
		}
	})
	t.Run("subset needs the same kind, cardinality and enum", func(t *testing.T) {
		for name, pair := range map[string][2]string{
			"kind":        {`syntax = "proto3"; message O { int32 n = 1; }`, `syntax = "proto3"; message O { sint32 n = 1; }`},
			"cardinality": {`syntax = "proto3"; message O { int32 n = 1; }`, `syntax = "proto3"; message O { repeated int32 n = 1; }`},
			"enum":        {`syntax = "proto3"; enum E { A = 0; } message O { E n = 1; }`, `syntax = "proto3"; enum F { B = 0; } message O { F n = 1; }`},
		} {
			w, err1 := compileProto(ctx, Text{Schema: pair[0]}, &referenced{texts: map[string]Text{}})
			c, err2 := compileProto(ctx, Text{Schema: pair[1]}, &referenced{texts: map[string]Text{}})
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			wm, cm := findMessage(w.proto.Messages(), "O"), findMessage(c.proto.Messages(), "O")
			if protoSubset(wm, cm, map[[2]protoreflect.FullName]bool{}) {
				t.Errorf("%s: a subset", name)
			}
		}
	})
	t.Run("a map on one side only is refused at start-up", func(t *testing.T) {
		reg, srv := newFakeRegistry(t)
		c := NewClient(srv.URL, time.Second)
		reg.registerAs("s", FormatProtobuf, `syntax = "proto3"; message O { map<string, string> m = 1; }`)
		reg.registerAs("s", FormatProtobuf, `syntax = "proto3"; message O { repeated E m = 1; } message E { string key = 1; string value = 2; }`)
		acc, _ := config.ParseVersions("1-2")
		if _, err := CheckAccepted(ctx, c, Settings{Subject: "s", Accept: acc, ReaderVersion: 2, Timeout: time.Second, CacheSize: 8}); err == nil {
			t.Fatal("a map read as a list of messages passed the start-up check")
		}
	})
	t.Run("a writer that does not compile", func(t *testing.T) {
		reg, srv := newFakeRegistry(t)
		c := NewClient(srv.URL, time.Second)
		reg.registerAs("s", FormatProtobuf, `syntax = "proto3"; message O { string s = 1; }`)
		bad := reg.registerAs("s", FormatProtobuf, `syntax = "proto3"; message O { string s = 1 }`)
		acc, _ := config.ParseVersions("1-2")
		a, _ := NewAdmitter(c, Settings{Subject: "s", Accept: acc, ReaderVersion: 1, Timeout: time.Second, CacheSize: 8}, readerAt(t, c, "s", 1))
		if _, err := a.Admit(ctx, framed(bad, []int{0}, nil)); causeOf(t, err) != tiers.CauseSchemaUnsupported {
			t.Fatalf("want SCHEMA_UNSUPPORTED, got %v", err)
		}
	})
	t.Run("more message indexes than the bound", func(t *testing.T) {
		b := protowire.AppendVarint(nil, protowire.EncodeZigZag(maxIndexes+1))
		b = append(b, bytes.Repeat([]byte{0}, maxIndexes+1)...)
		if _, _, err := ParseIndexes(b); err == nil {
			t.Fatal("accepted")
		}
	})
	t.Run("a JSON number outside a double's range", func(t *testing.T) {
		e, a := setupJSON(t)
		if _, err := a.Admit(ctx, AppendWire(nil, e.ids[2], []byte(`{"id":"x","extra":1e400}`))); causeOf(t, err) != tiers.CausePayloadMalformed {
			t.Fatalf("want PAYLOAD_MALFORMED, got %v", err)
		}
	})
	t.Run("a JSON body over the bound", func(t *testing.T) {
		e, a := setupJSON(t)
		body := append([]byte(`{"id":"`), bytes.Repeat([]byte("a"), maxJSONBody)...)
		body = append(body, `"}`...)
		if _, err := a.Admit(ctx, AppendWire(nil, e.ids[2], body)); causeOf(t, err) != tiers.CausePayloadMalformed {
			t.Fatalf("want PAYLOAD_MALFORMED, got %v", err)
		}
	})
}

// The nesting scan skips strings whole, escaped quotes included.
func TestJSONDepthSkipsStrings(t *testing.T) {
	deep := bytes.Repeat([]byte("["), maxJSONDepth+1)
	for body, ok := range map[string]bool{
		`{"a":"` + string(deep) + `"}`:                 true,
		`{"a":"x\"` + string(deep) + `"}`:              true,
		`{"a":"x\\"}` + string(deep):                   false,
		`{"a":"x\\\"` + string(deep) + `"}`:            true,
		string(deep):                                   false,
		`{"a":[[[` + `]]],"b":"` + string(deep) + `"}`: true,
	} {
		if err := jsonDepth([]byte(body)); (err == nil) != ok {
			t.Errorf("%.40s…: %v", body, err)
		}
	}
}
