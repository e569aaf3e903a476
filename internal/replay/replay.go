package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/envelope"
	"relay/internal/kafkaclient"
	"relay/internal/ledger"
	"relay/internal/statetopic"
	"relay/internal/tiers"
)

const replayUsage = `Usage:
  relay replay --reason TEXT <selection> [options]

Replays quarantined records through relay: each selected record is
published to the replay topic with its original identity and
relay.replay.count incremented, in a transaction with its ledger change
(replaying); relay consumes the replay topic through the same pipeline and
records each outcome (resolved, failed-again) in the ledger.

Selection (at least one; only open failures unless --include-failed-again;
resolved, discarded, replaying ones and those whose record is gone are
skipped and counted):
  --ids ID[,ID]            failure ids (these may also be failed-again)
  --code C[,C]             error codes
  --schema-version N[,N]   writer schema versions
  --since T / --until T    quarantined in a window (RFC 3339, or a duration ago: 24h, 7d)
  --min-age D / --max-age D
  --source TOPIC / --partition P
  --all                    every open failure
  --include-failed-again   also failures whose earlier replay failed again
  --include-replaying      also failures still replaying from an earlier replay (its record lost,
                           e.g. past the replay topic's retention); relay outputs a failure once
                           whichever copy comes first, and notes the other as a duplicate

Options:
  --reason TEXT            why (required; recorded in the ledger)
  --actor NAME             who (default RELAY_ACTOR, else user@host)
  --dry-run                run today's admission and rules on the selection; write nothing;
                           report what would pass and what would still fail, by code
  --sample N               replay a deterministic sample of about N records first (whole keys,
                           so a key's order holds) and wait for their outcomes before the rest
  --rate R                 records per second at most (default 50)
  --max-failure-rate F     stop when this share of known outcomes failed again (default 0.5)
  --min-outcomes N         outcomes needed before the threshold applies after the sample (default 10)
  --wait D                 how long to wait for outcomes (default 5m)
  --progress MODE          auto, bar, lines or none (default auto: a bar on a terminal)
  --json                   the report (dry run or summary) as JSON on stdout

Exit codes: 0 done (outcomes in the summary), 1 runtime failure,
2 bad input (nothing written), 3 stopped by the repeat-failure threshold,
4 outcomes not all known within --wait.
`

// Exit codes of relay replay besides exitOK, exitFailure and exitUsage.
const (
	exitStopped    = 3 // the repeat-failure threshold stopped the replay
	exitIncomplete = 4 // published, but not every outcome is known yet
)

type replayOpts struct {
	reason, actor, ids       string
	ff                       filterFlags
	all, failedAgain, dryRun bool
	replaying                bool
	sample, minOutcomes      int
	rate, maxFailureRate     float64
	wait                     time.Duration
	progress                 string
	asJSON                   bool
	filter                   *filter
	selected                 bool
}

