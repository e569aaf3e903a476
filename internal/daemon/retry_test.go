package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

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
	err := untilReachable(context.Background(), log, "topic metadata", func() error { calls++; return verdict })
	if !errors.Is(err, verdict) || calls != 1 {
		t.Fatalf("%v after %d calls; want the verdict at once", err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err = untilReachable(ctx, log, "topic metadata", func() error {
		calls++
		if calls == 2 {
			cancel()
		}
		return kafka.NewError(kafka.ErrTransport, "broker down", false)
	})
	if ctx.Err() == nil || !errors.Is(err, context.Canceled) || calls != 2 {
		t.Fatalf("%v after %d calls; want the stop after the second", err, calls)
	}
	if !strings.Contains(logs.String(), "waiting for the brokers") || !strings.Contains(logs.String(), "in=") {
		t.Fatalf("the wait is not logged:\n%s", logs.String())
	}
}

// A start-up call that runs out of its own deadline while no broker
// answers (librdkafka's admin calls say context.DeadlineExceeded, not a
// Kafka error) is an outage too: relay once took it for a verdict, and
// exited 1 five seconds after starting while its broker was down.
func TestUntilReachableWaitsOutTimedOutCalls(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	calls := 0
	err := untilReachable(context.Background(), log, "the ACL check", func() error {
		calls++
		if calls < 3 {
			c, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			defer cancel()
			<-c.Done()
			return fmt.Errorf("describe topics: %w", c.Err())
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("%v after %d calls; want success on the third", err, calls)
	}
	if !strings.Contains(logs.String(), "for=\"the ACL check\"") {
		t.Fatalf("the wait does not say what it waits for:\n%s", logs.String())
	}
	// A permanent answer (not authorised) is a verdict, however it came.
	calls = 0
	denied := kafka.NewError(kafka.ErrClusterAuthorizationFailed, "not allowed", false)
	if err := untilReachable(context.Background(), log, "x", func() error { calls++; return denied }); !errors.Is(err, denied) || calls != 1 {
		t.Fatalf("%v after %d calls; want the refusal at once", err, calls)
	}
}
