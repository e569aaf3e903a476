package pipeline

import (
	"errors"
	"strconv"

	"relay/internal/envelope"
	"relay/internal/keyorder"
	"relay/internal/ledger"
	"relay/internal/tiers"
	"relay/internal/txn"
)

// Codes of key ordering.
const (
	// CodeKeyBlocked marks a record that waits in a tier behind an earlier
	// record of its key; it has not failed itself.
	CodeKeyBlocked = "KEY_BLOCKED"
	// CodeKeyHeld quarantines a record whose key's earlier record was
	// quarantined, under the hold setting, so they can be replayed together.
	CodeKeyHeld = "KEY_HELD"
)

// keyedRecord is what a pass knows of its record's key under key ordering.
type keyedRecord struct {
	sk    string
	state *keyState // nil: the key is not blocked
	seq   int64     // the record's place; -1 for a source record of a free key
	// parked: a parked source record, handed back at its turn.
	parked bool
}

// takeTurn puts p in its key's queue (key ordering): a record of a blocked
// key that is not at its turn is parked or follows the key's head into
// its tier, and done is true. A record at its turn, or of a free key, goes
// on.
func (m *Machine) takeTurn(p *pass) (outs []txn.Output, done bool) {
	p.keyed = m.keyOrder && p.rec.Key != nil && len(p.origin.Routes.Tiers) > 0
	if !p.keyed {
		return nil, false
	}
	p.kr = keyedRecord{sk: stateKey(p.origin.Routes.Source, p.rec.Partition, p.rec.Key), seq: -1}
	p.kr.state = m.keys.get(p.kr.sk)
	switch {
	case p.origin.Tier >= 0:
		p.kr.seq = keySeq(p.rec.Headers)
	case p.rec.Topic == p.origin.Routes.Source:
		if _, seq, ok := m.keys.SlotOf(partOf(p.rec), p.rec.Offset); ok {
			p.kr.seq, p.kr.parked = seq, true
		}
	}
	if p.kr.state == nil {
		return nil, false
	}
	switch {
	case p.kr.seq < 0:
		// A new record of a blocked key joins its queue.
		return m.join(p), true
	case p.kr.seq != p.kr.state.Next:
		// Not its turn: back behind the head.
		outs = m.follow(p, p.kr.seq)
		if p.kr.parked {
			// Not expected (a parked record is handed back at its
			// turn); it waits in the tier now.
			outs = append(outs, m.keys.put(p.kr.sk, p.rec.Partition, keyorder.Unpark(p.kr.state, p.kr.seq)))
		}
		return outs, true
	}
	return nil, false
}

// join puts a new record of a blocked key at the end of its queue: parked
// when the limits allow, else into its head's tier.
func (m *Machine) join(p *pass) []txn.Output {
	ks := p.kr.state
	if p.rec.Topic == p.origin.Routes.Source {
		part, size := partOf(p.rec), recordSize(p.rec)
		m.keys.agree()
		ok, why := m.keys.CanPark(m.keys.Park, part, p.rec.Offset, size, ks.NotBefore, m.now())
		if ok {
			ns, _ := keyorder.Park(ks, p.rec.Offset, m.now())
			m.keys.Keep(part, p.rec.Offset, p.rec, size)
			m.count(ledger.OutcomeRetry, CodeKeyBlocked)
			p.traceOutcome(ledger.OutcomeRetry, tiers.Ordering.String(), CodeKeyBlocked, "parked behind "+ks.Head+", an earlier record of its key")
			return []txn.Output{m.keys.put(p.kr.sk, p.rec.Partition, ns)}
		}
		if why != "off" {
			if m.pending.refused == nil {
				m.pending.refused = map[string]int64{}
			}
			m.pending.refused[why]++
		}
	}
	seq, ns := ks.Tail, *ks
	ns.Tail++
	return append(m.follow(p, seq), m.keys.put(p.kr.sk, p.rec.Partition, &ns))
}

func partOf(rec *txn.Record) keyorder.Part {
	return keyorder.Part{Topic: rec.Topic, Partition: rec.Partition}
}

// recordSize is what a parked record costs in memory: its bytes, and
// about what Go keeps around them.
func recordSize(rec *txn.Record) int64 {
	n := int64(len(rec.Topic) + len(rec.Key) + len(rec.Value) + 160)
	for _, h := range rec.Headers {
		n += int64(len(h.Key) + len(h.Value) + 40)
	}
	return n
}

