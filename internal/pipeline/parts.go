package pipeline

import (
	"context"
	"errors"
	"time"

	"relay/internal/hook"
	"relay/internal/ledger"
	"relay/internal/schema"
)

// Admitter is what the machine needs of schema admission.
type Admitter interface {
	Admission
	Encode(rec map[string]any) ([]byte, error)
}

// Rules checks a decoded record.
type Rules interface {
	Check(ctx context.Context, rec map[string]any) error
}

// Hook calls the optional HTTP hook.
type Hook interface {
	Call(ctx context.Context, req *hook.Request) (map[string]any, error)
}

// Outcomes counts what becomes of records. The machine reports outcomes
// of a transaction only once it committed (see OnCommit).
type Outcomes interface {
	// Outcome: n records reached outcome, with code ("" when processed).
	Outcome(outcome ledger.Outcome, code string, n int)
	// Ended: a record that had failed at least once reached an end state
	// (processed, quarantined, rejected) after attempts, elapsed since it
	// first failed.
	Ended(outcome ledger.Outcome, attempts int, elapsed time.Duration)
	// Replayed: n replayed records reached a ledger outcome: a state
	// (resolved, failed-again) or ledger.OutcomeDuplicate.
	Replayed(outcome string, n int)
}

// Discards tells the machine whether an operator has discarded a failure
// since its partition's ledger was restored (Settled holds what was
// discarded before). relay quarantine discard writes to the state topic
// from outside, at any time: while a replayed record of the failure waits
// in a tier, in a lagging replay topic, or while relay is down.
type Discards interface {
	// Discarded reports whether failure id, whose ledger is in state
	// partition p, has been discarded, from a reading of p up to an end
	// it had moments before (its last stable offset), so a discard
	// committed earlier is not missed for lag. It does not block: an
	// error wrapping ErrNotRead means that reading is still under way;
	// another error, that it cannot tell now.
	Discarded(ctx context.Context, p int32, id string) (bool, error)
}

// ErrNotRead says a state partition is not read up to the end a discard
// check needs yet; it usually is within a fetch (about 100 ms).
var ErrNotRead = errors.New("the ledger is not read up to its end yet")

// StateLoader reads the committed records of state-topic partitions
// (key → latest value).
type StateLoader func(ctx context.Context, partitions []int32) (map[string][]byte, error)

// Clock is the time source; tests set it.
type Clock func() time.Time

// The parts a machine is built without: each does nothing, so the steps
// need not ask whether a part is there.

// unchecked admits every value as it is, without a decoded record: with
// no schema registry, values are not checked, and neither rules nor the
// hook see them (New leaves them out).
type unchecked struct{}

func (unchecked) Admit(_ context.Context, value []byte) (schema.Admitted, error) {
	return schema.Admitted{Value: value}, nil
}

func (unchecked) Encode(map[string]any) ([]byte, error) {
	return nil, errors.New("no schema to encode a record with")
}

type noRules struct{}

func (noRules) Check(context.Context, map[string]any) error { return nil }

type uncounted struct{}

func (uncounted) Outcome(ledger.Outcome, string, int)             {}
func (uncounted) Ended(ledger.Outcome, int, time.Duration)        {}
func (uncounted) Replayed(string, int)                            {}
func noState(context.Context, []int32) (map[string][]byte, error) { return nil, nil }

// noDiscards knows of no discard: a replayed record is never dropped.
type noDiscards struct{}

func (noDiscards) Discarded(context.Context, int32, string) (bool, error) { return false, nil }