func parseReplay(args []string, stderr io.Writer, now time.Time) (*replayOpts, error) {
	o := &replayOpts{}
	fs := newFlags("relay replay", replayUsage, stderr)
	fs.StringVar(&o.reason, "reason", "", "")
	fs.StringVar(&o.actor, "actor", "", "")
	fs.StringVar(&o.ids, "ids", "", "")
	o.ff.register(fs, false)
	fs.BoolVar(&o.all, "all", false, "")
	fs.BoolVar(&o.failedAgain, "include-failed-again", false, "")
	fs.BoolVar(&o.replaying, "include-replaying", false, "")
	fs.BoolVar(&o.dryRun, "dry-run", false, "")
	fs.IntVar(&o.sample, "sample", 0, "")
	fs.Float64Var(&o.rate, "rate", 50, "")
	fs.Float64Var(&o.maxFailureRate, "max-failure-rate", 0.5, "")
	fs.IntVar(&o.minOutcomes, "min-outcomes", 10, "")
	fs.DurationVar(&o.wait, "wait", 5*time.Minute, "")
	fs.StringVar(&o.progress, "progress", "auto", "")
	fs.BoolVar(&o.asJSON, "json", false, "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, errFlags{err} // the flag package said what is wrong
	}
	var errs []error
	if len(pos) > 0 {
		errs = append(errs, fmt.Errorf("unexpected argument %q (failure ids go in --ids)", pos[0]))
	}
	if strings.TrimSpace(o.reason) == "" {
		errs = append(errs, errors.New("--reason is required: say why (a fix was deployed, a dependency recovered)"))
	}
	if math.IsNaN(o.rate) || o.rate <= 0 || o.rate > 10000 {
		errs = append(errs, fmt.Errorf("--rate %g: must be above 0 and at most 10000 records per second", o.rate))
	}
	if o.sample < 0 {
		errs = append(errs, fmt.Errorf("--sample %d: must be 0 (none) or more", o.sample))
	}
	if math.IsNaN(o.maxFailureRate) || o.maxFailureRate < 0 || o.maxFailureRate > 1 {
		errs = append(errs, fmt.Errorf("--max-failure-rate %g: must be between 0 and 1", o.maxFailureRate))
	}
	if o.minOutcomes < 1 {
		errs = append(errs, fmt.Errorf("--min-outcomes %d: must be at least 1", o.minOutcomes))
	}
	if o.wait <= 0 {
		errs = append(errs, fmt.Errorf("--wait %s: must be positive", o.wait))
	}
	switch o.progress {
	case "auto", "bar", "lines", "none":
	default:
		errs = append(errs, fmt.Errorf("--progress %q: not auto, bar, lines or none", o.progress))
	}
	f, err := o.ff.build(now)
	if err != nil {
		errs = append(errs, err)
	}
	o.filter = f
	if f != nil {
		f.states = []string{ledger.Open}
		if o.failedAgain {
			f.states = append(f.states, ledger.FailedAgain)
		}
		if o.replaying {
			f.states = append(f.states, ledger.Replaying)
		}
		if ids := splitList(o.ids); len(ids) > 0 {
			f.ids = map[string]bool{}
			for _, id := range ids {
				if _, _, _, err := parseFailureID(id); err != nil {
					errs = append(errs, err)
				}
				f.ids[id] = true
			}
		}
		o.selected = o.all || f.ids != nil || len(f.codes) > 0 || len(f.schemaVersions) > 0 || f.minAge > 0 || f.maxAge > 0 ||
			!f.since.IsZero() || !f.until.IsZero() || f.partition >= 0 || f.source != ""
		if !o.selected {
			errs = append(errs, errors.New("no selection: give --ids, --code, --schema-version, --since/--until, --min-age/--max-age, --source, --partition, or --all"))
		}
	}
	return o, errors.Join(errs...)
}

// selection is what a replay acts on.
type selection struct {
	records []*failure
	skipped map[string]int // reason → count
	bytes   int
}

