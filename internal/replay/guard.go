package replay

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

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
	lags    []int64
	lagAt   time.Time
	lagErr  string // the last lag reading's error, said once

	scrapeAt time.Time
	// last is relay_hook_timeouts_total as last read, by URL; timeouts
	// what they rose by since the replay began, summed.
	baseline  map[string]float64
	timeouts  float64
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

// checkLag reads the lag of relay's group on the partitions published
// to, and stops the replay when it is above --max-replay-lag and has
// grown over the last risingChecks readings without falling: relay is not
// keeping up (or not running). The lag counts offsets: the replay's
// transaction markers too, one per transaction and partition.
func (g *guard) checkLag(ctx context.Context) string {
	lag, err := g.lag(ctx)
	if err != nil {
		if msg := err.Error(); msg != g.lagErr {
			g.lagErr = msg
			g.warn("the replay topic's lag cannot be read (%v); the replay goes on without that check", err)
		}
		return ""
	}
	return g.noteLag(lag)
}

// noteLag adds a lag reading, and says why the replay stops, or "".
func (g *guard) noteLag(lag int64) string {
	g.lags = append(g.lags, lag)
	if len(g.lags) > risingChecks+1 {
		g.lags = g.lags[1:]
	}
	if lag <= g.o.MaxReplayLag || len(g.lags) <= risingChecks {
		return ""
	}
	// Never falling, and higher than at the first of the readings: a
	// slow replay's lag may hold between two readings, and still grow.
	for i := 1; i < len(g.lags); i++ {
		if g.lags[i] < g.lags[i-1] {
			return ""
		}
	}
	if g.lags[len(g.lags)-1] <= g.lags[0] {
		return ""
	}
	return fmt.Sprintf("the lag of group %s on the replay topic grew to %d offsets over %d checks without falling, more than --max-replay-lag %d: "+
		"relay is not keeping up with the replay, or not running", g.group, lag, risingChecks, g.o.MaxReplayLag)
}

// lag is the group's lag summed over the partitions published to: their
// high watermark minus the group's committed offset (the low watermark
// when the group has none there yet).
func (g *guard) lag(ctx context.Context) (int64, error) {
	var tps []kafka.TopicPartition
	for topic, ps := range g.parts {
		for p := range ps {
			t := topic
			tps = append(tps, kafka.TopicPartition{Topic: &t, Partition: p})
		}
	}
	if len(tps) == 0 {
		return 0, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	// Committed asks for stable offsets: a commit in an open transaction
	// of relay's is waited for.
	res, err := g.offsets.Committed(tps, int(lagEvery/time.Millisecond))
	if err != nil {
		return 0, err
	}
	committed := map[string]int64{}
	for _, tp := range res {
		if tp.Error != nil {
			return 0, fmt.Errorf("the committed offset of %s[%d]: %w", *tp.Topic, tp.Partition, tp.Error)
		}
		if tp.Offset >= 0 {
			committed[*tp.Topic+"/"+strconv.Itoa(int(tp.Partition))] = int64(tp.Offset)
		}
	}
	var sum int64
	for _, tp := range tps {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		low, high, err := g.offsets.QueryWatermarkOffsets(*tp.Topic, tp.Partition, int(lagEvery/time.Millisecond))
		if err != nil {
			return 0, err
		}
		at, ok := committed[*tp.Topic+"/"+strconv.Itoa(int(tp.Partition))]
		if !ok {
			at = low
		}
		sum += max(high-at, 0)
	}
	return sum, nil
}

// scrape reads relay_hook_timeouts_total from every watched /metrics and
// adds what each rose by since its last reading: a counter that went down
// (a restarted instance, or another pod behind a Service's address) counts
// from 0. An instance that cannot be read is said once and left out.
func (g *guard) scrape(ctx context.Context) {
	for _, u := range g.o.WatchMetrics {
		v, err := scrapeTimeouts(ctx, g.http, u)
		if err != nil {
			if !g.scrapeErr[u] {
				g.scrapeErr[u] = true
				g.warn("relay's metrics at %s cannot be read (%v); its hook timeouts are not watched", secret.MaskURL(u), err)
			}
			continue
		}
		last, ok := g.baseline[u]
		g.baseline[u] = v
		switch {
		case !ok: // the first reading: where the replay begins
		case v >= last:
			g.timeouts += v - last
		default:
			g.timeouts += v
		}
	}
}

// MetricHookTimeouts is the counter the guard reads on relay's /metrics.
const MetricHookTimeouts = "relay_hook_timeouts_total"

func scrapeTimeouts(ctx context.Context, hc *http.Client, u string) (float64, error) {
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(c, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	// The classic text format: no exemplars after the value.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	found, sum := false, 0.0
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, MetricHookTimeouts) {
			continue
		}
		rest := line[len(MetricHookTimeouts):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		fields := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		found, sum = true, sum+v
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("no %s there (is it relay's /metrics?)", MetricHookTimeouts)
	}
	return sum, nil
}

// Watching says which stop conditions a replay with o watches, for its
// report and its page.
func (o *Options) Watching() []string {
	out := []string{fmt.Sprintf("repeat failures above %.0f%% (after %d outcomes)", 100*o.MaxFailureRate, o.MinOutcomes)}
	if o.MaxReplayLag > 0 {
		out = append(out, fmt.Sprintf("relay's lag on the replay topic above %d offsets and growing", o.MaxReplayLag))
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
