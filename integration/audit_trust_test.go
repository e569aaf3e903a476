package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/audit"
	"relay/internal/envelope"
	"relay/internal/topics"
)

// The audit as a least-privilege CronJob runs it: as its own principal,
// with exactly the ACLs `relay topics acls audit` prints. Records of one
// output partition deleted by hand (DeleteRecords, as retention would)
// make exactly the source records whose outputs went unverifiable, and
// every other record is still judged: a loss beside them, and one in the
// other partition, are lost. Without DescribeConfigs on the output the
// audit cannot tell a deleted record from a lost one: it exits 3, no
// verdict, never clean.
func TestAuditLeastPrivilegeJudgesDeletionPerPartition(t *testing.T) {
	const partitions = 2
	s := newScenario(t, partitions)
	s.src.produce(t, 240)
	r := startRelay(t, "relay", s.env(uniq(t, "txn")))
	assertExactlyOnce(t, s.src, s.output, s.group, partitions)
	r.stop()

	user, password := scramUser(t)
	principal := "User:" + user
	env := merge(s.env(""), scramEnv(t, user, password))
	acls := requiredACLs(t, env, "audit")
	grant(t, principal, acls...)
	as := flatten(scramEnv(t, user, password))

	if rep, res := auditAs(t, s, as); res.code != 0 || !rep.Clean {
		t.Fatalf("least privilege, nothing done: exit %d, %v\n%s", res.code, rep, res.stderr)
	}

	// The first 40 outputs of partition 0 deleted: their source records
	// are the unverifiable ones.
	var outs0 []*kafka.Message
	for _, m := range readCommitted(t, s.output, partitions) {
		if m.TopicPartition.Partition == 0 {
			outs0 = append(outs0, m)
		}
	}
	slices.SortFunc(outs0, func(a, b *kafka.Message) int { return int(a.TopicPartition.Offset - b.TopicPartition.Offset) })
	const gone = 40
	if len(outs0) <= gone {
		t.Fatalf("partition 0 has %d outputs; the test needs more than %d", len(outs0), gone)
	}
	deleted := map[string]bool{}
	for _, m := range outs0[:gone] {
		id, _ := envelope.Lookup(toEnvelopeHeaders(m.Headers), envelope.MessageID)
		deleted[string(id)] = true
	}
	deleteRecords(t, s.output, 0, int64(outs0[gone].TopicPartition.Offset))

	// A loss in each partition, beside the deletion.
	lost := map[string]bool{}
	for p := range int32(partitions) {
		at := produceRaw(t, s.src.topic, p, []byte("k"), []byte("never seen by relay"), nil)
		commitPast(t, s.group, s.src.topic, p, at+1)
		lost[envelope.ID(s.src.topic, p, at)] = true
	}

	rep, res := auditAs(t, s, as)
	if res.code != 1 || rep.Clean {
		t.Fatalf("deletion and losses: exit %d, clean %v; want 1\n%s", res.code, rep.Clean, res.stderr)
	}
	p0, p1 := rep.Partitions[0], rep.Partitions[1]
	if p0.Unverifiable != gone || p0.Lost != 1 || p1.Unverifiable != 0 || p1.Lost != 1 {
		t.Fatalf("partition 0 %+v, partition 1 %+v: want %d unverifiable and 1 lost in 0, 1 lost in 1", p0, p1, gone)
	}
	for _, f := range rep.Findings {
		switch {
		case f.Kind == audit.KindUnverifiable && !deleted[f.Source.String()]:
			t.Errorf("unverifiable, but its output was not deleted: %s", f)
		case f.Kind == audit.KindLost && !lost[f.Source.String()]:
			t.Errorf("lost, but not one of the injected losses: %s", f)
		}
	}

	// DescribeConfigs on the output revoked: no verdict.
	i := slices.IndexFunc(acls, func(a topics.ACL) bool { return a.Operation == "DescribeConfigs" && a.Name == s.output })
	if i < 0 {
		t.Fatalf("relay topics acls audit lists no DescribeConfigs on %s: %v", s.output, acls)
	}
	revoke(t, principal, acls[i])
	metrics := t.TempDir() + "/relay_audit.prom"
	res = s.cli(t, as, "audit", "--source", s.src.topic, "-o", "json", "--metrics-file", metrics)
	if res.code != 3 || !strings.Contains(res.stderr, "DescribeConfigs") || strings.Contains(res.stdout, `"clean": true`) {
		t.Fatalf("without DescribeConfigs on the output: exit %d; want 3 naming DescribeConfigs, and no clean report:\n%s%s", res.code, res.stdout, res.stderr)
	}
	if text := readFile(t, metrics); !strings.Contains(text, `relay_audit_outcome{outcome="incomplete",source="`+s.src.topic+`"} 1`) ||
		!strings.Contains(text, `relay_audit_clean{source="`+s.src.topic+`"} 0`) {
		t.Fatalf("the metrics of an incomplete audit:\n%s", text)
	}
}

