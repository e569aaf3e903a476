package replay

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/ledger"
)

func newTestGuard(o *Options) *guard {
	return &guard{o: o, group: "g", parts: map[string]map[int32]bool{}, baseline: map[string]float64{}, http: http.DefaultClient,
		scrapeErr: map[string]bool{}, warn: func(string, ...any) {}}
}

// The lag stops a replay only above the limit while relay consumes less
// than half of what the replay publishes: a healthy relay's lag while a
// fast replay starts is no reason.
func TestLagStopsOnlyWhenRelayFallsBehind(t *testing.T) {
	type read struct{ committed, end int64 }
	for _, tc := range []struct {
		name  string
		reads []read
		stop  bool
	}{
		{"relay not consuming", []read{{0, 2}, {0, 10}, {0, 20}, {0, 30}}, true},
		{"a healthy relay behind a fast replay", []read{{0, 2000}, {1500, 4100}, {3600, 6200}, {5700, 8300}}, false},
		{"under the limit", []read{{0, 2}, {0, 4}, {0, 6}, {0, 8}}, false},
		{"too few readings", []read{{0, 20}, {0, 30}, {0, 40}}, false},
		{"nothing published lately", []read{{0, 40}, {0, 40}, {0, 40}, {0, 40}}, false},
		{"relay at a third of the rate", []read{{0, 30}, {10, 60}, {20, 90}, {30, 120}}, true},
	} {
		g := newTestGuard(&Options{MaxReplayLag: 10})
		why := ""
		for _, r := range tc.reads {
			why = g.noteLag(r.committed, r.end)
		}
		if (why != "") != tc.stop {
			t.Errorf("%s: stop %q, want a stop %v", tc.name, why, tc.stop)
		}
		if tc.stop && (!strings.Contains(why, "--max-replay-lag 10") || !strings.Contains(why, "not keeping up")) {
			t.Errorf("%s: %q", tc.name, why)
		}
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

// Hook timeouts count what each relay process's counter rose by during
// the replay: an address alternating between two pods compares each pod
// with itself, and a process started during the replay counts from 0.
func TestHookTimeoutsStopAReplay(t *testing.T) {
	type proc struct {
		timeouts int64
		started  int64
	}
	var a, b atomic.Pointer[proc]
	serve := func(p *atomic.Pointer[proc]) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			v := p.Load()
			fmt.Fprintf(w, "# TYPE relay_hook_timeouts_total counter\nrelay_hook_timeouts_total{otel_scope_name=\"relay\"} %d\nrelay_hook_timeouts_totalx 99\nprocess_start_time_seconds %d.25\n",
				v.timeouts, v.started)
		}))
	}
	sa, sb := serve(&a), serve(&b)
	defer sa.Close()
	defer sb.Close()
	before := time.Now().Add(-time.Hour).Unix()
	podA, podB := &proc{100, before}, &proc{5, before + 1}
	a.Store(podA)
	b.Store(&proc{7, before})
	g := newTestGuard(&Options{MaxHookTimeouts: 5, WatchMetrics: []string{sa.URL, sb.URL, "http://127.0.0.1:1/metrics?token=s3cret"}})
	var warned []string
	g.warn = func(format string, args ...any) { warned = append(warned, fmt.Sprintf(format, args...)) }
	g.began = time.Now()
	ctx := context.Background()
	g.scrape(ctx) // the baselines
	// A's address alternates between two pods of long ago; B restarts
	// during the replay.
	a.Store(podB)
	b.Store(&proc{2, time.Now().Add(time.Second).Unix()})
	g.scrape(ctx)
	a.Store(&proc{101, before})
	g.scrape(ctx)
	a.Store(&proc{7, before + 1})
	g.scrape(ctx)
	if g.timeouts != 2+1+2 { // B's restart: 2; pod A: +1; pod B: +2
		t.Fatalf("timeouts %g, want 5", g.timeouts)
	}
	if why := g.stop(ctx, nil); why != "" {
		t.Fatalf("5 timeouts allowed: %s", why)
	}
	a.Store(&proc{102, before})
	g.scrapeAt = g.scrapeAt.Add(-scrapeEvery)
	if why := g.stop(ctx, nil); !strings.Contains(why, "timed out 6 times") {
		t.Fatalf("6 timeouts: %q", why)
	}
	if len(warned) != 1 || strings.Contains(warned[0], "s3cret") {
		t.Errorf("the unreachable instance: warnings %q (once, without the URL's secret)", warned)
	}
}
