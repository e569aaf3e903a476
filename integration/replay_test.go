package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/envelope"
	"relay/internal/ledger"
)

// TestReplayFixedSampleTwiceIsIdempotent replays a fixed
// sample twice, and each record is in the output exactly once.
// The second replay skips the resolved records and counts them; a copy of a
// replay record published behind relay's back (two replays racing) is
// recognised by relay, recorded as a duplicate, and not output again.
func TestReplayFixedSampleTwiceIsIdempotent(t *testing.T) {
	f := newQuarantineFixture(t, 6, 0, 0, 0)
	r := f.startFixed(t)
	defer r.stop()
	sample := f.v1[:3]
	env := append(f.fixed(), "RELAY_ACTOR", "alice")
	args := []string{"replay", "--ids", strings.Join(sample, ","), "--reason", "fix: v1 accepted", "--rate", "100", "--wait", "90s", "--progress", "none"}
	if res := f.s.cli(t, env, args...); res.code != 0 || !strings.Contains(res.stdout, "resolved 3;") {
		t.Fatalf("first replay: exit %d", res.code)
	}
	res := f.s.cli(t, env, args...)
	if res.code != 0 || !strings.Contains(res.stdout, "already resolved 3") {
		t.Fatalf("second replay must skip the 3 resolved records and say so: exit %d", res.code)
	}

	// A copy of one replay record, as if two replays had raced.
	replays := readCommitted(t, f.s.replayTopic(), f.s.partitions)
	if len(replays) != 3 {
		t.Fatalf("%d records in the replay topic, want 3 (the second replay publishes nothing)", len(replays))
	}
	dup := replays[0]
	dupID := string(must(envelope.Lookup(toEnvelopeHeaders(dup.Headers), envelope.FailureID)))
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": bootstrap})
	if err != nil {
		t.Fatal(err)
	}
	topic := f.s.replayTopic()
	if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: dup.TopicPartition.Partition},
		Key: dup.Key, Value: dup.Value, Headers: dup.Headers}, nil); err != nil {
		t.Fatal(err)
	}
	p.Flush(10000)
	p.Close()
	deadline := time.Now().Add(60 * time.Second)
	for !hasDuplicate(ledgerOf(t, f.s)[dupID]) {
		if time.Now().After(deadline) {
			t.Fatalf("relay did not record the copy of %s's replay as a duplicate", dupID)
		}
		time.Sleep(500 * time.Millisecond)
	}

	outs := outputsByID(t, f.s)
	l := ledgerOf(t, f.s)
	for _, id := range f.v1 {
		replayed := id == sample[0] || id == sample[1] || id == sample[2]
		switch {
		case replayed && len(outs[id]) != 1:
			t.Errorf("%s: %d outputs, want exactly 1", id, len(outs[id]))
		case !replayed && len(outs[id]) != 0:
			t.Errorf("%s was not selected but has %d outputs", id, len(outs[id]))
		case replayed:
			hs := toEnvelopeHeaders(outs[id][0].Headers)
			if rid, _ := envelope.Lookup(hs, envelope.ReplayID); !strings.HasPrefix(string(rid), "rp-") {
				t.Errorf("%s: output without relay.replay.id", id)
			}
			if c, _ := envelope.Lookup(hs, envelope.ReplayCount); string(c) != "1" {
				t.Errorf("%s: relay.replay.count %q, want 1", id, c)
			}
			e := l[id]
			if e.State != ledger.Resolved {
				t.Errorf("%s: ledger %s, want resolved", id, e.State)
				continue
			}
			h := e.History
			if h[0].State != ledger.Open || h[1].State != ledger.Replaying || h[1].Actor != "alice" || h[1].Reason != "fix: v1 accepted" || h[2].State != ledger.Resolved {
				t.Errorf("%s: history %+v", id, h)
			}
		default:
			if l[id].State != ledger.Open {
				t.Errorf("%s: ledger %s, want open", id, l[id].State)
			}
		}
	}
	if n := len(readCommitted(t, f.s.quarantine, f.s.partitions)); n != 6 {
		t.Errorf("%d quarantine records, want the 6 first ones only", n)
	}
}

