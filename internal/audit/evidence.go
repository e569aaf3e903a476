package audit

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/envelope"
	"relay/internal/keyorder"
	"relay/internal/ledger"
)

// at is the slot of source offset off of partition p, or nil outside the
// window.
func (s *scan) at(p int32, off int64) (*part, *slot) {
	pt := s.batch[p]
	if pt == nil {
		return nil, nil
	}
	i := off - pt.base
	if i < 0 || i >= int64(len(pt.slots)) {
		return pt, nil
	}
	return pt, &pt.slots[i]
}

func (s *scan) sourceRecord(m *kafka.Message) {
	pt, sl := s.at(m.TopicPartition.Partition, int64(m.TopicPartition.Offset))
	if sl == nil {
		return
	}
	*sl |= present
	ts := m.Timestamp.UnixMilli()
	if ts > s.o.Now.UnixMilli() {
		// A source timestamp ahead of the audit's clock: relay's copies
		// of the record carry earlier times than it, so no time tells
		// where they start in the derived topics: read them whole.
		s.aheadTs = true
	}
	if ts > 0 && (s.minTs == 0 || ts < s.minTs) {
		s.minTs = ts
	}
	pt.fps[int64(m.TopicPartition.Offset)-pt.base] = shortPrint(envelope.Fingerprint(m.Key, m.Value))
}

// shortPrint is the part of a fingerprint the audit keeps per source
// offset: its first 16 bits (a record credited to the wrong offset goes
// unnoticed once in 65,536).
func shortPrint(fp string) uint16 {
	if len(fp) < 4 {
		return 0
	}
	n, err := strconv.ParseUint(fp[:4], 16, 16)
	if err != nil {
		return 0
	}
	return uint16(n)
}

// coordOf is where a derived record is.
func coordOf(m *kafka.Message) Coord {
	return Coord{Topic: *m.TopicPartition.Topic, Partition: m.TopicPartition.Partition, Offset: int64(m.TopicPartition.Offset)}
}

func (s *scan) outputRecord(m *kafka.Message) {
	id, ok := envelope.Lookup(m.Headers, envelope.MessageID)
	if !ok {
		s.misrouted(m, "no relay.message.id: not written by relay")
		return
	}
	topic, p, off, err := parseID(string(id))
	if err != nil {
		s.misrouted(m, err.Error())
		return
	}
	s.derivedOf(m, topic, p, off, func(sl *slot) {
		sl.add(outShift)
		if sl.count(outShift) == 2 {
			s.note(KindDuplicated, &Coord{Topic: topic, Partition: p, Offset: off}, coordOf(m), "a second output with this relay.message.id (the first is earlier in its partition)")
		}
	})
}

// envelopeRecord reads a rejected, quarantine, tier or replay record's
// source from its envelope.
func (s *scan) envelopeRecord(d derived) func(*kafka.Message) {
	return func(m *kafka.Message) {
		topic, tok := envelope.Lookup(m.Headers, envelope.SourceTopic)
		ps, pok := envelope.Lookup(m.Headers, envelope.SourcePartition)
		os, ook := envelope.Lookup(m.Headers, envelope.SourceOffset)
		if !tok || !pok || !ook {
			s.misrouted(m, "no relay.source.* headers: not written by relay")
			return
		}
		p, perr := strconv.ParseInt(string(ps), 10, 32)
		off, oerr := strconv.ParseInt(string(os), 10, 64)
		if perr != nil || oerr != nil {
			s.misrouted(m, "unreadable relay.source.partition or relay.source.offset")
			return
		}
		if id, ok := envelope.Lookup(m.Headers, envelope.FailureID); ok && string(id) != envelope.ID(string(topic), int32(p), off) {
			s.misrouted(m, fmt.Sprintf("its relay.failure.id %q is not its source, %s/%d/%d: it does not stand for that record", id, topic, p, off))
			return
		}
		again := retriedRecord(m)
		s.derivedOf(m, string(topic), int32(p), off, func(sl *slot) {
			if again || d.role == roleTier || d.role == roleReplay {
				*sl |= retried
			}
			switch d.role {
			case roleRejected:
				sl.add(rejShift)
			case roleQuarantine:
				sl.add(quarShift)
			case roleTier, roleReplay:
				c, ok := s.committed[d.topic][m.TopicPartition.Partition]
				if ok && int64(m.TopicPartition.Offset) >= c {
					if d.role == roleTier {
						*sl |= tierFlight
					} else {
						*sl |= replFlight
					}
					s.aging(m, d.role, string(topic), int32(p), off)
				}
			}
		})
	}
}