// A ledger entry alone is not an end state. A failure the ledger says is
// replaying, whose replay copy was consumed (the group's offset of the
// replay partition committed past it) with nothing written after it, is
// lost; so are open failures whose quarantine records went with a
// quarantine topic deleted and created again.
func TestAuditLedgerWithoutItsRecords(t *testing.T) {
	f := newQuarantineFixture(t, 4, 0, 0, 0)
	s := f.s
	if rep, res := auditOf(t, s); res.code != 0 || !rep.Clean {
		t.Fatalf("quarantined, nothing done: exit %d, findings %v", res.code, rep.Findings)
	}

	// A replay published while relay is away: the copy waits, in flight.
	victim := f.v1[0]
	if res := s.cli(t, f.fixed(), "replay", "--ids", victim, "--reason", "audit test", "--wait", "1s", "--progress", "none"); res.code != 4 {
		t.Fatalf("replay with relay away: exit %d, want 4 (published, outcome unknown)\n%s", res.code, res.stderr)
	}
	rep, res := auditOf(t, s)
	if res.code != 0 || rep.Partitions[0].InReplay+rep.Partitions[1].InReplay != 1 {
		t.Fatalf("a replay copy waiting: exit %d, %+v %+v; want one replaying", res.code, rep.Partitions[0], rep.Partitions[1])
	}
	// Its offset committed past, as if consumed with nothing after it.
	copies := readCommitted(t, s.replayTopic(), s.partitions)
	if len(copies) != 1 {
		t.Fatalf("%d replay copies, want 1", len(copies))
	}
	c := copies[0].TopicPartition
	commitPast(t, s.group, s.replayTopic(), c.Partition, int64(c.Offset)+1)
	rep, res = auditOf(t, s)
	if res.code != 1 || !findingAt(rep, audit.KindLost, victim, "") || rep.Totals[audit.KindLost] != 1 {
		t.Fatalf("replaying, copy consumed, nothing after it: exit %d, findings %v; want %s lost", res.code, rep.Findings, victim)
	}

	// The quarantine topic deleted and created again.
	deleteTopics(t, s.quarantine)
	waitTopicGone(t, s.quarantine)
	applyTopics(t, s.partitions, s.env("unused"), s.quarantine)
	rep, res = auditOf(t, s)
	if res.code != 1 || rep.Totals[audit.KindLost] != 4 {
		t.Fatalf("quarantine re-created: exit %d, totals %v, findings %v; want the 4 quarantined lost", res.code, rep.Totals, rep.Findings)
	}
	for _, id := range f.v1 {
		if !findingAt(rep, audit.KindLost, id, "") {
			t.Errorf("%s not reported lost: %v", id, rep.Findings)
		}
	}
}

// auditAs runs relay audit with extra settings (name, value pairs) and
// reads its JSON report.
func auditAs(t *testing.T, s *scenario, extra []string, args ...string) (*audit.Report, cliResult) {
	t.Helper()
	res := s.cli(t, extra, append([]string{"audit", "--source", s.src.topic, "-o", "json", "--max-findings", "100"}, args...)...)
	var rep audit.Report
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("relay audit printed no JSON report (exit %d): %v\n%s", res.code, err, res.stderr)
	}
	return &rep, res
}

// flatten turns settings into name, value pairs.
func flatten(env map[string]string) []string {
	out := make([]string, 0, 2*len(env))
	for k, v := range env {
		out = append(out, k, v)
	}
	return out
}

