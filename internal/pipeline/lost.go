package pipeline

import (
	"cmp"
	"slices"
	"time"

	"relay/internal/keyorder"
	"relay/internal/txn"
)

// A parked record gone from its source (see keyorder's gone) is lost in a
// transaction of its own partition: the loop hands the machine a carrier
// record of that partition through Due, as it hands back a parked record
// whose turn has come, and the carrier's outputs are the key states that
// pass over the lost records. The carrier changes no offset but the floor,
// which no longer stops at them.

// lost is what the machine keeps of the records found gone.
type lost struct {
	// carriers are the carrier records handed out, by partition, until
	// handled.
	carriers map[keyorder.Part]*txn.Record
	// looked is when the partitions' log starts were last looked at.
	looked time.Time
	// pending counts the records lost in the open transaction, total
	// since start once committed.
	pending, total int64
}

// SetLogStart gives key ordering where each source partition's log
// starts, as the consumer last heard it (no request to the brokers): a
// parked record below it is gone even when no record of the partition is
// read again.
func (m *Machine) SetLogStart(f func(topic string, partition int32) (int64, bool)) {
	m.keys.LogStart = f
}

// passed notes the read of rec, a record of its partition read (not a
// parked one handed back): parked records below it that were not read
// again are gone.
func (m *Machine) passed(rec *txn.Record) {
	m.keys.Passed(partOf(rec), rec.Offset)
}

// lostCarriers looks, at most once a second, whether the logs of the
// partitions with parked records still to be read again start above
// them, and hands out a carrier for each partition with records found
// gone.
func (m *Machine) lostCarriers() []*txn.Record {
	if m.now().Sub(m.lost.looked) >= time.Second {
		m.lost.looked = m.now()
		for _, p := range m.keys.Awaiting() {
			m.keys.Look(p)
			if f := m.keys.LogStart; f != nil {
				if start, ok := f(p.Topic, p.Partition); ok && start > 0 {
					m.keys.Trimmed(p, start)
				}
			}
		}
	}
	parts := m.keys.LostParts()
	if len(parts) == 0 {
		return nil
	}
	if m.lost.carriers == nil {
		m.lost.carriers = map[keyorder.Part]*txn.Record{}
	}
	out := make([]*txn.Record, 0, len(parts))
	for p, lowest := range parts {
		c := m.lost.carriers[p]
		if c == nil || c.Offset != lowest {
			// Its offset is the lowest record found gone: the loop
			// rewinds the partition no further back than its commit,
			// or this record when nothing was committed.
			c = &txn.Record{Topic: p.Topic, Partition: p.Partition, Offset: lowest}
			m.lost.carriers[p] = c
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *txn.Record) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// carried says whether rec is a carrier, and if so are the key states
// that pass over its partition's records found gone.
func (m *Machine) carried(rec *txn.Record) (outs []txn.Output, ok bool) {
	p := partOf(rec)
	if c := m.lost.carriers[p]; c == nil || c != rec {
		return nil, false
	}
	delete(m.lost.carriers, p)
	// One state record per key, whatever number of its records are
	// lost: each holds the key's whole queue.
	byKey := map[string][]keyorder.GoneSlot{}
	var keys []string
	for _, g := range m.keys.TakeLost(p) {
		if _, seen := byKey[g.Key]; !seen {
			keys = append(keys, g.Key)
		}
		byKey[g.Key] = append(byKey[g.Key], g)
	}
	for _, sk := range keys {
		ks := m.keys.get(sk)
		if ks == nil {
			continue
		}
		for _, g := range byKey[sk] {
			m.lost.pending++
			m.log.Warn("a parked record is gone from its source partition (retention, DeleteRecords, or the group's offset reset past it) and was never handled: its key goes on without it, and the partition commits past it",
				"topic", p.Topic, "partition", p.Partition, "offset", g.Offset, "key_state", sk, "seq", g.Seq,
				"hint", "relay audit says unverifiable of a record retention or DeleteRecords removed, and lost of one the group's offset was reset past; keep the source's retention above RELAY_KEY_PARK_MAX_AGE plus the longest outage")
			if ks != nil {
				ks = keyorder.Lose(ks, g.Seq)
			}
		}
		outs = append(outs, m.keys.put(sk, p.Partition, ks))
	}
	return outs, true
}
