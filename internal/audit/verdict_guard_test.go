package audit

import (
	"strings"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/envelope"
	"relay/internal/ledger"
)

// A second output with one relay.message.id is a finding, duplicated,
// with the copy's coordinates; so is a third (counted, not listed twice).
func TestSecondOutputIsNoted(t *testing.T) {
	s := testScan(t, nil)
	for i := range int64(3) {
		s.outputRecord(msg("orders.valid", i, nil, nil, h(envelope.MessageID, "orders/0/1"), printOf(1)))
	}
	if got := s.batch[0].slots[1].count(outShift); got != 3 {
		t.Fatalf("outputs counted %d, want 3", got)
	}
	if n := s.rep.Totals[KindDuplicated]; n != 1 || !findingAt(s.rep, KindDuplicated, "orders/0/1", "orders.valid/0/1") {
		t.Fatalf("duplicated findings %d %v, want the second output named", n, s.rep.Findings)
	}
}

// findingAt says whether rep lists a finding of kind about src and at.
func findingAt(rep *Report, kind Kind, src, at string) bool {
	for _, f := range rep.Findings {
		if f.Kind == kind && (src == "" || f.Source != nil && f.Source.String() == src) && (at == "" || f.At != nil && f.At.String() == at) {
			return true
		}
	}
	return false
}

// An envelope without its relay.source.* headers, or with unreadable
// ones, or with a failure id that is not its source's, is misrouted for
// that reason, and credits nothing.
func TestEnvelopesWithoutTheirSourceAreMisrouted(t *testing.T) {
	quarantine := derived{topic: "orders.quarantine", role: roleQuarantine}
	src := func(p, off string) []kafka.Header {
		return []kafka.Header{h(envelope.SourceTopic, "orders"), h(envelope.SourcePartition, p), h(envelope.SourceOffset, off), printOf(0)}
	}
	for _, c := range []struct {
		name, why string
		hs        []kafka.Header
	}{
		{"no headers", "no relay.source.* headers", []kafka.Header{printOf(0)}},
		{"no offset", "no relay.source.* headers", []kafka.Header{h(envelope.SourceTopic, "orders"), h(envelope.SourcePartition, "0"), printOf(0)}},
		{"unreadable partition", "unreadable relay.source.partition", src("zero", "0")},
		{"unreadable offset", "unreadable relay.source.partition or relay.source.offset", src("0", "0x")},
		{"another failure id", "is not its source", append(src("0", "2"), h(envelope.FailureID, "orders/0/3"))},
	} {
		s := testScan(t, nil)
		s.envelopeRecord(quarantine)(msg("orders.quarantine", 0, nil, nil, c.hs...))
		if s.rep.Misrouted != 1 || len(s.rep.Findings) != 1 || !strings.Contains(s.rep.Findings[0].Detail, c.why) {
			t.Errorf("%s: misrouted %d, findings %v; want one, saying %q", c.name, s.rep.Misrouted, s.rep.Findings, c.why)
		}
		for off, sl := range s.batch[0].slots {
			if sl.count(quarShift) != 0 {
				t.Errorf("%s: credited to offset %d", c.name, off)
			}
		}
	}
	s := testScan(t, nil)
	s.envelopeRecord(quarantine)(msg("orders.quarantine", 0, nil, nil, h(envelope.SourceTopic, "orders"), h(envelope.SourcePartition, "0"), h(envelope.SourceOffset, "2"), h(envelope.FailureID, "orders/0/2"), printOf(2)))
	if s.rep.Misrouted != 0 || s.batch[0].slots[2].count(quarShift) != 1 {
		t.Fatalf("a proper quarantine record: misrouted %d, credited %d", s.rep.Misrouted, s.batch[0].slots[2].count(quarShift))
	}
}

