package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/envelope"
	"relay/internal/kafkaclient"
	"relay/internal/ledger"
	"relay/internal/statetopic"
)

const quarantineUsage = `Usage:
  relay quarantine list [filters] [--json]
        unresolved failures (open, replaying, failed-again), oldest first
        --code C[,C]          error codes
        --min-age D           quarantined at least D ago (e.g. 1h, 7d)
        --max-age D           quarantined at most D ago
        --schema-version N    writer schema version of the record
        --partition P         source partition
        --source TOPIC        source topic
        --state S[,S]|all     states (default: open,replaying,failed-again)
  relay quarantine show <failure-id>
        the failure envelope as JSON, with its ledger state and history
  relay quarantine stats [--json]
        counts by state; unresolved by code with the oldest; retention headroom
  relay quarantine discard <failure-id>... --reason TEXT [--actor NAME] [--include-replaying]
        close failures without replay; recorded in the ledger
        --include-replaying   also failures being replayed: relay drops the replayed
                              record at its turn, unless it has already taken it up

A failure id is topic/partition/offset of the record's first appearance, as
in the relay.failure.id header. The actor defaults to RELAY_ACTOR, else
user@host. Exit codes: 0 ok, 1 runtime failure, 2 bad input (nothing written).
`

// cliLookup lets operator commands run with the daemon's environment or
// without its instance identity: they need no transactional id.
func cliLookup(lookup func(string) (string, bool)) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := lookup(name)
		if name == config.EnvTransactionalID && (!ok || v == "") {
			return "relay-cli", true
		}
		return v, ok
	}
}

// parseInterspersed parses flags that may come before, between or after
// positional arguments, and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// newFlags is a flag set that reports its errors, with usage, on stderr.
func newFlags(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	return fs
}

// runQuarantine is `relay quarantine ...`.
func runQuarantine(ctx context.Context, args []string, lookup func(string) (string, bool), environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, quarantineUsage)
		return exitUsage
	}
	switch args[0] {
	case "show":
		return quarantineShow(ctx, args[1:], lookup, environ, stdout, stderr)
	case "list":
		return quarantineList(ctx, args[1:], lookup, environ, stdout, stderr)
	case "stats":
		return quarantineStats(ctx, args[1:], lookup, environ, stdout, stderr)
	case "discard":
		return quarantineDiscard(ctx, args[1:], lookup, environ, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, quarantineUsage)
		return exitOK
	}
	fmt.Fprintf(stderr, "relay quarantine: unknown command %q\n\n%s", args[0], quarantineUsage)
	return exitUsage
}

// ops is an operator command's configuration and admin client.
type ops struct {
	cfg    *config.Config
	admin  *kafka.AdminClient
	name   string
	stderr io.Writer
}

// opsSetup loads the configuration and an admin client for an operator
// command; a non-zero code is what the command must stop with.
func opsSetup(name string, lookup func(string) (string, bool), environ []string, stderr io.Writer) (*ops, int) {
	cfg, ok := loadConfig(cliLookup(lookup), environ, stderr)
	if !ok {
		return nil, exitUsage
	}
	a, err := kafkaclient.Admin(cfg)
	if err != nil {
		return nil, clientConfigError(cfg, "admin", err, stderr)
	}
	return &ops{cfg: cfg, admin: a, name: name, stderr: stderr}, exitOK
}

func (o *ops) close() { o.admin.Close() }

// withSnapshot runs an operator command's body on a fresh snapshot of the
// ledger and the quarantine; it returns the body's exit code, or the
// setup's or the read's.
func withSnapshot(ctx context.Context, name string, lookup func(string) (string, bool), environ []string, stderr io.Writer,
	keep func(id string) bool, body func(o *ops, s *snapshot) int) int {
	o, code := opsSetup(name, lookup, environ, stderr)
	if code != exitOK {
		return code
	}
	defer o.close()
	s, ok := o.load(ctx, keep)
	if !ok {
		return exitFailure
	}
	return body(o, s)
}

// load reads the snapshot, keeping the bytes of the records keep asks for,
// and reports a failure.
func (o *ops) load(ctx context.Context, keep func(id string) bool) (*snapshot, bool) {
	s, err := loadSnapshot(ctx, o.cfg, o.admin, keep)
	if err != nil {
		fmt.Fprintf(o.stderr, "%s: %v\n", o.name, err)
		return nil, false
	}
	return s, true
}

