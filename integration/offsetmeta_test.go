package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// TestOffsetMetadataInTransactions pins what key-order parking will rest
// on, against the real broker and librdkafka: an offset committed through
// a transaction carries its metadata, read back as it was written; and
// metadata over the broker's offset.metadata.max.bytes (4096 by default)
// fails the transaction in a way the loop can recover from (abort, and
// the producer goes on), with the committed offset left as it was.
func TestOffsetMetadataInTransactions(t *testing.T) {
	topic, group := uniq(t, "src"), uniq(t, "grp")
	createTopics(t, 1, topic)
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "transactional.id": uniq(t, "txn"), "log_level": 3})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	go func() {
		for range p.Events() {
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": false})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	meta, err := c.GetConsumerGroupMetadata()
	if err != nil {
		t.Fatal(err)
	}
	commit := func(offset int64, metadata string) error {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		m := metadata
		err := p.SendOffsetsToTransaction(ctx, []kafka.TopicPartition{{Topic: &topic, Partition: 0, Offset: kafka.Offset(offset), Metadata: &m}}, meta)
		if err == nil {
			err = p.CommitTransaction(ctx)
		}
		if err != nil {
			var ke kafka.Error
			if errors.As(err, &ke) && ke.TxnRequiresAbort() {
				if aerr := p.AbortTransaction(ctx); aerr != nil {
					t.Fatalf("abort after %v: %v", err, aerr)
				}
			}
		}
		return err
	}
	committed := func() (int64, string) {
		tps, err := c.Committed([]kafka.TopicPartition{{Topic: &topic, Partition: 0}}, 10000)
		if err != nil || len(tps) != 1 {
			t.Fatal(tps, err)
		}
		m := ""
		if tps[0].Metadata != nil {
			m = *tps[0].Metadata
		}
		return int64(tps[0].Offset), m
	}
	// A budget's worth of metadata, as parking would write it.
	fits := "p1:" + strings.Repeat("a", 4000)
	if err := commit(10, fits); err != nil {
		t.Fatalf("commit with %d bytes of metadata: %v", len(fits), err)
	}
	if off, m := committed(); off != 10 || m != fits {
		t.Fatalf("committed %d with %d bytes of metadata, want 10 with %d", off, len(m), len(fits))
	}
	tooLarge := strings.Repeat("b", 5000)
	err = commit(20, tooLarge)
	if err == nil {
		t.Fatalf("%d bytes of metadata were accepted: the broker's offset.metadata.max.bytes is larger than 4096", len(tooLarge))
	}
	var ke kafka.Error
	if !errors.As(err, &ke) {
		t.Fatalf("metadata too large: %v, not a kafka.Error", err)
	}
	t.Logf("metadata too large: %v (code %v, fatal %v, abortable %v, retriable %v)", err, ke.Code(), ke.IsFatal(), ke.TxnRequiresAbort(), ke.IsRetriable())
	if ke.IsFatal() {
		t.Fatalf("metadata too large is fatal to the producer: %v", err)
	}
	if off, m := committed(); off != 10 || m != fits {
		t.Fatalf("after the failed commit: committed %d with %d bytes of metadata, want 10 unchanged", off, len(m))
	}
	// The producer goes on.
	if err := commit(30, "p0:"); err != nil {
		t.Fatalf("the next transaction: %v", err)
	}
	if off, m := committed(); off != 30 || m != "p0:" {
		t.Fatalf("committed %d %q, want 30 p0:", off, m)
	}
}
