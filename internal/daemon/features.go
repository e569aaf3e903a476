package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/features"
	"relay/internal/kafkaclient"
	"relay/internal/telemetry"
)

// featuresEvery is how often relay looks at what its group's members
// announce, besides after each rebalance. A member restarted within its
// session keeps its place without a rebalance, so the last older member
// can leave unseen by the others' rebalance callbacks; a look costs one
// connection and one request.
const featuresEvery = 10 * time.Second

// watchFeatures starts watching what the group's members announce, for as
// long as ctx; key ordering parks only while every member announces it.
func (d *daemon) watchFeatures(ctx context.Context, metrics *telemetry.Metrics) *features.Watch {
	groups := kafkaclient.GroupsOf(d.cfg)
	w := features.NewWatch(func(ctx context.Context) ([]features.Member, error) { return Members(ctx, groups, d.cfg.GroupID) },
		featuresEvery, d.log.With("group", d.cfg.GroupID))
	metrics.SetFeatures(func() map[string]bool {
		on := map[string]bool{}
		for _, f := range features.All {
			on[f] = w.On(f)
		}
		return on
	})
	d.opts.Go(func() { w.Run(ctx) })
	return w
}

// Members are group's members as the group coordinator describes them.
func Members(ctx context.Context, g groupDescriber, group string) ([]features.Member, error) {
	res, err := g.DescribeConsumerGroups(ctx, []string{group})
	if err != nil {
		return nil, err
	}
	if len(res.ConsumerGroupDescriptions) != 1 {
		return nil, fmt.Errorf("describe group %s: %d descriptions", group, len(res.ConsumerGroupDescriptions))
	}
	desc := res.ConsumerGroupDescriptions[0]
	if desc.Error.Code() != kafka.ErrNoError {
		return nil, fmt.Errorf("describe group %s: %w", group, desc.Error)
	}
	out := make([]features.Member, 0, len(desc.Members))
	for _, m := range desc.Members {
		out = append(out, features.Member{InstanceID: m.GroupInstanceID, ClientID: m.ClientID, Host: m.Host})
	}
	return out, nil
}

// pokeOnAssign is the loop's observer, which also has the features watch
// look at the group after each rebalance.
type pokeOnAssign struct {
	*telemetry.Metrics
	watch *features.Watch
}

func (o pokeOnAssign) Assigned(partitions int) {
	o.Metrics.Assigned(partitions)
	o.watch.Poke()
}