// derivedOf applies a derived record naming source topic/p/off: one in
// another source's topics, or in a partition other than its source's, is
// misrouted.
func (s *scan) derivedOf(m *kafka.Message, topic string, p int32, off int64, apply func(*slot)) {
	switch {
	case topic != s.source:
		s.misrouted(m, fmt.Sprintf("names source %s/%d/%d, not of %s", topic, p, off, s.source))
		return
	case p != m.TopicPartition.Partition:
		s.misrouted(m, fmt.Sprintf("names source partition %d, but relay writes a record to its source's partition number", p))
		return
	}
	pt, sl := s.at(p, off)
	if sl != nil && *sl&present != 0 {
		fp, ok := envelope.Lookup(m.Headers, envelope.SourceFingerprint)
		switch {
		case !ok && !s.o.AllowUnprinted:
			s.misrouted(m, fmt.Sprintf("names source %s/%d/%d, but carries no relay.source.fingerprint, which relay writes on every record (written by a relay older than fingerprints? audit such a window with --allow-unfingerprinted)", topic, p, off))
			return
		case !ok:
			s.unprinted++ // written before relay kept fingerprints
		case shortPrint(string(fp)) != pt.fps[off-pt.base]:
			s.misrouted(m, fmt.Sprintf("names source %s/%d/%d, but its relay.source.fingerprint %s is not that record's: its key and value are another record's", topic, p, off, fp))
			return
		}
	}
	s.named(*m.TopicPartition.Topic, p, off)
	if sl != nil {
		apply(sl)
	}
}

// retriedRecord says whether a rejected or quarantine record was written
// after a retry (a tier's attempt, or a replay) rather than on the
// record's first consumption.
func retriedRecord(m *kafka.Message) bool {
	if _, ok := envelope.Lookup(m.Headers, envelope.ReplayID); ok {
		return true
	}
	a, ok := envelope.Lookup(m.Headers, envelope.Attempt)
	n, err := strconv.Atoi(string(a))
	return ok && (err != nil || n > 1)
}

func (s *scan) misrouted(m *kafka.Message, why string) {
	s.rep.Misrouted++
	s.note(KindMisrouted, nil, coordOf(m), why)
}

// ledgerRecord keeps a ledger change of a failure of the window, for
// foldLedger.
func (s *scan) ledgerRecord(m *kafka.Message) {
	if s.keyState(m) {
		return
	}
	e, ok, err := ledger.Decode(string(m.Key), m.Value)
	if ok && err != nil {
		// A change the audit cannot read (a newer relay's format, or
		// bytes that are no ledger change) of a record of the window
		// may settle a record it would call lost, or reopen one: no
		// verdict. Its key names the failure.
		if !s.concerns(string(m.Key)) {
			return
		}
		s.unreadable++
		if len(s.unreadableAt) < 3 {
			s.unreadableAt = append(s.unreadableAt, fmt.Sprintf("%s (%v)", coordOf(m), err))
		}
		return
	}
	if !ok || e.Source.Topic != s.source {
		return
	}
	if _, sl := s.at(e.Source.Partition, e.Source.Offset); sl != nil {
		if want := envelope.ID(e.Source.Topic, e.Source.Partition, e.Source.Offset); e.ID != want {
			// The change of a failure that did not come from the source
			// record it names (a record written into a tier or the
			// replay topic by someone else, quarantined by relay).
			s.misrouted(m, fmt.Sprintf("a ledger change of failure %s names source %s: it does not stand for that record", e.ID, want))
			return
		}
		at := sourceAt{e.Source.Partition, e.Source.Offset}
		r, ok := s.ledger[at]
		if !ok && len(s.ledger) >= s.maxFailures() {
			s.tooManyFailures = true
			return
		}
		if s.ledger == nil {
			s.ledger = map[sourceAt]ledger.Reduced{}
		}
		r.Add(e)
		s.ledger[at] = r
	}
}

// concerns says whether the ledger record keyed key may speak of a
// record of the batch's window: its failure id names one, or cannot be
// read (then it may).
func (s *scan) concerns(key string) bool {
	rest, _ := strings.CutPrefix(key, ledger.Prefix)
	id, _, _ := strings.Cut(rest, "|")
	topic, p, off, err := parseID(id)
	if err != nil {
		return true
	}
	if topic != s.source {
		return false
	}
	_, sl := s.at(p, off)
	return sl != nil
}

