package integration

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// One rules file for every format: the field names agree.
const formatRules = `rules:
  - name: NEGATIVE_AMOUNT
    expr: has(record.amount) && record.amount < 0
`

// registerAs registers a schema of typ ("PROTOBUF", "JSON") with its
// references in the real registry and returns its id.
func registerAs(t *testing.T, subject, typ, text string, refs ...map[string]any) int {
	t.Helper()
	req := map[string]any{"schemaType": typ, "schema": text}
	if len(refs) > 0 {
		req["references"] = refs
	}
	body, _ := json.Marshal(req)
	resp, err := http.Post(registryURL+"/subjects/"+subject+"/versions", "application/vnd.schemaregistry.v1+json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("schema registry: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var out struct {
		ID int `json:"id"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil || out.ID == 0 {
		t.Fatalf("register %s under %s: %d %s", typ, subject, resp.StatusCode, b)
	}
	return out.ID
}

// frame is the Confluent framing of body for schema id; index, when not
// nil, is Protobuf's message-index bytes.
func frame(id int, index, body []byte) []byte {
	b := binary.BigEndian.AppendUint32([]byte{0}, uint32(id))
	return append(append(b, index...), body...)
}

// formatRun is one format's stream through relay with a kill mid-run:
// every record must end in exactly its expected state, and every output
// must be framed with the canonical id and pass check.
func formatRun(t *testing.T, env []string, canonical int, batch func(i0, n int) []rec, check func(body []byte) error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(p, []byte(formatRules), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newScenario(t, 2, append(env, "RELAY_RULES_FILE", p)...)
	want := produceRecs(t, s.src.topic, batch(0, 150))
	txn := uniq(t, "txn")
	r := startRelay(t, "relay-1", s.env(txn))
	r.waitLog("partitions assigned", 60*time.Second)
	for k, v := range produceRecs(t, s.src.topic, batch(150, 150)) {
		want[k] = v
	}
	time.Sleep(jitter(200*time.Millisecond, 1500*time.Millisecond))
	r.signal(syscall.SIGKILL)
	r.wait(10 * time.Second)
	r = startRelay(t, "relay-2", s.env(txn))
	for k, v := range produceRecs(t, s.src.topic, batch(300, 100)) {
		want[k] = v
	}
	waitSettled(t, s, 2*time.Minute)
	got := assertOutcomes(t, s, want)
	r.stop()
	outputs := 0
	for id, ls := range got {
		if ls[0].topic != s.output {
			continue
		}
		outputs++
		v := ls[0].msg.Value
		if len(v) < 5 || v[0] != 0 || int(binary.BigEndian.Uint32(v[1:5])) != canonical {
			t.Errorf("%s: output not framed with the canonical id %d: %x", id, canonical, v[:min(len(v), 8)])
			continue
		}
		if err := check(v[5:]); err != nil {
			t.Errorf("%s: output: %v", id, err)
		}
	}
	if outputs == 0 {
		t.Fatal("no output at all")
	}
	// An operator reads a record of a version relay does not accept
	// decoded by its own schema.
	shown := 0
	for id, w := range want {
		if w != "quarantine:SCHEMA_UNSUPPORTED" || shown == 2 {
			continue
		}
		out, err := relayCmd(t, s.env("x"), "quarantine", "show", id)
		var view map[string]any
		if err != nil || json.Unmarshal(out, &view) != nil {
			t.Fatalf("relay quarantine show %s: %v\n%s", id, err, out)
		}
		if !strings.HasSuffix(fmt.Sprint(view["payloadSchema"]), ".v1") {
			continue // another message of the canonical file
		}
		shown++
		if view["payloadDecoded"] != true || !strings.Contains(fmt.Sprint(view["payload"]), `"id": "`) {
			t.Errorf("quarantine show %s does not decode the payload: %s", id, out)
		}
	}
	if shown == 0 {
		t.Error("no record of version 1 to show")
	}
	assertAuditClean(t, s)
}

