package kafkaclient

import (
	"context"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
)

// A request that librdkafka's admin API sends to a group coordinator
// (DescribeConsumerGroups here) waits, inside the client, for that
// coordinator to be found and up. When the request times out first, the
// wait goes on without it; when the coordinator comes back, librdkafka
// (2.11, and its main branch in December 2026) hands the timed-out
// request's freed state to its response handler and the process aborts:
// "rd_kafka_enq_once_del_source_return: Assertion `eonce->refcnt > 0'
// failed". Seen in a rolling restart: relay's start-up ACL check, made
// on its consumer's handle while the group coordinator was down, killed
// the process a minute later, when the next broker went away. Destroying
// the client ends such a wait safely, so every group-coordinator request
// of relay runs on a client of its own, closed before the call returns
// (TestClusterGroupDescribeOutlivesItsCoordinator).

// Groups describes consumer groups, each call on an admin client of its
// own that is closed before the call returns. It costs a connection per
// call; its callers are a start-up check and a watch that looks once a
// second for a few seconds.
type Groups struct{ cfg *config.Config }

// GroupsOf is Groups with cfg's connection settings.
func GroupsOf(cfg *config.Config) Groups { return Groups{cfg: cfg} }

// DescribeConsumerGroups is kafka.AdminClient's, with librdkafka's own
// bound on the request set to ctx's deadline.
func (g Groups) DescribeConsumerGroups(ctx context.Context, groups []string, options ...kafka.DescribeConsumerGroupsAdminOption) (kafka.DescribeConsumerGroupsResult, error) {
	if d, ok := ctx.Deadline(); ok {
		left := time.Until(d)
		if left <= 0 {
			return kafka.DescribeConsumerGroupsResult{}, context.DeadlineExceeded
		}
		options = append(options, kafka.SetAdminRequestTimeout(left))
	}
	a, err := Admin(g.cfg)
	if err != nil {
		return kafka.DescribeConsumerGroupsResult{}, err
	}
	defer a.Close()
	return a.DescribeConsumerGroups(ctx, groups, options...)
}