// filter selects failures; zero fields select everything.
type filter struct {
	codes          []string
	states         []string
	minAge, maxAge time.Duration
	schemaVersions []int
	partition      int
	source         string
	since, until   time.Time
	ids            map[string]bool
}

func (f *filter) match(fl *failure, now time.Time) bool {
	switch {
	case len(f.states) > 0 && !slices.Contains(f.states, fl.State):
		return false
	case len(f.codes) > 0 && !slices.Contains(f.codes, fl.Code):
		return false
	case f.minAge > 0 && now.Sub(fl.Since) < f.minAge:
		return false
	case f.maxAge > 0 && now.Sub(fl.Since) > f.maxAge:
		return false
	case len(f.schemaVersions) > 0 && !slices.Contains(f.schemaVersions, fl.SchemaVersion):
		return false
	case f.partition >= 0 && fl.Source.Partition != int32(f.partition):
		return false
	case f.source != "" && fl.Source.Topic != f.source:
		return false
	case !f.since.IsZero() && fl.Since.Before(f.since):
		return false
	case !f.until.IsZero() && fl.Since.After(f.until):
		return false
	case f.ids != nil && !f.ids[fl.ID]:
		return false
	}
	return true
}

// filterFlags registers the selection flags shared by list and replay.
type filterFlags struct {
	codes, states, schemaVersions, minAge, maxAge, since, until, source string
	partition                                                           int
}

func (ff *filterFlags) register(fs *flag.FlagSet, withStates bool) {
	fs.StringVar(&ff.codes, "code", "", "error codes, comma-separated")
	fs.StringVar(&ff.minAge, "min-age", "", "quarantined at least this long ago")
	fs.StringVar(&ff.maxAge, "max-age", "", "quarantined at most this long ago")
	fs.StringVar(&ff.schemaVersions, "schema-version", "", "writer schema versions, comma-separated")
	fs.IntVar(&ff.partition, "partition", -1, "source partition")
	fs.StringVar(&ff.source, "source", "", "source topic")
	fs.StringVar(&ff.since, "since", "", "quarantined at or after (RFC 3339 time, or a duration ago)")
	fs.StringVar(&ff.until, "until", "", "quarantined at or before (RFC 3339 time, or a duration ago)")
	if withStates {
		fs.StringVar(&ff.states, "state", "", "states, comma-separated, or all")
	}
}

// build checks the flag values; every problem is named.
func (ff *filterFlags) build(now time.Time) (*filter, error) {
	f := &filter{partition: ff.partition, source: ff.source}
	var errs []error
	if ff.partition < -1 {
		errs = append(errs, fmt.Errorf("--partition %d: not a partition number", ff.partition))
	}
	f.codes = splitList(ff.codes)
	switch ff.states {
	case "":
		f.states = []string{ledger.Open, ledger.Replaying, ledger.FailedAgain}
	case "all":
	default:
		f.states = splitList(ff.states)
		for _, s := range f.states {
			if !slices.Contains(ledger.States, s) {
				errs = append(errs, fmt.Errorf("--state %q: not one of %s or all", s, strings.Join(ledger.States, ", ")))
			}
		}
	}
	for _, v := range splitList(ff.schemaVersions) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("--schema-version %q: not a version number", v))
		}
		f.schemaVersions = append(f.schemaVersions, n)
	}
	var err error
	if f.minAge, err = parseAge("--min-age", ff.minAge); err != nil {
		errs = append(errs, err)
	}
	if f.maxAge, err = parseAge("--max-age", ff.maxAge); err != nil {
		errs = append(errs, err)
	}
	if f.since, err = parseWhen("--since", ff.since, now); err != nil {
		errs = append(errs, err)
	}
	if f.until, err = parseWhen("--until", ff.until, now); err != nil {
		errs = append(errs, err)
	}
	if !f.since.IsZero() && !f.until.IsZero() && f.since.After(f.until) {
		errs = append(errs, fmt.Errorf("--since %s is after --until %s: the window is empty", ff.since, ff.until))
	}
	if f.minAge > 0 && f.maxAge > 0 && f.minAge > f.maxAge {
		errs = append(errs, fmt.Errorf("--min-age %s is above --max-age %s: nothing can match", ff.minAge, ff.maxAge))
	}
	return f, errors.Join(errs...)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseAge reads a duration; a "d" suffix counts days.
