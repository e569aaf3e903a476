package ledger

import (
	"sort"
	"sync"
	"time"
)

// Item is what the summaries need of one failure.
type Item struct {
	State      State
	Code       string
	Since      time.Time // first quarantined
	RecordTime time.Time // timestamp of its latest quarantine record
	Topic      string    // quarantine topic of that record
	count      int
	rank       int
	discarded  bool // see discardedIn
}

// ItemOf is the summary item of an entry.
func ItemOf(en *Entry) Item {
	return Item{State: en.State, Code: en.Code, Since: en.Since, RecordTime: en.RecordTime, Topic: en.Topic}
}

// CodeStats summarises the unresolved failures of one code.
type CodeStats struct {
	Code       string    `json:"errorCode"`
	Unresolved int       `json:"unresolved"`
	Oldest     time.Time `json:"oldestSince"`
}

// Summary is the state of a quarantine at a glance.
type Summary struct {
	ByState map[State]int `json:"byState"`
	ByCode  []CodeStats   `json:"unresolvedByCode"`
	// Deadline is, per quarantine topic, the earliest time retention may
	// delete an unresolved record: its record timestamp plus retention.
	// Only topics with a known, finite retention are present.
	Deadline map[string]time.Time `json:"deadline,omitempty"`
	// ByTopic counts the unresolved failures of each quarantine topic
	// (those whose quarantine record's topic is known).
	ByTopic map[string]int `json:"unresolvedByTopic,omitempty"`
}

// Summarize counts items by state, unresolved ones by code with the
// oldest, and finds each quarantine topic's first retention deadline.
// retention gives a topic's retention; ok is false when it is unknown or
// infinite.
func Summarize(items []Item, retention func(topic string) (time.Duration, bool)) Summary {
	z := NewSummarizer(retention)
	for i := range items {
		z.Add(&items[i])
	}
	return z.Summary()
}

// Summarizer is Summarize one item at a time: its memory grows with the
// codes and topics, not the items.
type Summarizer struct {
	s         Summary
	codes     map[string]*CodeStats
	retention func(topic string) (time.Duration, bool)
}

// NewSummarizer starts a summary; retention is as Summarize's.
func NewSummarizer(retention func(topic string) (time.Duration, bool)) *Summarizer {
	return &Summarizer{s: Summary{ByState: map[State]int{}, Deadline: map[string]time.Time{}, ByTopic: map[string]int{}},
		codes: map[string]*CodeStats{}, retention: retention}
}

// Add counts one item.
func (z *Summarizer) Add(it *Item) {
	s := &z.s
	s.ByState[it.State]++
	if !Unresolved(it.State) {
		return
	}
	c := z.codes[it.Code]
	if c == nil {
		c = &CodeStats{Code: it.Code, Oldest: it.Since}
		z.codes[it.Code] = c
	}
	c.Unresolved++
	if it.Since.Before(c.Oldest) {
		c.Oldest = it.Since
	}
	if it.Topic != "" {
		s.ByTopic[it.Topic]++
	}
	if it.Topic == "" || it.RecordTime.IsZero() || z.retention == nil {
		return
	}
	if r, ok := z.retention(it.Topic); ok {
		d := it.RecordTime.Add(r)
		if old, seen := s.Deadline[it.Topic]; !seen || d.Before(old) {
			s.Deadline[it.Topic] = d
		}
	}
}

// Summary is what the items added so far sum to.
func (z *Summarizer) Summary() Summary {
	s := z.s
	s.ByCode = nil
	for _, c := range z.codes {
		s.ByCode = append(s.ByCode, *c)
	}
	sort.Slice(s.ByCode, func(i, j int) bool { return s.ByCode[i].Code < s.ByCode[j].Code })
	return s
}

// Index follows the ledger of some state-topic partitions (those of the
// source partitions a relay owns) for its metrics. It holds one small item
// per failure; it is safe for concurrent use.
type Index struct {
	mu    sync.Mutex
	parts map[int32]map[string]*Item
}

