package audit

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/envelope"
	"relay/internal/ledger"
	"relay/internal/pipeline"
)

// testScan is a scan of source orders' partition 0, offsets [0, 10), with
// the source records of offsets 0 to 9 read (key k, value v<offset>).
func testScan(t *testing.T, o *Options) *scan {
	t.Helper()
	if o == nil {
		o = &Options{}
	}
	o.Now = time.Now()
	o.StuckAfter = time.Hour
	o.MaxFindings = 100
	pt := &part{p: 0, lo: 0, hi: 10, committed: 10, slots: make([]slot, 10), fps: make([]uint16, 10)}
	s := &scan{cfg: &config.Config{}, o: o, source: "orders", parts: map[int32]*part{0: pt}, batch: map[int32]*part{0: pt},
		rep: newReport(o, &config.Config{}), committed: map[string]map[int32]int64{"orders.retry.5s": {0: 3}}}
	for off := range int64(10) {
		s.sourceRecord(msg("orders", off, []byte("k"), value(off)))
	}
	return s
}

func value(off int64) []byte { return []byte{'v', byte('0' + off)} }

func msg(topic string, off int64, key, val []byte, hs ...kafka.Header) *kafka.Message {
	return &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0, Offset: kafka.Offset(off)}, Key: key, Value: val, Headers: hs}
}

func h(k, v string) kafka.Header { return kafka.Header{Key: k, Value: []byte(v)} }

func printOf(off int64) kafka.Header {
	return h(envelope.SourceFingerprint, envelope.Fingerprint([]byte("k"), value(off)))
}

// A record is evidence for the source offset it names only when its
// fingerprint is that record's; without one it is misrouted unless records
// from before fingerprints are allowed.
func TestOutputsProveTheirSource(t *testing.T) {
	s := testScan(t, nil)
	s.outputRecord(msg("orders.valid", 0, nil, nil, h(envelope.MessageID, "orders/0/1"), printOf(1)))
	s.outputRecord(msg("orders.valid", 1, nil, nil, h(envelope.MessageID, "orders/0/2"), printOf(3)))
	s.outputRecord(msg("orders.valid", 2, nil, nil, h(envelope.MessageID, "orders/0/4")))
	sl := s.batch[0].slots
	if sl[1].count(outShift) != 1 || sl[2].count(outShift) != 0 || sl[4].count(outShift) != 0 || s.rep.Misrouted != 2 {
		t.Fatalf("outputs %d %d %d, misrouted %d; want only the one with its own fingerprint credited",
			sl[1].count(outShift), sl[2].count(outShift), sl[4].count(outShift), s.rep.Misrouted)
	}
	s = testScan(t, &Options{AllowUnprinted: true})
	s.outputRecord(msg("orders.valid", 2, nil, nil, h(envelope.MessageID, "orders/0/4")))
	if s.batch[0].slots[4].count(outShift) != 1 || s.unprinted != 1 || s.rep.Misrouted != 0 {
		t.Fatal("--allow-unfingerprinted: a record without a fingerprint is credited and counted")
	}
}

// An envelope's relay.failure.id must be the coordinates it names; a copy
// in a tier is in flight at or above the group's committed offset of its
// tier partition, and marks its source offset retried either way.
func TestEnvelopesAndTheInFlightRule(t *testing.T) {
	s := testScan(t, nil)
	env := func(off int64, id string) []kafka.Header {
		return []kafka.Header{h(envelope.FailureID, id), h(envelope.SourceTopic, "orders"), h(envelope.SourcePartition, "0"),
			h(envelope.SourceOffset, string(rune('0'+off))), printOf(off), h(envelope.NotBefore, time.Now().UTC().Format(envelope.TimeFormat))}
	}
	tier := s.envelopeRecord(derived{"orders.retry.5s", roleTier})
	tier(msg("orders.retry.5s", 2, nil, nil, env(5, "orders/0/5")...)) // below the committed 3: consumed
	tier(msg("orders.retry.5s", 3, nil, nil, env(6, "orders/0/6")...)) // at it: in flight
	quarantine := s.envelopeRecord(derived{"orders.quarantine", roleQuarantine})
	quarantine(msg("orders.quarantine", 0, nil, nil, env(7, "orders.replay/0/7")...))
	sl := s.batch[0].slots
	switch {
	case sl[5]&tierFlight != 0 || sl[5]&retried == 0:
		t.Error("a consumed tier copy: not in flight, but retried")
	case sl[6]&tierFlight == 0:
		t.Error("a tier copy at the committed offset is in flight")
	case sl[7].count(quarShift) != 0 || s.rep.Misrouted != 1:
		t.Errorf("a quarantine record whose failure id is not its source: credited %d, misrouted %d", sl[7].count(quarShift), s.rep.Misrouted)
	}
}

