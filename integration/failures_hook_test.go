package integration

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"relay/internal/envelope"
	"relay/internal/schema"
)

// TestHookOutcomes runs the hook contract (README, the failure state machine) through relay: each
// record's id says how the hook answers. It checks the outcome of each,
// that a replacement record is written in the canonical schema, and that
// every call for a record carries the same Idempotency-Key.
func TestHookOutcomes(t *testing.T) {
	o := registerOrders(t)
	var mu sync.Mutex
	calls := map[string][]string{} // order id → idempotency keys seen
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			MessageID string         `json:"messageId"`
			Record    map[string]any `json:"record"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		id, _ := req.Record["id"].(string)
		mu.Lock()
		calls[id] = append(calls[id], r.Header.Get("Idempotency-Key"))
		n := len(calls[id])
		mu.Unlock()
		if r.Header.Get("Idempotency-Key") != req.MessageID {
			http.Error(w, "key differs from messageId", http.StatusBadRequest)
			return
		}
		switch {
		case id == "ok":
			w.WriteHeader(http.StatusNoContent)
		case id == "replace":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"record":{"id":"replaced","amount":99,"currency":"CHF"}}`))
		case id == "reject":
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(`{"code":"unknown_tenant"}`))
		case id == "bad":
			w.WriteHeader(http.StatusBadRequest)
		case id == "teapot":
			w.WriteHeader(http.StatusTeapot)
		case id == "busy" && n <= 2:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
		case id == "down" && n <= 3:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	defer hook.Close()
	s := newScenario(t, 2, append(o.env(registryURL),
		"RELAY_HOOK_URL", hook.URL+"/orders", "RELAY_HOOK_TIMEOUT", "500ms", "RELAY_SCHEMA_TIMEOUT", "500ms",
		"RELAY_BLOCKING_ATTEMPTS", "2", "RELAY_BLOCKING_BACKOFF", "50ms", "RELAY_RETRY_TIERS", "1s",
		// The harness's 10 s is below this budget with records tried at
		// once (two waves of in-place retries: 11.4 s).
		"RELAY_KAFKA_TRANSACTION_TIMEOUT_MS", "15000")...)
	value := func(id string) []byte {
		return o.value(t, 3, map[string]any{"id": id, "amount": int64(1), "currency": "EUR"})
	}
	want := produceRecs(t, s.src.topic, []rec{
		{[]byte("1"), value("ok"), "output"},
		{[]byte("2"), value("replace"), "output"},
		{[]byte("3"), value("reject"), "rejected:REJECTED_UNKNOWN_TENANT"},
		{[]byte("4"), value("bad"), "quarantine:HOOK_INVALID_INPUT"},
		{[]byte("5"), value("teapot"), "quarantine:HOOK_UNEXPECTED_STATUS"},
		{[]byte("6"), value("busy"), "output"}, // 429 twice, third attempt in place passes
		{[]byte("7"), value("down"), "output"}, // 503 three times: in place, then from the tier
	})
	r := startRelay(t, "relay", s.env(uniq(t, "txn")))
	waitSettled(t, s, 90*time.Second)
	got := assertOutcomes(t, s, want)
	r.stop()

	for _, ls := range got {
		m := ls[0].msg
		hs := toEnvelopeHeaders(m.Headers)
		if id, _ := envelope.Lookup(hs, envelope.MessageID); len(id) == 0 || ls[0].topic != s.output {
			continue
		}
		sid, body, err := schema.ParseWire(m.Value)
		if err != nil || sid != o.ids[3] {
			t.Fatalf("output not framed with the canonical schema: %d %v", sid, err)
		}
		var v map[string]any
		if err := avro.Unmarshal(avro.MustParse(orderV3), body, &v); err != nil {
			t.Fatal(err)
		}
		if v["id"] == "replaced" && (v["amount"] != int64(99) || v["currency"] != "CHF") {
			t.Errorf("replacement record written as %v", v)
		}
		if v["id"] == "replace" {
			t.Error("the hook's replacement was not written")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for id, keys := range calls {
		for _, k := range keys {
			if k != keys[0] || !strings.HasPrefix(k, s.src.topic+"/") {
				t.Errorf("%s: Idempotency-Key changed between calls: %v", id, keys)
				break
			}
		}
	}
	if len(calls["down"]) != 4 || len(calls["busy"]) != 3 {
		t.Errorf("calls: down %d (want 4: three failures, in place and from the tier, then success), busy %d (want 3)",
			len(calls["down"]), len(calls["busy"]))
	}
}