// choose applies the selection to a snapshot: explicit ids must exist;
// settled, in-flight and expired failures are skipped and counted. The
// records come in source order (topic, partition, offset), so a key's
// records are replayed in their order.
func choose(s *snapshot, o *replayOpts, now time.Time) (*selection, error) {
	sel := &selection{skipped: map[string]int{}}
	var errs []error
	for id := range o.filter.ids {
		if s.byID[id] == nil {
			errs = append(errs, fmt.Errorf("%s: not in the ledger nor in a quarantine topic", id))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	states := o.filter.states
	o.filter.states = nil // judged below, so skips are counted
	defer func() { o.filter.states = states }()
	for _, fl := range s.failures {
		if !o.filter.match(fl, now) {
			continue
		}
		explicit := o.filter.ids[fl.ID]
		switch {
		case fl.State == ledger.Resolved:
			sel.skipped["already resolved"]++
		case fl.State == ledger.Discarded:
			sel.skipped["discarded"]++
		case fl.State == ledger.Replaying && !o.replaying:
			sel.skipped["being replayed"]++
		case fl.State == ledger.FailedAgain && !explicit && !o.failedAgain:
			sel.skipped["failed again (add --include-failed-again)"]++
		case fl.Record == nil:
			sel.skipped["record gone (retention)"]++
		case fl.Record.Damaged != nil:
			sel.skipped["envelope unreadable (see quarantine show)"]++
		case s.kept && !fl.Record.Kept:
			// Quarantined (again) between the command's two reads.
			sel.skipped["changed while the replay started; run it again"]++
		default:
			sel.records = append(sel.records, fl)
			sel.bytes += fl.Record.ValueLen
		}
	}
	sort.Slice(sel.records, func(i, j int) bool {
		a, b := sel.records[i].Source, sel.records[j].Source
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		return a.Offset < b.Offset
	})
	return sel, nil
}

// sample splits records into a deterministic sample of about n records and
// the rest. It picks whole keys (by a hash of source topic, partition and
// key), so a key's records never straddle the two phases; both keep
// source order.
func sample(records []*failure, n int) (first, rest []*failure) {
	if n <= 0 || n >= len(records) {
		return records, nil
	}
	group := func(fl *failure) string {
		if fl.Record.Key == nil {
			return "id|" + fl.ID
		}
		return fl.Source.Topic + "|" + strconv.Itoa(int(fl.Source.Partition)) + "|" + string(fl.Record.Key)
	}
	hash := map[string]uint64{}
	var groups []string
	size := map[string]int{}
	for _, fl := range records {
		g := group(fl)
		if _, ok := hash[g]; !ok {
			h := fnv.New64a()
			_, _ = h.Write([]byte(g))
			hash[g] = h.Sum64()
			groups = append(groups, g)
		}
		size[g]++
	}
	sort.Slice(groups, func(i, j int) bool { return hash[groups[i]] < hash[groups[j]] })
	chosen := map[string]bool{}
	taken := 0
	for _, g := range groups {
		if taken >= n {
			break
		}
		chosen[g] = true
		taken += size[g]
	}
	for _, fl := range records {
		if chosen[group(fl)] {
			first = append(first, fl)
		} else {
			rest = append(rest, fl)
		}
	}
	return first, rest
}

// runReplay is `relay replay`.
func runReplay(ctx context.Context, args []string, lookup func(string) (string, bool), environ []string, stdout, stderr io.Writer) int {
	now := time.Now()
	o, err := parseReplay(args, stderr, now)
	var fe errFlags
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &fe):
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "relay replay: %v\nnothing was replayed\n", err)
		return exitUsage
	}
	ops, code := opsSetup("relay replay", lookup, environ, stderr)
	if code != exitOK {
		return code
	}
	defer ops.close()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := checkSource(ops.cfg, o.filter.source); err != nil {
		fmt.Fprintf(stderr, "relay replay: %v\nnothing was replayed\n", err)
		return exitUsage
	}
	s, ok := ops.load(ctx, nil)
	if !ok {
		return exitFailure
	}
	sel, err := choose(s, o, now)
	if err != nil {
		fmt.Fprintf(stderr, "relay replay: %v\nnothing was replayed\n", err)
		return exitUsage
	}
	if len(sel.records) == 0 {
		fmt.Fprintf(stdout, "nothing to replay: 0 failures selected%s\n", skips(sel.skipped))
		return exitOK
	}
	// The bytes of the selected records only: read again, keeping them.
	chosen := map[string]bool{}
	for _, fl := range sel.records {
		chosen[fl.ID] = true
	}
	keep := func(id string) bool { return chosen[id] }
	if o.dryRun {
		if s, ok = ops.load(ctx, keep); !ok {
			return exitFailure
		}
		if sel, err = choose(s, o, now); err != nil {
			fmt.Fprintf(stderr, "relay replay: %v\nnothing was replayed\n", err)
			return exitUsage
		}
		return dryRun(ctx, ops.cfg, o, sel, stdout, stderr)
	}
	// The input is good. Now fence an earlier replay of the group: its
	// last transaction is then committed or aborted, and the snapshot is
	// read again, so it sees that replay's changes (or that there are
	// none).
	w, err := statetopic.NewWriter(ctx, ops.cfg, ops.cfg.GroupID+".replay")
	if err != nil {
		fmt.Fprintf(stderr, "relay replay: %v\nnothing was replayed\n", err)
		return exitFailure
	}
	defer w.Close()
	if s, ok = ops.load(ctx, keep); !ok {
		return exitFailure
	}
	if sel, err = choose(s, o, now); err != nil {
		fmt.Fprintf(stderr, "relay replay: %v\nnothing was replayed\n", err)
		return exitUsage
	}
	if len(sel.records) == 0 {
		fmt.Fprintf(stdout, "nothing to replay: 0 failures selected%s\n", skips(sel.skipped))
		return exitOK
	}
	r := &replayRun{cfg: ops.cfg, o: o, id: newReplayID(now), actor: actorOf(o.actor, lookup), w: w, outcomes: map[string]string{}, tally: map[string]int{},
		pending: map[string]bool{}, changed: map[string]string{}, skippedLate: map[string]int{}, stderr: stderr}
	return r.run(ctx, s, sel, stdout)
}