// The boundary of a trimmed end-state partition is the first record left
// that relay wrote on first consumption: records after a retry name
// earlier offsets and are passed over; none left at all, and the whole
// window may have lost its end states there.
func TestTrimBoundary(t *testing.T) {
	s := testScan(t, nil)
	pt := s.batch[0]
	pt.slots[2] |= retried
	b, _ := s.boundary(pt, &trim{logStart: 40, firsts: []int64{2, 6, 7}})
	if b != 6 {
		t.Errorf("boundary %d, want 6 (2 went through a tier)", b)
	}
	if b, _ := s.boundary(pt, &trim{logStart: 40}); b != pt.hi {
		t.Errorf("nothing left: boundary %d, want the window's end %d", b, pt.hi)
	}
	if b, _ := s.boundary(pt, &trim{logStart: 40, firsts: []int64{25}}); b != pt.hi {
		t.Errorf("first record left past the window: boundary %d, want %d", b, pt.hi)
	}
	s.trims = map[string]map[int32]*trim{"orders.valid": {0: {logStart: 40, firsts: []int64{2, 6}}}}
	s.bound()
	if pt.trimBelow != 6 || len(s.rep.Trimmed) != 1 {
		t.Errorf("trimBelow %d, notes %v", pt.trimBelow, s.rep.Trimmed)
	}
}

// An output in a partition other than its source's, or without
// relay.message.id, is misrouted, never credited.
func TestStrayOutputsAreMisrouted(t *testing.T) {
	s := testScan(t, nil)
	other := msg("orders.valid", 0, nil, nil, h(envelope.MessageID, "orders/0/1"), printOf(1))
	other.TopicPartition.Partition = 1
	s.outputRecord(other)
	s.outputRecord(msg("orders.valid", 1, nil, nil))
	if s.batch[0].slots[1].count(outShift) != 0 || s.rep.Misrouted != 2 || len(s.rep.Findings) != 2 {
		t.Fatalf("credited %d, misrouted %d, findings %v; want both misrouted", s.batch[0].slots[1].count(outShift), s.rep.Misrouted, s.rep.Findings)
	}
}

// Offsets at and above the group's committed offset are not consumed yet:
// in flight, never lost.
func TestTheCommittedOffsetIsNotConsumed(t *testing.T) {
	s := testScan(t, nil)
	s.batch[0].committed = 5
	for off := range int64(5) {
		s.outputRecord(msg("orders.valid", off, nil, nil, h(envelope.MessageID, envelope.ID("orders", 0, off)), printOf(off)))
	}
	s.judge()
	pr := s.rep.Partitions[0]
	if pr.Processed != 5 || pr.Behind != 5 || pr.Lost != 0 {
		t.Fatalf("%+v: want 5 processed, 5 not consumed, none lost", pr)
	}
}

// The stuck bound: the retry budget plus the longest tier delay; without
// a budget, every attempt at the longest delay; never under a minute.
func TestDefaultStuckAfter(t *testing.T) {
	tiers := []config.Tier{{Delay: 30 * time.Second}, {Delay: 5 * time.Minute}}
	for _, c := range []struct {
		cfg  config.Config
		want time.Duration
	}{
		{config.Config{RetryTiers: tiers, RetryMaxElapsed: time.Hour, RetryMaxAttempts: 5}, 65 * time.Minute},
		{config.Config{RetryTiers: tiers, RetryMaxAttempts: 5}, 30 * time.Minute},
		{config.Config{RetryMaxAttempts: 3, RetryMaxElapsed: time.Second}, time.Minute},
	} {
		if got := DefaultStuckAfter(&c.cfg); got != c.want {
			t.Errorf("%+v: %s, want %s", c.cfg.RetryTiers, got, c.want)
		}
	}
}

