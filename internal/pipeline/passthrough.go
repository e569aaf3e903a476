package pipeline

import (
	"context"

	"relay/internal/envelope"
	"relay/internal/txn"
)

// Passthrough writes each source record unchanged to its output topic:
// same key, value, headers and timestamp, and the same partition number, so
// per-partition (and so per-key) order is kept. It adds relay.message.id.
type Passthrough struct {
	// OutputTopic maps a source topic to its output topic.
	OutputTopic func(source string) string
}

// Handle implements txn.Handler.
func (p Passthrough) Handle(_ context.Context, rec *txn.Record) ([]txn.Output, error) {
	headers := make([]txn.Header, 0, len(rec.Headers)+1)
	for _, h := range rec.Headers {
		// A relay.message.id from upstream (e.g. a record relayed twice
		// through chained relays) is replaced, not duplicated.
		if h.Key != envelope.MessageID {
			headers = append(headers, h)
		}
	}
	headers = append(headers, txn.Header{
		Key:   envelope.MessageID,
		Value: []byte(envelope.ID(rec.Topic, rec.Partition, rec.Offset)),
	})
	return []txn.Output{{
		Topic:     p.OutputTopic(rec.Topic),
		Partition: rec.Partition,
		Key:       rec.Key,
		Value:     rec.Value,
		Headers:   headers,
		Timestamp: rec.Timestamp,
	}}, nil
}