// waitTopicGone waits until the broker no longer lists topic.
func waitTopicGone(t *testing.T, topic string) {
	t.Helper()
	a := admin(t)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		md, err := a.GetMetadata(&topic, false, 5000)
		if err == nil {
			if tm, ok := md.Topics[topic]; !ok || tm.Error.Code() == kafka.ErrUnknownTopicOrPart {
				return
			}
		}
	}
	t.Fatalf("topic %s still listed a minute after its deletion", topic)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path) //nolint:gosec // the test's own file
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A copy that waits in a tier long past its due time is stuck: the audit
// says so with its coordinates and age, and fails. A longer --stuck-after
// lets it wait.
func TestAuditReportsAStuckCopy(t *testing.T) {
	s := newScenario(t, 1)
	s.src.produce(t, 20)
	r := startRelay(t, "relay", s.env(uniq(t, "txn")))
	assertExactlyOnce(t, s.src, s.output, s.group, 1)
	r.stop()

	var src *kafka.Message // the record the copy stands for
	for _, m := range readCommitted(t, s.src.topic, 1) {
		if m.TopicPartition.Offset == 7 {
			src = m
		}
	}
	tier := s.tiers[0]
	due := time.Now().Add(-3 * time.Hour)
	at := produceRaw(t, tier, 0, src.Key, src.Value, []kafka.Header{
		{Key: envelope.SourceTopic, Value: []byte(s.src.topic)},
		{Key: envelope.SourcePartition, Value: []byte("0")},
		{Key: envelope.SourceOffset, Value: []byte("7")},
		{Key: envelope.SourceFingerprint, Value: []byte(envelope.Fingerprint(src.Key, src.Value))},
		{Key: envelope.NotBefore, Value: []byte(due.UTC().Format(envelope.TimeFormat))},
	})
	rep, res := auditOf(t, s)
	copyAt := fmt.Sprintf("%s/0/%d", tier, at)
	if res.code != 1 || rep.Totals[audit.KindStuck] != 1 || !findingAt(rep, audit.KindStuck, s.src.topic+"/0/7", copyAt) || rep.Partitions[0].Stuck != 1 {
		t.Fatalf("a tier copy 3 h overdue: exit %d, totals %v, findings %v; want it stuck at %s", res.code, rep.Totals, rep.Findings, copyAt)
	}
	if rep, res := auditOf(t, s, "--stuck-after", "4h"); res.code != 0 || !rep.Clean || rep.Partitions[0].InTier != 1 {
		t.Fatalf("--stuck-after 4h: exit %d, findings %v, %+v; want clean with one in a tier", res.code, rep.Findings, rep.Partitions[0])
	}

	// A replay copy published 3 h ago and never consumed is stuck too.
	var src9 *kafka.Message
	for _, m := range readCommitted(t, s.src.topic, 1) {
		if m.TopicPartition.Offset == 9 {
			src9 = m
		}
	}
	rat := produceRawAt(t, s.replayTopic(), 0, src9.Key, src9.Value, []kafka.Header{
		{Key: envelope.FailureID, Value: []byte(envelope.ID(s.src.topic, 0, 9))},
		{Key: envelope.SourceTopic, Value: []byte(s.src.topic)},
		{Key: envelope.SourcePartition, Value: []byte("0")},
		{Key: envelope.SourceOffset, Value: []byte("9")},
		{Key: envelope.SourceFingerprint, Value: []byte(envelope.Fingerprint(src9.Key, src9.Value))},
		{Key: envelope.ReplayID, Value: []byte("rp-test")},
		{Key: envelope.ReplayCount, Value: []byte("1")},
	}, due)
	rep, res = auditOf(t, s)
	if replayAt := fmt.Sprintf("%s/0/%d", s.replayTopic(), rat); res.code != 1 || !findingAt(rep, audit.KindStuck, s.src.topic+"/0/9", replayAt) {
		t.Fatalf("a replay copy 3 h old: exit %d, findings %v; want it stuck at %s", res.code, rep.Findings, replayAt)
	}
}