// With two trimmed end-state topics, a source offset below either
// boundary may have lost its end state: the higher boundary holds. A
// replay's output (its failure resolved in the ledger) is no boundary.
func TestTheHighestBoundaryHolds(t *testing.T) {
	s := testScan(t, nil)
	for _, e := range []*ledger.Event{
		{ID: "orders/0/2", State: ledger.Open, Source: ledger.Source{Topic: "orders", Offset: 2}},
		{ID: "orders/0/2", State: ledger.Resolved, ReplayCount: 1, Source: ledger.Source{Topic: "orders", Offset: 2}},
	} {
		s.ledgerRecord(msg("_relay.relay.state", 0, []byte(e.Key()), e.Value()))
	}
	s.foldLedger()
	s.trims = map[string]map[int32]*trim{
		"orders.quarantine": {0: {logStart: 9, firsts: []int64{8}}},
		"orders.valid":      {0: {logStart: 4, firsts: []int64{2, 3}}},
	}
	s.bound()
	if got := s.batch[0].trimBelow; got != 8 {
		t.Fatalf("trimBelow %d, want 8 (the quarantine's; the output's is 3, past the replay's output at 2)", got)
	}
	if b, _ := s.boundary(s.batch[0], s.trims["orders.valid"][0]); b != 3 {
		t.Fatalf("the output's boundary %d, want 3", b)
	}
}

type fakeConfigs struct {
	res []kafka.ConfigResourceResult
	err error
}

func (f fakeConfigs) DescribeConfigs(context.Context, []kafka.ConfigResource, ...kafka.DescribeConfigsAdminOption) ([]kafka.ConfigResourceResult, error) {
	return f.res, f.err
}

// A configuration the audit cannot read — the call failing, a topic
// refused, a topic without cleanup.policy — stops it; it is never taken
// for a deletion, nor for none.
func TestUnreadableConfigurationStopsTheAudit(t *testing.T) {
	policy := func(name, v string) kafka.ConfigResourceResult {
		r := kafka.ConfigResourceResult{Type: kafka.ResourceTopic, Name: name, Config: map[string]kafka.ConfigEntryResult{}}
		if v != "" {
			r.Config["cleanup.policy"] = kafka.ConfigEntryResult{Name: "cleanup.policy", Value: v}
		}
		return r
	}
	all := func(v string) []kafka.ConfigResourceResult {
		return []kafka.ConfigResourceResult{policy("orders", "delete"), policy("orders.valid", v), policy("orders.rejected", "delete"), policy("orders.quarantine", "delete")}
	}
	refused := all("delete")
	refused[1].Error = kafka.NewError(kafka.ErrTopicAuthorizationFailed, "Topic authorization failed", false)
	for name, f := range map[string]fakeConfigs{
		"the call failed":      {err: kafka.NewError(kafka.ErrTimedOut, "timed out", false)},
		"a topic refused":      {res: refused},
		"no cleanup.policy":    {res: all("")},
		"a topic not in reply": {res: all("delete")[:3]},
	} {
		s := testScan(t, nil)
		s.topics = []derived{{"orders.valid", roleOutput}, {"orders.rejected", roleRejected}, {"orders.quarantine", roleQuarantine}}
		if err := s.retention(context.Background(), f); err == nil || s.sourceCompacted {
			t.Errorf("%s: error %v, source compacted %v; want an error, nothing taken for compacted", name, err, s.sourceCompacted)
		}
	}
	// A compacted end-state topic may have lost any end state: every
	// loss would read unverifiable, and the audit clean. No verdict.
	for _, v := range []string{"compact", "compact,delete"} {
		s := testScan(t, nil)
		s.topics = []derived{{"orders.valid", roleOutput}, {"orders.rejected", roleRejected}, {"orders.quarantine", roleQuarantine}}
		if err := s.retention(context.Background(), fakeConfigs{res: all(v)}); err == nil || !strings.Contains(err.Error(), "orders.valid is compacted") {
			t.Errorf("an output with cleanup.policy %s: %v, want no verdict naming it", v, err)
		}
	}
}

