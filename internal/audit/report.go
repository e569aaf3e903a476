package audit

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"relay/internal/config"
	"relay/internal/ledger"
)

// Kind is the kind of a finding.
type Kind string

// Kinds of finding. Lost, duplicated, misrouted and stuck make the audit
// fail; unverifiable is said, never counted as lost.
const (
	KindLost         Kind = "lost"
	KindDuplicated   Kind = "duplicated"
	KindMisrouted    Kind = "misrouted"
	KindUnverifiable Kind = "unverifiable"
	// KindStuck is a copy in flight far past its due time.
	KindStuck Kind = "stuck"
)

// Failing are the kinds of finding that make the audit fail (exit 1); the
// help texts name each (cmd/relay's test).
var Failing = []Kind{KindLost, KindDuplicated, KindMisrouted, KindStuck}

func kindOf(v Verdict) Kind {
	switch v {
	case Lost:
		return KindLost
	case Duplicated:
		return KindDuplicated
	case Unverifiable:
		return KindUnverifiable
	case Phantom:
		return KindMisrouted
	}
	return ""
}

// Coord is a record's place.
type Coord struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

func (c Coord) String() string { return fmt.Sprintf("%s/%d/%d", c.Topic, c.Partition, c.Offset) }

// Finding is one thing the audit cannot account for.
type Finding struct {
	Kind Kind `json:"kind"`
	// Source is the source record concerned, when one is (a misrouted
	// record may name none of this source's).
	Source *Coord `json:"source,omitempty"`
	// At is the derived record concerned, when one is.
	At     *Coord `json:"at,omitempty"`
	Detail string `json:"detail"`
}

func (f Finding) String() string {
	var b strings.Builder
	b.WriteString(string(f.Kind))
	if f.Source != nil {
		b.WriteString(" " + f.Source.String())
	}
	if f.At != nil {
		b.WriteString(" at " + f.At.String())
	}
	b.WriteString(": " + f.Detail)
	return b.String()
}

// PartitionReport accounts for one source partition's window.
type PartitionReport struct {
	Partition int32 `json:"partition"`
	// From and To are the window, To exclusive; Committed is the
	// group's committed offset at the cut (-1: none).
	From      int64 `json:"from"`
	To        int64 `json:"to"`
	Committed int64 `json:"committed"`
	// Cursor is the first offset of the window not judged final (To:
	// every one was): where the next run with --cursor starts.
	Cursor int64 `json:"cursor"`
	// Records are the committed source records read; Skipped the
	// offsets without one (aborted records and transaction markers,
	// which read_committed hides).
	Records int64 `json:"records"`
	Skipped int64 `json:"skipped"`
	// End states.
	Processed   int64                  `json:"processed"`
	Rejected    int64                  `json:"rejected"`
	Quarantined map[ledger.State]int64 `json:"quarantined"`
	// In flight: not consumed yet (Behind), or a copy in a tier or the
	// replay topic.
	Behind   int64 `json:"notConsumed"`
	InTier   int64 `json:"inTier"`
	InReplay int64 `json:"replaying"`
	// Parked are records key ordering holds in memory behind an earlier
	// record of their key, above the committed offset.
	Parked int64 `json:"parked"`
	// Findings about source records.
	Lost         int64 `json:"lost"`
	Duplicated   int64 `json:"duplicated"`
	Unverifiable int64 `json:"unverifiable"`
	// Stuck counts copies in flight far past their due time (their
	// source records count as in flight too).
	Stuck int64 `json:"stuck"`
}

// count counts offset's verdict; record says a committed source record
// is at the offset.
func (pr *PartitionReport) count(v Verdict, st ledger.State, record bool) {
	switch v {
	case Gone:
		pr.Skipped++
		return
	case Phantom:
		return // a finding, counted with the misrouted records
	case Processed:
		pr.Processed++
	case Rejected:
		pr.Rejected++
	case Quarantined:
		pr.Quarantined[orOpen(st)]++
	case NotConsumed:
		pr.Behind++
	case InTier:
		pr.InTier++
	case InReplay:
		pr.InReplay++
	case Parked:
		pr.Parked++
	case Lost:
		pr.Lost++
	case Duplicated:
		pr.Duplicated++
	case Unverifiable:
		pr.Unverifiable++
	}
	if record {
		pr.Records++
	}
}