// A derived record must prove whose it is. An output with a forged
// relay.message.id (another producer's, without relay's fingerprint, or
// with the fingerprint of another record) is misrouted, and the loss it
// would have covered is still lost. A copy that waited in a tier and was
// consumed (its offset committed past) with nothing written after it is
// lost too.
func TestAuditForgedEvidenceDoesNotHideALoss(t *testing.T) {
	s := newScenario(t, 1)
	s.src.produce(t, 30)
	r := startRelay(t, "relay", s.env(uniq(t, "txn")))
	assertExactlyOnce(t, s.src, s.output, s.group, 1)
	r.stop()

	// Two records relay never saw, committed past by hand.
	key, value := []byte("k"), []byte("never seen by relay")
	lost := produceRaw(t, s.src.topic, 0, key, value, nil)
	viaTier := produceRaw(t, s.src.topic, 0, key, []byte("also never seen"), nil)
	commitPast(t, s.group, s.src.topic, 0, viaTier+1)
	lostID, tierID := envelope.ID(s.src.topic, 0, lost), envelope.ID(s.src.topic, 0, viaTier)

	// Outputs claiming the first: no fingerprint, and another record's.
	bare := produceRaw(t, s.output, 0, key, value, []kafka.Header{{Key: envelope.MessageID, Value: []byte(lostID)}})
	other := produceRaw(t, s.output, 0, key, value, []kafka.Header{{Key: envelope.MessageID, Value: []byte(lostID)},
		{Key: envelope.SourceFingerprint, Value: []byte(envelope.Fingerprint(key, []byte("another value")))}})
	// A tier copy of the second, consumed with nothing after it.
	tier := s.tiers[0]
	copyAt := produceRaw(t, tier, 0, key, []byte("also never seen"), []kafka.Header{
		{Key: envelope.FailureID, Value: []byte(tierID)},
		{Key: envelope.SourceTopic, Value: []byte(s.src.topic)},
		{Key: envelope.SourcePartition, Value: []byte("0")},
		{Key: envelope.SourceOffset, Value: []byte(fmt.Sprint(viaTier))},
		{Key: envelope.SourceFingerprint, Value: []byte(envelope.Fingerprint(key, []byte("also never seen")))},
		{Key: envelope.NotBefore, Value: []byte(time.Now().UTC().Format(envelope.TimeFormat))},
	})
	commitPast(t, s.group, tier, 0, copyAt+1)

	rep, res := auditOf(t, s)
	if res.code != 1 || rep.Totals[audit.KindLost] != 2 || rep.Totals[audit.KindMisrouted] != 2 {
		t.Fatalf("exit %d, totals %v, findings %v; want 2 lost and 2 misrouted", res.code, rep.Totals, rep.Findings)
	}
	for _, c := range []struct {
		kind    audit.Kind
		src, at string
	}{
		{audit.KindLost, lostID, ""},
		{audit.KindLost, tierID, ""},
		{audit.KindMisrouted, "", fmt.Sprintf("%s/0/%d", s.output, bare)},
		{audit.KindMisrouted, "", fmt.Sprintf("%s/0/%d", s.output, other)},
	} {
		if !findingAt(rep, c.kind, c.src, c.at) {
			t.Errorf("no %s finding for %s%s: %v", c.kind, c.src, c.at, rep.Findings)
		}
	}
	// Audited as records from before fingerprints, the bare output is
	// credited: the first record reads as processed.
	if rep, res := auditOf(t, s, "--allow-unfingerprinted"); res.code != 1 || findingAt(rep, audit.KindLost, lostID, "") || rep.Totals[audit.KindMisrouted] != 1 {
		t.Fatalf("--allow-unfingerprinted: exit %d, findings %v; want the bare output credited", res.code, rep.Findings)
	}
}

// A record written into the replay topic without relay replay's headers is
// quarantined by relay under its own replay coordinates; the audit does not
// credit that quarantine record to the source record whose offset number it
// carries: it is misrouted, and the source record keeps its own end state.
func TestAuditReplayRecordWithoutReplayHeadersIsMisrouted(t *testing.T) {
	s := newScenario(t, 1)
	s.src.produce(t, 20)
	r := startRelay(t, "relay", s.env(uniq(t, "txn")))
	assertExactlyOnce(t, s.src, s.output, s.group, 1)
	at := produceRaw(t, s.replayTopic(), 0, []byte("k"), []byte("not from relay replay"), nil)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && len(readCommitted(t, s.quarantine, 1)) == 0 {
		time.Sleep(500 * time.Millisecond)
	}
	r.stop()
	qs := readCommitted(t, s.quarantine, 1)
	if len(qs) != 1 {
		t.Fatalf("%d quarantine records, want the replay record's", len(qs))
	}
	rep, res := auditOf(t, s)
	q := qs[0].TopicPartition
	// Misrouted: the record itself (no relay.source.*), relay's quarantine
	// record of it, and its ledger changes.
	if res.code != 1 || !findingAt(rep, audit.KindMisrouted, "", fmt.Sprintf("%s/0/%d", s.replayTopic(), at)) ||
		!findingAt(rep, audit.KindMisrouted, "", fmt.Sprintf("%s/0/%d", s.quarantine, q.Offset)) ||
		rep.Totals[audit.KindDuplicated] != 0 || rep.Totals[audit.KindLost] != 0 || rep.Partitions[0].Processed != 20 {
		t.Fatalf("replay record %s/0/%d without headers: exit %d, totals %v, %+v, findings %v; want it and its quarantine record misrouted, the 20 source records processed",
			s.replayTopic(), at, res.code, rep.Totals, rep.Partitions[0], rep.Findings)
	}
}