func parseAge(name, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if d, err := strconv.Atoi(n); err == nil && d >= 0 {
			return time.Duration(d) * 24 * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s %q: not a duration (e.g. 90m, 24h, 7d)", name, s)
	}
	return d, nil
}

// parseWhen reads an RFC 3339 time, or a duration before now.
func parseWhen(name, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := parseAge(name, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q: neither an RFC 3339 time nor a duration ago", name, s)
	}
	return now.Add(-d), nil
}

func quarantineList(ctx context.Context, args []string, lookup func(string) (string, bool), environ []string, stdout, stderr io.Writer) int {
	fs := newFlags("relay quarantine list", quarantineUsage, stderr)
	var ff filterFlags
	ff.register(fs, true)
	asJSON := fs.Bool("json", false, "JSON lines instead of a table")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return exitUsage
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "relay quarantine list: unexpected argument %q\n", pos[0])
		return exitUsage
	}
	now := time.Now()
	f, err := ff.build(now)
	if err != nil {
		fmt.Fprintf(stderr, "relay quarantine list: %v\n", err)
		return exitUsage
	}
	return withSnapshot(ctx, "relay quarantine list", lookup, environ, stderr, nil, func(o *ops, s *snapshot) int {
		if err := checkSource(o.cfg, f.source); err != nil {
			fmt.Fprintf(stderr, "relay quarantine list: %v\n", err)
			return exitUsage
		}
		printList(stdout, s, f, now, *asJSON)
		return exitOK
	})
}

func printList(stdout io.Writer, s *snapshot, f *filter, now time.Time, asJSON bool) {
	enc := json.NewEncoder(stdout)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if !asJSON {
		fmt.Fprintln(tw, "FAILURE ID\tSTATE\tCODE\tAGE\tSCHEMA\tREPLAYS\tRECORD")
	}
	for _, fl := range s.failures {
		if !f.match(fl, now) {
			continue
		}
		where := "gone (retention)"
		if fl.Record != nil {
			where = fmt.Sprintf("%s/%d/%d", fl.Record.Topic, fl.Record.Partition, fl.Record.Offset)
		}
		if asJSON {
			_ = enc.Encode(listItem{ID: fl.ID, State: fl.State, Code: fl.Code, Since: fl.Since.UTC(), AgeSeconds: int64(now.Sub(fl.Since).Seconds()),
				Source: fl.Source, SchemaVersion: fl.SchemaVersion, ReplayCount: fl.ReplayCount, Record: where})
			continue
		}
		sv := "-"
		if fl.SchemaVersion > 0 {
			sv = "v" + strconv.Itoa(fl.SchemaVersion)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", fl.ID, fl.State, fl.Code, age(now.Sub(fl.Since)), sv, fl.ReplayCount, where)
	}
	if !asJSON {
		_ = tw.Flush()
	}
}

type listItem struct {
	ID            string        `json:"failureId"`
	State         string        `json:"state"`
	Code          string        `json:"errorCode"`
	Since         time.Time     `json:"quarantinedAt"`
	AgeSeconds    int64         `json:"ageSeconds"`
	Source        ledger.Source `json:"source"`
	SchemaVersion int           `json:"schemaVersion,omitempty"`
	ReplayCount   int           `json:"replayCount"`
	Record        string        `json:"record"`
}

// shown is what `quarantine show` prints: the failure envelope (as the quarantine record carries it), then
// the ledger's state and history.
type shown struct {
	envelope.View
	State   string         `json:"state"`
	History []ledger.Event `json:"history,omitempty"`
}

func quarantineShow(ctx context.Context, args []string, lookup func(string) (string, bool), environ []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprint(stderr, quarantineUsage)
		return exitUsage
	}
	id := args[0]
	if _, _, _, err := parseFailureID(id); err != nil {
		fmt.Fprintf(stderr, "relay quarantine show: %v\n", err)
		return exitUsage
	}
	keep := func(x string) bool { return x == id }
	return withSnapshot(ctx, "relay quarantine show", lookup, environ, stderr, keep, func(_ *ops, s *snapshot) int {
		return printShown(stdout, stderr, s, id)
	})
}

