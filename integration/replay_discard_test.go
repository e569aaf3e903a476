package integration

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/ledger"
)

// idHook answers 503 to every call while down, 204 otherwise, and counts
// calls by messageId (a replay keeps its failure's id) and by whether it
// was down.
type idHook struct {
	srv  *httptest.Server
	down atomic.Bool
	mu   sync.Mutex
	up   map[string]int // calls answered 204, by messageId
}

func newIDHook(t *testing.T) *idHook {
	h := &idHook{up: map[string]int{}}
	h.down.Store(true)
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			MessageID string `json:"messageId"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		if h.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		h.mu.Lock()
		h.up[req.MessageID]++
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *idHook) callsUp(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.up[id]
}

// TestDiscardWhileReplayWaitsInATierIsNeverOutput pins the discard that the
// owning relay did not see: it read the ledger only at assignment, so a
// failure discarded while its replayed record waited in a tier was output
// and recorded resolved once the dependency came back, next to the
// operator's discarded — two end states. Two failures are replayed while
// the hook is down, so both wait in the tier; one is discarded there
// (discard --include-replaying; without it discard refuses), then the hook
// recovers. The discarded one is never output, never sent to the hook
// again, and ends discarded with relay's note that it skipped it; the
// other is output once and resolved.
func TestDiscardWhileReplayWaitsInATierIsNeverOutput(t *testing.T) {
	f := newQuarantineFixture(t, 2, 0, 0, 0, "RELAY_RETRY_TIERS", "2s")
	h := newIDHook(t)
	r := f.startFixed(t, "RELAY_HOOK_URL", h.srv.URL, "RELAY_HOOK_TIMEOUT", "500ms", "RELAY_BLOCKING_ATTEMPTS", "0",
		"RELAY_RETRY_MAX_ATTEMPTS", "100", "RELAY_RETRY_MAX_ELAPSED", "10m")
	defer r.stop()
	gone, kept := f.v1[0], f.v1[1]
	done := make(chan cliResult, 1)
	go func() {
		done <- f.s.cli(t, f.fixed(), "replay", "--ids", gone+","+kept, "--reason", "fix", "--rate", "100", "--wait", "2m", "--progress", "none")
	}()

	// The hook is down: the replayed record fails and waits in the tier.
	deadline := time.Now().Add(90 * time.Second)
	for !inTier(t, f, gone) {
		if time.Now().After(deadline) {
			t.Fatalf("the replayed record of %s never reached the tier", gone)
		}
		time.Sleep(300 * time.Millisecond)
	}
	env := []string{"RELAY_ACTOR", "carol"}
	if res := f.s.cli(t, env, "quarantine", "discard", gone, "--reason", "order cancelled"); res.code != 2 || !strings.Contains(res.stderr, "--include-replaying") {
		t.Fatalf("discard of a replaying failure without --include-replaying: exit %d, want 2 and the flag named", res.code)
	}
	if res := f.s.cli(t, env, "quarantine", "discard", gone, "--reason", "order cancelled", "--include-replaying"); res.code != 0 {
		t.Fatalf("discard --include-replaying: exit %d", res.code)
	}
	// relay has read the discard: from now on its turn cannot output it.
	r.waitLog(`"msg":"failure discarded","id":"`+gone+`"`, 30*time.Second)
	h.down.Store(false)

	res := <-done
	if res.code != 0 || !strings.Contains(res.stdout, "resolved 1;") || !strings.Contains(res.stdout, "duplicate 1;") {
		t.Fatalf("replay: exit %d; want the kept one resolved and the discarded one skipped by relay (duplicate)", res.code)
	}
	outs := outputsByID(t, f.s)
	if n := len(outs[gone]); n != 0 {
		t.Errorf("%s was output %d times after its discard", gone, n)
	}
	if n := h.callsUp(gone); n != 0 {
		t.Errorf("%s went to the hook %d times after its discard", gone, n)
	}
	if n := len(outs[kept]); n != 1 {
		t.Errorf("%s: %d outputs, want 1", kept, n)
	}
	l := ledgerOf(t, f.s)
	if e := l[kept]; e.State != ledger.Resolved {
		t.Errorf("%s: %s, want resolved", kept, e.State)
	}
	e := l[gone]
	skipped := false
	for _, c := range e.History {
		switch {
		case c.State == ledger.Resolved || c.State == ledger.FailedAgain:
			t.Errorf("%s: %s in its history next to the discard: %+v", gone, c.State, e.History)
		case c.Outcome == ledger.OutcomeDuplicate && c.State == ledger.Discarded && c.ReplayCount == 1:
			skipped = true
		}
	}
	if e.State != ledger.Discarded || !skipped {
		t.Fatalf("%s: %s, history %+v; want discarded, and relay's note that it skipped the replay", gone, e.State, e.History)
	}
	// The audit folds the ledger as relay does: the discard raced by the
	// replay (whose copy arrived after it) is one end state, not a finding.
	waitSettled(t, f.s, 60*time.Second)
	assertAuditClean(t, f.s)
}

// inTier says whether a tier holds a replayed record of failure id.
func inTier(t *testing.T, f *quarantineFixture, id string) bool {
	t.Helper()
	for _, m := range readCommitted(t, f.s.tiers[0], f.s.partitions) {
		if env := envelopeOf(t, m); env.ID == id && env.ReplayCount == 1 {
			return true
		}
	}
	return false
}
