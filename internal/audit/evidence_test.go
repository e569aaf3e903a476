package audit

import (
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/envelope"
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