func hasDuplicate(e *ledger.Entry) bool {
	if e == nil {
		return false
	}
	for _, h := range e.History {
		if h.Outcome == ledger.OutcomeDuplicate {
			return e.State == ledger.Resolved
		}
	}
	return false
}

func must[T any](v T, ok bool) T {
	if !ok {
		panic("missing")
	}
	return v
}

// TestReplayDryRunWritesNothingAndPredicts: a dry run changes no topic's
// end offset, and its prediction by code is what the real replay then
// does. Records that fail again are failed-again in the ledger with their
// history, stay in quarantine, and are not replayed automatically.
func TestReplayDryRunWritesNothingAndPredicts(t *testing.T) {
	f := newQuarantineFixture(t, 4, 3, 2, 0)
	r := f.startFixed(t)
	defer r.stop()
	// relay's own write once it has joined, not the dry run's.
	waitMemberRecord(t, f.s, r)
	before := map[string]map[int32]int64{}
	for _, topic := range f.allTopics() {
		before[topic] = endOffsets(t, topic, f.s.partitions)
	}
	res := f.s.cli(t, f.fixed(), "replay", "--all", "--reason", "fix", "--dry-run", "--json", "--rate", "20")
	var pred struct {
		Selected  int            `json:"selected"`
		WouldPass int            `json:"wouldPass"`
		WouldFail map[string]int `json:"wouldFailAgain"`
		Estimated float64        `json:"estimatedSeconds"`
	}
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &pred) != nil {
		t.Fatalf("dry run: exit %d, output %q", res.code, res.stdout)
	}
	want := map[string]int{"WIRE_FORMAT_INVALID": 3, "PAYLOAD_MALFORMED": 2}
	if pred.Selected != 9 || pred.WouldPass != 4 || fmt.Sprint(pred.WouldFail) != fmt.Sprint(want) || pred.Estimated != 9.0/20 {
		t.Fatalf("prediction %+v; want 9 selected, 4 passing, failing %v, 0.45 s", pred, want)
	}
	if res := f.s.cli(t, f.fixed(), "replay", "--all", "--reason", "fix", "--dry-run"); res.code != 0 ||
		!strings.Contains(res.stdout, "nothing was written") || !strings.Contains(res.stdout, "would pass admission and rules: 4") {
		t.Fatalf("text dry run: exit %d", res.code)
	}
	for _, topic := range f.allTopics() {
		if after := endOffsets(t, topic, f.s.partitions); !equalOffsets(before[topic], after) {
			t.Errorf("a dry run wrote to %s: end offsets %v → %v", topic, before[topic], after)
		}
	}

	res = f.s.cli(t, f.fixed(), "replay", "--all", "--reason", "fix", "--rate", "50", "--max-failure-rate", "1", "--progress", "none", "--json")
	var sum struct {
		Resolved    int `json:"resolved"`
		FailedAgain int `json:"failedAgain"`
		Pending     int `json:"outcomeUnknown"`
	}
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &sum) != nil || sum.Resolved != 4 || sum.FailedAgain != 5 || sum.Pending != 0 {
		t.Fatalf("replay: exit %d, summary %+v", res.code, sum)
	}
	l := ledgerOf(t, f.s)
	got := map[string]int{}
	for _, id := range f.v1 {
		if l[id].State != ledger.Resolved {
			t.Errorf("%s: %s, predicted to pass", id, l[id].State)
		}
	}
	for _, id := range append(append([]string{}, f.garbage...), f.trunc...) {
		e := l[id]
		if e.State != ledger.FailedAgain {
			t.Errorf("%s: %s, want failed-again", id, e.State)
			continue
		}
		got[e.Current().Code]++
		h := e.History
		if len(h) != 3 || h[0].State != ledger.Open || h[0].Attempt != 1 || h[1].State != ledger.Replaying ||
			h[2].State != ledger.FailedAgain || h[2].Attempt != 1 || h[2].ReplayCount != 1 || h[2].Code != h[0].Code {
			t.Errorf("%s: attempt history %+v", id, h)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("failed again by code %v; the dry run predicted %v", got, want)
	}
	show := f.s.cli(t, nil, "quarantine", "show", f.garbage[0])
	var shown struct {
		FailureID string         `json:"failureId"`
		State     ledger.State   `json:"state"`
		History   []ledger.Event `json:"history"`
	}
	if show.code != 0 || json.Unmarshal([]byte(show.stdout), &shown) != nil || shown.State != ledger.FailedAgain || len(shown.History) != 3 {
		t.Errorf("quarantine show %s: exit %d, %+v", f.garbage[0], show.code, shown)
	}

	// Not replayed automatically: nothing moves while nobody acts.
	replayEnd := endOffsets(t, f.s.replayTopic(), f.s.partitions)
	time.Sleep(5 * time.Second)
	if after := endOffsets(t, f.s.replayTopic(), f.s.partitions); !equalOffsets(replayEnd, after) {
		t.Errorf("the replay topic grew without a replay: %v → %v", replayEnd, after)
	}
	counts := map[string]int{}
	for _, m := range readCommitted(t, f.s.quarantine, f.s.partitions) {
		counts[envelopeOf(t, m).ID]++
	}
	for _, id := range append(append([]string{}, f.garbage...), f.trunc...) {
		if counts[id] != 2 {
			t.Errorf("%s is in quarantine %d times, want 2 (first failure, failed again)", id, counts[id])
		}
	}
	if s := byState(ledgerOf(t, f.s)); s[ledger.FailedAgain] != 5 || s[ledger.Resolved] != 4 {
		t.Errorf("ledger moved by itself: %v", s)
	}
}

