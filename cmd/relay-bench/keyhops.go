package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Mode (h), key hops: what key ordering costs in tier traffic. Records
// over 200 keys are fed at a fixed rate; 3 % of them (by message id) fail
// twice at the hook — the first call and the in-place retry — and pass in
// the tier. Each such record goes to the 1 s tier once, its key is
// blocked meanwhile, and the records of its key that arrive then follow
// it. The mode prints tier records per source record, by code: the
// target is at most 0.15.
const (
	hopsKeys     = 200
	hopsFailPct  = 3
	hopsTarget   = 0.15
	hopsTierName = "1s"
)

func (b *bench) keyHops(ctx context.Context) error {
	fmt.Printf("== (h) key ordering + hook, %d%% of records fail twice, %d keys, %d records at %d/s\n",
		hopsFailPct, hopsKeys, b.o.keyHops, b.o.hopsRate)
	a, err := b.setupAdmission()
	if err != nil {
		return err
	}
	t := topics{src: fmt.Sprintf("bench-%s-h-key-hops", b.runID), value: a.value}
	t.out, t.group = t.src+".valid", t.src+"-grp"
	b.groups = append(b.groups, t.group)
	if err := b.createTopics(ctx, t.src, t.out); err != nil {
		return err
	}
	h, err := startFlakyHook(hopsFailPct, false, 0)
	if err != nil {
		return err
	}
	defer h.close()
	h.times = 2
	env := append(a.env(b.o.registry), "RELAY_ORDERING=key", "RELAY_HOOK_URL="+h.url(), "RELAY_HOOK_TIMEOUT=1s",
		"RELAY_RETRY_TIERS="+hopsTierName, "RELAY_BLOCKING_ATTEMPTS=1", "RELAY_BLOCKING_BACKOFF=20ms", "RELAY_RETRY_MAX_ATTEMPTS=5")
	pt, err := b.relayStarter(env)(ctx, t)
	if err != nil {
		return err
	}
	defer pt.kill()
	start := time.Now()
	if err := b.feed(ctx, t); err != nil {
		return err
	}
	feed := time.Since(start)
	if t.end, err = b.watermarks(t.src); err != nil {
		return err
	}
	pt.(*relayProc).t.end = t.end
	if err := waitDone(ctx, pt, b.o.timeout); err != nil {
		return err
	}
	fmt.Printf("   fed in %.1fs, all terminal after %.1fs\n", feed.Seconds(), time.Since(start).Seconds())
	tc, err := b.countTier(ctx, t.src+".retry."+hopsTierName)
	if err != nil {
		return err
	}
	printHops(tc, b.o.keyHops)
	return nil
}

// feed writes the records at the mode's rate, each key to its partition.
func (b *bench) feed(ctx context.Context, t topics) error {
	pr, err := b.newProducer(nil)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(7, 11))
	start := time.Now()
	for i := range b.o.keyHops {
		k := []byte(fmt.Sprintf("key-%03d", rng.IntN(hopsKeys)))
		f := fnv.New32a()
		_, _ = f.Write(k)
		if err := pr.send(t.src, int32(f.Sum32()%uint32(b.o.partitions)), k, t.value); err != nil {
			_ = pr.close(ctx)
			return err
		}
		if i%10 == 9 {
			if err := sleep(ctx, time.Until(start.Add(time.Duration(i+1)*time.Second/time.Duration(b.o.hopsRate)))); err != nil {
				_ = pr.close(ctx)
				return err
			}
		}
	}
	return pr.close(ctx)
}

func waitDone(ctx context.Context, pt passthrough, bound time.Duration) error {
	c, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	for {
		ok, err := pt.caughtUp(c)
		if err != nil || ok {
			return err
		}
		if err := pt.check(); err != nil {
			return err
		}
		if err := sleep(c, 200*time.Millisecond); err != nil {
			return fmt.Errorf("not every record reached a terminal state: %w", err)
		}
	}
}

// tierCount is what a tier topic received: its records by
// relay.error.code, and how often each source record (its source
// partition and offset) was written there behind a blocked key.
type tierCount struct {
	records int
	byCode  map[string]int
	blocked map[string]int // source partition@offset → KEY_BLOCKED writes
}

// countTier reads a tier topic to its end (committed records) and counts
// its records.
func (b *bench) countTier(ctx context.Context, topic string) (tierCount, error) {
	tc := tierCount{byCode: map[string]int{}, blocked: map[string]int{}}
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": b.o.bootstrap, "group.id": "relay-bench-count",
		"enable.auto.commit": false, "isolation.level": "read_committed", "enable.partition.eof": true})
	if err != nil {
		return tc, err
	}
	defer func() { _ = c.Close() }()
	tps := make([]kafka.TopicPartition, b.o.partitions)
	for p := range tps {
		tps[p] = kafka.TopicPartition{Topic: &topic, Partition: int32(p), Offset: kafka.OffsetBeginning}
	}
	if err := c.Assign(tps); err != nil {
		return tc, err
	}
	eof := map[int32]bool{}
	deadline := time.Now().Add(b.o.timeout)
	for len(eof) < len(tps) && ctx.Err() == nil && time.Now().Before(deadline) {
		switch e := c.Poll(200).(type) {
		case *kafka.Message:
			var code, part, off string
			for _, h := range e.Headers {
				switch h.Key {
				case "relay.error.code":
					code = string(h.Value)
				case "relay.source.partition":
					part = string(h.Value)
				case "relay.source.offset":
					off = string(h.Value)
				}
			}
			id := part + "@" + off
			tc.byCode[code]++
			if code == "KEY_BLOCKED" {
				tc.blocked[id]++
			}
			tc.records++
		case kafka.PartitionEOF:
			eof[e.Partition] = true
		}
	}
	if len(eof) < len(tps) {
		return tc, fmt.Errorf("%s not read to its end", topic)
	}
	return tc, nil
}

// printHops prints tier records per source record against the target,
// and how the KEY_BLOCKED share splits: how many distinct followers went
// through the tier, how many times each did on average and at most, and
// how many followers each genuine failure took with it.
func printHops(tc tierCount, records int) {
	codes := make([]string, 0, len(tc.byCode))
	for c := range tc.byCode {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%s=%d (%.3f)", c, tc.byCode[c], float64(tc.byCode[c])/float64(records))
	}
	ratio := float64(tc.records) / float64(records)
	verdict := "met"
	if ratio > hopsTarget {
		verdict = "NOT met"
	}
	fmt.Printf("   tier records: %d = %.3f per source record [%s]; target <= %.2f %s\n",
		tc.records, ratio, strings.Join(parts, " "), hopsTarget, verdict)
	writes, most := 0, 0
	for _, n := range tc.blocked {
		writes += n
		most = max(most, n)
	}
	genuine := tc.records - writes
	if len(tc.blocked) == 0 || genuine == 0 {
		return
	}
	fmt.Printf("   followers: %d distinct (%.3f of the source records), %.2f tier writes each (at most %d); %.1f per genuine failure (%d)\n",
		len(tc.blocked), float64(len(tc.blocked))/float64(records), float64(writes)/float64(len(tc.blocked)), most,
		float64(writes)/float64(genuine), genuine)
}
