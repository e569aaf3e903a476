package topics

import (
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
)

// lateAdmin's metadata shows topic orders only from its shown-th request
// on, as a broker that learns of a new topic a moment late answers.
type lateAdmin struct {
	Admin
	asked, shown int
}

func (l *lateAdmin) GetMetadata(topic *string, _ bool, _ int) (*kafka.Metadata, error) {
	l.asked++
	if *topic != "orders" || l.asked < l.shown {
		return &kafka.Metadata{Topics: map[string]kafka.TopicMetadata{*topic: {Topic: *topic, Error: kafka.NewError(kafka.ErrUnknownTopicOrPart, "unknown", false)}}}, nil
	}
	return &kafka.Metadata{Topics: map[string]kafka.TopicMetadata{*topic: {Topic: *topic, Partitions: []kafka.PartitionMetadata{{ID: 0}, {ID: 1}}}}}, nil
}

// A source a broker learns of a moment late is found; one that does not
// exist is an error naming it, once the settle time has passed.
func TestSourcesSettle(t *testing.T) {
	defer func(d time.Duration) { sourceSettle = d }(sourceSettle)
	sourceSettle = 600 * time.Millisecond
	l := &lateAdmin{shown: 3}
	parts, err := Sources(l, &config.Config{SourceTopics: []string{"orders"}}, time.Second)
	if err != nil || parts["orders"] != 2 {
		t.Fatalf("a source shown at the third request: %v %v", parts, err)
	}
	start := time.Now()
	_, err = Sources(&lateAdmin{shown: 3}, &config.Config{SourceTopics: []string{"payments"}}, time.Second)
	if err == nil || !strings.Contains(err.Error(), `source topic "payments" does not exist`) || time.Since(start) < sourceSettle {
		t.Fatalf("a missing source: %v after %s", err, time.Since(start))
	}
}
