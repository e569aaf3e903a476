package schema

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"relay/internal/config"
	"relay/internal/rules"
	"relay/internal/tiers"
)

// Order schemas in JSON Schema: j1 is not accepted, j2 is upcast to j3
// (the canonical version), whose address is a $ref to another subject.
const (
	jsonAddress = `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`
	j1          = `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`
	j2          = `{"type":"object","properties":{"id":{"type":"string"},"amount":{"type":"integer"}},"required":["id"]}`
	j3          = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"id":{"type":"string"},"amount":{"type":"integer","minimum":0},"addr":{"$ref":"address.json"}},"required":["id"]}`
)

type jsonEnv struct {
	c   *Client
	ids []int
}

func setupJSON(t *testing.T) (*jsonEnv, *Admitter) {
	t.Helper()
	reg, srv := newFakeRegistry(t)
	e := &jsonEnv{c: NewClient(srv.URL, 2*time.Second)}
	reg.registerAs("address-value", FormatJSON, jsonAddress)
	for _, s := range []string{j1, j2, j3} {
		var refs []Reference
		if s == j3 {
			refs = []Reference{{Name: "address.json", Subject: "address-value", Version: 1}}
		}
		e.ids = append(e.ids, reg.registerAs("orders-value", FormatJSON, s, refs...))
	}
	acc, _ := config.ParseVersions("2-3")
	set := Settings{Subject: "orders-value", Accept: acc, ReaderVersion: 3, Timeout: time.Second, CacheSize: 8}
	r, err := CheckAccepted(context.Background(), e.c, set)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAdmitter(e.c, set, r)
	if err != nil {
		t.Fatal(err)
	}
	return e, a
}

func TestJSONSchemaAdmission(t *testing.T) {
	e, a := setupJSON(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		id    int
		body  string
		cause tiers.Cause // 0: accepted
	}{
		{"canonical version", e.ids[2], `{"id":"o3","amount":5,"addr":{"city":"Bern"}}`, 0},
		{"older accepted version", e.ids[1], `{"id":"o2","amount":7}`, 0},
		{"version outside the accepted set", e.ids[0], `{"id":"o1"}`, tiers.CauseSchemaUnsupported},
		{"not JSON", e.ids[2], `{"id":`, tiers.CausePayloadMalformed},
		{"zero-length body", e.ids[2], ``, tiers.CausePayloadMalformed},
		{"two documents", e.ids[2], `{"id":"a"} {"id":"b"}`, tiers.CausePayloadMalformed},
		{"an array", e.ids[2], `[1,2]`, tiers.CausePayloadMalformed},
		{"breaks its writer schema", e.ids[1], `{"id":"o2","amount":"seven"}`, tiers.CausePayloadMalformed},
		{"referenced schema broken", e.ids[2], `{"id":"o3","addr":{}}`, tiers.CausePayloadMalformed},
		{"required field missing", e.ids[2], `{"amount":1}`, tiers.CausePayloadMalformed},
		{"older version the canonical one refuses", e.ids[1], `{"id":"o2","amount":-1}`, tiers.CauseFieldMissing},
		{"older version with what the reference refuses", e.ids[1], `{"id":"o2","addr":{"zip":1}}`, tiers.CauseFieldMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.Admit(ctx, AppendWire(nil, tc.id, []byte(tc.body)))
			if tc.cause == 0 {
				if err != nil {
					t.Fatalf("want accepted, got %v", err)
				}
				return
			}
			if c := causeOf(t, err); c != tc.cause {
				t.Fatalf("want %v, got %v: %v", tc.cause, c, err)
			}
		})
	}
	// Upcast keeps the body and frames it with the canonical id.
	body := []byte(`{"id":"o2","amount":7}`)
	got, err := a.Admit(ctx, AppendWire(nil, e.ids[1], body))
	if err != nil || !bytes.Equal(got.Value, AppendWire(nil, e.ids[2], body)) {
		t.Fatalf("upcast: %q %v", got.Value, err)
	}
	if got.Record["amount"] != int64(7) {
		t.Fatalf("record: %#v", got.Record)
	}
	// A refusal names the place and the keyword, not the record's value.
	_, err = a.Admit(ctx, AppendWire(nil, e.ids[1], []byte(`{"id":"o2","amount":-123456}`)))
	if err == nil || contains(err.Error(), "123456") || !contains(err.Error(), "/amount") {
		t.Fatalf("refusal: %v", err)
	}
	// A hook's replacement must satisfy the canonical version.
	if _, err := a.Encode(map[string]any{"id": "r", "amount": -1}); err == nil {
		t.Fatal("a replacement the canonical version refuses must be refused")
	}
	v, err := a.Encode(map[string]any{"id": "r", "amount": 3})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := Decode(ctx, e.c, v); err != nil || d.Format != FormatJSON || d.Record["amount"] != int64(3) {
		t.Fatalf("decode: %v %v", d, err)
	}
}

// TestJSONSchemaLoadsNothing: a $ref that is not one of the schema's
// registered references is not fetched from the network or read from a
// file; the schema does not compile.
func TestJSONSchemaLoadsNothing(t *testing.T) {
	for _, ref := range []string{"file:///etc/hostname", "http://127.0.0.1:1/x.json", "other.json"} {
		_, err := compileJSON(Text{Schema: `{"properties":{"a":{"$ref":"` + ref + `"}}}`, Format: FormatJSON}, &referenced{texts: map[string]Text{}})
		if err == nil {
			t.Errorf("a $ref to %s compiled", ref)
		}
	}
}

// TestRulesAcrossFormats: one rules file serves Avro, Protobuf and JSON
// Schema records where their field names agree, including records of an
// older version that lacks a field.
func TestRulesAcrossFormats(t *testing.T) {
	set, err := rules.Parse("rules.yaml", []byte(`rules:
  - name: TOO_LARGE
    expr: has(record.amount) && record.amount > 1000
  - name: NO_ID
    expr: record.id == ""
`))
	if err != nil {
		t.Fatal(err)
	}
	check := func(a *Admitter, value []byte) string {
		t.Helper()
		got, err := a.Admit(context.Background(), value)
		if err != nil {
			t.Fatal(err)
		}
		var te *tiers.Error
		if err := set.Check(context.Background(), got.Record); errors.As(err, &te) {
			return te.Name
		} else if err != nil {
			t.Fatalf("rule failed to evaluate on %v: %v", got.Record, err)
		}
		return ""
	}
	je, ja := setupJSON(t)
	if got := check(ja, AppendWire(nil, je.ids[1], []byte(`{"id":"a","amount":5000}`))); got != "TOO_LARGE" {
		t.Errorf("JSON: %q", got)
	}
	if got := check(ja, AppendWire(nil, je.ids[2], []byte(`{"id":""}`))); got != "NO_ID" {
		t.Errorf("JSON without amount: %q", got)
	}
	if got := check(ja, AppendWire(nil, je.ids[1], []byte(`{"id":"b"}`))); got != "" {
		t.Errorf("JSON, an older version without amount: %q", got)
	}
	pe, pa := setupProto(t)
	// Money is a message in these Protobuf schemas: a rule reads its
	// units; an older version without channel sees its default.
	pset, err := rules.Parse("rules.yaml", []byte(`rules:
  - name: NEGATIVE_AMOUNT
    expr: record.amount != null && record.amount.units < 0
  - name: NO_CHANNEL
    expr: record.channel == ""
`))
	if err != nil {
		t.Fatal(err)
	}
	set = pset
	if got := check(pa, framed(pe.ids[2], []int{0}, pe.message(t, 3, map[string]any{"id": "c", "channel": "web", "amount": map[string]any{"units": int64(-1)}}))); got != "NEGATIVE_AMOUNT" {
		t.Errorf("Protobuf: %q", got)
	}
	if got := check(pa, framed(pe.ids[1], []int{0}, pe.message(t, 2, map[string]any{"id": "d"}))); got != "NO_CHANNEL" {
		t.Errorf("Protobuf, older version: %q", got)
	}
	if got := check(pa, framed(pe.ids[2], []int{0}, pe.message(t, 3, map[string]any{"id": "e", "channel": "web"}))); got != "" {
		t.Errorf("Protobuf, no amount: %q", got)
	}
}
