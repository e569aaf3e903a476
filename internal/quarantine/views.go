package quarantine

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"relay/internal/config"

	"relay/internal/envelope"
	"relay/internal/ledger"
)

// Item is one row of `relay quarantine list`.
type Item struct {
	ID            string        `json:"failureId"`
	State         ledger.State  `json:"state"`
	Code          string        `json:"errorCode"`
	Since         time.Time     `json:"quarantinedAt"`
	AgeSeconds    int64         `json:"ageSeconds"`
	Source        ledger.Source `json:"source"`
	SchemaVersion int           `json:"schemaVersion,omitempty"`
	ReplayCount   int           `json:"replayCount"`
	// Record is where the quarantine record is, topic/partition/offset,
	// or "gone (retention)".
	Record string `json:"record"`
}

// Gone is where a record past its topic's retention is.
const Gone = "gone (retention)"

// Items lists the failures f selects at now, oldest first.
func (x *Index) Items(f *Filter, now time.Time) []Item {
	out := []Item{}
	x.Each(func(fl *Failure) bool {
		if f.Match(fl, now) {
			out = append(out, ItemOf(fl, now))
		}
		return true
	})
	return out
}

// ItemOf is fl's row at now.
func ItemOf(fl *Failure, now time.Time) Item {
	where := Gone
	if fl.Record != nil {
		where = fmt.Sprintf("%s/%d/%d", fl.Record.Topic, fl.Record.Partition, fl.Record.Offset)
	}
	return Item{ID: fl.ID, State: fl.State, Code: fl.Code, Since: fl.Since.UTC(), AgeSeconds: int64(now.Sub(fl.Since).Seconds()),
		Source: fl.Source, SchemaVersion: fl.SchemaVersion, ReplayCount: fl.ReplayCount, Record: where}
}

// Shown is what `quarantine show` prints: the failure envelope (as the
// quarantine record carries it), then the ledger's state and history.
type Shown struct {
	envelope.View
	State   ledger.State   `json:"state"`
	History []ledger.Event `json:"history,omitempty"`
	// TraceURL is the quarantined record's trace (its traceId, see
	// envelope.View) in the tracing UI RELAY_TRACE_URL names.
	TraceURL string `json:"traceUrl,omitempty"`
	// RecordGone says the quarantine record is past retention: the view
	// holds only what the ledger knows.
	RecordGone bool `json:"-"`
	// Payload is the failed record's value as an operator may see it
	// (ShowDecoded): decoded through the registry as JSON text when it
	// can be, raw text or the first bytes of binary otherwise; redacted.
	Payload        string `json:"payload,omitempty"`
	PayloadDecoded bool   `json:"payloadDecoded,omitempty"`
	// PayloadNote says why the payload is not decoded.
	PayloadNote string `json:"payloadNote,omitempty"`
}

// Render shows a record's value to an operator: its text, whether it
// was decoded through the registry, and why not (payload.ForConfig).
type Render func(ctx context.Context, value []byte) (text string, decoded bool, note string)

// Show is failure id's envelope and history, with its record's value as
// render shows it; false if it is in neither the ledger nor a quarantine
// topic. It reads only that failure's records. err says what could not be
// read: what is shown is then what the index holds.
func (r *Reader) Show(ctx context.Context, id string, render Render) (out Shown, ok bool, err error) {
	fl, err := r.Full(ctx, id)
	if fl == nil {
		return Shown{}, false, err
	}
	out = ShowFailure(fl, r.cfg.TraceURL)
	if fl.Record != nil && fl.Record.Kept {
		out.Payload, out.PayloadDecoded, out.PayloadNote = render(ctx, fl.Record.Value)
	}
	return out, true, err
}

// ShowFailure is fl's envelope and history; traceURL is RELAY_TRACE_URL.
func ShowFailure(fl *Failure, traceURL string) Shown {
	out := Shown{State: fl.State}
	if fl.Entry != nil {
		out.History = fl.Entry.History
	}
	if r := fl.Record; r != nil {
		tp, _ := envelope.Lookup(toHeaders(r.Headers), envelope.TraceParent)
		out.View = envelope.NewView(r.Failure, string(tp), r.Key, r.ValueLen)
		out.Location = &envelope.Where{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
		if out.TraceID != "" && traceURL != "" {
			out.TraceURL = strings.ReplaceAll(traceURL, config.TraceIDPlaceholder, out.TraceID)
		}
	} else {
		out.FailureID, out.ErrorCode, out.RecordGone = fl.ID, fl.Code, true
		out.Source = envelope.Source{Topic: fl.Source.Topic, Partition: fl.Source.Partition, Offset: fl.Source.Offset}
	}
	return out
}

// CodeStats is the unresolved failures of one code.
type CodeStats struct {
	ledger.CodeStats
	OldestAgeSeconds int64 `json:"oldestAgeSeconds"`
}

// Stats is what `quarantine stats` reports.
type Stats struct {
	ByState  map[ledger.State]int `json:"byState"`
	ByCode   []CodeStats          `json:"unresolvedByCode"`
	Headroom map[string]int64     `json:"retentionHeadroomSeconds"`
	// Deadline is, per quarantine topic, when its oldest unresolved
	// record may be deleted.
	Deadline map[string]time.Time `json:"-"`
}

// Stats summarises the index at now, as the gauges do.
func (x *Index) Stats(now time.Time) Stats {
	sum := x.Summary()
	out := Stats{ByState: sum.ByState, Headroom: map[string]int64{}, Deadline: sum.Deadline}
	for _, c := range sum.ByCode {
		out.ByCode = append(out.ByCode, CodeStats{c, int64(now.Sub(c.Oldest).Seconds())})
	}
	for t, d := range sum.Deadline {
		out.Headroom[t] = int64(d.Sub(now).Seconds())
	}
	return out
}

// Summary summarises the index as the gauges do.
func (x *Index) Summary() ledger.Summary {
	ret := x.Retention()
	z := ledger.NewSummarizer(func(t string) (time.Duration, bool) {
		r, ok := ret[t]
		return r, ok
	})
	var it ledger.Item
	x.Each(func(fl *Failure) bool {
		it = ledger.Item{State: fl.State, Code: fl.Code, Since: fl.Since}
		if fl.Record != nil {
			it.Topic, it.RecordTime = fl.Record.Topic, fl.Record.Timestamp
		}
		z.Add(&it)
		return true
	})
	return z.Summary()
}

// Retention is each quarantine topic's known, finite retention.
func (x *Index) Retention() map[string]time.Duration {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return maps.Clone(x.retention)
}