// An output without relay.message.id, or with one that is not a source
// coordinate, is misrouted for that reason.
func TestOutputsWithoutTheirIDAreMisrouted(t *testing.T) {
	for _, c := range []struct {
		why string
		hs  []kafka.Header
	}{
		{"no relay.message.id", []kafka.Header{printOf(0)}},
		{"is not topic/partition/offset", []kafka.Header{h(envelope.MessageID, "orders-0-0"), printOf(0)}},
		{"is not topic/partition/offset", []kafka.Header{h(envelope.MessageID, "orders/0/x"), printOf(0)}},
	} {
		s := testScan(t, nil)
		s.outputRecord(msg("orders.valid", 0, nil, nil, c.hs...))
		if s.rep.Misrouted != 1 || len(s.rep.Findings) != 1 || !strings.Contains(s.rep.Findings[0].Detail, c.why) || s.batch[0].slots[0].count(outShift) != 0 {
			t.Errorf("output with %v: misrouted %d, findings %v, credited %d; want misrouted saying %q", c.hs, s.rep.Misrouted, s.rep.Findings, s.batch[0].slots[0].count(outShift), c.why)
		}
	}
}

// A ledger change whose failure id is not the source record it names is
// misrouted, and gives that record no state.
func TestLedgerChangeOfAnotherRecordIsMisrouted(t *testing.T) {
	s := testScan(t, nil)
	for _, e := range []*ledger.Event{
		{ID: "orders/0/4", State: ledger.Discarded, Source: ledger.Source{Topic: "orders", Partition: 0, Offset: 3}},
		{ID: "orders/0/5", State: ledger.Open, Source: ledger.Source{Topic: "orders", Partition: 0, Offset: 5}},
	} {
		s.ledgerRecord(msg("_relay.relay.state", 0, []byte(e.Key()), e.Value()))
	}
	s.foldLedger()
	if s.rep.Misrouted != 1 || s.batch[0].slots[3].state() != "" || s.batch[0].slots[5].state() != ledger.Open {
		t.Fatalf("misrouted %d, state of 3 %q, of 5 %q; want the change naming 3 as 4 misrouted", s.rep.Misrouted, s.batch[0].slots[3].state(), s.batch[0].slots[5].state())
	}
}

// A ledger change the audit cannot read, in a newer format or not JSON at
// all, is no verdict (an error naming it), never skipped: a replaying
// change written as v2 turned a lost record into an open one.
func TestUnreadableLedgerChangesAreNoVerdict(t *testing.T) {
	for _, v := range []string{`{"v":2,"id":"orders/0/3","state":"replaying","source":{"topic":"orders","partition":0,"offset":3}}`, `not json`} {
		s := testScan(t, nil)
		s.ledgerRecord(msg("_relay.relay.state", 7, []byte("q|orders/0/3|0|state"), []byte(v)))
		err := s.unreadableLedger()
		if err == nil || !strings.Contains(err.Error(), "_relay.relay.state/0/7") {
			t.Errorf("%s: %v, want no verdict naming the record", v, err)
		}
	}
	s := testScan(t, nil)
	s.ledgerRecord(msg("_relay.relay.state", 8, []byte("q|orders/0/3|0|state"), nil))
	if err := s.unreadableLedger(); err != nil {
		t.Fatalf("a tombstone: %v", err)
	}
	// One of another source, or of an offset outside the window, says
	// nothing of the window's records: the audit of them goes on. One
	// whose key names no failure may speak of any.
	for _, c := range []struct {
		key      string
		refusing bool
	}{
		{"q|payments/0/3|0|discarded", false},
		{"q|orders/0/999999|0|discarded", false},
		{"q|orders/1/3|0|discarded", false},
		{"q|garbage", true},
	} {
		s := testScan(t, nil)
		s.ledgerRecord(msg("_relay.relay.state", 7, []byte(c.key), []byte(`{"v":2}`)))
		if err := s.unreadableLedger(); (err != nil) != c.refusing {
			t.Errorf("%s: %v, want refusing %v", c.key, err, c.refusing)
		}
	}
}
