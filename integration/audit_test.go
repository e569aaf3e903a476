package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/audit"
	"relay/internal/envelope"
)

// auditOf runs relay audit on the scenario's source with args and reads
// its JSON report.
func auditOf(t *testing.T, s *scenario, args ...string) (*audit.Report, cliResult) {
	t.Helper()
	res := s.cli(t, nil, append([]string{"audit", "--source", s.src.topic, "-o", "json", "--max-findings", "100"}, args...)...)
	var rep audit.Report
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("relay audit printed no JSON report (exit %d): %v\n%s", res.code, err, res.stderr)
	}
	return &rep, res
}

// assertAuditClean is relay audit as a second oracle, beside a test's own
// accounting: every source record has its end state, nothing is lost,
// duplicated or misrouted.
func assertAuditClean(t *testing.T, s *scenario) {
	t.Helper()
	rep, res := auditOf(t, s)
	if res.code != 0 || !rep.Clean {
		t.Fatalf("relay audit: exit %d, clean %v, findings %v", res.code, rep.Clean, rep.Findings)
	}
	for _, pr := range rep.Partitions {
		if pr.Behind+pr.InTier+pr.InReplay+pr.Parked != 0 {
			t.Errorf("relay audit: partition %d still in flight after the run settled: %+v", pr.Partition, pr)
		}
	}
}

// findingAt says whether rep lists a finding of kind about source record
// src (when not empty) or derived record at (when not empty).
func findingAt(rep *audit.Report, kind audit.Kind, src, at string) bool {
	return slices.ContainsFunc(rep.Findings, func(f audit.Finding) bool {
		return f.Kind == kind && (src == "" || (f.Source != nil && f.Source.String() == src)) && (at == "" || (f.At != nil && f.At.String() == at))
	})
}

// TestAuditFindsWhatWasInjected: a run with relay SIGKILLed and restarted
// audits clean, with every record processed; a window reaching into
// deleted source records says they are unverifiable, not lost. Then three
// faults relay never makes are injected by hand — a second output with an
// existing relay.message.id, a source record whose offset is committed
// past without relay, and a quarantine record of another source — and the
// audit names each with its coordinates and exits 1.
func TestAuditFindsWhatWasInjected(t *testing.T) {
	const partitions = 2
	s := newScenario(t, partitions)
	s.src.produce(t, 400)
	r := startRelay(t, "relay", s.env(uniq(t, "txn")))
	r.waitLog("partitions assigned", 60*time.Second)
	producing := s.src.produceInBackground(t, 10, 40, 30*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	r.signal(syscall.SIGKILL)
	r.wait(10 * time.Second)
	producing.Wait()
	r = startRelay(t, "relay-2", s.env(uniq(t, "txn")))
	assertExactlyOnce(t, s.src, s.output, s.group, partitions)
	r.stop()

	rep, res := auditOf(t, s)
	var records, processed int64
	for _, pr := range rep.Partitions {
		records += pr.Records
		processed += pr.Processed
	}
	if res.code != 0 || !rep.Clean || records != int64(s.src.len()) || processed != records {
		t.Fatalf("clean run: exit %d, clean %v, %d records (%d produced), %d processed; findings %v",
			res.code, rep.Clean, records, s.src.len(), processed, rep.Findings)
	}

	// Retention took the first 50 records of partition 0: a window
	// from offset 0 cannot say what became of them.
	deleteRecords(t, s.src.topic, 0, 50)
	rep, res = auditOf(t, s, "--from-offsets", "0:0,1:0")
	if res.code != 0 || rep.Partitions[0].Unverifiable != 50 || rep.Partitions[0].Lost != 0 || !findingAt(rep, audit.KindUnverifiable, s.src.topic+"/0/0", "") {
		t.Fatalf("window into deleted records: exit %d, partition 0 %+v, findings %v", res.code, rep.Partitions[0], rep.Findings)
	}

	// The faults.
	outs := readCommitted(t, s.output, partitions)
	var victim *kafka.Message // of partition 1, which kept all its records
	for _, m := range outs {
		if m.TopicPartition.Partition == 1 {
			victim = m
		}
	}
	id, _ := envelope.Lookup(toEnvelopeHeaders(victim.Headers), envelope.MessageID)
	dupAt := produceRaw(t, s.output, victim.TopicPartition.Partition, victim.Key, victim.Value, victim.Headers)
	lostAt := produceRaw(t, s.src.topic, 1, []byte("k"), []byte("never seen by relay"), nil)
	commitPast(t, s.group, s.src.topic, 1, lostAt+1)
	misAt := produceRaw(t, s.quarantine, 0, []byte("k"), []byte("x"), []kafka.Header{
		{Key: envelope.SourceTopic, Value: []byte("some-other-source")},
		{Key: envelope.SourcePartition, Value: []byte("0")},
		{Key: envelope.SourceOffset, Value: []byte("5")},
	})

	rep, res = auditOf(t, s)
	if res.code != 1 || rep.Clean {
		t.Fatalf("after the faults: exit %d, clean %v; want 1", res.code, rep.Clean)
	}
	if !findingAt(rep, audit.KindDuplicated, string(id), fmt.Sprintf("%s/%d/%d", s.output, victim.TopicPartition.Partition, dupAt)) {
		t.Errorf("the second output of %s at %s/%d/%d is not reported as duplicated: %v", id, s.output, victim.TopicPartition.Partition, dupAt, rep.Findings)
	}
	if !findingAt(rep, audit.KindLost, fmt.Sprintf("%s/1/%d", s.src.topic, lostAt), "") {
		t.Errorf("the record committed past at %s/1/%d is not reported as lost: %v", s.src.topic, lostAt, rep.Findings)
	}
	if !findingAt(rep, audit.KindMisrouted, "", fmt.Sprintf("%s/0/%d", s.quarantine, misAt)) {
		t.Errorf("the quarantine record of another source at %s/0/%d is not reported as misrouted: %v", s.quarantine, misAt, rep.Findings)
	}
	if rep.Totals[audit.KindLost] != 1 || rep.Totals[audit.KindDuplicated] != 1 || rep.Totals[audit.KindMisrouted] != 1 {
		t.Errorf("totals %v, want one of each", rep.Totals)
	}

	// Memory bounded: a partition at a time, the same verdicts; a
	// partition whose window alone does not fit stops the audit.
	one := rep.Partitions[0].To - rep.Partitions[0].From
	bound := fmt.Sprint(one*6 + 100) // one partition's state, not two
	batched, res := auditOf(t, s, "--max-memory", bound)
	if res.code != 1 || fmt.Sprint(batched.Totals) != fmt.Sprint(rep.Totals) || len(batched.Partitions) != partitions {
		t.Errorf("--max-memory %s (a partition at a time): exit %d, totals %v; want %v", bound, res.code, batched.Totals, rep.Totals)
	}
	res = s.cli(t, nil, "audit", "--source", s.src.topic, "--max-memory", "1KiB")
	if res.code != 3 || !strings.Contains(res.stderr, "--max-memory") {
		t.Errorf("--max-memory 1KiB: exit %d; want 3 naming the flag:\n%s", res.code, res.stderr)
	}
}

// produceRaw writes one record to topic's partition p and gives its offset.
func produceRaw(t *testing.T, topic string, p int32, key, value []byte, headers []kafka.Header) int64 {
	t.Helper()
	pr, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "acks": "all"})
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	done := make(chan kafka.Event, 1)
	if err := pr.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: p}, Key: key, Value: value, Headers: headers}, done); err != nil {
		t.Fatal(err)
	}
	m := (<-done).(*kafka.Message)
	if m.TopicPartition.Error != nil {
		t.Fatal(m.TopicPartition.Error)
	}
	return int64(m.TopicPartition.Offset)
}

