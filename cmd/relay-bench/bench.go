package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// bench owns the clients shared by every mode and what has to be cleaned up.
type bench struct {
	o     options
	runID string
	admin *kafka.AdminClient
	meta  *kafka.Consumer // watermark queries only; never subscribes
	// offsets holds a read_committed consumer per group, for the group's
	// committed offsets; none of them subscribes.
	offsets map[string]*kafka.Consumer
	value   []byte
	topics  []string
	groups  []string
	adm     *admission // set up by the first admission mode
}

// passthrough is one system under test, started on a preloaded source.
type passthrough interface {
	// caughtUp says whether every preloaded record is in the output (for
	// relay: in a committed transaction).
	caughtUp(ctx context.Context) (bool, error)
	// check returns an error once the passthrough has failed.
	check() error
	// finish collects end-of-run facts and stops it gracefully.
	finish(ctx context.Context, r *result) error
	// kill stops it at once; safe after finish and on every exit path.
	kill()
}

type modeSpec struct {
	name, label string
	start       func(ctx context.Context, t topics) (passthrough, error)
	// value, when set, gives the record values (admission modes).
	value func() ([]byte, error)
}

// topics of one mode.
type topics struct {
	src, out, group string
	end             map[int32]int64 // source end offsets after the preload
	value           []byte          // every record's value
}

func newBench(o options) (*bench, error) {
	b := &bench{o: o, runID: strconv.FormatInt(time.Now().UnixNano()/1e6, 36), offsets: map[string]*kafka.Consumer{}}
	var err error
	if b.admin, err = kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": o.bootstrap}); err != nil {
		return nil, err
	}
	b.meta, err = kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers": o.bootstrap, "group.id": "relay-bench-meta", "enable.auto.commit": false,
	})
	if err != nil {
		b.admin.Close()
		return nil, err
	}
	// Random bytes: nothing compresses them, should compression be on.
	b.value = make([]byte, o.size)
	if _, err := rand.Read(b.value); err != nil {
		return nil, err
	}
	return b, nil
}

// cleanup deletes what the run created and closes the shared clients.
func (b *bench) cleanup() error {
	var errs []error
	if !b.o.keepTopics && len(b.topics) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if len(b.groups) > 0 {
			// Best effort: a group that never committed does not exist.
			_, _ = b.admin.DeleteConsumerGroups(ctx, b.groups)
		}
		res, err := b.admin.DeleteTopics(ctx, b.topics, kafka.SetAdminOperationTimeout(30*time.Second))
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("delete topics: %w", err))
		}
		for _, r := range res {
			if c := r.Error.Code(); c != kafka.ErrNoError && c != kafka.ErrUnknownTopicOrPart {
				errs = append(errs, fmt.Errorf("delete topic %s: %w", r.Topic, r.Error))
			}
		}
		if len(errs) == 0 {
			fmt.Printf("deleted %d topics created by this run\n", len(res))
		}
	}
	_ = b.meta.Close()
	for _, c := range b.offsets {
		_ = c.Close()
	}
	b.admin.Close()
	return errors.Join(errs...)
}

func (b *bench) createTopics(ctx context.Context, names ...string) error {
	specs := make([]kafka.TopicSpecification, len(names))
	for i, n := range names {
		specs[i] = kafka.TopicSpecification{Topic: n, NumPartitions: b.o.partitions, ReplicationFactor: b.o.rf}
	}
	c, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	res, err := b.admin.CreateTopics(c, specs, kafka.SetAdminOperationTimeout(30*time.Second))
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	for _, r := range res {
		if r.Error.Code() != kafka.ErrNoError {
			return fmt.Errorf("create topic %s: %w", r.Topic, r.Error)
		}
		b.topics = append(b.topics, r.Topic)
	}
	// Wait until the metadata shows every partition with a leader.
	for _, n := range names {
		for {
			md, err := b.meta.GetMetadata(&n, false, 5000)
			if err == nil {
				tm := md.Topics[n]
				if tm.Error.Code() == kafka.ErrNoError && len(tm.Partitions) == b.o.partitions {
					break
				}
			}
			if err := sleep(ctx, 50*time.Millisecond); err != nil {
				return err
			}
		}
	}
	return nil
}

