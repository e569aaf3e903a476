package txn

import (
	"context"
	"fmt"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// onRebalance ends an open transaction before partitions go: a transaction
// must not commit offsets for partitions this member no longer owns, and
// the next owner must see everything this member has committed.
func (l *Loop) onRebalance(_ *kafka.Consumer, ev kafka.Event) error {
	if l.detached.Load() {
		return nil // a wedged consumer call, served after Run gave up on it
	}
	l.rebalances++
	switch e := ev.(type) {
	case kafka.AssignedPartitions:
		// Assign here rather than leave it to the client, so the
		// partitions can be resumed: one paused while this member owned
		// it before must not stay paused now.
		if err := l.consumer.Assign(e.Partitions); err != nil {
			l.fatal = fmt.Errorf("%w: assign: %w", ErrFatal, err)
			return nil
		}
		if err := l.consumer.Resume(e.Partitions); err != nil {
			l.fatal = fmt.Errorf("%w: resume assigned partitions: %w", ErrFatal, err)
			return nil
		}
		for _, tp := range e.Partitions {
			l.assigned[keyOf(tp)] = true
		}
		l.assigns++
		if pl, ok := l.handler.(PartitionListener); ok {
			ctx := l.runCtx
			if ctx == nil {
				ctx = context.Background()
			}
			if err := pl.OnAssigned(ctx, numbers(e.Partitions)); err != nil {
				l.fatal = fmt.Errorf("%w: partitions assigned: %w", ErrFatal, err)
				return nil
			}
		}
		if err := l.resumeAssigned(e.Partitions); err != nil {
			l.fatal = err
			return nil //nolint:nilerr // Run stops on l.fatal, as for the errors above
		}
		// Held partitions that came back stay held (a failure to
		// pause them is fatal, and Run stops).
		l.restoreStalls(e.Partitions)
		l.log.Info("partitions assigned", "partitions", describe(e.Partitions))
		l.obs.Assigned(len(l.assigned))
		l.tellOwned()
	case kafka.RevokedPartitions:
		if l.consumer.AssignmentLost() {
			l.lostSinceInit = true
		}
		// Forget the partitions first: an abort below rewinds only the
		// partitions this member keeps (a seek on a partition being
		// revoked would fail), and their late messages are dropped.
		for _, tp := range e.Partitions {
			delete(l.assigned, keyOf(tp))
			delete(l.paused, keyOf(tp))
		}
		defer func() {
			for _, tp := range e.Partitions {
				delete(l.handledTo, keyOf(tp))
			}
		}()
		if l.open && l.fatal == nil && l.twin == nil {
			// Run's context, not a bounded one: if the broker is away,
			// the abort or the new producer waits for it (each call
			// has its own deadline), as everywhere else. Giving up
			// here would stop relay on an outage it can outlast.
			ctx := l.runCtx
			if ctx == nil {
				ctx = context.Background()
			}
			if l.consumer.AssignmentLost() {
				// The group already moved on: commit would be refused.
				l.abort(ctx, "assignment lost")
			} else {
				l.end(ctx, "revoke")
			}
		}
		// After the commit, which ends the stalls of the partitions it
		// moved on.
		l.forgetStalls(e.Partitions)
		if pl, ok := l.handler.(PartitionListener); ok {
			pl.OnRevoked(numbers(e.Partitions))
		}
		l.log.Info("partitions revoked", "partitions", describe(e.Partitions))
		l.obs.Assigned(len(l.assigned))
		l.tellOwned()
	}
	return nil
}

// resumeAssigned tells a Floors handler the committed offsets and
// metadata the assigned partitions are read from.
func (l *Loop) resumeAssigned(parts []kafka.TopicPartition) error {
	if _, ok := l.handler.(Floors); !ok {
		return nil
	}
	ctx := l.runCtx
	if ctx == nil {
		ctx = context.Background()
	}
	committed, err := l.committedOf(ctx, parts)
	if err != nil {
		return err
	}
	for _, c := range committed {
		if err := l.resumeFrom(c, int64(c.Offset)); err != nil {
			return err
		}
	}
	return nil
}

// tellOwned gives an OwnershipListener the current assignment.
func (l *Loop) tellOwned() {
	ol, ok := l.handler.(OwnershipListener)
	if !ok {
		return
	}
	owned := make([]TopicPartition, 0, len(l.assigned))
	for k := range l.assigned {
		owned = append(owned, TopicPartition{Topic: k.topic, Partition: k.partition})
	}
	ol.OnOwned(owned)
}