// Apply adds a change read from partition p.
func (x *Index) Apply(p int32, e *Event) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.parts == nil {
		x.parts = map[int32]map[string]*Item{}
	}
	m := x.parts[p]
	if m == nil {
		m = map[string]*Item{}
		x.parts[p] = m
	}
	it := m[e.ID]
	if it == nil {
		it = &Item{Since: e.At, count: -1}
		m[e.ID] = it
	}
	if e.Topic != "" && (e.ReplayCount >= it.count) {
		it.Topic, it.RecordTime = e.Topic, e.RecordTime
		if e.Code != "" {
			it.Code = e.Code
		}
	}
	if it.Code == "" {
		it.Code = e.Code
	}
	if (e.State == Open || e.State == FailedAgain) && e.At.Before(it.Since) {
		it.Since = e.At
	}
	r := Rank(e)
	if e.Outcome == OutcomeDuplicate {
		if it.State == Replaying && e.ReplayCount >= it.count {
			it.State = e.State // a copy of a settled failure: settled as that
		}
		return
	}
	if e.ReplayCount > it.count || (e.ReplayCount == it.count && r >= it.rank) {
		it.State, it.count, it.rank = e.State, e.ReplayCount, r
	}
	it.discarded = it.discarded || e.State == Discarded
	if it.discarded && it.State != Resolved {
		it.State = Discarded
	}
}

// Drop forgets partitions (revoked, or about to be read again).
func (x *Index) Drop(partitions []int32) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, p := range partitions {
		delete(x.parts, p)
	}
}

// Summary summarises every failure the index holds.
func (x *Index) Summary(retention func(string) (time.Duration, bool)) Summary {
	x.mu.Lock()
	items := make([]Item, 0, 64)
	for _, m := range x.parts {
		for _, it := range m {
			items = append(items, *it)
		}
	}
	x.mu.Unlock()
	return Summarize(items, retention)
}

// Settled remembers, for the partitions a relay owns, which failures are
// settled — resolved, discarded, or failed again at some replay count — so
// that a second copy of a replayed record (two replays of one failure, or a
// replay published twice) is recognised and not output again. It is used
// only by the transaction loop's goroutine; changes of an open transaction
// are undone by Abort.
type Settled struct {
	m       map[string]settled
	journal map[string]*settled
}

type settled struct {
	state     State
	count     int
	partition int32
}

// Check says whether a record of failure id at replay count has been
// settled already, and as what.
func (s *Settled) Check(id string, count int) (state State, done bool) {
	v, ok := s.m[id]
	if !ok {
		return "", false
	}
	switch v.state {
	case Resolved, Discarded:
		return v.state, true
	case FailedAgain:
		return v.state, v.count >= count
	}
	return "", false
}

// Record notes a change written in the open transaction. A duplicate note
// changes nothing: it is about a copy of a failure settled already.
func (s *Settled) Record(e *Event) {
	if (e.State != Resolved && e.State != Discarded && e.State != FailedAgain) || e.Outcome == OutcomeDuplicate {
		return
	}
	if s.m == nil {
		s.m = map[string]settled{}
		s.journal = map[string]*settled{}
	}
	if _, seen := s.journal[e.ID]; !seen {
		if old, ok := s.m[e.ID]; ok {
			s.journal[e.ID] = &old
		} else {
			s.journal[e.ID] = nil
		}
	}
	s.put(e)
}

func (s *Settled) put(e *Event) {
	if old, ok := s.m[e.ID]; ok && (old.state == Resolved || (old.state == Discarded && e.State != Resolved)) {
		return // settled for good; resolved outranks a discard (see rank)
	}
	s.m[e.ID] = settled{state: e.State, count: e.ReplayCount, partition: e.Partition()}
}

// Commit keeps the open transaction's changes.
func (s *Settled) Commit() { clear(s.journal) }

// Abort undoes the open transaction's changes.
func (s *Settled) Abort() {
	for id, old := range s.journal {
		if old == nil {
			delete(s.m, id)
		} else {
			s.m[id] = *old
		}
	}
	clear(s.journal)
}

// Restore adds the settled failures of state-topic records (key → value,
// as the state topic's restore reads them). Unreadable ledger records (a
// newer version's, damaged ones) are skipped and returned: one bad record
// must not keep relay from starting.
func (s *Settled) Restore(entries map[string][]byte) (skipped []error) {
	if s.m == nil {
		s.m = map[string]settled{}
		s.journal = map[string]*settled{}
	}
	for k, v := range entries {
		e, ok, err := Decode(k, v)
		if err != nil {
			skipped = append(skipped, err)
			continue
		}
		if ok && e.Outcome != OutcomeDuplicate && (e.State == Resolved || e.State == Discarded || e.State == FailedAgain) {
			if old, seen := s.m[e.ID]; seen && old.state == FailedAgain && e.State == FailedAgain && old.count > e.ReplayCount {
				continue
			}
			s.put(e)
		}
	}
	return skipped
}

// Forget drops the failures of revoked partitions.
func (s *Settled) Forget(partitions []int32) {
	for id, v := range s.m {
		for _, p := range partitions {
			if v.partition == p {
				delete(s.m, id)
			}
		}
	}
}

// Len is the number of settled failures held.
func (s *Settled) Len() int { return len(s.m) }
