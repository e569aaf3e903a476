package replay

import (
	"context"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/kafkaclient"
	"relay/internal/ledger"
)

// openTail follows the state topic from where the snapshot's read began,
// so every change since then is seen: this replay's outcomes, and what
// others did to the selected failures meanwhile.
func openTail(cfg *config.Config, from map[int32]int64) (*kafka.Consumer, error) {
	topic := cfg.StateTopicName()
	c, err := kafkaclient.Reader(cfg, cfg.ReaderGroup("cli"), kafkaclient.Read{})
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
func (r *run) poll(d time.Duration) {
	deadline := time.Now().Add(d)
	for {
		ms := int(time.Until(deadline) / time.Millisecond)
		if m, ok := r.tail.Poll(max(ms, 0)).(*kafka.Message); ok {
			r.note(m)
		}
		if time.Now().After(deadline) {
			return
		}
	}
}

// note reads one ledger record: an outcome of this replay, or a change
// someone else made to a failure.
func (r *run) note(m *kafka.Message) {
	e, ok, _ := ledger.Decode(string(m.Key), m.Value)
	if !ok || e == nil {
		return
	}
	if e.ReplayID != r.id && e.Outcome != ledger.OutcomeDuplicate && e.State != ledger.Open && !r.pending[e.ID] {
		r.changed[e.ID] = string(e.State) // not ours: a discard, another replay
	}
	if e.ReplayID != r.id || !r.pending[e.ID] {
		return
	}
	switch {
	case e.Outcome == ledger.OutcomeDuplicate:
		r.settle(e.ID, string(ledger.OutcomeDuplicate))
	case e.State == ledger.Resolved && e.Outcome == ledger.OutcomeRejected:
		r.settle(e.ID, string(ledger.OutcomeRejected))
	case e.State == ledger.Resolved, e.State == ledger.FailedAgain:
		r.settle(e.ID, string(e.State))
	}
}

// settle records the outcome of a published record; each is settled once
// (it leaves pending).
func (r *run) settle(id, outcome string) {
	delete(r.pending, id)
	r.outcomes[id] = outcome
	r.tally[outcome]++
}

// await waits until every published record's outcome is known, or Wait,
// or, guarded, the guard stops the replay (why).
func (r *run) await(ctx context.Context, guarded bool) (done bool, why string) {
	deadline := time.Now().Add(r.o.Wait)
	for len(r.pending) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		r.poll(200 * time.Millisecond)
		r.prog.Update(r.counts())
		if !guarded {
			continue
		}
		if why := r.guard.stop(ctx, r.tally); why != "" {
			return false, why
		}
	}
	return len(r.pending) == 0, ""
}

// failureRate is the share of known outcomes that failed again
// (duplicates aside), and how many outcomes it is over.
func (r *run) failureRate() (float64, int) {
	failed := r.tally[string(ledger.FailedAgain)]
	n := failed + r.tally[string(ledger.Resolved)] + r.tally[string(ledger.OutcomeRejected)]
	if n == 0 {
		return 0, 0
	}
	return float64(failed) / float64(n), n
}
