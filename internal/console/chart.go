package console

import (
	"fmt"
	"time"
)

// chart is a small bar chart of quarantine inflow and resolution over
// time, drawn as SVG attributes (no inline style, no script).
type chart struct {
	Window   string
	Bars     []bar
	Inflow   int
	Resolved int
	Label    string
}

type bar struct {
	X, InY, InH, OutY, OutH int
	Title                   string
}

const (
	chartBuckets = 24
	chartHeight  = 60
	barWidth     = 8
)

var chartWindows = []struct {
	d    time.Duration
	name string
}{{time.Hour, "the last hour"}, {24 * time.Hour, "the last 24 hours"}, {7 * 24 * time.Hour, "the last 7 days"}, {30 * 24 * time.Hour, "the last 30 days"}}

// newChart buckets the times failures came in and were resolved (or
// discarded) over the smallest window that holds the oldest of them, up
// to 30 days.
func newChart(in, out []time.Time, now time.Time) chart {
	t := newTally(now)
	for _, x := range in {
		t.in(x.UnixNano())
	}
	for _, x := range out {
		t.out(x.UnixNano())
	}
	return t.chart()
}

// tally is newChart one time (unix ns) at a time: it counts into every
// window at once, so memory does not grow with the failures.
type tally struct {
	now, oldest time.Time
	end         int64
	start, step [4]int64
	ins, outs   [4][chartBuckets]int
}

func newTally(now time.Time) *tally {
	t := &tally{now: now, oldest: now, end: now.UnixNano()}
	for w, c := range chartWindows {
		t.start[w], t.step[w] = now.Add(-c.d).UnixNano(), int64(c.d/chartBuckets)
	}
	return t
}

func (t *tally) in(ns int64) {
	if ns < t.oldest.UnixNano() {
		t.oldest = time.Unix(0, ns)
	}
	t.count(ns, &t.ins)
}

func (t *tally) out(ns int64) { t.count(ns, &t.outs) }

func (t *tally) count(ns int64, b *[4][chartBuckets]int) {
	if ns > t.end {
		return
	}
	for w := range chartWindows {
		if ns >= t.start[w] {
			b[w][min((ns-t.start[w])/t.step[w], chartBuckets-1)]++
		}
	}
}

func (t *tally) chart() chart {
	wi := len(chartWindows) - 1
	for i, c := range chartWindows {
		if t.now.Sub(t.oldest) <= c.d {
			wi = i
			break
		}
	}
	w := chartWindows[wi]
	ins, outs := t.ins[wi], t.outs[wi]
	step := w.d / chartBuckets
	start := t.now.Add(-w.d)
	ch := chart{Window: w.name}
	top := 1
	for i := range chartBuckets {
		top = max(top, ins[i], outs[i])
		ch.Inflow += ins[i]
		ch.Resolved += outs[i]
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
