package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/hamba/avro/v2"
)

// The demo's order schemas: v1 is no longer accepted, v2 is accepted and
// upcast, v3 is the canonical version business consumers read.
var orderSchemas = [...]string{
	1: `{"type":"record","name":"Order","namespace":"demo","fields":[{"name":"orderId","type":"string"},{"name":"customer","type":"string"}]}`,
	2: `{"type":"record","name":"Order","namespace":"demo","fields":[{"name":"orderId","type":"string"},{"name":"customer","type":"string"},{"name":"amount","type":"long","default":0}]}`,
	3: `{"type":"record","name":"Order","namespace":"demo","fields":[{"name":"orderId","type":"string"},{"name":"customer","type":"string"},{"name":"amount","type":"long","default":0},{"name":"currency","type":"string","default":"EUR"}]}`,
}

const demoRules = `# relay demo rules: CEL over the decoded, upcast record.
rules:
  - name: NEGATIVE_AMOUNT
    expr: record.amount < 0
`

// registerSchemas registers v1..v3 under subject and returns the schema id
// of each version. Registering an existing schema again returns its id.
func registerSchemas(registry, subject string) ([4]int, error) {
	var ids [4]int
	for v := 1; v <= 3; v++ {
		body, _ := json.Marshal(map[string]string{"schema": orderSchemas[v]})
		resp, err := http.Post(registry+"/subjects/"+subject+"/versions", "application/vnd.schemaregistry.v1+json", bytes.NewReader(body))
		if err != nil {
			return ids, fmt.Errorf("schema registry: %w", err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var out struct {
			ID int `json:"id"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil {
			return ids, fmt.Errorf("register %s v%d: %d %s", subject, v, resp.StatusCode, b)
		}
		ids[v] = out.ID
	}
	// The versions must be 1..3 in this order, or the accepted range
	// means something else.
	for v := 1; v <= 3; v++ {
		resp, err := http.Get(fmt.Sprintf("%s/subjects/%s/versions/%d", registry, subject, v))
		if err != nil {
			return ids, err
		}
		var out struct {
			ID int `json:"id"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		_ = resp.Body.Close()
		if err != nil || out.ID != ids[v] {
			return ids, fmt.Errorf("subject %s already holds other schemas (version %d is id %d, not %d); restart the local registry (make down; make demo)", subject, v, out.ID, ids[v])
		}
	}
	return ids, nil
}

// kind is one class of record in the demo mix.
type kind struct {
	name   string
	share  int    // per mille
	expect string // outcome/code the demo expects
}

var mix = []kind{
	{"valid v3", 800, "processed"},
	{"valid v2 (upcast to v3)", 80, "processed"},
	{"hook fails twice, recovers in place", 20, "processed"},
	{"hook fails 3 times, recovers from a tier", 10, "processed"},
	{"negative amount (rule)", 40, "rejected/REJECTED_NEGATIVE_AMOUNT"},
	{"unsupported version v1", 20, "quarantined/SCHEMA_UNSUPPORTED"},
	{"garbage bytes", 20, "quarantined/WIRE_FORMAT_INVALID"},
	{"truncated Avro body", 10, "quarantined/PAYLOAD_MALFORMED"},
}

// order builds record i of the mix and says which kind it is.
func order(ids [4]int, i int) (key, value []byte, k int) {
	slot, acc := i%1000, 0
	for n, kd := range mix {
		acc += kd.share
		if slot < acc {
			k = n
			break
		}
	}
	// Customers (the keys) are spread by a hash of i, so the failing
	// kinds, which come in runs of slots, fall on many keys: with key
	// ordering, a key's records wait behind its failing one.
	customer := fmt.Sprintf("c-%03d", (uint32(i)*2654435761>>8)%500)
	id := fmt.Sprintf("o-%06d", i)
	amount := int64(1000 + i%9000)
	switch k {
	case 2:
		id = "flaky2-" + id
	case 3:
		id = "flaky3-" + id
	case 4:
		amount = -amount
	}
	rec := map[string]any{"orderId": id, "customer": customer, "amount": amount, "currency": "EUR"}
	switch k {
	case 1:
		value = frame(ids[2], 2, rec)
	case 5:
		value = frame(ids[1], 1, rec)
	case 6:
		value = []byte(fmt.Sprintf(`{"orderId":%q,"note":"JSON where Avro belongs"}`, id))
	case 7:
		v := frame(ids[3], 3, rec)
		value = v[:len(v)-3]
	default:
		value = frame(ids[3], 3, rec)
	}
	return []byte(customer), value, k
}

func frame(id, version int, rec map[string]any) []byte {
	body, err := avro.Marshal(avro.MustParse(orderSchemas[version]), rec)
	if err != nil {
		panic(err) // the demo's own records always fit their schema
	}
	b := binary.BigEndian.AppendUint32([]byte{0}, uint32(id))
	return append(b, body...)
}

// flakyHook is the demo's HTTP hook: it answers 503 to the first calls for
// an order whose id starts with flakyN- (N failures per Idempotency-Key),
// then 204. It shows a transient dependency failure that recovers.
type flakyHook struct {
	mu    sync.Mutex
	calls map[string]int
	srv   *http.Server
	ln    net.Listener
}

func startHook() (*flakyHook, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &flakyHook{calls: map[string]int{}, ln: ln}
	h.srv = &http.Server{Handler: h}
	go func() { _ = h.srv.Serve(ln) }()
	return h, nil
}

func (h *flakyHook) url() string { return "http://" + h.ln.Addr().String() + "/orders" }

func (h *flakyHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Record map[string]any `json:"record"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	id, _ := req.Record["orderId"].(string)
	fails := 0
	switch {
	case strings.HasPrefix(id, "flaky2-"):
		fails = 2
	case strings.HasPrefix(id, "flaky3-"):
		fails = 3
	}
	h.mu.Lock()
	key := r.Header.Get("Idempotency-Key")
	h.calls[key]++
	n := h.calls[key]
	h.mu.Unlock()
	if n <= fails {
		http.Error(w, "warming up", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *flakyHook) close() { _ = h.srv.Close() }