var progressLine = regexp.MustCompile(`published=(\d+)/(\d+) percent=\d+ resolved=(\d+) rejected=\d+ failed_again=(\d+) duplicate=\d+ waiting=(\d+) rate=[\d.]+/s eta=(\S+)`)

// TestReplayRateLimitAndProgress: 30 records at 10 per second take about
// 3 seconds to publish, never more than the rate in a second (with one
// transaction's slack), and the progress lines count up to the outcome.
func TestReplayRateLimitAndProgress(t *testing.T) {
	f := newQuarantineFixture(t, 30, 0, 0, 0)
	r := f.startFixed(t)
	defer r.stop()
	res := f.s.cli(t, f.fixed(), "replay", "--code", "SCHEMA_UNSUPPORTED", "--reason", "fix", "--rate", "10", "--progress", "lines")
	if res.code != 0 {
		t.Fatalf("replay: exit %d", res.code)
	}
	var at []time.Time
	for _, e := range ledgerOf(t, f.s) {
		for _, h := range e.History {
			if h.State == ledger.Replaying {
				at = append(at, h.At)
			}
		}
	}
	if len(at) != 30 {
		t.Fatalf("%d replaying changes, want 30", len(at))
	}
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	span := at[len(at)-1].Sub(at[0])
	if span < 2500*time.Millisecond || span > 6*time.Second {
		t.Errorf("30 records at 10/s published over %s; want about 2.9 s (2.5 s to 6 s)", span)
	}
	for i := range at {
		n := 0
		for j := i; j < len(at) && at[j].Sub(at[i]) < time.Second; j++ {
			n++
		}
		if n > 12 {
			t.Errorf("%d records within one second from %s; the rate is 10", n, at[i].Format(time.StampMilli))
			break
		}
	}
	t.Logf("published over %s", span)

	lines := progressLine.FindAllStringSubmatch(res.stderr, -1)
	if len(lines) < 3 {
		t.Fatalf("%d progress lines, want one a second at least: %q", len(lines), res.stderr)
	}
	prev := -1
	for _, m := range lines {
		pub, _ := strconv.Atoi(m[1])
		if m[2] != "30" || pub < prev {
			t.Errorf("progress line out of order: %s", m[0])
		}
		prev = pub
	}
	last := lines[len(lines)-1]
	if last[1] != "30" || last[3] != "30" || last[4] != "0" || last[5] != "0" || last[6] != "0s" {
		t.Errorf("last progress line %q; want 30 published, 30 resolved, none waiting, eta 0s", last[0])
	}
	if !strings.Contains(res.stdout, "selected 30; published 30; resolved 30;") {
		t.Errorf("summary: %q", res.stdout)
	}
}