// errFlags is a command line the flag package refused (and explained).
type errFlags struct{ err error }

func (e errFlags) Error() string { return e.err.Error() }
func (e errFlags) Unwrap() error { return e.err }

func newReplayID(now time.Time) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return "rp-" + now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b)
}

func skips(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return "; skipped: " + strings.Join(parts, ", ")
}

// prediction is a dry run's report.
type prediction struct {
	Selected      int            `json:"selected"`
	Bytes         int            `json:"bytes"`
	WouldPass     int            `json:"wouldPass"`
	WouldFail     map[string]int `json:"wouldFailAgain"`
	WouldReject   map[string]int `json:"wouldBeRejected"`
	WouldRetry    map[string]int `json:"transientNow"`
	Skipped       map[string]int `json:"skipped"`
	Rate          float64        `json:"rate"`
	EstimatedSecs float64        `json:"estimatedSeconds"`
	Sample        int            `json:"sample,omitempty"`
	SchemaChecked bool           `json:"schemaChecked"`
	Rules         int            `json:"rules"`
}

// dryRun runs today's admission and rules on the selection and writes
// nothing: no producer is even created. The hook is not called: it may
// have side effects.
func dryRun(ctx context.Context, cfg *config.Config, o *replayOpts, sel *selection, stdout, stderr io.Writer) int {
	p := prediction{Selected: len(sel.records), Bytes: sel.bytes, WouldFail: map[string]int{}, WouldReject: map[string]int{},
		WouldRetry: map[string]int{}, Skipped: sel.skipped, Rate: o.rate, EstimatedSecs: float64(len(sel.records)) / o.rate}
	if o.sample > 0 {
		first, _ := sample(sel.records, o.sample)
		p.Sample = len(first)
	}
	rs, err := loadRules(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "relay replay: %s: %v\n", config.EnvRulesFile, err)
		return exitUsage
	}
	p.Rules = ruleCount(rs)
	if cfg.SchemaRegistryURL != "" && len(sel.records) > 0 {
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		adm, err := newAdmitter(c, cfg, newLogger(cfg, io.Discard))
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "relay replay: a dry run needs today's schema registry: %v\n", err)
			return exitFailure
		}
		p.SchemaChecked = true
		pol := policy(cfg)
		for _, fl := range sel.records {
			now := time.Now()
			a, err := adm.Admit(ctx, fl.Record.Value)
			if err == nil && rs != nil {
				err = rs.Check(ctx, a.Record)
			}
			if err == nil {
				p.WouldPass++
				continue
			}
			d := pol.Decide(err, tiers.State{Attempt: 1, FirstFailedAt: now, AtSource: true, Tier: -1}, now)
			switch d.Kind {
			case tiers.Quarantine:
				p.WouldFail[d.Code]++
			case tiers.Reject:
				p.WouldReject[d.Code]++
			default:
				p.WouldRetry[d.Code]++
			}
		}
	} else {
		p.WouldPass = len(sel.records)
	}
	if o.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(p)
		return exitOK
	}
	fmt.Fprintf(stdout, "dry run: nothing was written\n")
	fmt.Fprintf(stdout, "selected: %d records, %d bytes%s\n", p.Selected, p.Bytes, skips(sel.skipped))
	what := "admission and rules"
	if !p.SchemaChecked {
		what = "(no schema registry configured: nothing to check)"
	}
	fmt.Fprintf(stdout, "would pass %s: %d (the hook is not called in a dry run)\n", what, p.WouldPass)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if len(p.WouldFail)+len(p.WouldReject)+len(p.WouldRetry) > 0 {
		fmt.Fprintln(tw, "WOULD\tCODE\tRECORDS")
		for _, g := range []struct {
			what string
			m    map[string]int
		}{{"fail again", p.WouldFail}, {"be rejected", p.WouldReject}, {"retry (transient now)", p.WouldRetry}} {
			codes := make([]string, 0, len(g.m))
			for c := range g.m {
				codes = append(codes, c)
			}
			sort.Strings(codes)
			for _, c := range codes {
				fmt.Fprintf(tw, "%s\t%s\t%d\n", g.what, c, g.m[c])
			}
		}
		_ = tw.Flush()
	}
	eta := time.Duration(p.EstimatedSecs * float64(time.Second)).Round(time.Second)
	fmt.Fprintf(stdout, "at --rate %g/s: about %s to publish", o.rate, eta)
	if p.Sample > 0 {
		fmt.Fprintf(stdout, ", after a sample of %d and its outcomes", p.Sample)
	}
	fmt.Fprintln(stdout)
	return exitOK
}

