package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hamba/avro/v2"
)

// Schemas of the admission modes: records are written as v2 and upcast to
// v3, the worst case of admission (decode, resolve, re-encode).
const (
	benchV2 = `{"type":"record","name":"Order","namespace":"bench","fields":[{"name":"id","type":"string"},{"name":"amount","type":"long"},{"name":"payload","type":"bytes"}]}`
	benchV3 = `{"type":"record","name":"Order","namespace":"bench","fields":[{"name":"id","type":"string"},{"name":"amount","type":"long"},{"name":"payload","type":"bytes"},{"name":"currency","type":"string","default":"EUR"}]}`
)

const benchRules = `rules:
  - name: NEGATIVE_AMOUNT
    expr: record.amount < 0
  - name: HUGE_AMOUNT
    expr: record.amount > 1000000000
`

// admission is what the admission modes share: the registered subject, one
// framed v2 value of about -size bytes, and the rules file.
type admission struct {
	subject string
	value   []byte
	rules   string
}

// setupAdmission registers the bench schemas and builds the value.
func (b *bench) setupAdmission() (*admission, error) {
	if b.adm != nil {
		return b.adm, nil
	}
	a := &admission{subject: "bench-" + b.runID + "-value"}
	var v2id int
	for i, s := range []string{benchV2, benchV3} {
		body, _ := json.Marshal(map[string]string{"schema": strings.Replace(s, `"name":"Order"`, `"name":"Order","doc":"`+a.subject+`"`, 1)})
		resp, err := http.Post(b.o.registry+"/subjects/"+a.subject+"/versions", "application/vnd.schemaregistry.v1+json", bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("schema registry (-registry %s): %w", b.o.registry, err)
		}
		out, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var r struct {
			ID int `json:"id"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(out, &r) != nil {
			return nil, fmt.Errorf("register bench schema: %d %s", resp.StatusCode, out)
		}
		if i == 0 {
			v2id = r.ID
		}
	}
	payload := make([]byte, max(b.o.size-40, 1))
	copy(payload, b.value)
	body, err := avro.Marshal(avro.MustParse(benchV2), map[string]any{"id": "order-000000", "amount": int64(4200), "payload": payload})
	if err != nil {
		return nil, err
	}
	a.value = append(binary.BigEndian.AppendUint32([]byte{0}, uint32(v2id)), body...)
	dir, err := os.MkdirTemp("", "relay-bench-")
	if err != nil {
		return nil, err
	}
	a.rules = filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(a.rules, []byte(benchRules), 0o600); err != nil {
		return nil, err
	}
	b.adm = a
	return a, nil
}

func (a *admission) env(registry string) []string {
	return []string{
		"RELAY_SCHEMA_REGISTRY_URL=" + registry, "RELAY_SCHEMA_SUBJECT=" + a.subject,
		"RELAY_SCHEMA_ACCEPT=1-2", "RELAY_SCHEMA_READER_VERSION=2", "RELAY_RULES_FILE=" + a.rules,
	}
}

// flakyHook answers 503 to the first call for pct percent of the message
// ids (chosen by hash, so the same ids every run), 204 otherwise. With
// byKey, the share is of record keys: every record of a chosen key fails
// its first call.
type flakyHook struct {
	pct   uint32
	byKey bool
	delay time.Duration // before every answer
	mu    sync.Mutex
	seen  map[string]int
	times int // failed calls of a chosen id or key, then it passes
	calls int
	fails int
	srv   *http.Server
	ln    net.Listener
}

func startFlakyHook(pct int, byKey bool, delay time.Duration) (*flakyHook, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &flakyHook{pct: uint32(pct), byKey: byKey, delay: delay, seen: map[string]int{}, times: 1, ln: ln}
	h.srv = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = h.srv.Serve(ln) }()
	return h, nil
}

func (h *flakyHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Relay-Hook-Batch") != "" {
		h.serveBatch(w, r)
		return
	}
	var req struct {
		Key string `json:"key"`
	}
	if h.byKey {
		_ = json.NewDecoder(r.Body).Decode(&req)
	}
	_, _ = io.Copy(io.Discard, r.Body)
	fail := h.fails1(r.Header.Get("Idempotency-Key"), req.Key)
	if h.delay > 0 {
		time.Sleep(h.delay)
	}
	if fail {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// serveBatch answers the batch protocol: one result per record, as the
// per-record answer would be, after one pause for the whole batch.
func (h *flakyHook) serveBatch(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Records []struct {
			MessageID string `json:"messageId"`
			Key       string `json:"key"`
		} `json:"records"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	results := make([]map[string]any, len(req.Records))
	for i, rec := range req.Records {
		st := http.StatusNoContent
		if h.fails1(rec.MessageID, rec.Key) {
			st = http.StatusServiceUnavailable
		}
		results[i] = map[string]any{"messageId": rec.MessageID, "status": st}
	}
	if h.delay > 0 {
		time.Sleep(h.delay)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"results": results})
}

// fails1 says whether the call for the record with this id and key fails:
// by id, each chosen record fails its first calls (times of them); by
// key, each chosen key fails as often, on the first calls for any of its
// records.
func (h *flakyHook) fails1(id, key string) bool {
	chooser := id
	if h.byKey {
		chooser = key
	}
	f := fnv.New32a()
	_, _ = f.Write([]byte(chooser))
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	fail := f.Sum32()%100 < h.pct && h.seen[chooser] < h.times
	if fail {
		h.seen[chooser]++
		h.fails++
	}
	return fail
}

func (h *flakyHook) url() string { return "http://" + h.ln.Addr().String() + "/hook" }

func (h *flakyHook) close() { _ = h.srv.Close() }

// applyTopics runs `relay topics apply` for a relay mode, as an operator
// would, and remembers what it created for the cleanup.
func (b *bench) applyTopics(env []string) error {
	cmd := exec.Command(b.o.relayBin, "topics", "apply", "--replication-factor", strconv.Itoa(b.o.rf))
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("relay topics apply: %w: %s", err, stderr.String())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "created "); ok {
			b.topics = append(b.topics, name)
		}
	}
	return nil
}

// terminal reads relay's committed terminal outcomes (everything but
// retry hops) from its metrics.
func terminal(ctx context.Context, url string) (int64, error) {
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(c, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	var n int64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "relay_records_outcome_total{") || strings.Contains(line, `outcome="retry"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			n += int64(v)
		}
	}
	return n, sc.Err()
}
