package txn

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// restoringHandler is a handler whose partitions' state restore fails
// once the run's context is done, as reading the state topic does when a
// signal cancels it.
type restoringHandler struct {
	Handler
}

func (restoringHandler) OnAssigned(ctx context.Context, _ []int32) error { return ctx.Err() }
func (restoringHandler) OnRevoked([]int32)                               {}

// assigningCloser serves an assignment from Close, as librdkafka may when
// one is queued while the consumer closes.
type assigningCloser struct{ *fakeConsumer }

func (c assigningCloser) Close() error {
	_ = c.cb(nil, c.assign(1))
	return c.fakeConsumer.Close()
}

// Regression (TestMixedClassesSurviveKills on CI): SIGTERM came while the
// consumer's close served an assignment, whose state restore the signal
// cancelled; close reported that as fatal and the graceful stop exited 1.
// Only a wedge past the bound during close is a failure of the close.
func TestAssignmentCancelledDuringCloseIsGraceful(t *testing.T) {
	h := newHarness(t)
	c := h.c
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.script = []kafka.Event{c.assign(0), c.msg(0, 0)}
	c.onIdle = cancel
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	l := New(h.set, assigningCloser{c}, h.factory, restoringHandler{h.handler}, log, h.obs)
	if err := l.Run(ctx); err != nil {
		t.Fatalf("Run = %v after a signal, want a graceful stop", err)
	}
	if h.prods[0].committedTxns != 1 {
		t.Fatalf("committed %d transactions, want the record's", h.prods[0].committedTxns)
	}
}
