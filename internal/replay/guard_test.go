package replay

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"relay/internal/ledger"
)

func newTestGuard(o *Options) *guard {
	return &guard{o: o, group: "g", parts: map[string]map[int32]bool{}, baseline: map[string]float64{}, http: http.DefaultClient,
		scrapeErr: map[string]bool{}, warn: func(string, ...any) {}}
}

// The lag stops a replay only above the limit and rising at every check:
// a lag that holds or falls is relay catching up.
func TestLagStopsOnlyWhenRisingAboveTheLimit(t *testing.T) {
	g := newTestGuard(&Options{MaxReplayLag: 10})
	for _, lag := range []int64{20, 30, 40} {
		if why := g.noteLag(lag); why != "" {
			t.Fatalf("stopped at %d after fewer than %d rises: %s", lag, risingChecks, why)
		}
	}
	if why := g.noteLag(50); !strings.Contains(why, "grew to 50") || !strings.Contains(why, "--max-replay-lag 10") {
		t.Fatalf("rising above the limit: %q", why)
	}
	// A lag that fell within the last readings is relay catching up; one
	// that holds above the limit is not growing.
	for _, lags := range [][]int64{{20, 30, 25, 40}, {50, 50, 50, 50, 50}} {
		g = newTestGuard(&Options{MaxReplayLag: 10})
		for _, lag := range lags {
			if why := g.noteLag(lag); why != "" {
				t.Fatalf("%v: stopped at %d: %s", lags, lag, why)
			}
		}
	}
	// A slow replay's lag holds between some readings and still grows.
	g = newTestGuard(&Options{MaxReplayLag: 10})
	for _, lag := range []int64{20, 20, 21} {
		if why := g.noteLag(lag); why != "" {
			t.Fatalf("stopped at %d: %s", lag, why)
		}
	}
	if why := g.noteLag(21); why == "" {
		t.Fatal("a lag that grew from 20 to 21 over 4 readings without falling did not stop the replay")
	}
}

func TestDuplicatesStopAReplay(t *testing.T) {
	g := newTestGuard(&Options{MaxDuplicates: 1})
	tally := map[string]int{string(ledger.OutcomeDuplicate): 1}
	if why := g.stop(context.Background(), tally); why != "" {
		t.Fatalf("one duplicate allowed: %s", why)
	}
	tally[string(ledger.OutcomeDuplicate)] = 2
	if why := g.stop(context.Background(), tally); !strings.Contains(why, "--max-duplicates 1") {
		t.Fatalf("two duplicates: %q", why)
	}
}

// Hook timeouts are counted from the replay's start, summed over the
// instances, and an instance restarted (its counter from 0) counts again
// from 0.
func TestHookTimeoutsStopAReplay(t *testing.T) {
	var a, b atomic.Int64
	serve := func(n *atomic.Int64) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "# HELP relay_hook_timeouts_total x\n# TYPE relay_hook_timeouts_total counter\nrelay_hook_timeouts_total{otel_scope_name=\"relay\"} %d\nrelay_hook_timeouts_totalx 99\n", n.Load())
		}))
	}
	sa, sb := serve(&a), serve(&b)
	defer sa.Close()
	defer sb.Close()
	a.Store(100)
	b.Store(7)
	g := newTestGuard(&Options{MaxHookTimeouts: 5, WatchMetrics: []string{sa.URL, sb.URL, "http://127.0.0.1:1/metrics"}})
	ctx := context.Background()
	g.scrape(ctx) // the baseline
	a.Store(103)
	b.Store(2) // restarted
	g.scrape(ctx)
	if g.timeouts != 3+2 {
		t.Fatalf("timeouts %g, want 5", g.timeouts)
	}
	if why := g.stop(ctx, nil); why != "" {
		t.Fatalf("5 timeouts allowed: %s", why)
	}
	a.Store(104)
	g.scrapeAt = g.scrapeAt.Add(-scrapeEvery)
	if why := g.stop(ctx, nil); !strings.Contains(why, "timed out 6 times") {
		t.Fatalf("6 timeouts: %q", why)
	}
	if !g.scrapeErr["http://127.0.0.1:1/metrics"] {
		t.Error("an unreachable instance was not reported")
	}
}
