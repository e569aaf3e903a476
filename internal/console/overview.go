package console

import (
	"net/http"
	"sort"
	"sync"
	"time"

	"relay/internal/ledger"
	"relay/internal/quarantine"
)

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	snap, at, err := s.snapshot(r.Context(), false)
	if err != nil {
		s.failErr(w, r, "reading the quarantine", err)
		return
	}
	now := time.Now()
	audits, auditErr := readAudit(s.cfg.Console.AuditFile)
	if auditErr != nil {
		s.log.Warn("the audit file cannot be read", "file", s.cfg.Console.AuditFile, "err", auditErr)
	}
	d := overviewData{at: at, Running: s.replays.list(), Recent: recentReplays(snap, 5), Sources: s.sourceViews(snap, now, audits)}
	s.render(w, r, http.StatusOK, "overview", "Overview", d)
}

// failures is what the overview reads of the quarantine: an Index (a
// test gives it failures of its own).
type failures interface {
	Retention() map[string]time.Duration
	Each(fn func(fl *quarantine.Failure) bool)
}

// versioned is a quarantine that says when it changes (Index.Version).
type versioned interface{ Version() uint64 }

// summaryReuse is how long the overview's pass over the quarantine is
// reused while the quarantine does not change: one bar of the finest
// chart (an hour in 24 bars). The counts are always the quarantine's as
// read; the ages are taken at each page; the chart may end up to a bar
// before the page.
const summaryReuse = time.Hour / chartBuckets

// summary is one pass over the quarantine, reused by the pages that
// follow while the quarantine does not change (see summaryReuse): a
// pass over a million failures takes a tenth of a second or more.
type summary struct {
	mu      sync.Mutex
	version uint64
	at      time.Time // of the pass; zero: none
	accs    []*sourceAcc
}

// sourceViews summarise each source's failures, in one pass over the
// quarantine whatever the number of sources, or none when the last
// pass still holds.
func (s *Server) sourceViews(snap failures, now time.Time, audits map[string]*auditResult) []sourceView {
	accs := s.summarize(snap, now)
	out := make([]sourceView, len(accs))
	for i, a := range accs {
		out[i] = a.view(now)
		out[i].Audit, out[i].AuditConfigured = audits[out[i].Source], s.cfg.Console.AuditFile != ""
	}
	return out
}

// summarize is the last pass when snap has not changed since and it is
// recent, or a new one.
func (s *Server) summarize(snap failures, now time.Time) []*sourceAcc {
	v, ok := snap.(versioned)
	if !ok {
		return s.pass(snap, now)
	}
	sum := &s.summary
	sum.mu.Lock()
	defer sum.mu.Unlock()
	version := v.Version()
	if !sum.at.IsZero() && sum.version == version && now.Sub(sum.at) < summaryReuse && !now.Before(sum.at) {
		return sum.accs
	}
	sum.accs, sum.version, sum.at = s.pass(snap, now), version, now
	return sum.accs
}

// pass summarises each source's failures in one pass over snap.
func (s *Server) pass(snap failures, now time.Time) []*sourceAcc {
	ret := snap.Retention()
	accs := make([]*sourceAcc, len(s.cfg.SourceTopics))
	bySource, byTopic := map[string]*sourceAcc{}, map[string]*sourceAcc{}
	for i, src := range s.cfg.SourceTopics {
		topic := s.cfg.Derived(src).Quarantine
		a := &sourceAcc{v: sourceView{Source: src, Topic: topic, Owner: s.cfg.Owner(src), Threshold: s.cfg.Threshold(src)},
			codes: map[string]*codeAcc{}, tally: newTally(now)}
		a.ret, a.hasRet = ret[topic]
		accs[i], bySource[src], byTopic[topic] = a, a, a
	}
	snap.Each(func(fl *quarantine.Failure) bool {
		a := bySource[fl.Source.Topic]
		if a != nil {
			a.add(fl)
		}
		if fl.Record != nil {
			if b := byTopic[fl.Record.Topic]; b != nil && b != a {
				b.add(fl)
			}
		}
		return true
	})
	return accs
}

// sourceAcc gathers one source's overview.
type sourceAcc struct {
	v               sourceView
	codes           map[string]*codeAcc
	last            *codeAcc // failures come in runs of one code
	first, deadline int64    // unix ns; 0 none
	tally           *tally
	ret             time.Duration
	hasRet          bool
}

type codeAcc struct {
	row    codeRow
	oldest int64
}

func (a *sourceAcc) add(fl *quarantine.Failure) {
	since := fl.Since.UnixNano()
	a.tally.in(since)
	switch fl.State {
	case ledger.Resolved, ledger.Discarded:
		if fl.State == ledger.Resolved {
			a.v.Resolved++
		} else {
			a.v.Discarded++
		}
		if !fl.ChangedAt.IsZero() {
			a.tally.out(fl.ChangedAt.UnixNano())
		}
		return
	}
	a.v.Unresolved++
	c := a.last
	if c == nil || c.row.Code != fl.Code {
		if c = a.codes[fl.Code]; c == nil {
			c = &codeAcc{row: codeRow{Code: fl.Code}, oldest: since}
			a.codes[fl.Code] = c
		}
		a.last = c
	}
	c.row.N++
	switch fl.State {
	case ledger.Open:
		c.row.Open++
	case ledger.Replaying:
		c.row.Replaying++
	case ledger.FailedAgain:
		c.row.FailedAgain++
	}
	c.oldest = min(c.oldest, since)
	if a.first == 0 || since < a.first {
		a.first = since
	}
	if a.hasRet && fl.Record != nil && !fl.Record.Timestamp.IsZero() {
		if d := fl.Record.Timestamp.Add(a.ret).UnixNano(); a.deadline == 0 || d < a.deadline {
			a.deadline = d
		}
	}
}

func (a *sourceAcc) view(now time.Time) sourceView {
	v := a.v
	for _, c := range a.codes {
		row := c.row // a is shared by the pages that reuse it
		row.Oldest = quarantine.Age(now.Sub(time.Unix(0, c.oldest)))
		v.Codes = append(v.Codes, row)
	}
	sort.Slice(v.Codes, func(i, j int) bool {
		if v.Codes[i].N != v.Codes[j].N {
			return v.Codes[i].N > v.Codes[j].N
		}
		return v.Codes[i].Code < v.Codes[j].Code
	})
	if a.first != 0 {
		v.Oldest = quarantine.Age(now.Sub(time.Unix(0, a.first)))
	}
	v.Over = v.Threshold > 0 && v.Unresolved > v.Threshold
	if a.hasRet {
		v.Retention = quarantine.Age(a.ret)
		v.Level = "ok"
		if a.deadline != 0 {
			deadline := time.Unix(0, a.deadline)
			left := deadline.Sub(now)
			v.Headroom, v.Deadline = quarantine.Age(left), deadline.UTC().Format(time.RFC3339)
			switch {
			case left < a.ret/10:
				v.Level = "red"
			case left < a.ret*3/10:
				v.Level = "amber"
			}
		}
	}
	v.Chart = a.tally.chart()
	return v
}

// recentReplays are the n latest replays the ledger knows of.
func recentReplays(snap *quarantine.Index, n int) []recentReplay {
	var out []recentReplay
	for _, t := range snap.Replays(n) {
		out = append(out, recentReplay{ID: t.ID, Actor: t.Actor, Reason: t.Reason, At: t.At.UTC().Format(time.RFC3339),
			Published: t.Published, Resolved: t.Resolved, FailedAgain: t.FailedAgain})
	}
	return out
}