// TestReplayStopsOnRepeatFailures: records that keep failing stop the
// replay, after its sample or after enough outcomes, with exit code 3; the
// rest is not published and stays open.
func TestReplayStopsOnRepeatFailures(t *testing.T) {
	f := newQuarantineFixture(t, 0, 30, 0, 0)
	r := f.startFixed(t)
	defer r.stop()
	res := f.s.cli(t, f.fixed(), "replay", "--code", "WIRE_FORMAT_INVALID", "--reason", "try again", "--sample", "5",
		"--max-failure-rate", "0.5", "--rate", "50", "--progress", "none")
	if res.code != 3 || !strings.Contains(res.stdout, "stopped: the sample's repeat-failure rate 100% (5 of 5)") {
		t.Fatalf("after a failing sample: exit %d, want 3 and the reason", res.code)
	}
	if s := byState(ledgerOf(t, f.s)); s[ledger.FailedAgain] != 5 || s[ledger.Open] != 25 {
		t.Fatalf("after the sample: %v; want 5 failed-again, 25 open", s)
	}
	res = f.s.cli(t, f.fixed(), "replay", "--code", "WIRE_FORMAT_INVALID", "--reason", "try again", "--rate", "5",
		"--min-outcomes", "4", "--max-failure-rate", "0.5", "--progress", "none")
	if res.code != 3 || !strings.Contains(res.stdout, "stopped: repeat-failure rate 100%") {
		t.Fatalf("without a sample: exit %d, want 3", res.code)
	}
	// What was published before the stop still gets its outcome.
	s := byState(ledgerOf(t, f.s))
	for deadline := time.Now().Add(30 * time.Second); s[ledger.Replaying] > 0 && time.Now().Before(deadline); s = byState(ledgerOf(t, f.s)) {
		time.Sleep(500 * time.Millisecond)
	}
	if s[ledger.FailedAgain] < 9 || s[ledger.FailedAgain] > 20 || s[ledger.Open] != 30-s[ledger.FailedAgain] || s[ledger.Replaying] != 0 {
		t.Fatalf("after the stop: %v; want 4 to 15 more failed-again, the rest open", s)
	}
	if n := len(readCommitted(t, f.s.replayTopic(), f.s.partitions)); n != s[ledger.FailedAgain] {
		t.Errorf("%d records published to the replay topic, %d failed again: the stop must publish nothing more", n, s[ledger.FailedAgain])
	}
}

