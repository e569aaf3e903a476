package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"relay/internal/envelope"
	"strconv"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// auditScan measures relay audit against a plain consumer reading the same
// topics, in one run: n source records and, for each, the output relay
// would have written (its relay.message.id), with the group's offsets
// committed at the end. Each reader goes twice, alternating, and the best
// of each is compared; relay audit's peak RSS is read from the kernel
// (the child's rusage). Nothing is asserted: the ratio is printed.
func (b *bench) auditScan(ctx context.Context, n int) error {
	src := "relay-bench-audit-" + b.runID
	group := src + "-grp"
	env := []string{"RELAY_KAFKA_BOOTSTRAP_SERVERS=" + b.o.bootstrap, "RELAY_SOURCE_TOPICS=" + src, "RELAY_GROUP_ID=" + group}
	if err := b.createTopics(ctx, src); err != nil {
		return err
	}
	if err := b.applyTopics(env); err != nil {
		return err
	}
	out := src + ".valid"
	fmt.Printf("== audit scan: %d source records and %d outputs of %d bytes, %d partitions\n", n, n, b.o.size, b.o.partitions)
	ends, err := b.loadSource(ctx, src, n)
	if err != nil {
		return err
	}
	if err := b.loadOutputs(ctx, src, out, ends); err != nil {
		return err
	}
	if err := b.commit(group, src, ends); err != nil {
		return err
	}
	b.groups = append(b.groups, group)

	var plain, scan []time.Duration
	var rss int64
	for range 2 {
		d, err := b.plainRead(ctx, []string{src, out})
		if err != nil {
			return err
		}
		plain = append(plain, d)
		d, peak, err := b.runAudit(ctx, env, src, nil, processedAll(int64(n)))
		if err != nil {
			return err
		}
		scan = append(scan, d)
		rss = max(rss, peak)
	}
	best := func(ds []time.Duration) time.Duration { return min(ds[0], ds[1]) }
	records := float64(2 * n)
	fmt.Printf("plain consumer (read_committed, both topics): %s, %.0f records/s (runs %v)\n", best(plain).Round(time.Millisecond), records/best(plain).Seconds(), plain)
	fmt.Printf("relay audit (whole process, to its report):   %s, %.0f records/s (runs %v), peak RSS %d MiB\n", best(scan).Round(time.Millisecond), records/best(scan).Seconds(), scan, rss>>10)
	fmt.Printf("audit speed / plain consumer speed: %.2f (the bar is 0.5)\n", best(plain).Seconds()/best(scan).Seconds())
	return nil
}

// loadSource writes n source records to src, record i to partition
// i%partitions, and says where each partition ends.
func (b *bench) loadSource(ctx context.Context, src string, n int) (map[int32]int64, error) {
	pr, err := b.newProducer(kafka.ConfigMap{"linger.ms": 20, "batch.size": 1 << 20})
	if err != nil {
		return nil, err
	}
	for i := range n {
		if i%4096 == 0 && ctx.Err() != nil {
			break
		}
		p := int32(i % b.o.partitions)
		if err := pr.send(src, p, key(i), b.value); err != nil {
			_ = pr.close(ctx)
			return nil, err
		}
	}
	if err := pr.close(ctx); err != nil {
		return nil, fmt.Errorf("load source: %w", err)
	}
	return b.watermarks(src)
}

// loadOutputs writes, for every source record, the output relay would
// write: to the same partition, with its relay.message.id.
func (b *bench) loadOutputs(ctx context.Context, src, out string, ends map[int32]int64) error {
	pr, err := b.newProducer(kafka.ConfigMap{"linger.ms": 20, "batch.size": 1 << 20})
	if err != nil {
		return err
	}
	for p, end := range ends {
		for off := range end {
			if off%4096 == 0 && ctx.Err() != nil {
				break
			}
			m := &kafka.Message{
				TopicPartition: kafka.TopicPartition{Topic: &out, Partition: p},
				Value:          b.value,
				Headers: []kafka.Header{
					{Key: envelope.MessageID, Value: []byte(src + "/" + strconv.Itoa(int(p)) + "/" + strconv.FormatInt(off, 10))},
					// Source record i went to partition i%partitions, in
					// order: offset off of p is i = off*partitions+p.
					{Key: envelope.SourceFingerprint, Value: []byte(envelope.Fingerprint(key(int(off)*b.o.partitions+int(p)), b.value))},
				},
			}
			for {
				err := pr.p.Produce(m, nil)
				if err == nil {
					break
				}
				if ke, ok := err.(kafka.Error); !ok || ke.Code() != kafka.ErrQueueFull { //nolint:errorlint // the client returns kafka.Error values
					_ = pr.close(ctx)
					return err
				}
				pr.p.Flush(10)
			}
		}
	}
	if err := pr.close(ctx); err != nil {
		return fmt.Errorf("load outputs: %w", err)
	}
	return nil
}

