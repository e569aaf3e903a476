package topics

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/kafkaerr"
)

// Spec is one topic relay needs.
type Spec struct {
	Name   string
	Role   string // output, retry, quarantine, rejected, replay, state
	Source string // "" for the state topic
	// Partitions is what the topic needs at least: its source's count for
	// partition-preserving hops.
	Partitions int
	Configs    map[string]string
}

// Admin is the part of the Kafka admin client the package uses.
type Admin interface {
	GetMetadata(topic *string, allTopics bool, timeoutMs int) (*kafka.Metadata, error)
	CreateTopics(ctx context.Context, topics []kafka.TopicSpecification, options ...kafka.CreateTopicsAdminOption) ([]kafka.TopicResult, error)
	DescribeConfigs(ctx context.Context, resources []kafka.ConfigResource, options ...kafka.DescribeConfigsAdminOption) ([]kafka.ConfigResourceResult, error)
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// Plan lists the topics cfg needs, given the partition count of each source.
// Every hop writes to its record's source partition number, so every hop
// topic needs at least the source's partitions (dead-letter set-ups have lost
// records to a dead-letter topic with fewer partitions than its source).
func Plan(cfg *config.Config, sourcePartitions map[string]int) []Spec {
	var out []Spec
	tierRetention := max(2*cfg.RetryMaxElapsed, 24*time.Hour)
	maxParts := 1
	for _, src := range cfg.SourceTopics {
		n := sourcePartitions[src]
		maxParts = max(maxParts, n)
		del := func(retention time.Duration) map[string]string {
			return map[string]string{"cleanup.policy": "delete", "retention.ms": ms(retention)}
		}
		d := cfg.Derived(src)
		out = append(out, Spec{Name: d.Output, Role: "output", Source: src, Partitions: n, Configs: del(cfg.OutputRetention)})
		for i, t := range cfg.RetryTiers {
			if cfg.WaitsInPlace() {
				break // records wait in place: no tier topics
			}
			out = append(out, Spec{Name: d.Tiers[i], Role: "retry " + t.Label, Source: src, Partitions: n, Configs: del(tierRetention)})
		}
		out = append(out,
			Spec{Name: d.Quarantine, Role: "quarantine", Source: src, Partitions: n, Configs: del(cfg.QuarantineRetention)},
			Spec{Name: d.Rejected, Role: "rejected", Source: src, Partitions: n, Configs: del(cfg.QuarantineRetention)},
			Spec{Name: d.Replay, Role: "replay", Source: src, Partitions: n, Configs: del(cfg.OutputRetention)},
		)
	}
	out = append(out, Spec{Name: cfg.StateTopicName(), Role: "state", Partitions: maxParts,
		Configs: map[string]string{"cleanup.policy": "compact"}})
	return out
}

// Partitions returns a topic's partition count; 0 if it does not exist.
func Partitions(a Admin, topic string, timeout time.Duration) (int, error) {
	n, _, err := shape(a, topic, timeout)
	return n, err
}

// shape is a topic's partition count and the fewest replicas of any of
// its partitions, from one metadata request; 0 and 0 if it does not exist.
func shape(a Admin, topic string, timeout time.Duration) (partitions, replicas int, err error) {
	md, err := a.GetMetadata(&topic, false, int(timeout/time.Millisecond))
	if err != nil {
		return 0, 0, err
	}
	t, ok := md.Topics[topic]
	if !ok || t.Error.Code() == kafka.ErrUnknownTopicOrPart || t.Error.Code() == kafka.ErrUnknownTopic {
		return 0, 0, nil
	}
	if t.Error.Code() != kafka.ErrNoError {
		return 0, 0, t.Error
	}
	return len(t.Partitions), fewestReplicas(t), nil
}

// sourceSettle is how long a source the metadata does not show is asked
// for again before it counts as missing: each broker learns of a new
// topic from the controller, a moment after it was created, and the
// broker asked may not have yet (a script that creates the source and
// runs relay topics apply at once).
var sourceSettle = 3 * time.Second

// Sources reads the partition count of every source; a missing source is an
// error naming it.
func Sources(a Admin, cfg *config.Config, timeout time.Duration) (map[string]int, error) {
	out := map[string]int{}
	var errs []error
	for _, src := range cfg.SourceTopics {
		n, err := Partitions(a, src, timeout)
		for settled := time.Now().Add(sourceSettle); err == nil && n == 0 && time.Now().Before(settled); {
			time.Sleep(sourceSettle / 12)
			n, err = Partitions(a, src, timeout)
		}
		if err != nil {
			return nil, fmt.Errorf("metadata of %s: %w", src, err)
		}
		if n == 0 {
			errs = append(errs, fmt.Errorf("source topic %q does not exist", src))
		}
		out[src] = n
	}
	return out, errors.Join(errs...)
}

// State is a planned topic as the cluster has it.
type State struct {
	Spec
	Have       int // partitions now; 0 = missing
	Durability     // of an existing topic
}

// Problem says what is wrong with the topic, "" if nothing.
func (s State) Problem() string {
	switch {
	case s.Have == 0:
		return fmt.Sprintf("does not exist; create it with at least %d partitions (relay topics apply)", s.Partitions)
	case s.Have < s.Partitions && s.Source != "":
		return fmt.Sprintf("has %d partitions, fewer than source %q's %d: records keep their partition number, so it needs at least %d",
			s.Have, s.Source, s.Partitions, s.Partitions)
	}
	return ""
}

// Inspect reads the current partition count and durability of every
// planned topic.
func Inspect(ctx context.Context, a Admin, plan []Spec, timeout time.Duration) ([]State, error) {
	out := make([]State, 0, len(plan))
	d := map[string]Durability{}
	for _, s := range plan {
		n, replicas, err := shape(a, s.Name, timeout)
		if err != nil {
			return nil, fmt.Errorf("metadata of %s: %w", s.Name, err)
		}
		out = append(out, State{Spec: s, Have: n})
		if n > 0 {
			d[s.Name] = Durability{Replicas: replicas}
		}
	}
	if err := readMinInsync(ctx, a, d, timeout); err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Durability = d[out[i].Name]
	}
	return out, nil
}

