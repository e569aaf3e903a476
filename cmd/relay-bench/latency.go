package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

type latStats struct {
	n             int
	p50, p99, max time.Duration
}

// latency produces latRate records/s for latSeconds into the source of a
// caught-up passthrough and has a read_committed reader on the output
// measure receive time minus the record's timestamp (CreateTime, stamped by
// the producer at send and kept by the passthrough).
func (b *bench) latency(ctx context.Context, t topics, pt passthrough) (latStats, error) {
	start, err := b.watermarks(t.out)
	if err != nil {
		return latStats{}, err
	}
	reader, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers": b.o.bootstrap, "group.id": t.group + "-reader", "enable.auto.commit": false,
		"isolation.level": "read_committed",
	})
	if err != nil {
		return latStats{}, err
	}
	defer func() { _ = reader.Close() }()
	out := t.out
	var tps []kafka.TopicPartition
	for p, off := range start {
		tps = append(tps, kafka.TopicPartition{Topic: &out, Partition: p, Offset: kafka.Offset(off)})
	}
	if err := reader.Assign(tps); err != nil {
		return latStats{}, err
	}
	// Let the reader connect and start fetching before the clock matters.
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		if ev := reader.Poll(50); ev != nil {
			if m, ok := ev.(*kafka.Message); ok {
				return latStats{}, fmt.Errorf("unexpected record in %s before the latency phase: %v", out, m.TopicPartition)
			}
		}
	}

	want := b.o.latRate * b.o.latSeconds
	lats := make([]time.Duration, 0, want)
	var readErr error
	rctx, stopReader := context.WithCancel(ctx)
	defer stopReader()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for len(lats) < want && rctx.Err() == nil {
			switch e := reader.Poll(100).(type) {
			case *kafka.Message:
				now := time.Now()
				if e.TopicPartition.Error != nil {
					readErr = e.TopicPartition.Error
					return
				}
				lats = append(lats, now.Sub(e.Timestamp))
			case kafka.Error:
				if e.IsFatal() {
					readErr = e
					return
				}
			}
		}
	}()

	// Generator: paced by elapsed time so a late tick catches up.
	pr, err := b.newProducer(nil)
	if err != nil {
		stopReader()
		wg.Wait()
		return latStats{}, err
	}
	genStart := time.Now()
	tick := time.NewTicker(time.Millisecond)
	sent := 0
	for sent < want && ctx.Err() == nil {
		<-tick.C
		due := min(want, int(time.Since(genStart).Seconds()*float64(b.o.latRate)))
		for ; sent < due; sent++ {
			if err := pr.send(t.src, int32(sent%b.o.partitions), key(sent), t.value); err != nil {
				tick.Stop()
				_ = pr.close(ctx)
				stopReader()
				wg.Wait()
				return latStats{}, err
			}
		}
		if err := pt.check(); err != nil {
			tick.Stop()
			_ = pr.close(ctx)
			stopReader()
			wg.Wait()
			return latStats{}, err
		}
	}
	tick.Stop()
	genDur := time.Since(genStart)
	if err := pr.close(ctx); err != nil {
		stopReader()
		wg.Wait()
		return latStats{}, fmt.Errorf("latency generator: %w", err)
	}
	if actual := float64(sent) / genDur.Seconds(); actual < 0.95*float64(b.o.latRate) {
		fmt.Printf("   note: the generator reached only %.0f records/s of %d\n", actual, b.o.latRate)
	}

	// Wait for the reader, watching the passthrough.
	readerDone := make(chan struct{})
	go func() { wg.Wait(); close(readerDone) }()
wait:
	for {
		select {
		case <-readerDone:
			break wait
		case <-ctx.Done():
			stopReader()
			<-readerDone
			return latStats{}, fmt.Errorf("latency phase: read %d of %d records: %w", len(lats), want, ctx.Err())
		case <-time.After(100 * time.Millisecond):
			if err := pt.check(); err != nil {
				stopReader()
				<-readerDone
				return latStats{}, err
			}
		}
	}
	if readErr != nil {
		return latStats{}, fmt.Errorf("latency reader: %w", readErr)
	}
	if len(lats) < want {
		return latStats{}, fmt.Errorf("latency phase: read %d of %d records", len(lats), want)
	}
	return summarize(lats), nil
}

func summarize(d []time.Duration) latStats {
	slices.Sort(d)
	q := func(p float64) time.Duration {
		i := int(p*float64(len(d))+0.999999) - 1
		return d[min(max(i, 0), len(d)-1)]
	}
	return latStats{n: len(d), p50: q(0.50), p99: q(0.99), max: d[len(d)-1]}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }
