package quarantine

import (
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"time"

	"relay/internal/config"
	"relay/internal/ledger"
)

// Filter selects failures; zero fields select everything (Partition: -1).
type Filter struct {
	Codes          []string
	States         []ledger.State
	MinAge, MaxAge time.Duration
	SchemaVersions []int
	Partition      int
	Source         string
	Since, Until   time.Time
	IDs            map[string]bool
	// Classes are error classes (relay.error.class); Key is a record key,
	// as text. Both need the quarantine record: a failure whose record is
	// gone matches neither.
	Classes []string
	Key     *string
}

// Match says whether fl is selected at now.
func (f *Filter) Match(fl *Failure, now time.Time) bool {
	switch {
	case len(f.States) > 0 && !slices.Contains(f.States, fl.State):
		return false
	case len(f.Codes) > 0 && !slices.Contains(f.Codes, fl.Code):
		return false
	case f.MinAge > 0 && now.Sub(fl.Since) < f.MinAge:
		return false
	case f.MaxAge > 0 && now.Sub(fl.Since) > f.MaxAge:
		return false
	case len(f.SchemaVersions) > 0 && !slices.Contains(f.SchemaVersions, fl.SchemaVersion):
		return false
	case f.Partition >= 0 && fl.Source.Partition != int32(f.Partition):
		return false
	case f.Source != "" && fl.Source.Topic != f.Source:
		return false
	case !f.Since.IsZero() && fl.Since.Before(f.Since):
		return false
	case !f.Until.IsZero() && fl.Since.After(f.Until):
		return false
	case f.IDs != nil && !f.IDs[fl.ID]:
		return false
	case len(f.Classes) > 0 && (fl.Record == nil || !slices.Contains(f.Classes, fl.Record.Failure.Class)):
		return false
	case f.Key != nil && (fl.Record == nil || !fl.keyIs(*f.Key)):
		return false
	}
	return true
}

// Narrowed says whether f selects by anything but state.
func (f *Filter) Narrowed() bool {
	return f.IDs != nil || len(f.Codes) > 0 || len(f.Classes) > 0 || f.Key != nil || len(f.SchemaVersions) > 0 || f.MinAge > 0 || f.MaxAge > 0 ||
		!f.Since.IsZero() || !f.Until.IsZero() || f.Partition >= 0 || f.Source != ""
}

// Spec is a filter as written on a command line; Build checks it.
type Spec struct {
	Codes, States, SchemaVersions, MinAge, MaxAge, Since, Until, Source string
	Classes                                                             string
	// Key selects one record key (as text); nil selects any.
	Key       *string
	Partition int
}

// Build checks the values and makes the filter; every problem is named.
// An empty States selects the unresolved states; "all" selects every one.
func (sp *Spec) Build(now time.Time) (*Filter, error) {
	f := &Filter{Partition: sp.Partition, Source: sp.Source, Codes: SplitList(sp.Codes), Classes: SplitList(sp.Classes), Key: sp.Key}
	var errs []error
	if sp.Partition < -1 {
		errs = append(errs, fmt.Errorf("--partition %d: not a partition number", sp.Partition))
	}
	errs = append(errs, f.states(sp.States)...)
	for _, v := range SplitList(sp.SchemaVersions) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("--schema-version %q: not a version number", v))
		}
		f.SchemaVersions = append(f.SchemaVersions, n)
	}
	var err [4]error
	f.MinAge, err[0] = ParseAge("--min-age", sp.MinAge)
	f.MaxAge, err[1] = ParseAge("--max-age", sp.MaxAge)
	f.Since, err[2] = ParseWhen("--since", sp.Since, now)
	f.Until, err[3] = ParseWhen("--until", sp.Until, now)
	errs = append(errs, err[:]...)
	if !f.Since.IsZero() && !f.Until.IsZero() && f.Since.After(f.Until) {
		errs = append(errs, fmt.Errorf("--since %s is after --until %s: the window is empty", sp.Since, sp.Until))
	}
	if f.MinAge > 0 && f.MaxAge > 0 && f.MinAge > f.MaxAge {
		errs = append(errs, fmt.Errorf("--min-age %s is above --max-age %s: nothing can match", sp.MinAge, sp.MaxAge))
	}
	return f, errors.Join(errs...)
}

func (f *Filter) states(s string) []error {
	switch s {
	case "":
		f.States = []ledger.State{ledger.Open, ledger.Replaying, ledger.FailedAgain}
		return nil
	case "all":
		return nil
	}
	var errs []error
	for _, st := range SplitList(s) {
		f.States = append(f.States, ledger.State(st))
		if !slices.Contains(ledger.States, ledger.State(st)) {
			errs = append(errs, fmt.Errorf("--state %q: not one of %s or all", st, stateList()))
		}
	}
	return errs
}

// SplitList splits a comma-separated list, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ParseAge reads a duration; a "d" suffix counts days.
func ParseAge(name, s string) (time.Duration, error) {
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

// ParseWhen reads an RFC 3339 time, or a duration before now.
func ParseWhen(name, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := ParseAge(name, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q: neither an RFC 3339 time nor a duration ago", name, s)
	}
	return now.Add(-d), nil
}

// CheckSource refuses a --source relay is not configured for: it would
// select nothing, silently.
func CheckSource(cfg *config.Config, source string) error {
	if source == "" || slices.Contains(cfg.SourceTopics, source) {
		return nil
	}
	return fmt.Errorf("--source %q is not one of %s (%s)", source, config.EnvSourceTopics, strings.Join(cfg.SourceTopics, ","))
}

// ParseFailureID splits topic/partition/offset; the topic may contain '/'
// only in theory (Kafka forbids it), so the last two fields are numbers.
func ParseFailureID(id string) (topic string, partition int32, offset int64, err error) {
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

// stateList names every ledger state, for messages.
func stateList() string {
	names := make([]string, len(ledger.States))
	for i, s := range ledger.States {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// keyIs reports whether the failure's record has key k.
func (fl *Failure) keyIs(k string) bool {
	if fl.seed != nil {
		return maphash.String(*fl.seed, k) == fl.keyHash
	}
	return string(fl.Record.Key) == k
}