// Report is the whole audit.
type Report struct {
	Source     string             `json:"source"`
	Group      string             `json:"group"`
	At         time.Time          `json:"at"`
	Partitions []*PartitionReport `json:"partitions"`
	// Misrouted counts the derived records that do not belong to the
	// source (they name another source, or another partition, or none).
	Misrouted int64 `json:"misrouted"`
	// Trimmed says which end-state topics lost records to retention or
	// compaction: records without an end state there are unverifiable,
	// not lost.
	Trimmed []string `json:"trimmed,omitempty"`
	// Notes say what the reader of the report should know (a group
	// that never committed, say).
	Notes []string `json:"notes,omitempty"`
	// Findings are the first findings, with their coordinates; Totals
	// counts them all, by kind.
	Findings []Finding      `json:"findings"`
	Totals   map[Kind]int64 `json:"totals"`
	// FindingsTotal counts every finding; FindingsCut says Findings
	// lists only the first of them (--max-findings).
	FindingsTotal int64 `json:"findingsTotal"`
	FindingsCut   bool  `json:"findingsCut"`
	// Clean: nothing lost, duplicated, misrouted or stuck.
	Clean bool `json:"clean"`
	// With --cursor only: Unjudged counts the records of the windows not
	// judged final yet (from each cursor to the cut), and OldestUnjudged
	// is the source timestamp of the oldest of them, the time of the
	// cut when there is none: every record before it was judged.
	Unjudged       int64      `json:"unjudged,omitempty"`
	OldestUnjudged *time.Time `json:"oldestUnjudged,omitempty"`
	stuck          map[int32]int64
}

// unjudged counts n records not judged final of a partition whose
// first, at its cursor, has the source timestamp ts (zero: none known).
func (r *Report) unjudged(n int64, ts time.Time) {
	r.Unjudged += n
	if ts.IsZero() {
		return
	}
	if ts = ts.UTC(); r.OldestUnjudged == nil || ts.Before(*r.OldestUnjudged) {
		r.OldestUnjudged = &ts
	}
}

func newReport(o *Options, cfg *config.Config) *Report {
	return &Report{Source: o.Source, Group: cfg.GroupID, At: o.Now.UTC(), Totals: map[Kind]int64{}, Findings: []Finding{}}
}

func (r *Report) partition(pt *part) *PartitionReport {
	pr := &PartitionReport{Partition: pt.p, From: pt.lo, To: pt.hi, Committed: pt.committed, Quarantined: map[ledger.State]int64{}, Stuck: r.stuck[pt.p]}
	r.Partitions = append(r.Partitions, pr)
	return pr
}

// partitionStuck counts a stuck copy of source partition p (its report
// is made when the scan judges, so the count waits in stuck until then).
func (r *Report) partitionStuck(p int32) {
	if r.stuck == nil {
		r.stuck = map[int32]int64{}
	}
	r.stuck[p]++
}

func (r *Report) note(k Kind, src *Coord, at Coord, why string, keep int) {
	r.Totals[k]++
	if len(r.Findings) >= keep {
		return
	}
	f := Finding{Kind: k, Source: src, Detail: why}
	if at.Topic != "" {
		f.At = &at
	}
	r.Findings = append(r.Findings, f)
}

func (r *Report) finish() {
	r.FindingsTotal = total(r.Totals)
	r.FindingsCut = int64(len(r.Findings)) < r.FindingsTotal
	r.Clean = true
	for _, k := range Failing {
		r.Clean = r.Clean && r.Totals[k] == 0
	}
	slices.SortStableFunc(r.Findings, func(a, b Finding) int { return strings.Compare(string(a.Kind), string(b.Kind)) })
}

