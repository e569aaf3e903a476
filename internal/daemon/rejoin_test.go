package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// groupScript answers each describe with the next of its looks: the
// group.instance.ids of the members, or an error; the last look repeats.
type groupScript struct {
	mu    sync.Mutex
	looks []any // []string or error
	n     int
}

func (g *groupScript) DescribeConsumerGroups(_ context.Context, groups []string, _ ...kafka.DescribeConsumerGroupsAdminOption) (kafka.DescribeConsumerGroupsResult, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	look := g.looks[min(g.n, len(g.looks)-1)]
	g.n++
	if err, ok := look.(error); ok {
		return kafka.DescribeConsumerGroupsResult{}, err
	}
	d := kafka.ConsumerGroupDescription{GroupID: groups[0]}
	for _, id := range look.([]string) {
		d.Members = append(d.Members, kafka.MemberDescription{GroupInstanceID: id})
	}
	return kafka.DescribeConsumerGroupsResult{ConsumerGroupDescriptions: []kafka.ConsumerGroupDescription{d}}, nil
}

// A refused group.instance.id is a twin's only when a member holds it for
// longer than a stale member could (the watch): a holder that goes away
// was stale, and relay rejoins; one that stays is live, and relay stops.
// Looks that fail (a broker away) decide nothing. (Issue: in a rolling
// restart the coordinator refused a relay restarted while a broker was
// away, with no twin anywhere; relay took it for a twin and exited 1.)
func TestTwinHoldsOnlyWhileALiveMemberHoldsTheID(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	away := kafka.NewError(kafka.ErrTransport, "broker down", false)
	for name, tc := range map[string]struct {
		looks []any
		twin  bool
	}{
		"a live twin holds it":         {looks: []any{[]string{"relay-1", "relay-0"}}, twin: true},
		"a stale holder expires":       {looks: []any{[]string{"relay-0"}, []string{"relay-0"}, []string{"relay-1"}}},
		"nobody holds it":              {looks: []any{[]string{}}},
		"the broker is away, then not": {looks: []any{away, away, away, away, away, []string{"relay-1"}}},
	} {
		g := &groupScript{looks: tc.looks}
		twin, err := twinHolds(context.Background(), g, "grp", "relay-0", 30*time.Millisecond, 10*time.Millisecond, time.Second, log)
		if err != nil || twin != tc.twin {
			t.Errorf("%s: twin %v, %v; want %v", name, twin, err, tc.twin)
		}
	}
	if !strings.Contains(logs.String(), "cannot describe the group yet") {
		t.Errorf("looks that failed were not logged:\n%s", logs.String())
	}
	// A stop ends the watch.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := twinHolds(ctx, &groupScript{looks: []any{away}}, "grp", "relay-0", time.Hour, time.Millisecond, time.Second, log); err == nil {
		t.Error("a stopped watch gave no error")
	}
}
