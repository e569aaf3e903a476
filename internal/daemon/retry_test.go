package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

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