// replayRun is one replay in progress.
type replayRun struct {
	cfg       *config.Config
	o         *replayOpts
	id        string
	actor     string
	w         *statetopic.Writer
	tail      *kafka.Consumer
	prog      *progress
	stderr    io.Writer
	total     int
	published int
	// outcomes: failure id → resolved, rejected, failed-again, duplicate;
	// pending: published, outcome not known yet; changed: selected
	// failures someone else changed since the snapshot (a discard, another
	// replay), which this replay leaves alone.
	outcomes map[string]string
	tally    map[string]int // outcomes counted by kind, as they settle
	pending  map[string]bool
	changed  map[string]string
	// skippedLate counts selected failures left alone because someone
	// changed them during the replay, by their new state.
	skippedLate map[string]int
}

func (r *replayRun) run(ctx context.Context, s *snapshot, sel *selection, stdout io.Writer) int {
	var err error
	if r.tail, err = openTail(r.cfg, s.stateEnds); err != nil {
		fmt.Fprintf(r.stderr, "relay replay: %v\nnothing was replayed\n", err)
		return exitFailure
	}
	defer func() { _ = r.tail.Close() }()
	r.total = len(sel.records)
	r.prog = newProgress(r.o.progress, r.stderr, r.id, r.total, r.o.rate)
	first, rest := sample(sel.records, r.o.sample)
	fmt.Fprintf(r.stderr, "replay %s by %s (%s): %d records at %g/s%s\n", r.id, r.actor, r.o.reason, r.total, r.o.rate, skips(sel.skipped))

	code, why := exitOK, ""
	if len(rest) > 0 {
		// The sample first, then its outcomes, then the rest.
		fmt.Fprintf(r.stderr, "sample: %d records first\n", len(first))
		if why, err = r.publish(ctx, first, false); err == nil && why == "" {
			if !r.await(ctx) {
				code, why = exitIncomplete, "the sample's outcomes are not all known within --wait; the rest was not published"
			} else if rate, n := r.failureRate(); n > 0 && rate > r.o.maxFailureRate {
				code, why = exitStopped, fmt.Sprintf("the sample's repeat-failure rate %.0f%% (%d of %d) passed --max-failure-rate %.0f%%",
					100*rate, r.count(ledger.FailedAgain), n, 100*r.o.maxFailureRate)
			} else {
				why, err = r.publish(ctx, rest, true)
			}
		}
	} else {
		why, err = r.publish(ctx, first, true)
	}
	switch {
	case err != nil:
		r.prog.done(r.snapshot())
		fmt.Fprintf(r.stderr, "relay replay: %v\n", err)
		r.summary(stdout, sel, "failed: "+err.Error())
		return exitFailure
	case ctx.Err() != nil:
		r.prog.done(r.snapshot())
		r.summary(stdout, sel, fmt.Sprintf("interrupted: %d of %d published (committed, replaying in the ledger); the rest was not published and stays as it was",
			r.published, r.total))
		return exitFailure
	case code == exitOK && why != "":
		code = exitStopped
	}
	if code == exitOK && !r.await(ctx) && ctx.Err() == nil {
		code, why = exitIncomplete, fmt.Sprintf("outcomes of %d replayed records are not known within --wait %s: is relay running for group %s? They stay replaying in the ledger",
			len(r.pending), r.o.wait, r.cfg.GroupID)
	}
	r.prog.done(r.snapshot())
	if ctx.Err() != nil {
		r.summary(stdout, sel, fmt.Sprintf("interrupted while waiting for outcomes: %d published; the outcomes of %d are not known yet (they stay replaying until relay settles them)",
			r.published, len(r.pending)))
		return exitFailure
	}
	if code == exitStopped {
		why = "stopped: " + why + fmt.Sprintf("; %d selected records were not published and stay as they were", r.total-r.published)
	}
	r.summary(stdout, sel, why)
	return code
}

