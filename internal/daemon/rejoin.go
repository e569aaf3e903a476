package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/kafkaclient"
	"relay/internal/topics"
)

// A static member's consumer refused its group.instance.id
// (txn.ErrInstanceFenced) may have met a twin — a second live process
// with relay's transactional id — or a stale holder: the group coordinator
// can map the id to a member nobody runs any more, as when a member
// rejoined while the coordinator moved between brokers (seen in a rolling
// restart, with no twin anywhere). A live member keeps heartbeating; a
// stale one is removed after session.timeout.ms. So relay watches the
// group for that long: a holder all the while is a twin, and relay stops;
// no holder at some look means none is live, and relay rejoins with a new
// consumer (the refused one is unusable, and left unclosed: librdkafka's
// close of it does not return). Rejoins are bounded like fence recoveries.

const (
	maxRejoins   = 3
	rejoinWindow = 10 * time.Minute
	// lookEvery is how often the group is described while relay watches.
	lookEvery = time.Second
)

// groupDescriber is what the watch needs of an admin client: each look
// on a client of its own (kafkaclient.Groups), since a look that times
// out while the group coordinator is away must not outlive its client.
type groupDescriber = topics.GroupDescriber

// rejoin decides what follows a refused group.instance.id: a new consumer
// when no live member holds the id, the error (relay stops) when a twin
// does or the rejoins are spent; nil and nil when ctx ended meanwhile.
func (d *daemon) rejoin(ctx context.Context, fenced error, rejoins *[]time.Time) (*kafka.Consumer, error) {
	now := time.Now()
	*rejoins = slices.DeleteFunc(*rejoins, func(t time.Time) bool { return now.Sub(t) >= rejoinWindow })
	if len(*rejoins) >= maxRejoins {
		return nil, fmt.Errorf("%w (%d rejoins within %s, giving up)", fenced, maxRejoins, rejoinWindow)
	}
	watch := d.cfg.SessionTimeout + d.cfg.OpTimeout + 2*lookEvery
	d.log.Warn("the group coordinator gave this group.instance.id to another member; watching the group to tell a live twin from a stale member",
		"group_instance_id", d.cfg.GroupInstanceID, "watch", watch.String(), "err", fenced)
	twin, err := twinHolds(ctx, kafkaclient.GroupsOf(d.cfg), d.cfg.GroupID, d.cfg.GroupInstanceID, watch, lookEvery, d.cfg.OpTimeout, d.log)
	switch {
	case ctx.Err() != nil:
		return nil, nil //nolint:nilerr // a signal ended the watch: nil and nil, as rejoin says
	case err != nil:
		return nil, errors.Join(fenced, err)
	case twin:
		return nil, fmt.Errorf("%w; another live member holds group.instance.id %q (is %s shared by two instances?); this one stops",
			fenced, d.cfg.GroupInstanceID, config.EnvTransactionalID)
	}
	c, err := kafkaclient.LoopConsumer(d.cfg, kafkaclient.WithLogs(d.logs))
	if err != nil {
		return nil, errors.Join(fenced, fmt.Errorf("new consumer: %w", err))
	}
	*rejoins = append(*rejoins, now)
	d.lag.swap(c)
	d.log.Warn("no live member holds this group.instance.id: the holder was stale, not a twin; rejoining the group with a new consumer",
		"group_instance_id", d.cfg.GroupInstanceID, "rejoins_in_window", len(*rejoins))
	return c, nil
}

// twinHolds describes group every `every` until it can tell whether a
// live member holds instance: false at the first look that finds none
// holding it, true when every look for watch since the first found one.
// A look that fails (a broker away) says nothing either way; it is logged,
// and the watch goes on until ctx ends.
func twinHolds(ctx context.Context, a groupDescriber, group, instance string, watch, every, timeout time.Duration, log *slog.Logger) (bool, error) {
	var first time.Time
	for {
		c, cancel := context.WithTimeout(ctx, timeout)
		res, err := a.DescribeConsumerGroups(c, []string{group})
		cancel()
		if err == nil && len(res.ConsumerGroupDescriptions) == 1 && res.ConsumerGroupDescriptions[0].Error.Code() != kafka.ErrNoError {
			err = res.ConsumerGroupDescriptions[0].Error
		}
		switch {
		case ctx.Err() != nil:
			return false, ctx.Err()
		case err != nil:
			log.Warn("cannot describe the group yet; retrying", "group", group, "err", err)
		case !holds(res, instance):
			return false, nil
		case first.IsZero():
			first = time.Now()
		case time.Since(first) >= watch:
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(every):
		}
	}
}

// holds says whether a member of the described group has instance as its
// group.instance.id.
func holds(res kafka.DescribeConsumerGroupsResult, instance string) bool {
	for _, g := range res.ConsumerGroupDescriptions {
		for _, m := range g.Members {
			if m.GroupInstanceID == instance {
				return true
			}
		}
	}
	return false
}