// TestProtobufEndStates: Protobuf records through the real registry, with
// an import: the canonical version, an older one upcast by field number
// (its extra field dropped), a version outside the accepted set, wrong
// framing, another message of the file, bodies that do not parse, and a
// rule; relay is killed mid-run.
func TestProtobufEndStates(t *testing.T) {
	subject := uniq(t, "porder-value")
	head := "// " + subject + "\nsyntax = \"proto3\";\npackage it;\n"
	registerAs(t, subject+"-money", "PROTOBUF", head+"message Money { int64 units = 1; string currency = 2; }\n")
	ref := map[string]any{"name": "it/money.proto", "subject": subject + "-money", "version": 1}
	var ids [4]int
	ids[1] = registerAs(t, subject, "PROTOBUF", head+"message Order { string id = 1; }\n")
	ids[2] = registerAs(t, subject, "PROTOBUF", head+"message Order { string id = 1; int64 amount = 2; int64 legacy = 9; }\n")
	ids[3] = registerAs(t, subject, "PROTOBUF", head+"import \"it/money.proto\";\nmessage Order { string id = 1; int64 amount = 2; Money price = 4; message Line { string sku = 1; } }\nmessage Other { string x = 1; }\n", ref)
	env := []string{"RELAY_SCHEMA_REGISTRY_URL", registryURL, "RELAY_SCHEMA_SUBJECT", subject,
		"RELAY_SCHEMA_ACCEPT", "2-3", "RELAY_SCHEMA_READER_VERSION", "3"}

	order := func(id string, amount int64, extra func([]byte) []byte) []byte {
		b := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), id)
		b = protowire.AppendVarint(protowire.AppendTag(b, 2, protowire.VarintType), uint64(amount))
		if extra != nil {
			b = extra(b)
		}
		return b
	}
	price := func(b []byte) []byte {
		m := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1250)
		m = protowire.AppendString(protowire.AppendTag(m, 2, protowire.BytesType), "EUR")
		return protowire.AppendBytes(protowire.AppendTag(b, 4, protowire.BytesType), m)
	}
	legacy := func(b []byte) []byte {
		return protowire.AppendVarint(protowire.AppendTag(b, 9, protowire.VarintType), 77)
	}
	unknown := func(b []byte) []byte {
		return protowire.AppendVarint(protowire.AppendTag(b, 15, protowire.VarintType), 1)
	}
	first := []byte{0}
	batch := func(i0, n int) []rec {
		out := make([]rec, 0, n)
		for i := i0; i < i0+n; i++ {
			k := []byte(fmt.Sprintf("k%d", rand.IntN(20)))
			id, amount := fmt.Sprint(i), int64(rand.IntN(1000))
			var r rec
			switch x := rand.IntN(100); {
			case x < 45:
				r = rec{k, frame(ids[3], first, order(id, amount, price)), "output"}
			case x < 60:
				r = rec{k, frame(ids[2], first, order(id, amount, legacy)), "output"}
			case x < 66:
				r = rec{k, frame(ids[3], first, order(id, -1-amount, nil)), "rejected:REJECTED_NEGATIVE_AMOUNT"}
			case x < 72:
				v1 := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), id)
				r = rec{k, frame(ids[1], first, v1), "quarantine:SCHEMA_UNSUPPORTED"}
			case x < 77:
				r = rec{k, frame(ids[3], []byte{2, 2}, order(id, amount, nil)), "quarantine:SCHEMA_UNSUPPORTED"} // Other
			case x < 82:
				r = rec{k, frame(ids[3], []byte{2, 8}, order(id, amount, nil)), "quarantine:WIRE_FORMAT_INVALID"} // [4]: past the messages
			case x < 86:
				r = rec{k, frame(ids[3], []byte{4, 0, 0x80}, nil), "quarantine:WIRE_FORMAT_INVALID"} // truncated varint
			case x < 93:
				r = rec{k, frame(ids[3], first, order(id, amount, unknown)), "quarantine:PAYLOAD_MALFORMED"}
			default:
				b := order(id, amount, price)
				r = rec{k, frame(ids[3], first, b[:len(b)-2]), "quarantine:PAYLOAD_MALFORMED"}
			}
			out = append(out, r)
		}
		return out
	}
	formatRun(t, env, ids[3], batch, func(body []byte) error {
		if len(body) == 0 || body[0] != 0 {
			return fmt.Errorf("message index is not the [0] shorthand: %x", body[:min(len(body), 4)])
		}
		for b := body[1:]; len(b) > 0; {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				return fmt.Errorf("body does not parse: %w", protowire.ParseError(n))
			}
			if num != 1 && num != 2 && num != 4 {
				return fmt.Errorf("field %d is not in the canonical version", num)
			}
			m := protowire.ConsumeFieldValue(num, typ, b[n:])
			if m < 0 {
				return fmt.Errorf("body does not parse: %w", protowire.ParseError(m))
			}
			b = b[n+m:]
		}
		return nil
	})
}

