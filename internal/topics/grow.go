package topics

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Grower is what Grow needs of an admin client.
type Grower interface {
	Admin
	CreatePartitions(ctx context.Context, partitions []kafka.PartitionsSpecification, options ...kafka.CreatePartitionsAdminOption) ([]kafka.TopicResult, error)
}

// Grow adds partitions to the existing topics of states that have fewer
// than they need: after partitions were added to a source, relay holds back
// the new partitions' records until every derived topic has them. Adding
// partitions moves no record and is the one change relay makes to an
// existing topic: relay writes every derived record to an explicit
// partition (the source's number), never by key hash, so no key moves.
func Grow(ctx context.Context, a Grower, w Watermarks, states []State) ([]string, error) {
	var specs []kafka.PartitionsSpecification
	for _, s := range states {
		if s.Have > 0 && s.Have < s.Partitions {
			specs = append(specs, kafka.PartitionsSpecification{Topic: s.Name, IncreaseTo: s.Partitions})
		}
	}
	if len(specs) == 0 {
		return nil, nil
	}
	res, err := a.CreatePartitions(ctx, specs, kafka.SetAdminOperationTimeout(30*time.Second))
	if err != nil {
		return nil, err
	}
	var grown []string
	var errs []error
	for _, r := range res {
		if r.Error.Code() == kafka.ErrNoError {
			grown = append(grown, r.Topic)
			continue
		}
		errs = append(errs, fmt.Errorf("add partitions to %s: %w", r.Topic, r.Error))
	}
	sort.Strings(grown)
	if err := errors.Join(errs...); err != nil {
		return grown, err
	}
	// The controller answers before the new partitions serve requests.
	for _, sp := range specs {
		if err := waitUsable(ctx, a, w, sp.Topic, sp.IncreaseTo); err != nil {
			return grown, err
		}
	}
	return grown, nil
}