// TestQuarantineMetricsAndDiscard: for a prepared quarantine (records
// 48 h old, 720 h retention) /metrics shows depth and oldest age by code and
// the retention headroom; discard needs a reason, records who and why, and
// the gauges follow.
func TestQuarantineMetricsAndDiscard(t *testing.T) {
	start := time.Now()
	f := newQuarantineFixture(t, 3, 2, 0, 48*time.Hour)
	addr := freeAddr(t)
	r := startRelay(t, "metrics", f.s.env(uniq(t, "txn-m"), "RELAY_HTTP_ADDR", addr))
	defer r.stop()
	metric := func(name, label string) (float64, bool) { return scrapeMetric(addr, name, label) }
	waitMetric := func(name, label string, want float64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if v, ok := metric(name, label); ok && v == want {
				return
			}
			if time.Now().After(deadline) {
				v, _ := metric(name, label)
				t.Fatalf("%s{%s} = %v, want %v", name, label, v, want)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	waitMetric("relay_quarantine_unresolved", `code="SCHEMA_UNSUPPORTED"`, 3)
	waitMetric("relay_quarantine_unresolved", `code="WIRE_FORMAT_INVALID"`, 2)
	oldest, _ := metric("relay_quarantine_oldest_age_seconds", `code="SCHEMA_UNSUPPORTED"`)
	if limit := time.Since(start).Seconds() + 1; oldest < 0 || oldest > limit {
		t.Errorf("oldest age %v s; the records were quarantined within the last %v s", oldest, limit)
	}
	headroom, _ := metric("relay_quarantine_retention_headroom_seconds", `topic="`+f.s.quarantine+`"`)
	want := (720*time.Hour - 48*time.Hour).Seconds()
	if headroom > want+60 || headroom < want-time.Since(start).Seconds()-60 {
		t.Errorf("retention headroom %v s, want about %v s (720 h retention, records 48 h old)", headroom, want)
	}

	id := f.v1[0]
	if res := f.s.cli(t, nil, "quarantine", "discard", id); res.code != 2 || !strings.Contains(res.stderr, "--reason is required") {
		t.Fatalf("discard without a reason: exit %d, want 2", res.code)
	}
	if e := ledgerOf(t, f.s)[id]; e.State != ledger.Open {
		t.Fatalf("a refused discard changed the ledger: %s", e.State)
	}
	reason := "duplicate order, refunded by hand"
	if res := f.s.cli(t, []string{"RELAY_ACTOR", "alice"}, "quarantine", "discard", id, "--reason", reason); res.code != 0 {
		t.Fatalf("discard: exit %d", res.code)
	}
	e := ledgerOf(t, f.s)[id]
	last := e.History[len(e.History)-1]
	if e.State != ledger.Discarded || last.Actor != "alice" || last.Reason != reason || time.Since(last.At) > time.Minute {
		t.Fatalf("ledger after discard: %s %+v", e.State, last)
	}
	if res := f.s.cli(t, nil, "quarantine", "discard", id, "--reason", "again"); res.code != 2 || !strings.Contains(res.stderr, "already discarded") {
		t.Errorf("a second discard: exit %d", res.code)
	}
	waitMetric("relay_quarantine_unresolved", `code="SCHEMA_UNSUPPORTED"`, 2)

	res := f.s.cli(t, nil, "quarantine", "list", "--json")
	if n := strings.Count(res.stdout, "\n"); res.code != 0 || n != 4 {
		t.Errorf("list: exit %d, %d unresolved, want 4", res.code, n)
	}
	res = f.s.cli(t, nil, "quarantine", "list", "--code", "WIRE_FORMAT_INVALID", "--min-age", "0s", "--partition", "0", "--state", "all")
	for _, line := range strings.Split(strings.TrimSpace(res.stdout), "\n")[1:] {
		if !strings.Contains(line, "WIRE_FORMAT_INVALID") || !strings.Contains(line, "/0/") {
			t.Errorf("list filtered by code and partition 0: %q", line)
		}
	}
	res = f.s.cli(t, nil, "quarantine", "stats", "--json")
	var stats struct {
		ByState map[string]int `json:"byState"`
	}
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &stats) != nil || stats.ByState["open"] != 4 || stats.ByState["discarded"] != 1 {
		t.Errorf("stats: exit %d, %+v", res.code, stats)
	}
	if res := f.s.cli(t, nil, "quarantine", "show", id); res.code != 0 || !strings.Contains(res.stdout, `"state": "discarded"`) ||
		!strings.Contains(res.stdout, "alice") {
		t.Errorf("show after discard: exit %d", res.code)
	}
}

// TestReplaySurvivesKills: a replay whose command is SIGKILLed mid-way,
// and whose relay is SIGKILLed while it consumes the replay topic, still
// ends with every selected record in the output exactly once and resolved
// in the ledger, once the command is run again.
func TestReplaySurvivesKills(t *testing.T) {
	const n = 200
	f := newQuarantineFixture(t, n, 0, 0, 0)
	r := f.startFixed(t)
	args := []string{"replay", "--code", "SCHEMA_UNSUPPORTED", "--reason", "fix", "--rate", "20", "--progress", "lines", "--wait", "2m"}
	cmd := exec.Command(relayBin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "RELAY_KAFKA_BOOTSTRAP_SERVERS=" + bootstrap}
	for k, v := range f.s.env("", f.fixed()...) {
		if k != "RELAY_TRANSACTIONAL_ID" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	progress, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// relay is killed once it has resolved some replayed records, while
	// more arrive; the command a second later, while it publishes. The
	// command's progress lines say when.
	resolved := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(progress)
		once := false
		for sc.Scan() {
			if m := progressLine.FindStringSubmatch(sc.Text()); m != nil && !once {
				if n, _ := strconv.Atoi(m[3]); n >= 10 {
					once = true
					close(resolved)
				}
			}
		}
	}()
	deadline := time.Now().Add(time.Minute)
	select {
	case <-resolved:
	case <-time.After(time.Until(deadline)):
		t.Fatal("relay resolved no replayed record")
	}
	r.signal(syscall.SIGKILL)
	r.wait(10 * time.Second)
	time.Sleep(2 * time.Second)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	r2 := startRelay(t, "fixed-2", f.s.env(uniq(t, "txn-c"), f.fixed()...))
	defer r2.stop()
	res := f.s.cli(t, f.fixed(), args...)
	// It sees what the first one published, committed before it was
	// killed (resolved by now, or still in flight), even behind the killed
	// relay's open transaction, so it publishes none of it again.
	num := func(pattern string) int {
		m := regexp.MustCompile(pattern).FindStringSubmatch(res.stdout)
		if m == nil {
			return -1
		}
		v, _ := strconv.Atoi(m[1])
		return v
	}
	selected, dups, settled, inFlight := num(`selected (\d+);`), num(`duplicate (\d+);`), num(`already resolved (\d+)`), max(num(`being replayed (\d+)`), 0)
	if res.code != 0 || dups != 0 || selected < 1 || settled < 10 || selected+settled+inFlight != n {
		t.Fatalf("the second replay: exit %d, selected %d, duplicates %d, skipped as resolved %d and in flight %d; want 0, no duplicate, and the %d records split between them",
			res.code, selected, dups, settled, inFlight, n)
	}
	deadline = time.Now().Add(2 * time.Minute)
	for {
		l := ledgerOf(t, f.s)
		if byState(l)[ledger.Resolved] == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every replayed record resolved: %v", byState(l))
		}
		time.Sleep(time.Second)
	}
	outs := outputsByID(t, f.s)
	for _, id := range f.v1 {
		if len(outs[id]) != 1 {
			t.Errorf("%s: %d outputs, want exactly 1", id, len(outs[id]))
		}
	}
	if len(outs) != n+1 { // and the one valid record of the fixture
		t.Errorf("%d distinct outputs, want %d", len(outs), n+1)
	}
	// A second oracle: every replayed failure resolved once, by its
	// output; nothing lost or output twice.
	rep, res := auditOf(t, f.s)
	var audited int64
	for _, pr := range rep.Partitions {
		audited += pr.Quarantined[ledger.Resolved]
	}
	if res.code != 0 || !rep.Clean || audited != int64(n) {
		t.Errorf("relay audit: exit %d, clean %v, %d resolved (want %d); findings %v", res.code, rep.Clean, audited, n, rep.Findings)
	}
}

