package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/envelope"
	"relay/internal/ledger"
)

// auditFailures measures relay audit's memory when every record of its
// window failed: n source records, each quarantined (its quarantine
// record and its ledger change, open), all in one batch, against the
// same audit of n processed records (an output each), in one run, each
// audited twice, alternating. It prints both peak RSS, their difference
// per failure, and the time ratio; nothing is asserted.
func (b *bench) auditFailures(ctx context.Context, n int) error {
	base := "relay-bench-auditf-" + b.runID
	done, failed := base+"-done", base+"-failed"
	group := base + "-grp"
	env := []string{"RELAY_KAFKA_BOOTSTRAP_SERVERS=" + b.o.bootstrap, "RELAY_SOURCE_TOPICS=" + done + "," + failed, "RELAY_GROUP_ID=" + group}
	if err := b.createTopics(ctx, done, failed); err != nil {
		return err
	}
	if err := b.applyTopics(env); err != nil {
		return err
	}
	fmt.Printf("== audit of failures: %d source records, every one quarantined, against %d processed; %d bytes, %d partitions\n", n, n, b.o.size, b.o.partitions)
	ends := map[string]map[int32]int64{}
	for _, src := range []string{done, failed} {
		e, err := b.loadSource(ctx, src, n)
		if err != nil {
			return err
		}
		ends[src] = e
	}
	if err := b.loadOutputs(ctx, done, done+".valid", ends[done]); err != nil {
		return err
	}
	if err := b.loadFailures(ctx, failed, "_relay."+group+".state", ends[failed]); err != nil {
		return err
	}
	for _, src := range []string{done, failed} {
		if err := b.commit(group, src, ends[src]); err != nil {
			return err
		}
	}
	b.groups = append(b.groups, group)

	// One batch: the per-offset state of every partition fits the
	// default --max-memory; the failures get a budget as large, which n
	// must fit (133 bytes each).
	memory := []string{fmt.Sprintf("--max-memory=%dMiB", max(96, (int64(n)*133>>20)+1))}
	var tDone, tFailed []time.Duration
	var rssDone, rssFailed int64
	for range 2 {
		d, peak, err := b.runAudit(ctx, env, done, memory, processedAll(int64(n)))
		if err != nil {
			return err
		}
		tDone, rssDone = append(tDone, d), max(rssDone, peak)
		d, peak, err = b.runAudit(ctx, env, failed, memory, quarantinedAll(int64(n)))
		if err != nil {
			return err
		}
		tFailed, rssFailed = append(tFailed, d), max(rssFailed, peak)
	}
	best := func(ds []time.Duration) time.Duration { return min(ds[0], ds[1]) }
	fmt.Printf("relay audit %s, %d processed:   %s, peak RSS %d MiB\n", memory[0], n, best(tDone).Round(time.Millisecond), rssDone>>10)
	fmt.Printf("relay audit %s, %d quarantined: %s, peak RSS %d MiB\n", memory[0], n, best(tFailed).Round(time.Millisecond), rssFailed>>10)
	fmt.Printf("peak RSS quarantined / processed: %.2f; %d bytes more per failure; time quarantined / processed: %.2f\n",
		float64(rssFailed)/float64(rssDone), (rssFailed-rssDone)*1024/int64(n), best(tFailed).Seconds()/best(tDone).Seconds())
	return nil
}

// loadFailures writes, for every source record, what relay writes when it
// quarantines one: the quarantine record (its relay.source.* headers and
// fingerprint) and the ledger change that opens its failure, in the state
// topic's partition of the same number.
func (b *bench) loadFailures(ctx context.Context, src, state string, ends map[int32]int64) error {
	pr, err := b.newProducer(kafka.ConfigMap{"linger.ms": 20, "batch.size": 1 << 20})
	if err != nil {
		return err
	}
	quarantine := src + ".quarantine"
	at := time.Now()
	for p, end := range ends {
		for off := range end {
			if off%4096 == 0 && ctx.Err() != nil {
				break
			}
			id := envelope.ID(src, p, off)
			i := int(off)*b.o.partitions + int(p) // see loadOutputs
			q := &kafka.Message{
				TopicPartition: kafka.TopicPartition{Topic: &quarantine, Partition: p},
				Value:          b.value,
				Headers: []kafka.Header{
					{Key: envelope.SourceTopic, Value: []byte(src)},
					{Key: envelope.SourcePartition, Value: []byte(strconv.Itoa(int(p)))},
					{Key: envelope.SourceOffset, Value: []byte(strconv.FormatInt(off, 10))},
					{Key: envelope.FailureID, Value: []byte(id)},
					{Key: envelope.SourceFingerprint, Value: []byte(envelope.Fingerprint(key(i), b.value))},
				},
			}
			e := &ledger.Event{ID: id, State: ledger.Open, Source: ledger.Source{Topic: src, Partition: p, Offset: off}, At: at}
			l := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &state, Partition: p}, Key: []byte(e.Key()), Value: e.Value()}
			for _, m := range []*kafka.Message{q, l} {
				if err := pr.produce(m); err != nil {
					_ = pr.close(ctx)
					return err
				}
			}
		}
	}
	if err := pr.close(ctx); err != nil {
		return fmt.Errorf("load failures: %w", err)
	}
	return nil
}

// quarantinedAll checks a report accounts for n records, each quarantined
// and open.
func quarantinedAll(n int64) func(*auditReport) error {
	return func(rep *auditReport) error {
		var open int64
		for _, p := range rep.Partitions {
			open += p.Quarantined[string(ledger.Open)]
		}
		if !rep.Clean || open != n {
			return fmt.Errorf("relay audit: clean %v, %d quarantined open of %d", rep.Clean, open, n)
		}
		return nil
	}
}