// With RELAY_ORDERING=partition there are no tiers, but a tier topic of an
// earlier configuration may still hold a copy relay will read: the record
// is in flight, not lost.
func TestAuditReadsRetiredTiersUnderPartitionOrdering(t *testing.T) {
	s := newScenario(t, 1, "RELAY_ORDERING", "partition")
	s.src.produce(t, 10)
	r := startRelay(t, "relay", s.env(uniq(t, "txn")))
	assertExactlyOnce(t, s.src, s.output, s.group, 1)
	r.stop()

	key, value := []byte("k"), []byte("waits in a retired tier")
	off := produceRaw(t, s.src.topic, 0, key, value, nil)
	commitPast(t, s.group, s.src.topic, 0, off+1)
	retired := s.src.topic + ".retry.30s"
	createTopics(t, 1, retired)
	id := envelope.ID(s.src.topic, 0, off)
	produceRaw(t, retired, 0, key, value, []kafka.Header{
		{Key: envelope.FailureID, Value: []byte(id)},
		{Key: envelope.SourceTopic, Value: []byte(s.src.topic)},
		{Key: envelope.SourcePartition, Value: []byte("0")},
		{Key: envelope.SourceOffset, Value: []byte(fmt.Sprint(off))},
		{Key: envelope.SourceFingerprint, Value: []byte(envelope.Fingerprint(key, value))},
		{Key: envelope.NotBefore, Value: []byte(time.Now().Add(30 * time.Second).UTC().Format(envelope.TimeFormat))},
	})
	rep, res := auditOf(t, s)
	if res.code != 0 || !rep.Clean || rep.Partitions[0].InTier != 1 || rep.Partitions[0].Lost != 0 {
		t.Fatalf("a copy in a retired tier: exit %d, %+v, findings %v; want it in flight", res.code, rep.Partitions[0], rep.Findings)
	}
}

// The window by time: --from and --to select the records whose timestamps
// fall in them, and the derived topics are read far enough back for the
// oldest (an output keeps its source record's timestamp, hours old here).
// A metrics file that cannot be written is no verdict (exit 3).
func TestAuditWindowsByTime(t *testing.T) {
	s := newScenario(t, 1)
	old := time.Now().Add(-3 * time.Hour)
	for i := range 5 {
		produceRawAt(t, s.src.topic, 0, []byte("k"), fmt.Appendf(nil, "old %d", i), nil, old)
	}
	for i := range 5 {
		produceRawAt(t, s.src.topic, 0, []byte("k"), fmt.Appendf(nil, "new %d", i), nil, time.Now())
	}
	r := startRelay(t, "relay", s.env(uniq(t, "txn")))
	waitCaughtUp(t, s.group, s.src.topic, 1, 90*time.Second)
	r.stop()

	if rep, res := auditOf(t, s); res.code != 0 || !rep.Clean || rep.Partitions[0].Processed != 10 {
		t.Fatalf("the whole window: exit %d, %+v, findings %v; want 10 processed", res.code, rep.Partitions[0], rep.Findings)
	}
	cut := time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
	if rep, res := auditOf(t, s, "--from", cut); res.code != 0 || rep.Partitions[0].Records != 5 || rep.Partitions[0].Processed != 5 {
		t.Fatalf("--from %s: exit %d, %+v; want the 5 new records", cut, res.code, rep.Partitions[0])
	}
	if rep, res := auditOf(t, s, "--to", cut); res.code != 0 || rep.Partitions[0].Records != 5 || rep.Partitions[0].Processed != 5 {
		t.Fatalf("--to %s: exit %d, %+v; want the 5 old records", cut, res.code, rep.Partitions[0])
	}
	if res := s.cli(t, nil, "audit", "--source", s.src.topic, "--metrics-file", "/nonexistent/relay_audit.prom"); res.code != 3 || !strings.Contains(res.stderr, "--metrics-file") {
		t.Fatalf("an unwritable metrics file: exit %d; want 3 naming --metrics-file\n%s", res.code, res.stderr)
	}
}

