package console

import (
	"net/http"
	"net/url"
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
	snap.Each(func(fl *quarantine.Failure) bool {
		if !f.Match(fl, now) {
			return true
		}
		if d.Total >= from && d.Total < from+pageSize {
			if fl.Record != nil {
				d.Classes[fl.ID] = fl.Record.Failure.Class
			}
			d.Items = append(d.Items, quarantine.ItemOf(fl, now))
		}
		d.Total++
		return true
	})
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
