package replay

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"relay/internal/envelope"
	"relay/internal/ledger"
	"relay/internal/quarantine"
	"relay/internal/statetopic"
)

// publish writes records at the rate, each in a transaction with its
// ledger change; it stops early (why) when the repeat-failure threshold
// passes (check) or ctx ends.
func (r *run) publish(ctx context.Context, recs []*quarantine.Failure, check bool) (why string, err error) {
	pace := newPacer(r.o.Rate)
	for i := 0; i < len(recs); {
		if ctx.Err() != nil {
			return "interrupted", nil //nolint:nilerr // an interrupt is reported by Run, not as a publish error
		}
		r.poll(0)
		if rate, n := r.failureRate(); check && n >= r.o.MinOutcomes && rate > r.o.MaxFailureRate {
			return fmt.Sprintf("repeat-failure rate %.0f%% (%d of %d outcomes) passed --max-failure-rate %.0f%%",
				100*rate, r.tally[string(ledger.FailedAgain)], n, 100*r.o.MaxFailureRate), nil
		}
		if why := r.guard.stop(ctx, r.tally); why != "" {
			return why, nil
		}
		n := min(len(recs)-i, pace.batch)
		if wait := pace.take(time.Now(), n); wait > 0 {
			r.poll(min(wait, 100*time.Millisecond))
			r.prog.Update(r.counts())
			continue
		}
		if err := r.publishBatch(ctx, recs[i:i+n]); err != nil {
			return "", err
		}
		i += n
		r.prog.Update(r.counts())
	}
	return "", nil
}

// pacer holds the replay to its rate as a ceiling (x/time/rate's token
// bucket): a batch is a tenth of a second's worth at most, and time spent
// in a slow commit buys at most one batch more, never the backlog back to
// back.
type pacer struct {
	lim   *rate.Limiter
	batch int
}

func newPacer(perSecond float64) *pacer {
	batch := max(1, int(perSecond/10))
	return &pacer{lim: rate.NewLimiter(rate.Limit(perSecond), batch), batch: batch}
}

// take takes n records' tokens at now, or says how long until there are
// enough (taking none).
func (p *pacer) take(now time.Time, n int) time.Duration {
	if p.lim.AllowN(now, n) {
		return 0
	}
	short := float64(n) - p.lim.TokensAt(now)
	return max(time.Millisecond, time.Duration(short/float64(p.lim.Limit())*float64(time.Second)))
}

// publishBatch writes one transaction: the replay records of the batch
// with their ledger changes, leaving alone what someone else changed.
func (r *run) publishBatch(ctx context.Context, batch []*quarantine.Failure) error {
	now := time.Now()
	stateTopic := r.cfg.StateTopicName()
	msgs := make([]*kafka.Message, 0, 2*len(batch))
	var sent []*quarantine.Failure
	var spans []trace.Span
	for _, fl := range batch {
		if st := r.changed[fl.ID]; st != "" {
			r.skippedLate[st]++
			continue
		}
		rec, ev := r.replayOf(fl, now)
		if span := r.traceReplay(fl, rec); span != nil {
			spans = append(spans, span)
		}
		msgs = append(msgs, rec, statetopic.EventMessage(stateTopic, ev))
		sent = append(sent, fl)
		r.guard.published(*rec.TopicPartition.Topic, rec.TopicPartition.Partition)
	}
	if len(msgs) > 0 {
		err := r.w.Write(ctx, msgs)
		endSpans(spans, err)
		if err != nil {
			return fmt.Errorf("publishing to the replay topic: %w (whether the last transaction, %d records, was committed is not known: "+
				"run the replay again; what was published shows as replaying and is skipped)", err, len(sent))
		}
	}
	for _, fl := range sent {
		r.pending[fl.ID] = true
	}
	r.published += len(sent)
	return nil
}

// replayOf is the replay record of fl and its ledger change: the
// quarantined record's key, value and headers, with relay.replay.id and
// relay.replay.count set, in the partition of its source partition. Its
// timestamp is now, so the replay topic's retention counts from the
// replay; the original time stays in relay.source.timestamp.
func (r *run) replayOf(fl *quarantine.Failure, now time.Time) (*kafka.Message, *ledger.Event) {
	count := max(fl.ReplayCount, fl.Record.Failure.ReplayCount) + 1
	topic := r.cfg.Derived(fl.Record.Failure.SourceTopic).Replay
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
		src = ledger.SourceOf(fl.Record.Failure)
	}
	ev := &ledger.Event{ID: fl.ID, State: ledger.Replaying, At: now, Actor: r.o.Actor, Reason: r.o.Reason, Code: fl.Code,
		ReplayID: r.id, ReplayCount: count, Source: src, SchemaVersion: fl.SchemaVersion}
	return msg, ev
}