// produceRawAt is produceRaw with the record's timestamp.
func produceRawAt(t *testing.T, topic string, p int32, key, value []byte, headers []kafka.Header, at time.Time) int64 {
	t.Helper()
	pr, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "acks": "all"})
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	done := make(chan kafka.Event, 1)
	m := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: p}, Key: key, Value: value, Headers: headers, Timestamp: at}
	if err := pr.Produce(m, done); err != nil {
		t.Fatal(err)
	}
	got := (<-done).(*kafka.Message)
	if got.TopicPartition.Error != nil {
		t.Fatal(got.TopicPartition.Error)
	}
	return int64(got.TopicPartition.Offset)
}

// A key whose head never settles: A1 fails at every attempt for far
// longer than the budget the audit is told of, and A2 and A3 wait behind
// it — copied from tier to tier, each copy fresh and due within seconds,
// or parked in memory. Audited with a budget of 5 s (so a head's life is
// the bound's floor, a minute) and --stuck-after 10s, the followers that
// have waited behind A1 for more than that are stuck, named with their
// coordinates; A1's own copies are not (they are due). With relay's own
// configuration (a ten-minute budget) they are in flight, and once A1
// settles, everything audits clean.
func TestAuditFollowersOfAHeadThatNeverSettles(t *testing.T) {
	for _, c := range []struct {
		name, park    string
		inTier, parks int64
	}{{"copied", "0", 3, 0}, {"parked", "10000", 1, 2}} {
		t.Run(c.name, func(t *testing.T) {
			o := registerOrders(t)
			h := newOrderHook(t)
			h.setFailing("A1", true)
			s := keyScenario(t, o, h, 1, "RELAY_KEY_PARK_MAX_RECORDS", c.park)
			r := startRelay(t, "relay", s.env(uniq(t, "txn")))
			defer r.stop()
			if c.park != "0" {
				r.waitParking()
			}
			var ids []string
			for _, id := range []string{"A1", "A2", "A3"} {
				ids = append(ids, envelope.ID(s.src.topic, 0, produceOrder(t, o, s.src.topic, 0, "A", id)))
			}
			produceOrder(t, o, s.src.topic, 0, "B", "B1")
			waitCaughtUp(t, s.group, s.src.topic, 1, 30*time.Second)
			time.Sleep(75 * time.Second) // the followers have waited since they were consumed

			res := s.cli(t, []string{"RELAY_RETRY_MAX_ELAPSED", "5s"}, "audit", "--source", s.src.topic, "-o", "json", "--stuck-after", "10s")
			var rep audit.Report
			if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
				t.Fatalf("relay audit printed no JSON report (exit %d): %v\n%s", res.code, err, res.stderr)
			}
			if res.code != 1 || rep.Totals[audit.KindStuck] != 2 || !findingAt(&rep, audit.KindStuck, ids[1], "") || !findingAt(&rep, audit.KindStuck, ids[2], "") ||
				findingAt(&rep, audit.KindStuck, ids[0], "") {
				t.Fatalf("followers behind a head that never settles: exit %d, totals %v, findings %v; want A2 and A3 (%v) stuck, not A1",
					res.code, rep.Totals, rep.Findings, ids)
			}
			if rep, res := auditOf(t, s); res.code != 0 || !rep.Clean || rep.Partitions[0].InTier != c.inTier || rep.Partitions[0].Parked != c.parks {
				t.Fatalf("relay's own bound: exit %d, findings %v, %+v; want clean with %d in the tiers and %d parked", res.code, rep.Findings, rep.Partitions[0], c.inTier, c.parks)
			}
			h.setFailing("A1", false)
			if got := waitOutput(t, s, 0, 4, 60*time.Second); fmt.Sprint(got) != "[B1 A1 A2 A3]" {
				t.Fatalf("output %v, want [B1 A1 A2 A3]", got)
			}
			waitCaughtUp(t, s.group, s.src.topic, 1, 30*time.Second)
			for _, tier := range s.tiers {
				waitTierDrained(t, s, tier, time.Now().Add(30*time.Second))
			}
			assertAuditClean(t, s)
		})
	}
}