// commitPast commits group's offset of topic's partition p at off, as
// someone other than relay would (the group must be empty).
//
// relay's instances are static members, which do not leave the group when
// they stop: the coordinator refuses a commit from outside the group
// (UNKNOWN_MEMBER_ID) until their sessions have expired and the group is
// empty, as it would refuse kafka-consumer-groups --reset-offsets.
func commitPast(t *testing.T, group, topic string, p int32, off int64) {
	t.Helper()
	waitGroupEmpty(t, group, 60*time.Second)
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": false})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := c.CommitOffsets([]kafka.TopicPartition{{Topic: &topic, Partition: p, Offset: kafka.Offset(off)}}); err != nil {
		t.Fatalf("commit %s[%d] at %d for %s: %v", topic, p, off, group, err)
	}
}

// deleteRecords deletes topic's partition p before offset before, as
// retention would.
func deleteRecords(t *testing.T, topic string, p int32, before int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := admin(t).DeleteRecords(ctx, []kafka.TopicPartition{{Topic: &topic, Partition: p, Offset: kafka.Offset(before)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.DeleteRecordsResults {
		if r.TopicPartition.Error != nil {
			t.Fatalf("delete records of %s[%d] before %d: %v", topic, p, before, r.TopicPartition.Error)
		}
	}
}

// waitGroupEmpty waits until group has no members.
func waitGroupEmpty(t *testing.T, group string, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	var state kafka.ConsumerGroupState
	a := admin(t)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := a.DescribeConsumerGroups(ctx, []string{group})
		cancel()
		if err == nil && len(res.ConsumerGroupDescriptions) == 1 {
			d := res.ConsumerGroupDescriptions[0]
			if state = d.State; d.Error.Code() == kafka.ErrNoError && (state == kafka.ConsumerGroupStateEmpty || state == kafka.ConsumerGroupStateDead) {
				return
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("group %s still has members (state %s) %s after its relays stopped", group, state, bound)
}