// follow writes p's record behind the head of its key: into the head's
// tier, due with the head, keeping (or giving) its place seq. It is not an
// attempt.
func (m *Machine) follow(p *pass, seq int64) []txn.Output {
	ks := p.kr.state
	now := m.now()
	f := m.envelopeOf(p)
	f.Attempt, f.FirstFailedAt, f.LastFailedAt, f.NotBefore = p.st.Attempt-1, now, now, ks.NotBefore
	f.Class, f.Code = tiers.Ordering.String(), CodeKeyBlocked
	f.Message = "waits behind " + ks.Head + ", an earlier record of its key"
	if prev := p.prev; prev != nil && prev.Attempt > 0 {
		// A tier record: it keeps its history. (A replayed record starts
		// a new pass: it has none.)
		f.Attempt, f.FirstFailedAt, f.LastFailedAt = prev.Attempt, prev.FirstFailedAt, prev.LastFailedAt
		if prev.Code != CodeKeyBlocked {
			f.Class, f.Code, f.Message = prev.Class, prev.Code, prev.Message
		}
		f.SchemaID, f.SchemaSubject, f.SchemaVersion = prev.SchemaID, prev.SchemaSubject, prev.SchemaVersion
	}
	f.KeyHead = ks.Head
	if prev := p.prev; ks.Head != "" && prev != nil && prev.Code == CodeKeyBlocked && prev.KeyHead == ks.Head && !prev.FirstFailedAt.IsZero() {
		// It hops again behind the same head: it has waited since its
		// first hop behind it (relay audit judges how long).
		f.FirstFailedAt = prev.FirstFailedAt
	}
	m.count(ledger.OutcomeRetry, CodeKeyBlocked)
	p.traceOutcome(ledger.OutcomeRetry, f.Class, f.Code, f.Message)
	return withSeq([]txn.Output{tierRecord(p, p.origin.Routes.Tiers[tierOf(ks, p.origin.Routes)], f, nil, now)}, seq)
}

// tierOf is the configured tier a key's followers go to: its head's, or,
// when the key's state names a tier that is no longer configured (tiers
// removed since it was written), the last one. Any tier keeps the key's
// order, since a follower is tried only at its turn; the last is the one a
// failing head stays in.
func tierOf(ks *keyState, r *Routes) int {
	return min(max(ks.Tier, 0), len(r.Tiers)-1)
}

// errHeld is why a record of a held key is quarantined.
var errHeld = errors.New("held: an earlier record of its key was quarantined (ordering hold)")

// checkHeld quarantines a record at its turn whose key is held: an earlier
// record of the key was quarantined under the hold setting.
func (m *Machine) checkHeld(p *pass) (outs []txn.Output, done bool) {
	if !p.keyed || p.kr.state == nil || !p.kr.state.Held {
		return nil, false
	}
	outs = m.toEnd(p, verdict{Decision: tiers.Decision{Kind: tiers.Quarantine, Class: tiers.Ordering, Code: CodeKeyHeld}, cause: errHeld})
	return m.release(p, withSeq(outs, p.kr.seq)), true
}

// release lets the next record of p's key go when p held its key's turn.
func (m *Machine) release(p *pass, outs []txn.Output) []txn.Output {
	if !p.keyed || p.kr.state == nil {
		return outs
	}
	return append(outs, m.keys.put(p.kr.sk, p.rec.Partition, advance(p.kr.state)))
}

// keyedOutcome updates the key's state for a record that failed at its
// turn (or of a free key): a tier hop makes (or keeps) the key blocked with
// this record as its head; a terminal state lets the next record go, or,
// with Hold and a quarantine, holds the rest.
func (m *Machine) keyedOutcome(p *pass, d tiers.Decision, outs []txn.Output) []txn.Output {
	kr := p.kr
	switch d.Kind {
	case tiers.RetryTier:
		ns := &keyState{Next: 0, Tail: 1}
		switch {
		case kr.parked:
			// A parked record at its turn: it waits in the tier now.
			ns = keyorder.Unpark(kr.state, kr.seq)
		case kr.state != nil:
			c := *kr.state
			ns = &c
		}
		if ns.Head != p.id {
			ns.HeadSince = m.now().UnixMilli() // a new head: its followers wait behind it from now
		}
		ns.Tier, ns.NotBefore, ns.Head = d.Tier, m.now().Add(d.Delay), p.id
		return append(withSeq(outs, ns.Next), m.keys.put(kr.sk, p.rec.Partition, ns))
	default:
		if kr.state == nil {
			return outs // a free key: nothing follows it
		}
		ns := advance(kr.state)
		if ns != nil && d.Kind == tiers.Quarantine && m.keys.Hold {
			ns.Held = true
		}
		return append(withSeq(outs, kr.seq), m.keys.put(kr.sk, p.rec.Partition, ns))
	}
}

// advance resolves the record at the head of a key's queue; nil when
// nothing of the key is outstanding any more.
func advance(ks *keyState) *keyState { return keyorder.Advance(ks) }

// keySeq reads relay.key.seq; -1 if absent or unreadable.
func keySeq(headers []txn.Header) int64 {
	v, ok := envelope.Lookup(headers, envelope.KeySeq)
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

func withSeq(outs []txn.Output, seq int64) []txn.Output {
	for i := range outs {
		outs[i].Headers = append(outs[i].Headers, txn.Header{Key: envelope.KeySeq, Value: []byte(strconv.FormatInt(seq, 10))})
	}
	return outs
}