func printShown(stdout, stderr io.Writer, s *snapshot, id string) int {
	fl := s.byID[id]
	if fl == nil {
		fmt.Fprintf(stderr, "relay quarantine show: %s is not in the ledger nor in a quarantine topic\n", id)
		return exitUsage
	}
	out := shown{State: fl.State}
	if fl.Entry != nil {
		out.History = fl.Entry.History
	}
	if r := fl.Record; r != nil {
		hs := toHeaders(r.Headers)
		tp, _ := envelope.Lookup(hs, envelope.TraceParent)
		out.View = envelope.NewView(r.F, string(tp), r.Key, r.ValueLen)
		out.Location = &envelope.Where{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
	} else {
		out.FailureID, out.ErrorCode = fl.ID, fl.Code
		out.Source = envelope.Source{Topic: fl.Source.Topic, Partition: fl.Source.Partition, Offset: fl.Source.Offset}
		fmt.Fprintf(stderr, "relay quarantine show: the quarantine record of %s is gone (retention); the ledger remains\n", id)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return exitFailure
	}
	return exitOK
}

func quarantineStats(ctx context.Context, args []string, lookup func(string) (string, bool), environ []string, stdout, stderr io.Writer) int {
	fs := newFlags("relay quarantine stats", quarantineUsage, stderr)
	asJSON := fs.Bool("json", false, "JSON instead of text")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return exitUsage
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "relay quarantine stats: unexpected argument %q\n", pos[0])
		return exitUsage
	}
	return withSnapshot(ctx, "relay quarantine stats", lookup, environ, stderr, nil, func(_ *ops, s *snapshot) int {
		printStats(stdout, s, *asJSON)
		return exitOK
	})
}