// TestJSONSchemaEndStates: JSON Schema records through the real registry,
// with a $ref to another subject: the canonical version, an older one
// that the canonical version accepts (framed with its id, body kept) or
// refuses, a version outside the accepted set, wrong framing, bodies that
// are not JSON or break their own schema, and a rule; relay is killed
// mid-run.
func TestJSONSchemaEndStates(t *testing.T) {
	subject := uniq(t, "jorder-value")
	desc := `"description":"` + subject + `",`
	registerAs(t, subject+"-addr", "JSON", `{`+desc+`"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)
	ref := map[string]any{"name": "address.json", "subject": subject + "-addr", "version": 1}
	var ids [4]int
	ids[1] = registerAs(t, subject, "JSON", `{`+desc+`"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`)
	ids[2] = registerAs(t, subject, "JSON", `{`+desc+`"type":"object","properties":{"id":{"type":"string"},"amount":{"type":"integer"}},"required":["id"]}`)
	ids[3] = registerAs(t, subject, "JSON", `{`+desc+`"type":"object","properties":{"id":{"type":"string"},"amount":{"type":"integer"},"addr":{"$ref":"address.json"}},"required":["id"]}`, ref)
	env := []string{"RELAY_SCHEMA_REGISTRY_URL", registryURL, "RELAY_SCHEMA_SUBJECT", subject,
		"RELAY_SCHEMA_ACCEPT", "2-3", "RELAY_SCHEMA_READER_VERSION", "3"}
	batch := func(i0, n int) []rec {
		out := make([]rec, 0, n)
		for i := i0; i < i0+n; i++ {
			k := []byte(fmt.Sprintf("k%d", rand.IntN(20)))
			amount := rand.IntN(1000)
			var r rec
			switch x := rand.IntN(100); {
			case x < 45:
				r = rec{k, frame(ids[3], nil, fmt.Appendf(nil, `{"id":"%d","amount":%d,"addr":{"city":"Bern"}}`, i, amount)), "output"}
			case x < 60:
				r = rec{k, frame(ids[2], nil, fmt.Appendf(nil, `{"id":"%d","amount":%d}`, i, amount)), "output"}
			case x < 66:
				r = rec{k, frame(ids[3], nil, fmt.Appendf(nil, `{"id":"%d","amount":%d}`, i, -1-amount)), "rejected:REJECTED_NEGATIVE_AMOUNT"}
			case x < 72:
				r = rec{k, frame(ids[1], nil, fmt.Appendf(nil, `{"id":"%d"}`, i)), "quarantine:SCHEMA_UNSUPPORTED"}
			case x < 78:
				r = rec{k, frame(ids[2], nil, fmt.Appendf(nil, `{"id":"%d","addr":{"zip":%d}}`, i, amount)), "quarantine:FIELD_MISSING"}
			case x < 84:
				r = rec{k, fmt.Appendf(nil, `{"id":"%d"}`, i), "quarantine:WIRE_FORMAT_INVALID"} // no framing
			case x < 90:
				r = rec{k, frame(ids[3], nil, fmt.Appendf(nil, `{"id":"%d",`, i)), "quarantine:PAYLOAD_MALFORMED"}
			case x < 95:
				r = rec{k, frame(ids[3], nil, fmt.Appendf(nil, `{"id":%d}`, i)), "quarantine:PAYLOAD_MALFORMED"} // id is a number
			default:
				r = rec{k, frame(ids[3], nil, nil), "quarantine:PAYLOAD_MALFORMED"}
			}
			out = append(out, r)
		}
		return out
	}
	formatRun(t, env, ids[3], batch, func(body []byte) error {
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil {
			return err
		}
		if _, ok := v["id"].(string); !ok || strings.Contains(string(body), "zip") {
			return fmt.Errorf("body %s", body)
		}
		return nil
	})
}