// unreadableLedger is the error of a batch with ledger changes the audit
// cannot read, nil without.
func (s *scan) unreadableLedger() error {
	if s.unreadable == 0 {
		return nil
	}
	return fmt.Errorf("%d ledger changes in the state topic cannot be read, so the failures they speak of cannot be judged: %s (written by a newer relay? audit with it)",
		s.unreadable, strings.Join(s.unreadableAt, "; "))
}

// sourceAt is a source offset of the window.
type sourceAt struct {
	p   int32
	off int64
}

// foldLedger gives each failure of the window its state as ledger.Fold
// does — the one fold the console, the commands and relay itself use;
// ledger.Reduced gives its result one change at a time — once every
// change was read.
func (s *scan) foldLedger() {
	for at, r := range s.ledger {
		if _, sl := s.at(at.p, at.off); sl != nil {
			if st, count, ok := r.State(); ok {
				sl.ledgered(st, count)
			}
		}
	}
	s.ledger = nil
}

// keyState keeps the latest state of each blocked key of the batch's
// partitions (key ordering's, in the state topic beside the ledger), for
// parkedTooLong; it says whether m was one.
func (s *scan) keyState(m *kafka.Message) bool {
	sk := string(m.Key)
	p, ok := keyorder.PartOf(sk)
	if !ok {
		return false
	}
	if p.Topic != s.source || s.batch[p.Partition] == nil {
		return true
	}
	if s.keys == nil {
		s.keys = map[string]*keyorder.State{}
	}
	st, newer, err := keyorder.DecodeState(sk, m.Value)
	if m.Value == nil || newer != nil || err != nil || len(st.Parked) == 0 {
		delete(s.keys, sk) // free, or nothing parked that can be read
		return true
	}
	s.keys[sk] = st
	return true
}

// parkedTooLong notes a record the commit parks that has waited behind
// its key's head (since it was parked, or since that head became the
// head) longer than a head can take plus the stuck bound's allowance: its
// head never settles. It is the parked twin of waitsTooLong, and runs
// before judge, which counts each partition's stuck records.
func (s *scan) parkedTooLong() {
	bound := DefaultStuckAfter(s.cfg) + s.o.StuckAfter
	for _, sk := range slices.Sorted(maps.Keys(s.keys)) {
		st := s.keys[sk]
		p, _ := keyorder.PartOf(sk)
		pt := s.batch[p.Partition]
		for _, sl := range st.Parked {
			waited, ok := st.Waited(sl, s.o.Now)
			if !ok || sl.Lost || waited <= bound || pt.committed < 0 || !pt.parked.Holds(sl.Offset) {
				continue
			}
			if _, in := s.at(p.Partition, sl.Offset); in == nil {
				continue // outside the audited window
			}
			if !s.firstStuck(p.Partition, sl.Offset) {
				continue
			}
			since := s.o.Now.Add(-waited)
			s.note(KindStuck, &Coord{Topic: s.source, Partition: p.Partition, Offset: sl.Offset}, Coord{},
				fmt.Sprintf("parked behind %q, an earlier record of its key, since %s (%s): longer than a head can take plus the stuck bound (%s), so that record never settles; is it stuck, lost or held?",
					headOf(st.Head), since.UTC().Format(time.RFC3339), waited.Round(time.Second), bound))
		}
	}
	s.keys = nil
}

// headOf is a key's head (relay.key.head) as a finding quotes it: at
// most 200 bytes.
func headOf(h string) string {
	if len(h) > 200 {
		return h[:200]
	}
	return h
}

// parseID splits a relay.message.id, topic/partition/offset; topic names
// cannot hold a slash.
func parseID(id string) (topic string, p int32, off int64, err error) {
	i := strings.LastIndexByte(id, '/')
	j := -1
	if i > 0 {
		j = strings.LastIndexByte(id[:i], '/')
	}
	if j <= 0 {
		return "", 0, 0, fmt.Errorf("relay.message.id %q is not topic/partition/offset", id)
	}
	pp, perr := strconv.ParseInt(id[j+1:i], 10, 32)
	o, oerr := strconv.ParseInt(id[i+1:], 10, 64)
	if perr != nil || oerr != nil {
		return "", 0, 0, errors.New("relay.message.id " + strconv.Quote(id) + " is not topic/partition/offset")
	}
	return id[:j], int32(pp), o, nil
}