// publish writes records at the rate, each in a transaction with its
// ledger change; it stops early (why) when the repeat-failure threshold
// passes (check) or ctx ends.
func (r *replayRun) publish(ctx context.Context, recs []*failure, check bool) (why string, err error) {
	start := time.Now()
	stateTopic := r.cfg.StateTopicName()
	for i := 0; i < len(recs); {
		if ctx.Err() != nil {
			return "interrupted", nil //nolint:nilerr // an interrupt is reported by run, not as a publish error
		}
		r.poll(0)
		if rate, n := r.failureRate(); check && n >= r.o.minOutcomes && rate > r.o.maxFailureRate {
			return fmt.Sprintf("repeat-failure rate %.0f%% (%d of %d outcomes) passed --max-failure-rate %.0f%%",
				100*rate, r.count(ledger.FailedAgain), n, 100*r.o.maxFailureRate), nil
		}
		due := min(len(recs), int(time.Since(start).Seconds()*r.o.rate)+1)
		if due > i {
			// A tenth of a second's worth at most: a slow commit does
			// not turn into a burst, and the threshold is checked often.
			batch := recs[i:min(due, i+max(1, int(r.o.rate/10)))]
			now := time.Now()
			msgs := make([]*kafka.Message, 0, 2*len(batch))
			var sent []*failure
			for _, fl := range batch {
				if st := r.changed[fl.ID]; st != "" {
					r.skippedLate[st]++
					continue
				}
				rec, ev := r.replayOf(fl, now)
				msgs = append(msgs, rec, statetopic.EventMessage(stateTopic, ev))
				sent = append(sent, fl)
			}
			if len(msgs) > 0 {
				if err := r.w.Write(ctx, msgs); err != nil {
					return "", fmt.Errorf("publishing to the replay topic: %w (whether the last transaction, %d records, was committed is not known: "+
						"run the replay again; what was published shows as replaying and is skipped)", err, len(sent))
				}
			}
			for _, fl := range sent {
				r.pending[fl.ID] = true
			}
			i += len(batch)
			r.published += len(sent)
			r.prog.update(r.snapshot())
			continue
		}
		next := start.Add(time.Duration(float64(i) / r.o.rate * float64(time.Second)))
		r.poll(min(time.Until(next), 100*time.Millisecond))
		r.prog.update(r.snapshot())
	}
	return "", nil
}