// TestDiscardDuringReplayIsRespected: a failure discarded while a replay
// that selected it is still publishing is left alone by the replay: not
// published, not output, still discarded.
func TestDiscardDuringReplayIsRespected(t *testing.T) {
	f := newQuarantineFixture(t, 10, 0, 0, 0)
	r := f.startFixed(t)
	defer r.stop()
	last := f.v1[len(f.v1)-1] // published last: source order
	done := make(chan cliResult, 1)
	go func() {
		done <- f.s.cli(t, f.fixed(), "replay", "--code", "SCHEMA_UNSUPPORTED", "--reason", "fix", "--rate", "2", "--progress", "none")
	}()
	time.Sleep(3 * time.Second)
	if res := f.s.cli(t, []string{"RELAY_ACTOR", "bob"}, "quarantine", "discard", last, "--reason", "customer cancelled"); res.code != 0 {
		t.Fatalf("discard during the replay: exit %d", res.code)
	}
	res := <-done
	if res.code != 0 || !strings.Contains(res.stdout, "published 9;") || !strings.Contains(res.stdout, "changed by someone else during the replay: discarded 1") {
		t.Fatalf("replay: exit %d, want 9 published and the discarded one left alone", res.code)
	}
	if e := ledgerOf(t, f.s)[last]; e.State != ledger.Discarded || e.ReplayCount != 0 {
		t.Fatalf("%s: %s at replay count %d, want discarded and never replayed", last, e.State, e.ReplayCount)
	}
	if n := len(outputsByID(t, f.s)[last]); n != 0 {
		t.Fatalf("%s was output %d times after its discard", last, n)
	}
}
