package integration

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"relay/internal/envelope"
	"relay/internal/schema"
)

// TestHookOutcomes runs the hook contract (docs/GUIDE.md, the failure state machine) through relay: each
// record's id says how the hook answers. It checks the outcome of each,
// that a replacement record is written in the canonical schema, and that
// every call for a record carries the same Idempotency-Key.
func TestHookOutcomes(t *testing.T) {
	t.Run("one record per request", func(t *testing.T) { testHookOutcomes(t, 1) })
	t.Run("batch protocol", func(t *testing.T) { testHookOutcomes(t, 4) })
}

// hookAnswer is what the test's hook answers for one record.
type hookAnswer struct {
	status int
	body   map[string]any
}

// testHookOutcomes runs every hook answer through relay, with batch
// records per request (1: the per-record protocol, its answers as HTTP
// statuses; above 1: the batch protocol, the same answers as results).
func testHookOutcomes(t *testing.T, batch int) {
	o := registerOrders(t)
	var mu sync.Mutex
	calls := map[string][]string{} // order id → idempotency keys seen
	batches := 0
	decideFor := func(messageID, idemKey string, record map[string]any) hookAnswer {
		id, _ := record["id"].(string)
		mu.Lock()
		calls[id] = append(calls[id], idemKey)
		n := len(calls[id])
		mu.Unlock()
		if idemKey != messageID {
			return hookAnswer{status: http.StatusBadRequest}
		}
		switch {
		case id == "ok":
			return hookAnswer{status: http.StatusNoContent}
		case id == "replace":
			return hookAnswer{status: http.StatusOK, body: map[string]any{"record": map[string]any{"id": "replaced", "amount": 99, "currency": "CHF"}}}
		case id == "reject":
			return hookAnswer{status: http.StatusUnprocessableEntity, body: map[string]any{"code": "unknown_tenant"}}
		case id == "bad":
			return hookAnswer{status: http.StatusBadRequest}
		case id == "teapot":
			return hookAnswer{status: http.StatusTeapot}
		case id == "busy" && n <= 2:
			return hookAnswer{status: http.StatusTooManyRequests}
		case id == "down" && n <= 3:
			return hookAnswer{status: http.StatusServiceUnavailable}
		default:
			return hookAnswer{status: http.StatusOK}
		}
	}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Relay-Hook-Batch") != "" {
			var req struct {
				Records []struct {
					MessageID string         `json:"messageId"`
					Record    map[string]any `json:"record"`
				} `json:"records"`
			}
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			mu.Lock()
			batches++
			mu.Unlock()
			results := []map[string]any{}
			for _, rec := range req.Records {
				a := decideFor(rec.MessageID, rec.MessageID, rec.Record)
				res := map[string]any{"messageId": rec.MessageID, "status": a.status}
				for k, v := range a.body {
					res[k] = v
				}
				results = append(results, res)
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"results": results})
			return
		}
		var req struct {
			MessageID string         `json:"messageId"`
			Record    map[string]any `json:"record"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a := decideFor(req.MessageID, r.Header.Get("Idempotency-Key"), req.Record)
		if a.status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "0")
		}
		if a.body != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(a.status)
			_ = json.NewEncoder(w).Encode(a.body)
			return
		}
		w.WriteHeader(a.status)
	}))
	defer hook.Close()
	s := newScenario(t, 2, append(o.env(registryURL),
		"RELAY_HOOK_URL", hook.URL+"/orders", "RELAY_HOOK_TIMEOUT", "500ms", "RELAY_SCHEMA_TIMEOUT", "500ms",
		"RELAY_BLOCKING_ATTEMPTS", "2", "RELAY_BLOCKING_BACKOFF", "50ms", "RELAY_RETRY_TIERS", "1s",
		"RELAY_HOOK_BATCH", strconv.Itoa(batch))...)
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
	if (batches > 0) != (batch > 1) {
		t.Errorf("%d batch requests with RELAY_HOOK_BATCH=%d", batches, batch)
	}
}
