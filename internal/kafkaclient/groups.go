package kafkaclient

import (
	"context"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
)

// A request that librdkafka's admin API sends to a group coordinator
// (DescribeConsumerGroups here) waits, inside the client, for that
// coordinator to be found and up. When librdkafka times the request out
// first, the wait goes on without it; when a coordinator is found again
// (moved to another broker, or back), librdkafka (2.11.1, and its main
// branch as of December 2026; a fix is proposed upstream as
// confluentinc/librdkafka#5397) hands the timed-out request's freed state
// to its response handler and the process aborts:
// "rd_kafka_enq_once_del_source_return: Assertion `eonce->refcnt > 0'
// failed". Seen in a rolling restart: relay's start-up ACL check, made on
// its consumer's handle while the group coordinator was down, killed the
// process a minute later. Destroying the client before librdkafka's own
// timeout ends such a wait safely (the request is failed, not sent, and
// its state freed once), so every group-coordinator request of relay runs
// on a client of its own, closed when the call returns, with librdkafka's
// timeout a second past the caller's deadline: the call returns on the
// deadline and the client is gone before librdkafka gives up on the
// request (TestClusterGroupDescribeOutlivesItsCoordinator).

// Groups describes consumer groups, each call on an admin client of its
// own that is closed before the call returns. It costs a connection per
// call; its callers are a start-up check and a watch that looks once a
// second for a few seconds.
type Groups struct{ cfg *config.Config }

// GroupsOf is Groups with cfg's connection settings.
func GroupsOf(cfg *config.Config) Groups { return Groups{cfg: cfg} }

// DescribeConsumerGroups is kafka.AdminClient's, with librdkafka's own
// bound on the request a second past ctx's deadline (see above).
func (g Groups) DescribeConsumerGroups(ctx context.Context, groups []string, options ...kafka.DescribeConsumerGroupsAdminOption) (kafka.DescribeConsumerGroupsResult, error) {
	if d, ok := ctx.Deadline(); ok {
		left := time.Until(d)
		if left <= 0 {
			return kafka.DescribeConsumerGroupsResult{}, context.DeadlineExceeded
		}
		options = append(options, kafka.SetAdminRequestTimeout(left+time.Second))
	}
	a, err := Admin(g.cfg)
	if err != nil {
		return kafka.DescribeConsumerGroupsResult{}, err
	}
	defer a.Close()
	return a.DescribeConsumerGroups(ctx, groups, options...)
}
