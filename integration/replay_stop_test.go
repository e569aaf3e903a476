package integration

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"relay/internal/ledger"
)

// TestReplayStopsOnHookTimeouts: the hook stops answering in time (it
// sleeps past RELAY_HOOK_TIMEOUT); a replay watching relay's /metrics
// (RELAY_REPLAY_WATCH_METRICS) stops by itself once relay_hook_timeouts_total
// rose by more than --max-hook-timeouts, exits 3, says why, and publishes
// nothing more: every record it published is replaying or settled, the
// rest open.
func TestReplayStopsOnHookTimeouts(t *testing.T) {
	const n = 30
	f := newQuarantineFixture(t, n, 0, 0, 0)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer slow.Close()
	metrics := freeAddr(t)
	hookEnv := []string{"RELAY_HOOK_URL", slow.URL, "RELAY_HOOK_TIMEOUT", "300ms", "RELAY_HOOK_CONCURRENCY", "4"}
	r := startRelay(t, "fixed-slow-hook", f.s.env(uniq(t, "txn-b"), append(append(f.fixed(), hookEnv...), "RELAY_HTTP_ADDR", metrics)...))
	defer r.stop()
	r.waitLog("partitions assigned", 60*time.Second)
	res := f.s.cli(t, append(f.fixed(), "RELAY_REPLAY_WATCH_METRICS", "http://"+metrics+"/metrics"), "replay", "--all",
		"--reason", "v1 accepted", "--rate", "2", "--max-hook-timeouts", "3", "--max-replay-lag", "0", "--progress", "none")
	if res.code != 3 || !strings.Contains(res.stdout, "the hook timed out") || !strings.Contains(res.stdout, "--max-hook-timeouts 3") {
		t.Fatalf("exit %d, want 3 saying the hook timed out", res.code)
	}
	published := 0
	if m := regexpFind(`published (\d+);`, res.stdout); m != "" {
		published, _ = strconv.Atoi(m)
	}
	if published == 0 || published >= n {
		t.Fatalf("published %d of %d: the stop must come after some, before all", published, n)
	}
	s := byState(ledgerOf(t, f.s))
	if s[ledger.Open] != n-published || s[ledger.Replaying]+s[ledger.Resolved]+s[ledger.FailedAgain] != published {
		t.Errorf("ledger %v after %d published: the rest must stay open", s, published)
	}
	if got := len(readCommitted(t, f.s.replayTopic(), f.s.partitions)); got != published {
		t.Errorf("%d records in the replay topic, %d published", got, published)
	}
}

// regexpFind is the first group of pattern's first match in s, or "".
func regexpFind(pattern, s string) string {
	if m := regexp.MustCompile(pattern).FindStringSubmatch(s); len(m) > 1 {
		return m[1]
	}
	return ""
}
