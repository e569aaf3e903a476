package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"relay/internal/ledger"
	"relay/internal/secret"
)

// How often the guard looks at the replay topic's lag and at relay's
// metrics, and how many rising lag readings in a row stop a replay.
const (
	lagEvery     = 2 * time.Second
	scrapeEvery  = 5 * time.Second
	risingChecks = 3
)

// guard watches what a replay does to relay, beyond the outcomes it
// settles: the lag of relay's group on the replay topic, copies of settled
// failures (duplicates), and the hook's timeouts on relay's metrics. Each
// can stop a replay; stop says why.
type guard struct {
	o     *Options
	group string
	// group reads relay's group's committed offsets and the replay
	// topic's watermarks (a consumer with relay's group.id that never
	// joins the group); nil: lag is not watched.
	offsets *kafka.Consumer
	parts   map[string]map[int32]bool // replay-topic partitions published to
	// reads are the last lag readings: relay's committed offsets and the
	// end offsets, summed over the partitions published to.
	reads  []lagRead
	lagAt  time.Time
	lagErr string // the last lag reading's error, said once

	scrapeAt time.Time
	// baseline is relay_hook_timeouts_total as last read, by URL and
	// process start; timeouts what they rose by since the replay began.
	baseline  map[string]float64
	timeouts  float64
	began     time.Time
	http      *http.Client
	scrapeErr map[string]bool
	warn      func(format string, args ...any)
}

// published notes a replay record's partition, whose lag is watched.
func (g *guard) published(topic string, partition int32) {
	if g.parts[topic] == nil {
		g.parts[topic] = map[int32]bool{}
	}
	g.parts[topic][partition] = true
}

// stop says why the replay must stop, or "". tally is the outcomes so far.
func (g *guard) stop(ctx context.Context, tally map[string]int) string {
	// With --include-replaying a copy is expected: the earlier replay's
	// record may still come, and relay outputs whichever is first.
	if n := tally[string(ledger.OutcomeDuplicate)]; n > g.o.MaxDuplicates && !g.o.IncludeReplaying {
		return fmt.Sprintf("%d replayed records were copies of failures already settled (outcome duplicate), more than --max-duplicates %d: "+
			"is another replay or a discard racing this one?", n, g.o.MaxDuplicates)
	}
	now := time.Now()
	if g.offsets != nil && g.o.MaxReplayLag > 0 && now.Sub(g.lagAt) >= lagEvery {
		g.lagAt = now
		if why := g.checkLag(ctx); why != "" {
			return why
		}
	}
	if len(g.o.WatchMetrics) > 0 && now.Sub(g.scrapeAt) >= scrapeEvery {
		g.scrapeAt = now
		g.scrape(ctx)
		if g.timeouts > float64(g.o.MaxHookTimeouts) {
			return fmt.Sprintf("the hook timed out %.0f times during the replay (relay_hook_timeouts_total), more than --max-hook-timeouts %d: "+
				"the hook is saturated; replay again at a lower --rate once it recovers", g.timeouts, g.o.MaxHookTimeouts)
		}
	}
	return ""
}

// lagRead is one reading of relay's progress on the replay topic.
type lagRead struct{ committed, end int64 }

// checkLag reads relay's progress on the partitions published to, and
// stops the replay when relay's lag is above --max-replay-lag and relay
// consumed less than half of what the replay published over the last
// risingChecks readings: relay is not keeping up (or not running). A
// healthy relay's lag while a fast replay starts is no reason: it consumes
// as fast as the replay publishes. The lag counts offsets: the replay's
// transaction markers too, one per transaction and partition.
func (g *guard) checkLag(ctx context.Context) string {
	committed, end, err := g.lag(ctx)
	if err != nil {
		if msg := err.Error(); msg != g.lagErr && ctx.Err() == nil {
			g.lagErr = msg
			g.warn("the replay topic's lag cannot be read (%v); the replay goes on without that check", err)
		}
		return ""
	}
	return g.noteLag(committed, end)
}

// noteLag adds a reading, and says why the replay stops, or "".
func (g *guard) noteLag(committed, end int64) string {
	g.reads = append(g.reads, lagRead{committed, end})
	if len(g.reads) > risingChecks+1 {
		g.reads = g.reads[1:]
	}
	last, first := g.reads[len(g.reads)-1], g.reads[0]
	lag := last.end - last.committed
	if lag <= g.o.MaxReplayLag || len(g.reads) <= risingChecks {
		return ""
	}
	published, consumed := last.end-first.end, last.committed-first.committed
	if published <= 0 || 2*consumed >= published {
		return ""
	}
	return fmt.Sprintf("the lag of group %s on the replay topic is %d offsets, more than --max-replay-lag %d, and relay consumed %d of the %d offsets published over the last %s: "+
		"relay is not keeping up with the replay, or not running", g.group, lag, g.o.MaxReplayLag, max(consumed, 0), published, risingChecks*lagEvery)
}

