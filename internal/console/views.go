package console

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"relay/internal/ledger"
	"relay/internal/quarantine"
)

// pageSize is how many failures a list page shows.
const pageSize = 50

type codeRow struct {
	Code                            string
	Open, Replaying, FailedAgain, N int
	Oldest                          string
}

type sourceView struct {
	Source, Topic, Owner string
	Threshold            int
	Over                 bool
	Unresolved           int
	Resolved, Discarded  int
	Codes                []codeRow
	Oldest               string
	Retention            string
	Headroom             string
	Level                string // "", "ok", "amber", "red"
	Deadline             string
	Audit                *auditResult
	AuditConfigured      bool
	Chart                chart
}

type recentReplay struct {
	ID, Actor, Reason, At            string
	Published, Resolved, FailedAgain int
}

type overviewData struct {
	Sources []sourceView
	Running []*replayRun
	Recent  []recentReplay
	at      time.Time
}

func (d overviewData) asOf() time.Time { return d.at }

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
	d := overviewData{at: at, Running: s.replays.list(), Recent: recentReplays(snap, 5)}
	for _, src := range s.cfg.SourceTopics {
		d.Sources = append(d.Sources, s.sourceView(snap, src, now, audits))
	}
	s.render(w, r, http.StatusOK, "overview", "Overview", d)
}

func (s *Server) sourceView(snap *quarantine.Snapshot, src string, now time.Time, audits map[string]*auditResult) sourceView {
	topic := s.cfg.Derived(src).Quarantine
	v := sourceView{Source: src, Topic: topic, Owner: s.cfg.Owner(src), Threshold: s.cfg.Threshold(src),
		Audit: audits[src], AuditConfigured: s.cfg.Console.AuditFile != ""}
	codes := map[string]*codeRow{}
	oldest := map[string]time.Time{}
	var first, deadline time.Time
	var inflow, resolved []time.Time
	for _, fl := range snap.Failures {
		if fl.Source.Topic != src && (fl.Record == nil || fl.Record.Topic != topic) {
			continue
		}
		inflow = append(inflow, fl.Since)
		switch fl.State {
		case ledger.Resolved, ledger.Discarded:
			if fl.State == ledger.Resolved {
				v.Resolved++
			} else {
				v.Discarded++
			}
			if fl.Entry != nil {
				resolved = append(resolved, fl.Entry.Current().At)
			}
			continue
		}
		v.Unresolved++
		c := codes[fl.Code]
		if c == nil {
			c = &codeRow{Code: fl.Code}
			codes[fl.Code] = c
			oldest[fl.Code] = fl.Since
		}
		c.N++
		switch fl.State {
		case ledger.Open:
			c.Open++
		case ledger.Replaying:
			c.Replaying++
		case ledger.FailedAgain:
			c.FailedAgain++
		}
		if fl.Since.Before(oldest[fl.Code]) {
			oldest[fl.Code] = fl.Since
		}
		if first.IsZero() || fl.Since.Before(first) {
			first = fl.Since
		}
		if ret, ok := snap.Retention[topic]; ok && fl.Record != nil && !fl.Record.Timestamp.IsZero() {
			if d := fl.Record.Timestamp.Add(ret); deadline.IsZero() || d.Before(deadline) {
				deadline = d
			}
		}
	}
	for code, c := range codes {
		c.Oldest = quarantine.Age(now.Sub(oldest[code]))
		v.Codes = append(v.Codes, *c)
	}
	sort.Slice(v.Codes, func(i, j int) bool {
		if v.Codes[i].N != v.Codes[j].N {
			return v.Codes[i].N > v.Codes[j].N
		}
		return v.Codes[i].Code < v.Codes[j].Code
	})
	if !first.IsZero() {
		v.Oldest = quarantine.Age(now.Sub(first))
	}
	v.Over = v.Threshold > 0 && v.Unresolved > v.Threshold
	if ret, ok := snap.Retention[topic]; ok {
		v.Retention = quarantine.Age(ret)
		v.Level = "ok"
		if !deadline.IsZero() {
			left := deadline.Sub(now)
			v.Headroom, v.Deadline = quarantine.Age(left), deadline.UTC().Format(time.RFC3339)
			switch {
			case left < ret/10:
				v.Level = "red"
			case left < ret*3/10:
				v.Level = "amber"
			}
		}
	}
	v.Chart = newChart(inflow, resolved, now)
	return v
}

