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
			i := min(int(t.Sub(start)/step), chartBuckets-1)
			b[i]++
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