// Check returns one error per planned topic that is missing or too small.
func Check(states []State) error {
	var errs []error
	for _, s := range states {
		if p := s.Problem(); p != "" {
			errs = append(errs, fmt.Errorf("%s topic %q %s", s.Role, s.Name, p))
		}
	}
	return errors.Join(errs...)
}

// Watermarks reads a partition's low and high offsets (a ListOffsets
// request to its leader); *kafka.Producer and *kafka.Consumer have it.
type Watermarks interface {
	QueryWatermarkOffsets(topic string, partition int32, timeoutMs int) (low, high int64, err error)
}

// Apply creates the missing topics of states, with min.insync.replicas
// one below the replication factor when that is 3 or more (durable.go),
// and returns when each
// partition of what it created answers its leader's requests, or ctx ends.
// Existing topics are left as they are (Grow adds partitions to a
// too-small one).
func Apply(ctx context.Context, a Admin, w Watermarks, states []State, replication int) ([]string, error) {
	var specs []kafka.TopicSpecification
	parts := map[string]int{}
	for _, s := range states {
		if s.Have == 0 {
			conf := maps.Clone(s.Configs)
			if n := MinInsyncFor(replication); n > 0 {
				conf["min.insync.replicas"] = strconv.Itoa(n)
			}
			specs = append(specs, kafka.TopicSpecification{Topic: s.Name, NumPartitions: s.Partitions, ReplicationFactor: replication, Config: conf})
			parts[s.Name] = s.Partitions
		}
	}
	if len(specs) == 0 {
		return nil, nil
	}
	res, err := a.CreateTopics(ctx, specs, kafka.SetAdminOperationTimeout(30*time.Second))
	if err != nil {
		return nil, err
	}
	var created []string
	var errs []error
	for _, r := range res {
		switch r.Error.Code() {
		case kafka.ErrNoError:
			created = append(created, r.Topic)
		case kafka.ErrTopicAlreadyExists:
		default:
			errs = append(errs, fmt.Errorf("create %s: %w", r.Topic, r.Error))
		}
	}
	sort.Strings(created)
	if err := errors.Join(errs...); err != nil {
		return created, err
	}
	for _, name := range created {
		if err := waitUsable(ctx, a, w, name, parts[name]); err != nil {
			return created, err
		}
	}
	return created, nil
}