// A copy waiting behind its key's head is a fresh copy at each hop, due
// soon: it is stuck when it has waited behind the same head longer than
// twice the bound (relay.key.head with relay.first.failed.at), not before,
// and never for a copy that waits for its own retry.
func TestFollowersOfAHeadThatNeverSettles(t *testing.T) {
	if keyBlocked != pipeline.CodeKeyBlocked {
		t.Fatalf("the audit's KEY_BLOCKED %q is not the pipeline's %q", keyBlocked, pipeline.CodeKeyBlocked)
	}
	s := testScan(t, nil)
	now := time.Now()
	follower := func(off int64, code string, since time.Time) []kafka.Header {
		return []kafka.Header{h(envelope.FailureID, envelope.ID("orders", 0, off)), h(envelope.SourceTopic, "orders"), h(envelope.SourcePartition, "0"),
			h(envelope.SourceOffset, string(rune('0'+off))), printOf(off), h(envelope.ErrorCode, code), h(envelope.KeyHead, "orders/0/1"),
			h(envelope.FirstFailedAt, since.UTC().Format(envelope.TimeFormat)), h(envelope.NotBefore, now.UTC().Format(envelope.TimeFormat))}
	}
	// The configuration's bound (a head's life): a minute, the default's
	// floor; --stuck-after (testScan's) an hour.
	tier := s.envelopeRecord(derived{"orders.retry.5s", roleTier})
	tier(msg("orders.retry.5s", 3, nil, nil, follower(5, keyBlocked, now.Add(-60*time.Minute))...))  // within a head's life plus the bound
	tier(msg("orders.retry.5s", 4, nil, nil, follower(6, keyBlocked, now.Add(-150*time.Minute))...)) // past it
	tier(msg("orders.retry.5s", 5, nil, nil, follower(7, "HOOK_UNAVAILABLE", now.Add(-150*time.Minute))...))
	// Offset 6 copied again since the cut: two copies in flight, one
	// record stuck (seen in an integration run).
	tier(msg("orders.retry.5s", 6, nil, nil, follower(6, keyBlocked, now.Add(-150*time.Minute))...))
	if s.rep.stuck[0] != 1 || len(s.rep.Findings) != 1 || s.rep.Findings[0].Source.Offset != 6 || s.rep.Totals[KindStuck] != 1 {
		t.Fatalf("stuck %d, findings %v; want offset 6 alone stuck, once", s.rep.stuck[0], s.rep.Findings)
	}
	// A short --stuck-after does not make a follower of a head that is
	// still within its own budget stuck: the head's life is the
	// configuration's (an hour of budget here).
	s = testScan(t, nil)
	s.cfg.RetryMaxElapsed = time.Hour
	s.o.StuckAfter = 15 * time.Minute
	tier = s.envelopeRecord(derived{"orders.retry.5s", roleTier})
	tier(msg("orders.retry.5s", 3, nil, nil, follower(5, keyBlocked, now.Add(-40*time.Minute))...))
	if s.rep.stuck[0] != 0 {
		t.Fatalf("a follower 40 min behind a head with an hour of budget, --stuck-after 15m: %v", s.rep.Findings)
	}
	// A follower whose copy is itself overdue is reported as overdue (is
	// relay consuming?), not blamed on its head; a forged head is quoted.
	s = testScan(t, nil)
	late := follower(5, keyBlocked, now.Add(-5*time.Hour))
	late[len(late)-1] = h(envelope.NotBefore, now.Add(-5*time.Hour).UTC().Format(envelope.TimeFormat))
	s.envelopeRecord(derived{"orders.retry.5s", roleTier})(msg("orders.retry.5s", 3, nil, nil, late...))
	if len(s.rep.Findings) != 1 || !strings.Contains(s.rep.Findings[0].Detail, "is relay consuming") {
		t.Fatalf("an overdue follower: %v", s.rep.Findings)
	}
	s = testScan(t, nil)
	forged := follower(6, keyBlocked, now.Add(-150*time.Minute))
	forged[6] = h(envelope.KeyHead, "orders/0/1\nFAKE FINDING")
	s.envelopeRecord(derived{"orders.retry.5s", roleTier})(msg("orders.retry.5s", 3, nil, nil, forged...))
	if len(s.rep.Findings) != 1 || strings.Contains(s.rep.Findings[0].Detail, "\nFAKE") {
		t.Fatalf("a forged head: %v", s.rep.Findings)
	}
}