// replayOf is the replay record of fl and its ledger change: the
// quarantined record's key, value and headers, with relay.replay.id and
// relay.replay.count set, in the partition of its source partition. Its
// timestamp is now, so the replay topic's retention counts from the
// replay; the original time stays in relay.source.timestamp.
func (r *replayRun) replayOf(fl *failure, now time.Time) (*kafka.Message, *ledger.Event) {
	count := max(fl.ReplayCount, fl.Record.F.ReplayCount) + 1
	topic := r.cfg.Derived(fl.Record.F.SourceTopic).Replay
	hs := make([]kafka.Header, 0, len(fl.Record.Headers)+2)
	for _, h := range fl.Record.Headers {
		switch h.Key {
		case envelope.ReplayID, envelope.ReplayCount, envelope.NotBefore, envelope.KeySeq:
			continue
		}
		hs = append(hs, h)
	}
	hs = append(hs, kafka.Header{Key: envelope.ReplayID, Value: []byte(r.id)},
		kafka.Header{Key: envelope.ReplayCount, Value: []byte(strconv.Itoa(count))})
	msg := &kafka.Message{
		TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: fl.Record.Partition},
		Key:            fl.Record.Key, Value: fl.Record.Value, Headers: hs, Timestamp: now,
	}
	src := fl.Source
	if src.Topic == "" {
		src = ledger.SourceOf(fl.Record.F)
	}
	ev := &ledger.Event{ID: fl.ID, State: ledger.Replaying, At: now, Actor: r.actor, Reason: r.o.reason, Code: fl.Code,
		ReplayID: r.id, ReplayCount: count, Source: src, SchemaVersion: fl.SchemaVersion}
	return msg, ev
}

// openTail follows the state topic from where the snapshot's read began,
// so every change since then is seen: this replay's outcomes, and what
// others did to the selected failures meanwhile.
func openTail(cfg *config.Config, from map[int32]int64) (*kafka.Consumer, error) {
	topic := cfg.StateTopicName()
	c, err := kafkaclient.Reader(cfg, "relay-cli", kafkaclient.Read{})
	if err != nil {
		return nil, err
	}
	tps := make([]kafka.TopicPartition, 0, len(from))
	for p, off := range from {
		tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: p, Offset: kafka.Offset(off)})
	}
	if err := c.Assign(tps); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// poll reads outcomes of this replay for up to d.
func (r *replayRun) poll(d time.Duration) {
	deadline := time.Now().Add(d)
	for {
		ms := int(time.Until(deadline) / time.Millisecond)
		switch ev := r.tail.Poll(max(ms, 0)).(type) {
		case *kafka.Message:
			e, ok, _ := ledger.Decode(string(ev.Key), ev.Value)
			if ok && e != nil && e.ReplayID != r.id && e.Outcome != ledger.OutcomeDuplicate && e.State != ledger.Open && !r.pending[e.ID] {
				r.changed[e.ID] = e.State // not ours: a discard, another replay
			}
			if ok && e != nil && e.ReplayID == r.id && r.pending[e.ID] {
				switch {
				case e.Outcome == ledger.OutcomeDuplicate:
					r.settle(e.ID, ledger.OutcomeDuplicate)
				case e.State == ledger.Resolved && e.Outcome == ledger.OutcomeRejected:
					r.settle(e.ID, ledger.OutcomeRejected)
				case e.State == ledger.Resolved, e.State == ledger.FailedAgain:
					r.settle(e.ID, e.State)
				}
			}
			if time.Now().After(deadline) {
				return
			}
			continue
		case nil:
			if time.Now().After(deadline) {
				return
			}
		}
		if time.Now().After(deadline) {
			return
		}
	}
}

// settle records the outcome of a published record; each is settled once
// (it leaves pending).
func (r *replayRun) settle(id, outcome string) {
	delete(r.pending, id)
	r.outcomes[id] = outcome
	r.tally[outcome]++
}

// await waits until every published record's outcome is known, or --wait.
func (r *replayRun) await(ctx context.Context) bool {
	deadline := time.Now().Add(r.o.wait)
	for len(r.pending) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		r.poll(200 * time.Millisecond)
		r.prog.update(r.snapshot())
	}
	return len(r.pending) == 0
}

func (r *replayRun) count(outcome string) int { return r.tally[outcome] }

// failureRate is the share of known outcomes that failed again
// (duplicates aside), and how many outcomes it is over.
func (r *replayRun) failureRate() (float64, int) {
	failed := r.count(ledger.FailedAgain)
	n := failed + r.count(ledger.Resolved) + r.count(ledger.OutcomeRejected)
	if n == 0 {
		return 0, 0
	}
	return float64(failed) / float64(n), n
}

// counts is a progress snapshot.
type counts struct {
	Published   int `json:"published"`
	Total       int `json:"selected"`
	Resolved    int `json:"resolved"`
	Rejected    int `json:"rejected"`
	FailedAgain int `json:"failedAgain"`
	Duplicate   int `json:"duplicate"`
	Pending     int `json:"outcomeUnknown"`
}

