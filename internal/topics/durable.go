package topics

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/kafkaerr"
)

// relay's producers write with acks=all, and a broker acknowledges such a
// write once min.insync.replicas replicas have it. On a topic with three
// replicas and min.insync.replicas 1 (Kafka's default) a committed
// transaction's records may sit on one broker only, and that broker's loss
// before its followers copy them loses them: exactly once holds for what
// the cluster keeps. So relay creates its topics with min.insync.replicas
// one below their replication factor (2 of 3: one broker may be down and
// writes go on), raises it on its own topics where it is lower, and says
// so of any topic it reads or writes (its sources included) that cannot
// survive one broker's loss.

// MinInsyncFor is the min.insync.replicas relay gives a topic of its own
// with rf replicas: rf-1 when rf is 3 or more; 0 (the broker's default
// stays) below, where no setting keeps writes going through a broker's
// loss without risking the records.
func MinInsyncFor(rf int) int {
	if rf >= 3 {
		return rf - 1
	}
	return 0
}

// Durability is a topic's replication as the cluster has it.
type Durability struct {
	Replicas  int // the fewest replicas of any of its partitions; 0 unknown
	MinInsync int // its effective min.insync.replicas; 0 unknown
}

// Risk says how acknowledged records of the topic could be lost, or its
// writes stop, when one broker is lost: "" when they cannot (or nothing is
// known).
func (d Durability) Risk() string {
	switch {
	case d.Replicas == 0:
		return ""
	case d.Replicas < 3:
		return fmt.Sprintf("replication factor %d: one broker's loss can lose acknowledged records or stop writes (3 replicas with min.insync.replicas 2 survive one)", d.Replicas)
	case d.MinInsync == 0:
		return ""
	case d.MinInsync < 2:
		return fmt.Sprintf("min.insync.replicas %d with %d replicas: a write counts once one broker has it, and that broker's loss loses it; set min.insync.replicas to 2 or more", d.MinInsync, d.Replicas)
	case d.MinInsync >= d.Replicas:
		return fmt.Sprintf("min.insync.replicas %d with %d replicas: writes stop while any replica is away; set it to %d", d.MinInsync, d.Replicas, MinInsyncFor(d.Replicas))
	}
	return ""
}

// ReadDurability reads the replication of the existing topics among
// names: the fewest replicas of a partition from the metadata, and the
// effective min.insync.replicas (the topic's own, or the brokers') from
// DescribeConfigs. A topic that does not exist is left out.
func ReadDurability(ctx context.Context, a Admin, names []string, timeout time.Duration) (map[string]Durability, error) {
	out := map[string]Durability{}
	for _, name := range names {
		md, err := a.GetMetadata(&name, false, int(timeout/time.Millisecond))
		if err != nil {
			return nil, fmt.Errorf("metadata of %s: %w", name, err)
		}
		t, ok := md.Topics[name]
		if !ok || t.Error.Code() != kafka.ErrNoError || len(t.Partitions) == 0 {
			continue
		}
		out[name] = Durability{Replicas: fewestReplicas(t)}
	}
	if err := readMinInsync(ctx, a, out, timeout); err != nil {
		return nil, err
	}
	return out, nil
}

// fewestReplicas is the fewest replicas of any partition of t.
func fewestReplicas(t kafka.TopicMetadata) int {
	if len(t.Partitions) == 0 {
		return 0
	}
	fewest := len(t.Partitions[0].Replicas)
	for _, p := range t.Partitions {
		fewest = min(fewest, len(p.Replicas))
	}
	return fewest
}

// readMinInsync fills in the effective min.insync.replicas of the topics
// of d, in one DescribeConfigs request. Refused (no DescribeConfigs on the
// topics), the values stay unknown; brokers out of reach are an error.
func readMinInsync(ctx context.Context, a Admin, d map[string]Durability, timeout time.Duration) error {
	if len(d) == 0 {
		return nil
	}
	res := make([]kafka.ConfigResource, 0, len(d))
	for name := range d {
		res = append(res, kafka.ConfigResource{Type: kafka.ResourceTopic, Name: name})
	}
	c, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	described, err := a.DescribeConfigs(c, res)
	switch {
	case err != nil && kafkaerr.Outage(err):
		return fmt.Errorf("configuration of %d topics: %w", len(res), err)
	case err != nil:
		return nil
	}
	for _, r := range described {
		cur, ok := d[r.Name]
		e, has := r.Config["min.insync.replicas"]
		if !ok || r.Error.Code() != kafka.ErrNoError || !has {
			continue
		}
		if n, err := strconv.Atoi(e.Value); err == nil && n > 0 {
			cur.MinInsync = n
			d[r.Name] = cur
		}
	}
	return nil
}

// Alterer is what RaiseMinInsync needs of an admin client.
type Alterer interface {
	IncrementalAlterConfigs(ctx context.Context, resources []kafka.ConfigResource, options ...kafka.AlterConfigsAdminOption) ([]kafka.ConfigResourceResult, error)
}

// RaiseMinInsync sets min.insync.replicas to 2 on each existing topic of
// states that has 3 or more replicas and a value of 1 (the one Risk names
// for lost records), and returns the topics it changed. It never touches
// a value an operator chose from 2 up, nor a source: a higher value can
// stop writes while replicas are away, so relay raises it only as far as
// durability needs.
func RaiseMinInsync(ctx context.Context, a Alterer, states []State) ([]string, error) {
	var res []kafka.ConfigResource
	for _, s := range states {
		if s.Have == 0 || s.Replicas < 3 || s.MinInsync == 0 || s.MinInsync >= 2 {
			continue
		}
		res = append(res, kafka.ConfigResource{Type: kafka.ResourceTopic, Name: s.Name, Config: []kafka.ConfigEntry{
			{Name: "min.insync.replicas", Value: "2", IncrementalOperation: kafka.AlterConfigOpTypeSet},
		}})
	}
	if len(res) == 0 {
		return nil, nil
	}
	out, err := a.IncrementalAlterConfigs(ctx, res)
	if err != nil {
		return nil, err
	}
	var raised []string
	var errs []error
	for _, r := range out {
		if r.Error.Code() != kafka.ErrNoError {
			errs = append(errs, fmt.Errorf("set min.insync.replicas of %s: %w", r.Name, r.Error))
			continue
		}
		raised = append(raised, r.Name)
	}
	return raised, errors.Join(errs...)
}
