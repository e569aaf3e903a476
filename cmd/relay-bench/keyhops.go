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
	// The same stream under four policies, one after the other: the
	// baseline without order, key ordering copying its followers through
	// the tier, and key ordering with relay's parking defaults, which park
	// them once the group agrees (from its first rebalance): with the
	// mode's 1 s tier, and with relay's default tiers (the first 30 s,
	// equal to RELAY_KEY_PARK_MAX_WAIT's default).
	policies := []struct {
		name, tag, tier string
		env             []string
	}{
		{"unordered", "u", hopsTierName, []string{"RELAY_ORDERING=unordered"}},
		{"key, followers copied", "c", hopsTierName, []string{"RELAY_ORDERING=key", "RELAY_KEY_PARK_MAX_RECORDS=0"}},
		{"key, relay's parking defaults (followers parked)", "p", hopsTierName, []string{"RELAY_ORDERING=key"}},
		{"key, relay's parking defaults and default tiers (30s,5m)", "d", "30s", []string{"RELAY_ORDERING=key", "RELAY_RETRY_TIERS=30s,5m"}},
	}
	rss := make([]int64, len(policies))
	for i, pol := range policies {
		fmt.Printf("   -- %s\n", pol.name)
		tc, peak, err := b.keyHopsRun(ctx, pol.tag, pol.tier, pol.env)
		if err != nil {
			return err
		}
		rss[i] = peak
		printHops(tc, b.o.keyHops, i >= 2)
		fmt.Printf("   relay peak RSS %d MiB\n", peak>>10)
	}
	if rss[0] > 0 {
		fmt.Printf("   peak RSS against unordered: copied %.2f, parked %.2f (target for parked <= 1.20)\n",
			float64(rss[1])/float64(rss[0]), float64(rss[2])/float64(rss[0]))
	}
	return nil
}

// keyHopsRun feeds the mode's stream to a relay with env and returns what
// its tier received and relay's peak RSS.
func (b *bench) keyHopsRun(ctx context.Context, tag, tier string, env []string) (tierCount, int64, error) {
	a, err := b.setupAdmission()
	if err != nil {
		return tierCount{}, 0, err
	}
	t := topics{src: fmt.Sprintf("bench-%s-h%s-key-hops", b.runID, tag), value: a.value}
	t.out, t.group = t.src+".valid", t.src+"-grp"
	b.groups = append(b.groups, t.group)
	if err := b.createTopics(ctx, t.src, t.out); err != nil {
		return tierCount{}, 0, err
	}
	h, err := startFlakyHook(hopsFailPct, false, 0)
	if err != nil {
		return tierCount{}, 0, err
	}
	defer h.close()
	h.times = 2
	env = append(append(append(a.env(b.o.registry), "RELAY_RETRY_TIERS="+hopsTierName), env...), "RELAY_HOOK_URL="+h.url(), "RELAY_HOOK_TIMEOUT=1s",
		"RELAY_BLOCKING_ATTEMPTS=1", "RELAY_BLOCKING_BACKOFF=20ms", "RELAY_RETRY_MAX_ATTEMPTS=5")
	pt, err := b.relayStarter(env)(ctx, t)
	if err != nil {
		return tierCount{}, 0, err
	}
	defer pt.kill()
	start := time.Now()
	if err := b.feed(ctx, t); err != nil {
		return tierCount{}, 0, err
	}
	feed := time.Since(start)
	if t.end, err = b.watermarks(t.src); err != nil {
		return tierCount{}, 0, err
	}
	r := pt.(*relayProc)
	r.t.end = t.end
	if err := waitDone(ctx, pt, b.o.timeout); err != nil {
		return tierCount{}, 0, err
	}
	fmt.Printf("   fed in %.1fs, all terminal after %.1fs\n", feed.Seconds(), time.Since(start).Seconds())
	peak, err := relayMemory(r.cmd.Process.Pid, "VmHWM")
	if err != nil {
		return tierCount{}, 0, err
	}
	tc, err := b.countTier(ctx, t.src+".retry."+tier)
	return tc, peak, err
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
func printHops(tc tierCount, records int, judged bool) {
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
	verdict := ""
	switch {
	case !judged:
	case ratio > hopsTarget:
		verdict = fmt.Sprintf("; target <= %.2f NOT met", hopsTarget)
	default:
		verdict = fmt.Sprintf("; target <= %.2f met", hopsTarget)
	}
	fmt.Printf("   tier records: %d = %.3f per source record [%s]%s\n",
		tc.records, ratio, strings.Join(parts, " "), verdict)
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
