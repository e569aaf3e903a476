package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// retry waits a doubling, jittered interval between failures, tells each
// failure and its wait, and stops at once on a permanent error.
func TestRetryBacksOffAndStopsOnPermanent(t *testing.T) {
	calls := 0
	var waits []time.Duration
	op := func() (int, error) {
		calls++
		switch calls {
		case 1, 2, 3:
			return 0, errors.New("not yet")
		case 4:
			return 0, backoff.Permanent(errors.New("never"))
		}
		return calls, nil
	}
	_, err := retry(context.Background(), op, 2*time.Millisecond, 4*time.Millisecond, func(_ error, in time.Duration) { waits = append(waits, in) })
	if err == nil || err.Error() != "never" || calls != 4 {
		t.Fatalf("%v after %d calls; want the permanent error, unmarked, after 4", err, calls)
	}
	if len(waits) != 3 {
		t.Fatalf("waits %v, want one per failure before the permanent one", waits)
	}
	for i, most := range []time.Duration{3, 6, 6} { // initial 2 ms ±50%, then 4 ms ±50%, capped at 4 ms ±50%
		if waits[i] > most*time.Millisecond {
			t.Errorf("wait %d is %s, above %d ms", i, waits[i], most)
		}
	}
}

// untilReachable waits out Kafka errors (an unreachable broker) only; a
// verdict on the topics themselves is returned at once, and a stop ends
// the wait.
func TestUntilReachable(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	verdict := errors.New(`topic "orders" has 2 partitions`)
	calls := 0
	err := untilReachable(context.Background(), log, func() error { calls++; return verdict })
	if !errors.Is(err, verdict) || calls != 1 {
		t.Fatalf("%v after %d calls; want the verdict at once", err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err = untilReachable(ctx, log, func() error {
		calls++
		if calls == 2 {
			cancel()
		}
		return kafka.NewError(kafka.ErrTransport, "broker down", false)
	})
	if ctx.Err() == nil || !errors.Is(err, context.Canceled) || calls != 2 {
		t.Fatalf("%v after %d calls; want the stop after the second", err, calls)
	}
	if !strings.Contains(logs.String(), "cannot read topic metadata yet; retrying") || !strings.Contains(logs.String(), "in=") {
		t.Fatalf("the wait is not logged:\n%s", logs.String())
	}
}
