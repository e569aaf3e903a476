package console

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"relay/internal/config"
	"relay/internal/ledger"
	"relay/internal/quarantine"
)

// listChart is newChart as it was drawn from lists of times, before the
// streaming tally: the reference the tally must draw alike.
func listChart(in, out []time.Time, now time.Time) chart {
	oldest := now
	for _, t := range in {
		if t.Before(oldest) {
			oldest = t
		}
	}
	w := chartWindows[len(chartWindows)-1]
	for _, c := range chartWindows {
		if now.Sub(oldest) <= c.d {
			w = c
			break
		}
	}
	step := w.d / chartBuckets
	start := now.Add(-w.d)
	var ins, outs [chartBuckets]int
	ch := chart{Window: w.name}
	count := func(ts []time.Time, b *[chartBuckets]int) int {
		n := 0
		for _, t := range ts {
			if t.Before(start) || t.After(now) {
				continue
			}
			b[min(int(t.Sub(start)/step), chartBuckets-1)]++
			n++
		}
		return n
	}
	ch.Inflow, ch.Resolved = count(in, &ins), count(out, &outs)
	top := 1
	for i := range chartBuckets {
		top = max(top, ins[i], outs[i])
	}
	for i := range chartBuckets {
		ih, oh := ins[i]*chartHeight/top, outs[i]*chartHeight/top
		if ins[i] > 0 {
			ih = max(ih, 1)
		}
		if outs[i] > 0 {
			oh = max(oh, 1)
		}
		from := start.Add(time.Duration(i) * step).UTC().Format("Jan 2 15:04")
		ch.Bars = append(ch.Bars, bar{X: i * (2*barWidth + 4), InY: chartHeight - ih, InH: ih, OutY: chartHeight - oh, OutH: oh,
			Title: fmt.Sprintf("from %s UTC: %d quarantined, %d resolved or discarded", from, ins[i], outs[i])})
	}
	ch.Label = fmt.Sprintf("Over %s: %d failures quarantined, %d resolved or discarded.", w.name, ch.Inflow, ch.Resolved)
	return ch
}

// The streaming tally draws what the chart of the lists drew, times on
// the windows' and buckets' edges, now, the future and beyond 30 days
// included.
func TestChartAsDrawnFromLists(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	var edges []time.Time
	for _, w := range chartWindows {
		step := w.d / chartBuckets
		edges = append(edges, now.Add(-w.d), now.Add(-w.d-1), now.Add(-w.d+step), now.Add(-step), now.Add(-step-1))
	}
	edges = append(edges, now, now.Add(time.Minute), now.Add(-40*24*time.Hour))
	for seed := range uint64(500) {
		r := rand.New(rand.NewPCG(seed, 3))
		span := chartWindows[r.IntN(len(chartWindows))].d
		times := func() (out []time.Time) {
			for range r.IntN(8) {
				at := now.Add(-time.Duration(r.Int64N(int64(span))))
				if r.IntN(3) == 0 {
					at = edges[r.IntN(len(edges))]
				}
				for range 1 + r.IntN(2)*r.IntN(80) { // now and then a crowd: a bar of 1 beside one of 60
					out = append(out, at)
				}
			}
			return out
		}
		in, out := times(), times()
		if got, want := newChart(in, out, now), listChart(in, out, now); !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d:\n%+v\nwant\n%+v", seed, got, want)
		}
	}
}

// quarantineOf is a quarantine of the failures given, in their order.
type quarantineOf struct {
	fls []*quarantine.Failure
	ret map[string]time.Duration
}

func (q quarantineOf) Retention() map[string]time.Duration { return q.ret }

func (q quarantineOf) Each(fn func(fl *quarantine.Failure) bool) {
	for _, fl := range q.fls {
		if !fn(fl) {
			return
		}
	}
}

