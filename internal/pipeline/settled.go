package pipeline

import (
	"context"
	"errors"
	"time"

	"relay/internal/txn"
)

// How long a replayed record waits, paused where it is, when relay cannot
// tell yet whether its failure was discarded: briefly while the ledger is
// being read, longer when something is wrong.
const (
	discardRetry   = 100 * time.Millisecond
	discardBackoff = time.Second
)

// checkSettled stops a replayed record whose failure is settled: a copy of
// a replayed record whose failure is settled already is not handled
// again, and one whose failure was discarded is dropped (see
// checkDiscarded). At its key's turn either lets the next record go. done
// says the record is decided (or must wait: err).
func (m *Machine) checkSettled(ctx context.Context, p *pass) (outs []txn.Output, done bool, err error) {
	if p.prev == nil || p.prev.ReplayCount < 1 {
		return nil, false, nil
	}
	if state, done := m.settled.Check(p.id, p.prev.ReplayCount); done {
		return m.release(p, m.duplicate(p, state)), true, nil
	}
	return m.checkDiscarded(ctx, p)
}

// checkDiscarded drops a replayed record, at its turn and before any
// attempt, when its failure has been discarded: nothing is output, the
// ledger gets a duplicate note saying why, and at its key's turn the next
// record may go.
//
// This check is where a discard and a replay meet. A discard read by the
// record's turn stops the record here; one read later is too late, and
// the outcome this transaction writes stands — resolved outranks a
// discard of the same replay count (ledger's rank), so the ledger again
// agrees with the output. Discards keeps what it has read no older than
// about a second, so only a discard made within about a second of the
// turn can be too late.
func (m *Machine) checkDiscarded(ctx context.Context, p *pass) (outs []txn.Output, done bool, err error) {
	prev := p.prev
	gone, err := m.discards.Discarded(ctx, prev.SourcePartition, prev.ID)
	switch {
	case ctx.Err() != nil:
		return nil, true, ctx.Err()
	case errors.Is(err, ErrNotRead):
		// Not knowing is not "not discarded": the record waits, paused
		// in its partition (other partitions go on), and nothing is
		// aborted.
		m.log.Debug("replayed record waits for the ledger", "id", prev.ID, "error", err.Error())
		return nil, true, &txn.NotDueError{Until: m.now().Add(discardRetry)}
	case err != nil:
		m.log.Warn("replayed record waits: cannot tell whether its failure was discarded", "id", prev.ID,
			"replay_id", prev.ReplayID, "error", err.Error(), "in", discardBackoff.String())
		return nil, true, &txn.NotDueError{Until: m.now().Add(discardBackoff)}
	case !gone:
		return nil, false, nil
	}
	m.log.Warn("replayed record not output: its failure was discarded", "id", prev.ID,
		"replay_id", prev.ReplayID, "replay_count", prev.ReplayCount, "topic", p.rec.Topic, "offset", p.rec.Offset)
	return m.release(p, m.discarded(p)), true, nil
}
