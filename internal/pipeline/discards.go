package pipeline

import (
	"context"
	"errors"
	"time"

	"relay/internal/envelope"
	"relay/internal/ledger"
	"relay/internal/txn"
)

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

// How long a replayed record waits, paused where it is, when relay cannot
// tell yet whether its failure was discarded: briefly while the ledger is
// being read, longer when something is wrong.
const (
	discardRetry   = 100 * time.Millisecond
	discardBackoff = time.Second
)

// discardedReplay drops a replayed record, at its turn and before any
// attempt, when its failure has been discarded: nothing is output, the
// ledger gets a duplicate note saying why, and at its key's turn the next
// record may go. done says the record is decided (or must wait: err).
//
// This check is where a discard and a replay meet. A discard read by the
// record's turn stops the record here; one read later is too late, and
// the outcome this transaction writes stands — resolved outranks a
// discard of the same replay count (ledger's rank), so the ledger again
// agrees with the output. Discards keeps what it has read no older than
// about a second, so only a discard made within about a second of the
// turn can be too late.
func (m *Machine) discardedReplay(ctx context.Context, rec *txn.Record, prev *envelope.Failure, keyed bool, kr keyedRecord) (outs []txn.Output, done bool, err error) {
	if m.Discards == nil || prev == nil || prev.ReplayCount < 1 {
		return nil, false, nil
	}
	gone, err := m.Discards.Discarded(ctx, prev.SourcePartition, prev.ID)
	switch {
	case ctx.Err() != nil:
		return nil, true, ctx.Err()
	case errors.Is(err, ErrNotRead):
		// Not knowing is not "not discarded": the record waits, paused
		// in its partition (other partitions go on), and nothing is
		// aborted.
		m.Log.Debug("replayed record waits for the ledger", "id", prev.ID, "error", err.Error())
		return nil, true, &txn.NotDueError{Until: m.Now().Add(discardRetry)}
	case err != nil:
		m.Log.Warn("replayed record waits: cannot tell whether its failure was discarded", "id", prev.ID,
			"replay_id", prev.ReplayID, "error", err.Error(), "in", discardBackoff.String())
		return nil, true, &txn.NotDueError{Until: m.Now().Add(discardBackoff)}
	case !gone:
		return nil, false, nil
	}
	m.Log.Warn("replayed record not output: its failure was discarded", "id", prev.ID,
		"replay_id", prev.ReplayID, "replay_count", prev.ReplayCount, "topic", rec.Topic, "offset", rec.Offset)
	m.replayed(string(ledger.OutcomeDuplicate))
	if m.StateTopic != "" {
		outs = append(outs, m.ledgerOutput(&ledger.Event{
			ID: prev.ID, State: ledger.Discarded, At: m.Now(), Actor: m.Actor, Outcome: ledger.OutcomeDuplicate,
			Reason:   "replay " + prev.ReplayID + " skipped: the failure was discarded",
			ReplayID: prev.ReplayID, ReplayCount: prev.ReplayCount, Source: ledger.SourceOf(prev),
		}))
	}
	if keyed && kr.state != nil {
		outs = append(outs, m.Keys.put(kr.sk, rec.Partition, advance(kr.state)))
	}
	return outs, true, nil
}
