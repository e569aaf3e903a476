package quarantine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/ledger"
	"relay/internal/statetopic"
)

// InputError is a request the operator must change: an unknown failure,
// one in the wrong state. Nothing was written.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// Discard is one `relay quarantine discard`: who closes which failures,
// and why.
type Discard struct {
	IDs    []string
	Actor  string
	Reason string
	// IncludeReplaying also closes failures being replayed.
	IncludeReplaying bool
}

// Check names every problem of the request itself, before anything is read.
func (d *Discard) Check() error {
	var errs []error
	if strings.TrimSpace(d.Reason) == "" {
		errs = append(errs, errors.New("--reason is required: say why these failures are closed without replay"))
	}
	if len(d.IDs) == 0 {
		errs = append(errs, errors.New("no failure id given"))
	}
	for _, id := range d.IDs {
		if _, _, _, err := ParseFailureID(id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Apply closes the failures in one transaction, or none if any cannot be
// (an *InputError). A failure being replayed is closed only with
// IncludeReplaying: its discard carries the replay's count, and relay,
// which owns the replayed record, drops the record at its turn if it has
// read the discard by then; if it had already taken the record up, its
// outcome stands and the ledger says so. It returns, by failure id, the
// replays that were in flight.
func (d *Discard) Apply(ctx context.Context, cfg *config.Config, x *Index) (inFlight map[string]string, err error) {
	now := time.Now()
	why := strings.TrimSpace(d.Reason)
	var errs []error
	var msgs []*kafka.Message
	inFlight = map[string]string{}
	for _, id := range d.IDs {
		fl := x.Get(id)
		switch {
		case fl == nil:
			errs = append(errs, fmt.Errorf("%s: not in the ledger nor in a quarantine topic", id))
			continue
		case fl.State == ledger.Replaying && !d.IncludeReplaying:
			errs = append(errs, fmt.Errorf("%s: being replayed (%s); wait for its outcome, or add --include-replaying to close it anyway",
				id, fl.ReplayID))
			continue
		case fl.State == ledger.Replaying:
			inFlight[id] = fl.ReplayID
		case !ledger.Unresolved(fl.State):
			errs = append(errs, fmt.Errorf("%s: already %s", id, fl.State))
			continue
		}
		e := &ledger.Event{ID: id, State: ledger.Discarded, At: now, Actor: d.Actor, Reason: why,
			Code: fl.Code, ReplayCount: fl.ReplayCount, Source: fl.Source, SchemaVersion: fl.SchemaVersion}
		msgs = append(msgs, statetopic.EventMessage(cfg.StateTopicName(), e))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, &InputError{err}
	}
	w, err := statetopic.NewWriter(ctx, cfg, cfg.GroupID+".discard")
	if err != nil {
		return nil, err
	}
	defer w.Close()
	return inFlight, w.Write(ctx, msgs)
}

// Actor is who an operator command records: flag (--actor), else
// RELAY_ACTOR, else user@host.
func Actor(flag string, lookup func(string) (string, bool)) string {
	if flag != "" {
		return flag
	}
	if v, ok := lookup(config.EnvActor); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v)
	}
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	if host == "" {
		return name
	}
	return name + "@" + host
}

// WriteText says what Apply did: each failure discarded, and the replays
// that were in flight (inFlight, as Apply returned it).
func (d *Discard) WriteText(w io.Writer, inFlight map[string]string) {
	for _, id := range d.IDs {
		fmt.Fprintf(w, "discarded %s (by %s: %s)\n", id, d.Actor, d.Reason)
		if rp, ok := inFlight[id]; ok {
			fmt.Fprintf(w, "  its replay %s was in flight: relay drops the replayed record at its turn, unless it had already taken it up"+
				" (then its outcome stands: relay quarantine show %s)\n", rp, id)
		}
	}
}