func (r *replayRun) snapshot() counts {
	return counts{Published: r.published, Total: r.total, Resolved: r.count(ledger.Resolved), Rejected: r.count(ledger.OutcomeRejected),
		FailedAgain: r.count(ledger.FailedAgain), Duplicate: r.count(ledger.OutcomeDuplicate), Pending: len(r.pending)}
}

func (r *replayRun) summary(w io.Writer, sel *selection, why string) {
	c := r.snapshot()
	if r.o.asJSON {
		out := struct {
			ReplayID string `json:"replayId"`
			Actor    string `json:"actor"`
			Reason   string `json:"reason"`
			counts
			Skipped map[string]int    `json:"skipped"`
			Late    map[string]int    `json:"changedDuringReplay,omitempty"`
			Stopped string            `json:"stopped,omitempty"`
			Failed  map[string]string `json:"outcomes"`
		}{r.id, r.actor, r.o.reason, c, sel.skipped, r.skippedLate, why, r.outcomes}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
		return
	}
	fmt.Fprintf(w, "replay %s by %s: %q\n", r.id, r.actor, r.o.reason)
	fmt.Fprintf(w, "selected %d; published %d; resolved %d; rejected %d; failed-again %d; duplicate %d; outcome unknown %d%s\n",
		c.Total, c.Published, c.Resolved, c.Rejected, c.FailedAgain, c.Duplicate, c.Pending, skips(sel.skipped))
	if len(r.skippedLate) > 0 {
		fmt.Fprintf(w, "left alone, changed by someone else during the replay:%s\n", strings.TrimPrefix(skips(r.skippedLate), "; skipped:"))
	}
	if why != "" {
		fmt.Fprintln(w, why)
	}
}

// progress shows a replay's progress: a bar redrawn in place on a
// terminal, plain lines otherwise (at most one a second, and the last).
type progress struct {
	w     io.Writer
	mode  string
	id    string
	total int
	rate  float64
	last  time.Time
	start time.Time
}

func newProgress(mode string, w io.Writer, id string, total int, rate float64) *progress {
	if mode == "auto" {
		mode = "lines"
		if f, ok := w.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				mode = "bar"
			}
		}
	}
	return &progress{w: w, mode: mode, id: id, total: total, rate: rate, start: time.Now()}
}

func (p *progress) update(c counts) {
	every := time.Second
	if p.mode == "bar" {
		every = 200 * time.Millisecond
	}
	if p.mode == "none" || time.Since(p.last) < every {
		return
	}
	p.last = time.Now()
	p.draw(c)
}

func (p *progress) done(c counts) {
	if p.mode == "none" {
		return
	}
	p.draw(c)
	if p.mode == "bar" {
		fmt.Fprintln(p.w)
	}
}

func (p *progress) draw(c counts) {
	eta := time.Duration(float64(c.Total-c.Published) / p.rate * float64(time.Second)).Round(time.Second)
	elapsed := time.Since(p.start).Seconds()
	speed := 0.0
	if elapsed > 0 {
		speed = float64(c.Published) / elapsed
	}
	pct := 100 * c.Published / max(c.Total, 1)
	if p.mode == "bar" {
		const width = 30
		fill := width * c.Published / max(c.Total, 1)
		fmt.Fprintf(p.w, "\r[%s%s] %d/%d %3d%%  resolved %d  failed-again %d  waiting %d  %.1f/s  ETA %s ",
			strings.Repeat("#", fill), strings.Repeat(".", width-fill), c.Published, c.Total, pct,
			c.Resolved+c.Rejected, c.FailedAgain, c.Pending, speed, eta)
		return
	}
	fmt.Fprintf(p.w, "progress replay=%s published=%d/%d percent=%d resolved=%d rejected=%d failed_again=%d duplicate=%d waiting=%d rate=%.1f/s eta=%s\n",
		p.id, c.Published, c.Total, pct, c.Resolved, c.Rejected, c.FailedAgain, c.Duplicate, c.Pending, speed, eta)
}