// lag reads, summed over the partitions published to, the group's
// committed offsets (the low watermark where it has none yet) and the
// high watermarks.
func (g *guard) lag(ctx context.Context) (committedSum, endSum int64, err error) {
	var tps []kafka.TopicPartition
	for topic, ps := range g.parts {
		for p := range ps {
			t := topic
			tps = append(tps, kafka.TopicPartition{Topic: &t, Partition: p})
		}
	}
	if len(tps) == 0 {
		return 0, 0, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	// A read_uncommitted consumer's Committed does not wait for relay's
	// open transactions' commits (require_stable).
	res, err := g.offsets.Committed(tps, int(lagEvery/time.Millisecond))
	if err != nil {
		return 0, 0, err
	}
	committed := map[string]int64{}
	for _, tp := range res {
		if tp.Error != nil {
			return 0, 0, fmt.Errorf("the committed offset of %s[%d]: %w", *tp.Topic, tp.Partition, tp.Error)
		}
		if tp.Offset >= 0 {
			committed[*tp.Topic+"/"+strconv.Itoa(int(tp.Partition))] = int64(tp.Offset)
		}
	}
	for _, tp := range tps {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		low, high, err := g.offsets.QueryWatermarkOffsets(*tp.Topic, tp.Partition, int(lagEvery/time.Millisecond))
		if err != nil {
			return 0, 0, err
		}
		at, ok := committed[*tp.Topic+"/"+strconv.Itoa(int(tp.Partition))]
		if !ok {
			at = low
		}
		committedSum += min(at, high)
		endSum += high
	}
	return committedSum, endSum, nil
}

// scrape reads relay_hook_timeouts_total from every watched /metrics and
// adds what it rose by since the last reading of the same process (told
// apart by process_start_time_seconds): an address that alternates
// between pods (a Service's) compares each pod with itself, and a
// process started after the replay began counts from 0. An instance that
// cannot be read is said once and left out.
func (g *guard) scrape(ctx context.Context) {
	for _, u := range g.o.WatchMetrics {
		v, started, err := scrapeTimeouts(ctx, g.http, u)
		if err != nil {
			if ctx.Err() == nil && !g.scrapeErr[u] {
				g.scrapeErr[u] = true
				g.warn("relay's metrics at %s cannot be read (%v); its hook timeouts are not watched", secret.MaskURL(u), err)
			}
			continue
		}
		key := u + "|" + strconv.FormatFloat(started, 'f', -1, 64)
		last, ok := g.baseline[key]
		g.baseline[key] = v
		switch {
		case ok:
			g.timeouts += max(v-last, 0)
		case started > 0 && time.Unix(int64(started), 0).After(g.began):
			g.timeouts += v // started during the replay: all of its timeouts are the replay's
		}
	}
}

// MetricHookTimeouts is the counter the guard reads on relay's /metrics.
const MetricHookTimeouts = "relay_hook_timeouts_total"

// metricStarted tells one relay process from another behind one address.
const metricStarted = "process_start_time_seconds"

// scrapeTimeouts reads relay_hook_timeouts_total (summed over its series)
// and process_start_time_seconds. Its errors never repeat the URL (it may
// hold a credential in its query).
func scrapeTimeouts(ctx context.Context, hc *http.Client, u string) (timeouts, started float64, err error) {
	timeouts, started, err = scrapeURL(ctx, hc, u)
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return timeouts, started, err
}

func scrapeURL(ctx context.Context, hc *http.Client, u string) (float64, float64, error) {
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(c, http.MethodGet, u, nil)
	if err != nil {
		return 0, 0, err
	}
	// The classic text format: no exemplars after the value.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, 0, err
	}
	timeouts, ok := families[MetricHookTimeouts]
	if !ok {
		return 0, 0, fmt.Errorf("no %s there (is it relay's /metrics?)", MetricHookTimeouts)
	}
	sum, started := 0.0, 0.0
	for _, m := range timeouts.GetMetric() {
		sum += m.GetCounter().GetValue() + m.GetUntyped().GetValue()
	}
	if st, ok := families[metricStarted]; ok && len(st.GetMetric()) > 0 {
		m := st.GetMetric()[0]
		started = m.GetGauge().GetValue() + m.GetUntyped().GetValue()
	}
	return sum, started, nil
}

// Watching says which stop conditions a replay with o watches, for its
// report and its page.
func (o *Options) Watching() []string {
	out := []string{fmt.Sprintf("repeat failures above %.0f%% (after %d outcomes)", 100*o.MaxFailureRate, o.MinOutcomes)}
	if o.MaxReplayLag > 0 {
		out = append(out, fmt.Sprintf("relay's lag on the replay topic above %d offsets while relay consumes less than half of what is published", o.MaxReplayLag))
	} else {
		out = append(out, "not relay's lag on the replay topic (--max-replay-lag 0)")
	}
	if o.IncludeReplaying {
		out = append(out, "not duplicates (expected with --include-replaying)")
	} else {
		out = append(out, fmt.Sprintf("more than %d duplicates", o.MaxDuplicates))
	}
	if len(o.WatchMetrics) > 0 {
		out = append(out, fmt.Sprintf("more than %d hook timeouts on %d relay instances", o.MaxHookTimeouts, len(o.WatchMetrics)))
	} else {
		out = append(out, "not hook timeouts (no RELAY_REPLAY_WATCH_METRICS)")
	}
	return out
}