// commit commits the group's offsets at ends, as relay would have.
func (b *bench) commit(group, topic string, ends map[int32]int64) error {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": b.o.bootstrap, "group.id": group, "enable.auto.commit": false})
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	var tps []kafka.TopicPartition
	for p, end := range ends {
		tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: p, Offset: kafka.Offset(end)})
	}
	_, err = c.CommitOffsets(tps)
	return err
}

// plainRead reads every partition of topics to its end with one
// read_committed consumer, and says how long it took.
func (b *bench) plainRead(ctx context.Context, topics []string) (time.Duration, error) {
	start := time.Now()
	// relay's consumer settings (internal/kafkaclient): the comparison
	// is of the audit's work, not of librdkafka's fetch tuning.
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers": b.o.bootstrap, "group.id": "relay-bench-plain", "enable.auto.commit": false,
		"isolation.level": "read_committed", "enable.partition.eof": true,
		"queued.max.messages.kbytes": 2048, "queued.min.messages": 10000, "fetch.queue.backoff.ms": 10,
	})
	if err != nil {
		return 0, err
	}
	defer func() { _ = c.Close() }()
	var tps []kafka.TopicPartition
	left := 0
	for _, t := range topics {
		md, err := c.GetMetadata(&t, false, 10000)
		if err != nil {
			return 0, err
		}
		for _, p := range md.Topics[t].Partitions {
			tps = append(tps, kafka.TopicPartition{Topic: &t, Partition: p.ID, Offset: kafka.OffsetBeginning})
			left++
		}
	}
	if err := c.Assign(tps); err != nil {
		return 0, err
	}
	var n int
	for left > 0 {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		switch ev := c.Poll(100).(type) {
		case *kafka.Message:
			n++
			_ = ev
		case kafka.PartitionEOF:
			left--
		case kafka.Error:
			if ev.IsFatal() {
				return 0, ev
			}
		}
	}
	return time.Since(start), nil
}

// auditReport is what the bench reads of relay audit's report.
type auditReport struct {
	Clean      bool `json:"clean"`
	Partitions []struct {
		Processed   int64            `json:"processed"`
		Quarantined map[string]int64 `json:"quarantined"`
	} `json:"partitions"`
}

// processedAll checks a report accounts for n records, each processed.
func processedAll(n int64) func(*auditReport) error {
	return func(rep *auditReport) error {
		var processed int64
		for _, p := range rep.Partitions {
			processed += p.Processed
		}
		if !rep.Clean || processed != n {
			return fmt.Errorf("relay audit: clean %v, %d processed of %d", rep.Clean, processed, n)
		}
		return nil
	}
}

// runAudit runs relay audit on src with args, checks its report, and
// says how long it took and its peak RSS.
func (b *bench) runAudit(ctx context.Context, env []string, src string, args []string, check func(*auditReport) error) (time.Duration, int64, error) {
	start := time.Now()
	cmd := exec.CommandContext(ctx, b.o.relayBin, append([]string{"audit", "--source", src, "-o", "json", "--progress", "none"}, args...)...) //nolint:gosec // the bench's own relay
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	// The peak RSS of the audit's own memory: VmHWM, polled while it
	// runs (the child's rusage would count the bench's pages, shared
	// with it between fork and exec).
	var peak int64
	stopped := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			if v, err := vmHWM(cmd.Process.Pid); err == nil {
				peak = max(peak, v)
			}
			select {
			case <-stopped:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	err := cmd.Wait()
	d := time.Since(start)
	close(stopped)
	<-polled
	if err != nil {
		return 0, 0, fmt.Errorf("relay audit: %w: %s", err, stderr.String())
	}
	var rep auditReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return 0, 0, fmt.Errorf("relay audit report: %w", err)
	}
	if err := check(&rep); err != nil {
		return 0, 0, err
	}
	return d, peak, nil
}
