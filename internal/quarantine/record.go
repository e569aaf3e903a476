package quarantine

import (
	"context"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/kafkaclient"
)

// WithBytes is fl with its quarantine record's value and headers, read
// from where the record is (committed records only), without reading the
// rest of the topic: what one failure's page needs from a snapshot that
// keeps no bytes. A failure whose record is gone is returned as it is.
func WithBytes(ctx context.Context, cfg *config.Config, fl *Failure) (*Failure, error) {
	if fl.Record == nil || fl.Record.Kept {
		return fl, nil
	}
	r := fl.Record
	c, err := kafkaclient.Reader(cfg, cfg.ReaderGroup(readerRole), kafkaclient.Read{})
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	topic := r.Topic
	if err := c.Assign([]kafka.TopicPartition{{Topic: &topic, Partition: r.Partition, Offset: kafka.Offset(r.Offset)}}); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(opTimeout(cfg))
	for time.Now().Before(deadline) && ctx.Err() == nil {
		switch ev := c.Poll(200).(type) {
		case *kafka.Message:
			if ev.TopicPartition.Error != nil {
				return nil, ev.TopicPartition.Error
			}
			if int64(ev.TopicPartition.Offset) != r.Offset {
				return nil, fmt.Errorf("the quarantine record %s/%d/%d is no longer there", r.Topic, r.Partition, r.Offset)
			}
			cp, rec := *fl, *r
			rec.Value, rec.Headers, rec.Kept = ev.Value, ev.Headers, true
			cp.Record = &rec
			return &cp, nil
		case kafka.Error:
			if ev.IsFatal() {
				return nil, ev
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("reading the quarantine record %s/%d/%d took longer than %s", r.Topic, r.Partition, r.Offset, opTimeout(cfg))
}