func printStats(stdout io.Writer, s *snapshot, asJSON bool) {
	now := time.Now()
	sum := s.summary()
	if asJSON {
		type codeOut struct {
			ledger.CodeStats
			OldestAgeSeconds int64 `json:"oldestAgeSeconds"`
		}
		out := struct {
			ByState  map[string]int   `json:"byState"`
			ByCode   []codeOut        `json:"unresolvedByCode"`
			Headroom map[string]int64 `json:"retentionHeadroomSeconds"`
		}{ByState: sum.ByState, Headroom: map[string]int64{}}
		for _, c := range sum.ByCode {
			out.ByCode = append(out.ByCode, codeOut{c, int64(now.Sub(c.Oldest).Seconds())})
		}
		for t, d := range sum.Deadline {
			out.Headroom[t] = int64(d.Sub(now).Seconds())
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
		return
	}
	fmt.Fprintf(stdout, "failures by state:")
	for _, st := range ledger.States {
		fmt.Fprintf(stdout, " %s=%d", st, sum.ByState[st])
	}
	fmt.Fprintln(stdout)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CODE\tUNRESOLVED\tOLDEST")
	for _, c := range sum.ByCode {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", c.Code, c.Unresolved, age(now.Sub(c.Oldest)))
	}
	_ = tw.Flush()
	for t, d := range sum.Deadline {
		fmt.Fprintf(stdout, "retention headroom of %s: %s (the oldest unresolved record may be deleted from %s)\n",
			t, age(d.Sub(now)), d.UTC().Format(time.RFC3339))
	}
}

func quarantineDiscard(ctx context.Context, args []string, lookup func(string) (string, bool), environ []string, stdout, stderr io.Writer) int {
	fs := newFlags("relay quarantine discard", quarantineUsage, stderr)
	reason := fs.String("reason", "", "why (required; recorded in the ledger)")
	actor := fs.String("actor", "", "who (default RELAY_ACTOR, else user@host)")
	replaying := fs.Bool("include-replaying", false, "also failures being replayed")
	ids, err := parseInterspersed(fs, args)
	if err != nil {
		return exitUsage
	}
	var errs []error
	if strings.TrimSpace(*reason) == "" {
		errs = append(errs, errors.New("--reason is required: say why these failures are closed without replay"))
	}
	if len(ids) == 0 {
		errs = append(errs, errors.New("no failure id given"))
	}
	for _, id := range ids {
		if _, _, _, err := parseFailureID(id); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(stderr, "relay quarantine discard: %v\nnothing was discarded\n", err)
		return exitUsage
	}
	who, why := actorOf(*actor, lookup), strings.TrimSpace(*reason)
	return withSnapshot(ctx, "relay quarantine discard", lookup, environ, stderr, nil, func(o *ops, s *snapshot) int {
		return discard(ctx, o.cfg, s, ids, who, why, *replaying, stdout, stderr)
	})
}

// discard closes failures in one transaction, or none if any cannot be.
// A failure being replayed is closed only with replaying set: its discard
// carries the replay's count, and relay, which owns the replayed record,
// drops the record at its turn if it has read the discard by then (see
// pipeline.Discards); if it had already taken the record up, its outcome
// stands and the ledger says so.
func discard(ctx context.Context, cfg *config.Config, s *snapshot, ids []string, who, why string, replaying bool, stdout, stderr io.Writer) int {
	var errs []error
	now := time.Now()
	var msgs []*kafka.Message
	inFlight := map[string]string{}
	for _, id := range ids {
		fl := s.byID[id]
		switch {
		case fl == nil:
			errs = append(errs, fmt.Errorf("%s: not in the ledger nor in a quarantine topic", id))
			continue
		case fl.State == ledger.Replaying && !replaying:
			errs = append(errs, fmt.Errorf("%s: being replayed (%s); wait for its outcome, or add --include-replaying to close it anyway",
				id, fl.Entry.Current().ReplayID))
			continue
		case fl.State == ledger.Replaying:
			inFlight[id] = fl.Entry.Current().ReplayID
		case !ledger.Unresolved(fl.State):
			errs = append(errs, fmt.Errorf("%s: already %s", id, fl.State))
			continue
		}
		e := &ledger.Event{ID: id, State: ledger.Discarded, At: now, Actor: who, Reason: why,
			Code: fl.Code, ReplayCount: fl.ReplayCount, Source: fl.Source, SchemaVersion: fl.SchemaVersion}
		msgs = append(msgs, statetopic.EventMessage(cfg.StateTopicName(), e))
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(stderr, "relay quarantine discard: %v\nnothing was discarded\n", err)
		return exitUsage
	}
	w, err := statetopic.NewWriter(ctx, cfg, cfg.GroupID+".discard")
	if err != nil {
		fmt.Fprintf(stderr, "relay quarantine discard: %v\n", err)
		return exitFailure
	}
	defer w.Close()
	if err := w.Write(ctx, msgs); err != nil {
		fmt.Fprintf(stderr, "relay quarantine discard: %v\nnothing was discarded\n", err)
		return exitFailure
	}
	for _, id := range ids {
		fmt.Fprintf(stdout, "discarded %s (by %s: %s)\n", id, who, why)
		if rp, ok := inFlight[id]; ok {
			fmt.Fprintf(stdout, "  its replay %s was in flight: relay drops the replayed record at its turn, unless it had already taken it up"+
				" (then its outcome stands: relay quarantine show %s)\n", rp, id)
		}
	}
	return exitOK
}

// checkSource refuses a --source relay is not configured for: it would
// select nothing, silently.
func checkSource(cfg *config.Config, source string) error {
	if source == "" || slices.Contains(cfg.SourceTopics, source) {
		return nil
	}
	return fmt.Errorf("--source %q is not one of %s (%s)", source, config.EnvSourceTopics, strings.Join(cfg.SourceTopics, ","))
}

// parseFailureID splits topic/partition/offset; the topic may contain '/'
// only in theory (Kafka forbids it), so the last two fields are numbers.
func parseFailureID(id string) (topic string, partition int32, offset int64, err error) {
	i := strings.LastIndex(id, "/")
	j := strings.LastIndex(id[:max(i, 0)], "/")
	if i <= 0 || j <= 0 {
		return "", 0, 0, fmt.Errorf("%q is not a failure id (topic/partition/offset)", id)
	}
	p, err1 := strconv.ParseInt(id[j+1:i], 10, 32)
	o, err2 := strconv.ParseInt(id[i+1:], 10, 64)
	if err1 != nil || err2 != nil || p < 0 || o < 0 {
		return "", 0, 0, fmt.Errorf("%q is not a failure id (topic/partition/offset)", id)
	}
	return id[:j], int32(p), o, nil
}

func toHeaders(hs []kafka.Header) []envelope.Header {
	out := make([]envelope.Header, len(hs))
	for i, h := range hs {
		out[i] = envelope.Header{Key: h.Key, Value: h.Value}
	}
	return out
}