// recentReplays are the n latest replays the ledger knows of.
func recentReplays(snap *quarantine.Snapshot, n int) []recentReplay {
	byID := map[string]*recentReplay{}
	at := map[string]time.Time{}
	for _, fl := range snap.Failures {
		if fl.Entry == nil {
			continue
		}
		for _, e := range fl.Entry.History {
			if e.ReplayID == "" {
				continue
			}
			rp := byID[e.ReplayID]
			if rp == nil {
				rp = &recentReplay{ID: e.ReplayID}
				byID[e.ReplayID] = rp
			}
			switch {
			case e.State == ledger.Replaying:
				rp.Published++
				rp.Actor, rp.Reason = e.Actor, e.Reason
				if t, ok := at[e.ReplayID]; !ok || e.At.Before(t) {
					at[e.ReplayID] = e.At
				}
			case e.State == ledger.Resolved && e.Outcome != ledger.OutcomeDuplicate:
				rp.Resolved++
			case e.State == ledger.FailedAgain:
				rp.FailedAgain++
			}
		}
	}
	out := make([]recentReplay, 0, len(byID))
	for id, rp := range byID {
		rp.At = at[id].UTC().Format(time.RFC3339)
		out = append(out, *rp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At > out[j].At })
	return out[:min(n, len(out))]
}

type listData struct {
	Q                  url.Values
	Query              string
	ReplayURL, BackURL string
	Items              []quarantine.Item
	Classes            map[string]string
	Total              int
	Page               int
	Pages              int
	PrevURL            string
	NextURL            string
	Sources            []string
	States             []ledger.State
	Error              string
	at                 time.Time
}

func (d listData) asOf() time.Time { return d.at }

// specOf reads a filter from a query: the same fields as the commands'
// flags.
func specOf(q url.Values) quarantine.Spec {
	sp := quarantine.Spec{Codes: q.Get("code"), Classes: q.Get("class"), States: q.Get("state"), SchemaVersions: q.Get("schema-version"),
		MinAge: q.Get("min-age"), MaxAge: q.Get("max-age"), Since: q.Get("since"), Until: q.Get("until"), Source: q.Get("source"), Partition: -1}
	if q.Has("key") && q.Get("key") != "" {
		k := q.Get("key")
		sp.Key = &k
	}
	if p := q.Get("partition"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil {
			n = -2 // Build names it
		}
		sp.Partition = n
	}
	return sp
}

// filterQuery keeps only the filter's fields of q, for links.
func filterQuery(q url.Values) url.Values {
	out := url.Values{}
	for _, k := range []string{"code", "class", "state", "schema-version", "min-age", "max-age", "since", "until", "source", "partition", "key"} {
		if v := q.Get(k); v != "" {
			out.Set(k, v)
		}
	}
	return out
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	now := time.Now()
	d := listData{Q: filterQuery(q), Sources: s.cfg.SourceTopics, States: ledger.States, Classes: map[string]string{}}
	d.Query = d.Q.Encode()
	// A replay takes open failures (failed-again ones when asked): the
	// list's state filter is not the replay's.
	rq := filterQuery(q)
	rq.Del("state")
	d.ReplayURL = "/replay?" + rq.Encode()
	d.BackURL = "/failures?" + d.Query
	sp := specOf(q)
	f, err := sp.Build(now)
	if err == nil {
		err = quarantine.CheckSource(s.cfg, f.Source)
	}
	if err != nil {
		d.Error = strings.NewReplacer("--", "").Replace(err.Error())
		s.render(w, r, http.StatusBadRequest, "list", "Failures", d)
		return
	}
	snap, at, err := s.snapshot(r.Context(), false)
	if err != nil {
		s.failErr(w, r, "reading the quarantine", err)
		return
	}
	d.at = at
	d.Page, _ = strconv.Atoi(q.Get("page"))
	d.Page = max(d.Page, 1)
	from := (d.Page - 1) * pageSize
	// One pass, keeping only the page: memory does not grow with the
	// quarantine's size.
	for _, fl := range snap.Failures {
		if !f.Match(fl, now) {
			continue
		}
		if d.Total >= from && d.Total < from+pageSize {
			where := quarantine.Gone
			if fl.Record != nil {
				where = fmt.Sprintf("%s/%d/%d", fl.Record.Topic, fl.Record.Partition, fl.Record.Offset)
				d.Classes[fl.ID] = fl.Record.Failure.Class
			}
			d.Items = append(d.Items, quarantine.Item{ID: fl.ID, State: fl.State, Code: fl.Code, Since: fl.Since.UTC(),
				AgeSeconds: int64(now.Sub(fl.Since).Seconds()), Source: fl.Source, SchemaVersion: fl.SchemaVersion,
				ReplayCount: fl.ReplayCount, Record: where})
		}
		d.Total++
	}
	d.Pages = max(1, (d.Total+pageSize-1)/pageSize)
	page := func(n int) string {
		v := filterQuery(q)
		v.Set("page", strconv.Itoa(n))
		return "/failures?" + v.Encode()
	}
	if d.Page > 1 {
		d.PrevURL = page(d.Page - 1)
	}
	if d.Page < d.Pages {
		d.NextURL = page(d.Page + 1)
	}
	s.render(w, r, http.StatusOK, "list", "Failures", d)
}