// Each source counts the failures of its source topic or of its
// quarantine topic, once each: its unresolved ones by code (most first,
// with the oldest), the resolved and discarded, the earliest retention
// deadline of its topic's retention, the threshold and the chart.
func TestSourceViews(t *testing.T) {
	s := newTestServer(t, map[string]string{config.EnvSourceTopics: "orders,payments"})
	s.cfg.Thresholds = map[string]int{"orders": 4}
	qo, qp := s.cfg.Derived("orders").Quarantine, s.cfg.Derived("payments").Quarantine
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	fl := func(src string, st ledger.State, code string, since time.Duration, topic string, recorded time.Duration) *quarantine.Failure {
		f := &quarantine.Failure{ID: fmt.Sprintf("%s/0/%d", src, since), State: st, Code: code, Since: ago(since), Source: ledger.Source{Topic: src}}
		if topic != "" {
			f.Record = &quarantine.Record{Topic: topic, Timestamp: ago(recorded)}
		}
		return f
	}
	day := 24 * time.Hour
	resolved, discarded := fl("orders", ledger.Resolved, "A", 2*time.Hour, "", 0), fl("orders", ledger.Discarded, "A", time.Hour, "", 0)
	resolved.ChangedAt, discarded.ChangedAt = ago(30*time.Minute), ago(20*time.Minute)
	q := quarantineOf{ret: map[string]time.Duration{qo: 10 * day}, fls: []*quarantine.Failure{
		fl("orders", ledger.Open, "A", 5*time.Hour, qo, 5*time.Hour),
		fl("orders", ledger.Open, "B", 4*time.Hour, "", 0),
		fl("orders", ledger.Replaying, "A", 3*time.Hour, qo, 8*day+12*time.Hour), // the earliest deadline: in 36 h
		resolved, discarded,
		fl("orders", ledger.FailedAgain, "C", 10*time.Minute, qp, 10*time.Minute), // in payments' topic: counted by both
		fl("", ledger.Open, "C", 30*time.Minute, qp, 30*time.Minute),              // payments' by its record only
	}}
	got := s.sourceViews(q, now, nil)
	if len(got) != 2 {
		t.Fatalf("%d views", len(got))
	}
	want := []sourceView{
		{Source: "orders", Topic: qo, Threshold: 4, Unresolved: 4, Resolved: 1, Discarded: 1, Oldest: "5h00m", Retention: "10d00h",
			Headroom: "36h00m", Level: "amber", Deadline: now.Add(36 * time.Hour).Format(time.RFC3339), Codes: []codeRow{
				{Code: "A", Open: 1, Replaying: 1, N: 2, Oldest: "5h00m"}, {Code: "B", Open: 1, N: 1, Oldest: "4h00m"},
				{Code: "C", FailedAgain: 1, N: 1, Oldest: "10m00s"}}},
		{Source: "payments", Topic: qp, Unresolved: 2, Oldest: "30m00s", Codes: []codeRow{{Code: "C", Open: 1, FailedAgain: 1, N: 2, Oldest: "30m00s"}}},
	}
	charts := []struct {
		window          string
		inflow, settled int
	}{{"the last 24 hours", 6, 2}, {"the last hour", 2, 0}}
	for i := range got {
		c := got[i].Chart
		if c.Window != charts[i].window || c.Inflow != charts[i].inflow || c.Resolved != charts[i].settled {
			t.Errorf("%s's chart: %s, %d in, %d out", got[i].Source, c.Window, c.Inflow, c.Resolved)
		}
		got[i].Chart = chart{}
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("%s:\n%+v\nwant\n%+v", got[i].Source, got[i], want[i])
		}
	}
}

// counted is a quarantine that says its version and counts the passes
// over it.
type counted struct {
	quarantineOf
	version uint64
	passes  *int
}

func (q counted) Version() uint64 { return q.version }

func (q counted) Each(fn func(fl *quarantine.Failure) bool) {
	*q.passes++
	q.quarantineOf.Each(fn)
}

// The overview's pass is reused while the quarantine's version holds and
// for at most summaryReuse, with ages taken at each page; a new version,
// an older pass or a clock gone back makes a new one. Pages that share a
// pass do not share what they show (run with -race).
func TestOverviewPassIsReused(t *testing.T) {
	s := newTestServer(t, nil)
	qo := s.cfg.Derived("orders").Quarantine
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	open := func(id, code string, since time.Duration) *quarantine.Failure {
		return &quarantine.Failure{ID: id, State: ledger.Open, Code: code, Since: now.Add(-since), Source: ledger.Source{Topic: "orders"},
			Record: &quarantine.Record{Topic: qo, Timestamp: now.Add(-since)}}
	}
	passes := 0
	q := counted{quarantineOf: quarantineOf{fls: []*quarantine.Failure{open("orders/0/1", "A", time.Hour)}}, version: 1, passes: &passes}
	view := func(q counted, at time.Time) sourceView { return s.sourceViews(q, at, nil)[0] }
	if v := view(q, now); passes != 1 || v.Unresolved != 1 || v.Codes[0].Oldest != "1h00m" {
		t.Fatalf("first page: %d passes, %+v", passes, v)
	}
	v := view(q, now.Add(time.Minute))
	if passes != 1 || v.Unresolved != 1 || v.Oldest != "1h01m" || v.Codes[0].Oldest != "1h01m" {
		t.Fatalf("a page a minute on: %d passes, %+v", passes, v)
	}
	q.fls = append(q.fls, open("orders/0/2", "B", time.Minute))
	if v := view(q, now.Add(time.Minute)); passes != 1 || v.Unresolved != 1 {
		t.Fatalf("the same version, changed: %d passes, %d unresolved (the pass is reused)", passes, v.Unresolved)
	}
	q.version++
	if v := view(q, now.Add(time.Minute)); passes != 2 || v.Unresolved != 2 || len(v.Codes) != 2 {
		t.Fatalf("a new version: %d passes, %+v", passes, v)
	}
	if view(q, now.Add(time.Minute+summaryReuse)); passes != 3 {
		t.Fatalf("a pass summaryReuse old: %d passes", passes)
	}
	if view(q, now); passes != 4 {
		t.Fatalf("the clock gone back: %d passes", passes)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			v := view(q, now.Add(time.Duration(i)*time.Second))
			if v.Unresolved != 2 || len(v.Codes) != 2 {
				t.Errorf("page %d: %+v", i, v)
			}
		})
	}
	wg.Wait()
	if passes != 4 {
		t.Fatalf("pages of one version: %d passes", passes)
	}
}