// waitUsable waits until topic's first partitions partitions serve
// requests. A topic or partition just created is not yet usable: first its
// partitions need a leader in the metadata, so whoever runs next (relay
// itself) does not meet "not leader"; then a leader in the metadata is not
// yet a leader that serves — on a fresh broker a partition can answer "not
// leader" for a while after the metadata names its leader, and the next
// client's first request (relay-demo's watermarks, relay's preflight) must
// not meet that.
func waitUsable(ctx context.Context, a Admin, w Watermarks, topic string, partitions int) error {
	if err := waitLeaders(ctx, a, topic, partitions); err != nil {
		return err
	}
	return waitAnswering(ctx, w, topic, partitions)
}

// waitAnswering waits until a watermark query succeeds on every partition
// of topic, retrying any error until ctx ends: right after creation every
// error (not leader, unknown partition, leader not available) is the broker
// still setting the partition up.
func waitAnswering(ctx context.Context, w Watermarks, topic string, partitions int) error {
	for p := range int32(partitions) {
		backoff := 50 * time.Millisecond
		for {
			_, _, err := w.QueryWatermarkOffsets(topic, p, 5000)
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s: partition %d does not answer its leader's requests yet (%w): %w", topic, p, err, ctx.Err())
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
		}
	}
	return nil
}

// waitLeaders waits until the metadata shows topic with at least
// partitions partitions, each with a leader.
func waitLeaders(ctx context.Context, a Admin, topic string, partitions int) error {
	for {
		md, err := a.GetMetadata(&topic, false, 5000)
		if err == nil && len(md.Topics[topic].Partitions) >= partitions && ready(md.Topics[topic]) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: the metadata does not show %d partitions with a leader yet: %w", topic, partitions, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func ready(t kafka.TopicMetadata) bool {
	if t.Error.Code() != kafka.ErrNoError || len(t.Partitions) == 0 {
		return false
	}
	for _, p := range t.Partitions {
		if p.Error.Code() != kafka.ErrNoError || p.Leader < 0 {
			return false
		}
	}
	return true
}

// Retention reads retention.ms of a topic; ok is false when it has none
// (or the broker did not say).
func Retention(ctx context.Context, a Admin, topic string) (time.Duration, bool, error) {
	res, err := a.DescribeConfigs(ctx, []kafka.ConfigResource{{Type: kafka.ResourceTopic, Name: topic}})
	if err != nil {
		return 0, false, err
	}
	for _, r := range res {
		if e, ok := r.Config["retention.ms"]; ok {
			n, perr := strconv.ParseInt(e.Value, 10, 64)
			if perr != nil || n < 0 {
				return 0, false, nil //nolint:nilerr // -1 or unreadable: no bound to compare
			}
			return time.Duration(n) * time.Millisecond, true, nil
		}
	}
	return 0, false, nil
}

// Compacted reads whether topic's cleanup.policy compacts it; known is
// false when the broker did not say (or relay may not ask: DescribeConfigs
// on the topic).
func Compacted(ctx context.Context, a Admin, topic string) (compacted, known bool, err error) {
	res, err := a.DescribeConfigs(ctx, []kafka.ConfigResource{{Type: kafka.ResourceTopic, Name: topic}})
	if err != nil && kafkaerr.Outage(err) {
		return false, false, err
	}
	if err != nil {
		return false, false, nil //nolint:nilerr // refused: not known, and not an error
	}
	for _, r := range res {
		if r.Error.Code() != kafka.ErrNoError {
			return false, false, nil
		}
		if e, ok := r.Config["cleanup.policy"]; ok {
			return strings.Contains(e.Value, "compact"), true, nil
		}
	}
	return false, false, nil
}