// A compacted source: an offset without a committed record, named by
// relay's records or not, is unverifiable (compaction may have removed
// it); the same offsets of a source under delete are phantom evidence (a
// finding) or nothing at all.
func TestCompactedSourceGaps(t *testing.T) {
	for _, c := range []struct {
		source, output        string
		unverifiable, phantom int64
	}{{"compact", "delete", 2, 0}, {"delete", "delete", 0, 1}} {
		s := testScan(t, nil)
		pt := s.batch[0]
		pt.hi, pt.committed = 12, 12
		pt.slots, pt.fps = append(pt.slots, 0, 0), append(pt.fps, 0, 0) // offsets 10 and 11: no source record
		s.topics = []derived{{"orders.valid", roleOutput}, {"orders.rejected", roleRejected}, {"orders.quarantine", roleQuarantine}}
		res := []kafka.ConfigResourceResult{}
		for name, v := range map[string]string{"orders": c.source, "orders.valid": c.output, "orders.rejected": "delete", "orders.quarantine": "delete"} {
			res = append(res, kafka.ConfigResourceResult{Type: kafka.ResourceTopic, Name: name,
				Config: map[string]kafka.ConfigEntryResult{"cleanup.policy": {Name: "cleanup.policy", Value: v}}})
		}
		if err := s.retention(context.Background(), fakeConfigs{res: res}); err != nil {
			t.Fatal(err)
		}
		for off := range int64(10) {
			s.outputRecord(msg("orders.valid", off, nil, nil, h(envelope.MessageID, envelope.ID("orders", 0, off)), printOf(off)))
		}
		s.outputRecord(msg("orders.valid", 10, nil, nil, h(envelope.MessageID, "orders/0/11"), printOf(3))) // names a gap
		s.judge()
		pr := s.rep.Partitions[0]
		if pr.Unverifiable != c.unverifiable || s.rep.Misrouted != c.phantom {
			t.Errorf("source %s, output %s: unverifiable %d, misrouted %d; want %d and %d", c.source, c.output, pr.Unverifiable, s.rep.Misrouted, c.unverifiable, c.phantom)
		}
	}
}

// recordingMarks answers every watermark query and remembers the order of
// the topics asked.
type recordingMarks struct{ asked []string }

func (r *recordingMarks) QueryWatermarkOffsets(topic string, _ int32, _ int) (int64, int64, error) {
	if len(r.asked) == 0 || r.asked[len(r.asked)-1] != topic {
		r.asked = append(r.asked, topic)
	}
	return 0, 5, nil
}

// The ledger's end is fixed before any other topic's: relay writes a
// ledger change in the transaction with the records it speaks of, so
// whatever the ledger's snapshot holds, the later snapshots hold too.
// Taken the other way round, a change written between the two would name
// a record the audit did not read: lost, falsely.
func TestTheLedgerIsSnapshottedFirst(t *testing.T) {
	s := testScan(t, nil)
	s.topics = []derived{{"orders.valid", roleOutput}, {"orders.quarantine", roleQuarantine}, {"orders.replay", roleReplay}, {"_relay.relay.state", roleLedger}}
	s.md = &kafka.Metadata{Topics: map[string]kafka.TopicMetadata{}}
	for _, d := range s.topics {
		s.md.Topics[d.topic] = kafka.TopicMetadata{Partitions: []kafka.PartitionMetadata{{ID: 0}}}
	}
	w := &recordingMarks{}
	if err := s.readEnds(w); err != nil {
		t.Fatal(err)
	}
	if want := []string{"_relay.relay.state", "orders.valid", "orders.quarantine", "orders.replay"}; !slices.Equal(w.asked, want) {
		t.Fatalf("watermarks asked in the order %v; want %v", w.asked, want)
	}
	if s.ends["orders.replay"][0] != 5 {
		t.Fatalf("ends %v", s.ends)
	}
}

// Mutation run finding: retention's marking of a trimmed end-state
// partition was reached by no unit test (they set s.trims by hand). A
// partition whose log starts past 0 is trimmed at its log start; one that
// starts at 0 is not.
func TestRetentionMarksTrimmedPartitions(t *testing.T) {
	conf := func(name string) kafka.ConfigResourceResult {
		return kafka.ConfigResourceResult{Type: kafka.ResourceTopic, Name: name,
			Config: map[string]kafka.ConfigEntryResult{"cleanup.policy": {Name: "cleanup.policy", Value: "delete"}}}
	}
	s := testScan(t, nil)
	s.topics = []derived{{"orders.valid", roleOutput}, {"orders.rejected", roleRejected}, {"orders.quarantine", roleQuarantine}}
	s.lows = map[string]map[int32]int64{"orders.valid": {0: 5, 1: 0}, "orders.quarantine": {0: 0}}
	f := fakeConfigs{res: []kafka.ConfigResourceResult{conf("orders"), conf("orders.valid"), conf("orders.rejected"), conf("orders.quarantine")}}
	if err := s.retention(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	if tr := s.trims["orders.valid"][0]; tr == nil || tr.logStart != 5 {
		t.Fatalf("orders.valid[0] starts at 5: trim %+v, want one at 5", tr)
	}
	if s.trims["orders.valid"][1] != nil || len(s.trims["orders.quarantine"]) != 0 {
		t.Fatalf("partitions starting at 0 marked trimmed: %+v", s.trims)
	}
}