// Text writes the report for people: a table per partition, the first
// findings, and the verdict.
func (r *Report) Text(w io.Writer) {
	fmt.Fprintf(w, "relay audit of %s for group %s at %s\n\n", r.Source, r.Group, r.At.Format(time.RFC3339))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "PARTITION\tOFFSETS\tRECORDS\tPROCESSED\tREJECTED\tQUARANTINED\tIN FLIGHT\tLOST\tDUPLICATED\tUNVERIFIABLE\tSKIPPED\t")
	for _, pr := range r.Partitions {
		fmt.Fprintf(tw, "%d\t%d–%d\t%d\t%d\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t\n", pr.Partition, pr.From, pr.To, pr.Records, pr.Processed, pr.Rejected,
			quarantineCell(pr.Quarantined), flightCell(pr), pr.Lost, pr.Duplicated, pr.Unverifiable, pr.Skipped)
	}
	if len(r.Partitions) > 1 {
		tot := r.sum()
		fmt.Fprintf(tw, "all\t\t%d\t%d\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t\n", tot.Records, tot.Processed, tot.Rejected,
			quarantineCell(tot.Quarantined), flightCell(&tot), tot.Lost, tot.Duplicated, tot.Unverifiable, tot.Skipped)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "QUARANTINED is by ledger state (o open, r resolved, f failed-again, d discarded, p replaying); IN FLIGHT is not consumed yet / in a tier / replaying (/ parked, when any);")
	fmt.Fprintln(w, "SKIPPED are offsets read_committed hides (aborted records, transaction markers).")
	if r.OldestUnjudged != nil {
		fmt.Fprintf(w, "cursor: %d records not judged final yet, the oldest from %s; the next --cursor run starts at each partition's\n", r.Unjudged, r.OldestUnjudged.Format(time.RFC3339))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, t := range r.Trimmed {
		fmt.Fprintf(w, "note: %s: a record without an end state there may have lost it: unverifiable, not lost\n", t)
	}
	if r.Misrouted > 0 {
		fmt.Fprintf(w, "misrouted derived records: %d\n", r.Misrouted)
	}
	if n := total(r.Totals); n > 0 {
		fmt.Fprintf(w, "\nfindings (%d", n)
		if int64(len(r.Findings)) < n {
			fmt.Fprintf(w, ", the first %d", len(r.Findings))
		}
		fmt.Fprintln(w, "):")
		for _, f := range r.Findings {
			fmt.Fprintf(w, "  %s\n", f)
		}
	}
	fmt.Fprintln(w)
	if r.Clean {
		fmt.Fprintln(w, "clean: nothing lost, duplicated, misrouted or stuck")
		return
	}
	fmt.Fprintf(w, "NOT CLEAN: %d lost, %d duplicated, %d misrouted, %d stuck\n", r.Totals[KindLost], r.Totals[KindDuplicated], r.Totals[KindMisrouted], r.Totals[KindStuck])
}

// sum adds up the partitions' counts.
func (r *Report) sum() PartitionReport {
	tot := PartitionReport{Quarantined: map[ledger.State]int64{}}
	for _, pr := range r.Partitions {
		tot.Records += pr.Records
		tot.Processed += pr.Processed
		tot.Rejected += pr.Rejected
		for k, v := range pr.Quarantined {
			tot.Quarantined[k] += v
		}
		tot.Behind += pr.Behind
		tot.InTier += pr.InTier
		tot.InReplay += pr.InReplay
		tot.Parked += pr.Parked
		tot.Lost += pr.Lost
		tot.Duplicated += pr.Duplicated
		tot.Unverifiable += pr.Unverifiable
		tot.Skipped += pr.Skipped
		tot.Stuck += pr.Stuck
	}
	return tot
}

func total(m map[Kind]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func quarantineCell(q map[ledger.State]int64) string {
	var n int64
	var parts []string
	for _, st := range []ledger.State{ledger.Open, ledger.Resolved, ledger.FailedAgain, ledger.Discarded, ledger.Replaying} {
		if v := q[st]; v > 0 {
			n += v
			parts = append(parts, fmt.Sprintf("%d%c", v, abbrev(st)))
		}
	}
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", n, strings.Join(parts, " "))
}

func abbrev(st ledger.State) byte {
	if st == ledger.Replaying {
		return 'p'
	}
	return st[0]
}

func flightCell(pr *PartitionReport) string {
	switch {
	case pr.Behind+pr.InTier+pr.InReplay+pr.Parked == 0:
		return "0"
	case pr.Parked > 0:
		return fmt.Sprintf("%d/%d/%d/%d", pr.Behind, pr.InTier, pr.InReplay, pr.Parked)
	}
	return fmt.Sprintf("%d/%d/%d", pr.Behind, pr.InTier, pr.InReplay)
}
