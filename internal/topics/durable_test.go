package topics

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// What one broker's loss does to a topic, by its replicas and
// min.insync.replicas: with 3 replicas, 2 is the one safe value; below 3
// replicas, none is; unknown values say nothing.
func TestDurabilityRisk(t *testing.T) {
	for _, c := range []struct {
		d    Durability
		want string // "" or a part of the risk
	}{
		{Durability{}, ""},
		{Durability{Replicas: 3, MinInsync: 2}, ""},
		{Durability{Replicas: 5, MinInsync: 4}, ""},
		{Durability{Replicas: 5, MinInsync: 3}, ""},
		{Durability{Replicas: 3}, ""},
		{Durability{Replicas: 1, MinInsync: 1}, "replication factor 1"},
		{Durability{Replicas: 2, MinInsync: 2}, "replication factor 2"},
		{Durability{Replicas: 3, MinInsync: 1}, "set min.insync.replicas to 2 or more"},
		{Durability{Replicas: 3, MinInsync: 3}, "writes stop while any replica is away"},
	} {
		got := c.d.Risk()
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%+v: risk %q, want %q", c.d, got, c.want)
		}
	}
	for rf, want := range map[int]int{1: 0, 2: 0, 3: 2, 4: 3, 5: 4} {
		if got := MinInsyncFor(rf); got != want {
			t.Errorf("MinInsyncFor(%d) = %d, want %d", rf, got, want)
		}
	}
}

// recordingAdmin records what CreateTopics and IncrementalAlterConfigs were
// asked; every topic exists once created.
type recordingAdmin struct {
	Admin
	created []kafka.TopicSpecification
	altered []kafka.ConfigResource
}

func (r *recordingAdmin) CreateTopics(_ context.Context, specs []kafka.TopicSpecification, _ ...kafka.CreateTopicsAdminOption) ([]kafka.TopicResult, error) {
	r.created = append(r.created, specs...)
	out := make([]kafka.TopicResult, len(specs))
	for i, s := range specs {
		out[i] = kafka.TopicResult{Topic: s.Topic, Error: kafka.NewError(kafka.ErrTopicAlreadyExists, "exists", false)}
	}
	return out, nil
}

func (r *recordingAdmin) IncrementalAlterConfigs(_ context.Context, res []kafka.ConfigResource, _ ...kafka.AlterConfigsAdminOption) ([]kafka.ConfigResourceResult, error) {
	r.altered = append(r.altered, res...)
	out := make([]kafka.ConfigResourceResult, len(res))
	for i, c := range res {
		out[i] = kafka.ConfigResourceResult{Type: c.Type, Name: c.Name}
	}
	return out, nil
}

// relay creates its topics with min.insync.replicas one below a
// replication factor of 3 or more, and leaves the broker's default below;
// it raises the value of its existing topics to 2 only where it is 1, and
// never changes a value an operator chose from 2 up (a review found 5
// replicas at 3 raised to 4: writes then stop with two brokers away).
func TestApplyAndRaiseSetMinInsync(t *testing.T) {
	plan := []Spec{{Name: "a", Partitions: 1, Configs: map[string]string{"cleanup.policy": "delete"}}}
	for rf, want := range map[int]string{3: "2", 1: ""} {
		r := &recordingAdmin{}
		if _, err := Apply(context.Background(), r, nil, []State{{Spec: plan[0]}}, rf); err != nil {
			t.Fatal(err)
		}
		if got := r.created[0].Config["min.insync.replicas"]; got != want || r.created[0].Config["cleanup.policy"] != "delete" {
			t.Errorf("replication %d: created with %v, want min.insync.replicas %q", rf, r.created[0].Config, want)
		}
	}
	if _, ok := plan[0].Configs["min.insync.replicas"]; ok {
		t.Error("Apply changed the plan's own configs")
	}
	r := &recordingAdmin{}
	states := []State{
		{Spec: Spec{Name: "low"}, Have: 1, Durability: Durability{Replicas: 3, MinInsync: 1}},
		{Spec: Spec{Name: "fine"}, Have: 1, Durability: Durability{Replicas: 3, MinInsync: 2}},
		{Spec: Spec{Name: "higher"}, Have: 1, Durability: Durability{Replicas: 3, MinInsync: 3}},
		{Spec: Spec{Name: "single"}, Have: 1, Durability: Durability{Replicas: 1, MinInsync: 1}},
		{Spec: Spec{Name: "unknown"}, Have: 1, Durability: Durability{Replicas: 3}},
		{Spec: Spec{Name: "chosen"}, Have: 1, Durability: Durability{Replicas: 5, MinInsync: 3}},
		{Spec: Spec{Name: "five-at-one"}, Have: 1, Durability: Durability{Replicas: 5, MinInsync: 1}},
		{Spec: Spec{Name: "missing"}, Durability: Durability{Replicas: 3, MinInsync: 1}},
	}
	raised, err := RaiseMinInsync(context.Background(), r, states)
	if err != nil || len(raised) != 2 || raised[0] != "low" || raised[1] != "five-at-one" || len(r.altered) != 2 ||
		r.altered[0].Config[0].Value != "2" || r.altered[1].Config[0].Value != "2" || r.altered[0].Config[0].IncrementalOperation != kafka.AlterConfigOpTypeSet {
		t.Fatalf("raised %v (%v), altered %+v; want low and five-at-one, set to 2", raised, err, r.altered)
	}
}

// refusingAdmin answers metadata with one topic of three replicas and
// refuses DescribeConfigs with err.
type refusingAdmin struct {
	Admin
	err error
}

func (r refusingAdmin) GetMetadata(topic *string, _ bool, _ int) (*kafka.Metadata, error) {
	reps := []int32{1, 2, 3}
	return &kafka.Metadata{Topics: map[string]kafka.TopicMetadata{*topic: {Topic: *topic, Partitions: []kafka.PartitionMetadata{{ID: 0, Replicas: reps}}}}}, nil
}

func (r refusingAdmin) DescribeConfigs(context.Context, []kafka.ConfigResource, ...kafka.DescribeConfigsAdminOption) ([]kafka.ConfigResourceResult, error) {
	return nil, r.err
}

// A principal without DescribeConfigs (relay run's least privilege) gets
// the replicas and no min.insync.replicas, never an error that would stop
// relay at start; a cluster out of reach is an error, which the start-up
// waits out.
func TestDurabilityWithoutDescribeConfigs(t *testing.T) {
	refused := refusingAdmin{err: kafka.NewError(kafka.ErrTopicAuthorizationFailed, "not allowed", false)}
	d, err := ReadDurability(context.Background(), refused, []string{"orders"}, time.Second)
	if err != nil || d["orders"] != (Durability{Replicas: 3}) {
		t.Fatalf("refused: %+v, %v; want 3 replicas, min.insync.replicas unknown, no error", d, err)
	}
	if c, known, err := Compacted(context.Background(), refused, "orders"); c || known || err != nil {
		t.Fatalf("Compacted refused: %v %v %v; want unknown, no error", c, known, err)
	}
	away := refusingAdmin{err: kafka.NewError(kafka.ErrTransport, "broker away", false)}
	if _, err := ReadDurability(context.Background(), away, []string{"orders"}, time.Second); err == nil {
		t.Fatal("brokers away: no error")
	}
}