// waitsTooLong notes a copy that waits behind an earlier record of its key
// (KEY_BLOCKED with relay.key.head) and has waited behind that same head
// longer than a head can take — its retry budget and last tier
// (DefaultStuckAfter) — plus the stuck bound's allowance for lateness: a
// key whose followers keep hopping that long has a head that never
// settles. Each hop is a fresh copy, due soon, which aging alone would
// never call stuck.
func (s *scan) waitsTooLong(m *kafka.Message, topic string, p int32, off int64) bool {
	head, ok := envelope.Lookup(m.Headers, envelope.KeyHead)
	code, _ := envelope.Lookup(m.Headers, envelope.ErrorCode)
	since, _ := envelope.Lookup(m.Headers, envelope.FirstFailedAt)
	t, err := time.Parse(time.RFC3339Nano, string(since))
	if !ok || len(head) == 0 || string(code) != keyBlocked || err != nil {
		return false
	}
	waited, bound := s.o.Now.Sub(t), DefaultStuckAfter(s.cfg)+s.o.StuckAfter
	if waited <= bound {
		return false
	}
	if !s.firstStuck(p, off) {
		return true
	}
	s.note(KindStuck, &Coord{Topic: topic, Partition: p, Offset: off}, coordOf(m),
		fmt.Sprintf("waits behind %q, an earlier record of its key, since %s (%s): longer than a head can take plus the stuck bound (%s), so that record never settles; is it stuck, lost or held?",
			headOf(string(head)), t.UTC().Format(time.RFC3339), waited.Round(time.Second), bound))
	return true
}

// firstStuck counts source offset off of partition p as stuck, once: a
// record can have two copies in flight at the cut (one consumed and
// copied again since), and it is one record stuck. It says whether this
// was the first.
// The mark is a bit of the record's slot: no memory beyond the window's.
func (s *scan) firstStuck(p int32, off int64) bool {
	_, sl := s.at(p, off)
	if sl == nil || *sl&stuck != 0 {
		return false
	}
	*sl |= stuck
	s.rep.partitionStuck(p)
	return true
}

// keyBlocked is the code of a copy that only waits behind its key (the
// pipeline's CodeKeyBlocked, which the audit does not import).
const keyBlocked = "KEY_BLOCKED"

// aging notes a copy in flight that relay should have consumed long ago:
// a tier copy past its relay.not.before, or a replay copy past its
// publication, by more than the stuck bound (a key whose head never
// settles, a partition paused for good, a relay that stopped consuming).
func (s *scan) aging(m *kafka.Message, r role, topic string, p int32, off int64) {
	due := m.Timestamp
	if r == roleTier {
		nb, ok := envelope.Lookup(m.Headers, envelope.NotBefore)
		t, err := time.Parse(time.RFC3339Nano, string(nb))
		if !ok || err != nil {
			return // a tier copy without its due time: no age to judge
		}
		due = t
	}
	if due.IsZero() {
		return
	}
	if ahead, horizon := due.Sub(s.o.Now), DefaultStuckAfter(s.cfg)+s.o.StuckAfter; ahead > horizon {
		// relay never makes a copy due further ahead than a tier's
		// delay, nor publishes one in the future: left alone, it would
		// count as in flight for ever.
		if s.firstStuck(p, off) {
			s.note(KindStuck, &Coord{Topic: topic, Partition: p, Offset: off}, coordOf(m),
				fmt.Sprintf("a copy in flight due at %s, %s ahead: further than relay ever makes a copy wait (%s); a clock far ahead, or a record not written by this relay", due.UTC().Format(time.RFC3339), ahead.Round(time.Second), horizon))
		}
		return
	}
	overdue := s.o.Now.Sub(due)
	if overdue <= s.o.StuckAfter {
		// Due, or late within the bound: unless it is a follower whose
		// head never settles, nothing to say. (Overdue, the copy is
		// reported as such first: relay may not be consuming at all.)
		if r == roleTier {
			s.waitsTooLong(m, topic, p, off)
		}
		return
	}
	if !s.firstStuck(p, off) {
		return
	}
	s.note(KindStuck, &Coord{Topic: topic, Partition: p, Offset: off}, coordOf(m),
		fmt.Sprintf("a copy in flight since %s, overdue by %s: more than the stuck bound %s (the retry budget plus the longest tier delay, or --stuck-after); is relay consuming %s[%d]?",
			due.UTC().Format(time.RFC3339), overdue.Round(time.Second), s.o.StuckAfter, *m.TopicPartition.Topic, m.TopicPartition.Partition))
}
