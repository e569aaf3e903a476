package quarantine

import (
	"context"
	"fmt"

	"relay/internal/config"
	"relay/internal/envelope"
	"relay/internal/kafkaclient"
)

// WithBytes is fl with its quarantine record's value and headers, and the
// envelope they carry, read from where the record is (committed records
// only), without reading the rest of the topic: what one failure's page
// needs from a snapshot or an index that keeps no bytes. A failure whose
// record is gone is returned as it is.
func WithBytes(ctx context.Context, cfg *config.Config, fl *Failure) (*Failure, error) {
	if fl.Record == nil || fl.Record.Kept {
		return fl, nil
	}
	r := fl.Record
	c, err := kafkaclient.Reader(cfg, cfg.ReaderGroup(readerRole), kafkaclient.Read{EOF: true})
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	m, err := fetch(ctx, c, r.Topic, r.Partition, r.Offset, opTimeout(cfg))
	if err != nil {
		return nil, fmt.Errorf("reading the quarantine record %s/%d/%d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	if m == nil || int64(m.TopicPartition.Offset) != r.Offset {
		return nil, fmt.Errorf("the quarantine record %s/%d/%d is no longer there", r.Topic, r.Partition, r.Offset)
	}
	cp, rec := *fl, *r
	rec.Value, rec.Headers, rec.Kept = m.Value, m.Headers, true
	if f, err := envelope.Parse(m.Headers); f != nil && f.ID == fl.ID {
		if f.SourceTopic == "" {
			f.SourceTopic = r.Failure.SourceTopic
		}
		rec.Failure, rec.Damaged = f, err
	}
	cp.Record = &rec
	return &cp, nil
}