// watermarks returns each partition's high watermark.
func (b *bench) watermarks(topic string) (map[int32]int64, error) {
	out := make(map[int32]int64, b.o.partitions)
	for p := range int32(b.o.partitions) {
		_, hi, err := b.meta.QueryWatermarkOffsets(topic, p, 10000)
		if err != nil {
			return nil, fmt.Errorf("watermarks of %s[%d]: %w", topic, p, err)
		}
		out[p] = hi
	}
	return out, nil
}

func sum(m map[int32]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// producer makes a producer for load generation and counts failed deliveries.
type producer struct {
	p      *kafka.Producer
	failed atomic.Int64
	first  atomic.Value // first delivery error
	done   chan struct{}
}

func (b *bench) newProducer(extra kafka.ConfigMap) (*producer, error) {
	cm := kafka.ConfigMap{
		"bootstrap.servers": b.o.bootstrap, "linger.ms": 5, "acks": "all",
		"go.delivery.report.fields": "none",
	}
	for k, v := range extra {
		cm[k] = v
	}
	p, err := kafka.NewProducer(&cm)
	if err != nil {
		return nil, err
	}
	pr := &producer{p: p, done: make(chan struct{})}
	go func() {
		defer close(pr.done)
		for ev := range p.Events() {
			switch e := ev.(type) {
			case *kafka.Message:
				if e.TopicPartition.Error != nil {
					pr.failed.Add(1)
					pr.first.CompareAndSwap(nil, e.TopicPartition.Error)
				}
			case kafka.Error:
				if e.IsFatal() {
					pr.failed.Add(1)
					pr.first.CompareAndSwap(nil, error(e))
				}
			}
		}
	}()
	return pr, nil
}

// send enqueues one record of the bench value to topic/partition; the
// producer stamps CreateTime.
func (pr *producer) send(topic string, partition int32, key []byte, value []byte) error {
	return pr.produce(&kafka.Message{
		TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: partition},
		Key:            key, Value: value,
		Headers: []kafka.Header{{Key: "bench", Value: []byte("relay-bench")}},
	})
}

// produce enqueues m, waiting while the queue is full.
func (pr *producer) produce(m *kafka.Message) error {
	for {
		err := pr.p.Produce(m, nil)
		var ke kafka.Error
		if err == nil || !errors.As(err, &ke) || ke.Code() != kafka.ErrQueueFull {
			return err
		}
		pr.p.Flush(10)
	}
}

// close flushes, closes and reports failed deliveries.
func (pr *producer) close(ctx context.Context) error {
	for pr.p.Flush(200) > 0 {
		if ctx.Err() != nil {
			break
		}
	}
	left := pr.p.Len()
	pr.p.Close()
	<-pr.done
	if n := pr.failed.Load(); n > 0 {
		return fmt.Errorf("%d deliveries failed, first: %v", n, pr.first.Load())
	}
	if left > 0 {
		return fmt.Errorf("%d records not delivered: %w", left, ctx.Err())
	}
	return nil
}

func key(i int) []byte { return []byte("k-" + strconv.Itoa(i%1024)) }

// preload writes the backlog, spread evenly over the partitions.
func (b *bench) preload(ctx context.Context, t topics) error {
	topic := t.src
	pr, err := b.newProducer(kafka.ConfigMap{"linger.ms": 20, "batch.size": 1 << 20})
	if err != nil {
		return err
	}
	for i := range b.o.records {
		if i%4096 == 0 && ctx.Err() != nil {
			break
		}
		if err := pr.send(topic, int32(i%b.o.partitions), key(i), t.value); err != nil {
			_ = pr.close(ctx)
			return fmt.Errorf("preload: %w", err)
		}
	}
	if err := pr.close(ctx); err != nil {
		return fmt.Errorf("preload: %w", err)
	}
	return ctx.Err()
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// selfRSSBase returns this process's RSS after a GC, with its peak reset
// to it: the base of an in-process mode's peak.
func (b *bench) selfRSSBase() (int64, error) {
	runtime.GC()
	debug.FreeOSMemory()
	if err := resetSelfHWM(); err != nil {
		return 0, fmt.Errorf("reset peak RSS: %w", err)
	}
	return vmRSS(os.Getpid())
}
