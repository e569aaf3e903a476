package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// scale measures relay across many partitions: n instances in one group
// over a source of -partitions partitions (every derived topic with as
// many, made by relay topics apply). It prints the time from start to
// each instance's first commit and to the group's catching up with a
// preload, each instance's RSS against 64 MiB + 64 KiB per partition it
// owns, the commit latency under a steady load, and the stall when one
// instance is killed with SIGKILL: the time until the group has committed
// everything produced before the kill, against the session timeout plus
// 5 s (a static member's partitions wait for its session to time out).
// A kill that lands while the instance commits leaves its transaction
// open with offsets in it; the new owners cannot read the committed
// offsets of those partitions (a read_committed consumer asks for stable
// offsets) until the broker aborts that transaction, transaction.timeout.ms
// after it began: then the stall is that timeout plus the catch-up.
// -relay-env sets the instances' env (e.g. a transaction timeout).
func (b *bench) scale(ctx context.Context, n int) error {
	p := b.o.partitions
	t := topics{src: fmt.Sprintf("bench-%s-scale", b.runID)}
	t.out, t.group = t.src+".valid", t.src+"-grp"
	b.groups = append(b.groups, t.group)
	start := time.Now()
	if err := b.createTopics(ctx, t.src, t.out); err != nil {
		return err
	}
	extra, _ := parseEnv(b.o.relayEnv)
	env := func(i int) []string {
		return append([]string{"RELAY_TRANSACTIONAL_ID=relay-bench-" + b.runID + "-scale-" + strconv.Itoa(i)}, extra...)
	}
	base := append([]string{"PATH=/usr/bin:/bin", "RELAY_SOURCE_TOPICS=" + t.src, "RELAY_GROUP_ID=" + t.group,
		"RELAY_KAFKA_BOOTSTRAP_SERVERS=" + b.o.bootstrap}, env(0)...)
	if err := b.applyTopics(base); err != nil {
		return err
	}
	fmt.Printf("\nscale: %d instances, %d partitions per topic; topics created in %s\n", n, p, time.Since(start).Round(time.Millisecond))
	value := make([]byte, b.o.size)
	const preload = 20 // records per partition
	if err := b.produceEach(ctx, t.src, preload, value); err != nil {
		return err
	}
	var err error
	if t.end, err = b.watermarks(t.src); err != nil {
		return err
	}
	// A steady load from the start: every instance has records to commit
	// as soon as it owns partitions.
	lctx, cancelLoad := context.WithCancel(ctx)
	loadDone := make(chan error, 1)
	go func() { loadDone <- b.steadyLoad(lctx, t.src, 1000, value) }()
	var once sync.Once
	var loadErr error
	stopLoad := func() error {
		once.Do(func() { cancelLoad(); loadErr = <-loadDone })
		return loadErr
	}
	defer func() { _ = stopLoad() }()
	rs := make([]*relayProc, n)
	t0 := time.Now()
	for i := range n {
		pt, err := b.relayStarter(env(i))(ctx, t)
		if err != nil {
			return err
		}
		rs[i] = pt.(*relayProc)
		defer rs[i].kill()
	}
	if err := b.reportStart(ctx, rs, t, t0); err != nil {
		return err
	}
	cfg, err := configOf(base)
	if err != nil {
		return err
	}
	if err := b.reportSteadyAndKill(ctx, rs, t, cfg.TransactionTimeout); err != nil {
		return err
	}
	if err := stopLoad(); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// produceEach writes per records to every partition of topic.
func (b *bench) produceEach(ctx context.Context, topic string, per int, value []byte) error {
	pr, err := b.newProducer(nil)
	if err != nil {
		return err
	}
	for i := range per {
		for p := range int32(b.o.partitions) {
			if err := pr.send(topic, p, []byte("k"+strconv.Itoa(i)), value); err != nil {
				_ = pr.close(ctx)
				return err
			}
		}
	}
	return pr.close(ctx)
}

// reportStart prints when each instance first committed and when the group
// had committed the preload.
func (b *bench) reportStart(ctx context.Context, rs []*relayProc, t topics, t0 time.Time) error {
	wctx, cancel := context.WithTimeout(ctx, b.o.timeout)
	defer cancel()
	first := make([]time.Duration, len(rs))
	var caught time.Duration
	for caught == 0 || contains(first, 0) {
		for i, r := range rs {
			if err := r.check(); err != nil {
				return err
			}
			if first[i] == 0 {
				if m, err := scrape(wctx, "http://"+r.addr+"/metrics"); err == nil && m["relay_transactions_committed_total"] > 0 {
					first[i] = time.Since(t0)
				}
			}
		}
		if caught == 0 {
			if ok, err := b.groupCaughtUp(wctx, t); err != nil {
				return fmt.Errorf("scale: the preload was not committed: %w", err)
			} else if ok {
				caught = time.Since(t0)
			}
		}
		if err := sleep(wctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("scale: start: %w", err)
		}
	}
	for i, d := range first {
		fmt.Printf("  instance %d: first commit %s after start\n", i, d.Round(time.Millisecond))
	}
	fmt.Printf("  the preload (%d records) committed %s after start\n", sum(t.end), caught.Round(time.Millisecond))
	return nil
}

func contains(ds []time.Duration, d time.Duration) bool {
	for _, x := range ds {
		if x == d {
			return true
		}
	}
	return false
}

// reportSteadyAndKill reads, under the steady load, each instance's RSS
// and commit latency over 20 s; then it kills the first
// instance and prints how long the group takes to commit everything
// produced before the kill.
func (b *bench) reportSteadyAndKill(ctx context.Context, rs []*relayProc, t topics, txnTimeout time.Duration) error {
	before := make([]map[string]float64, len(rs))
	for i, r := range rs {
		before[i], _ = scrape(ctx, "http://"+r.addr+"/metrics")
	}
	if err := sleep(ctx, 20*time.Second); err != nil {
		return err
	}
	for i, r := range rs {
		if err := r.check(); err != nil {
			return err
		}
		m, err := scrape(ctx, "http://"+r.addr+"/metrics")
		if err != nil {
			return err
		}
		rss, err := relayMemory(r.pid(), "VmRSS")
		if err != nil {
			return err
		}
		owned := m["relay_partitions_assigned"]
		goal := 64*1024 + 64*owned // KiB
		dc, ds := m["relay_commit_duration_seconds_count"]-before[i]["relay_commit_duration_seconds_count"], m["relay_commit_duration_seconds_sum"]-before[i]["relay_commit_duration_seconds_sum"]
		mean := 0.0
		if dc > 0 {
			mean = ds / dc * 1000
		}
		fmt.Printf("  instance %d: owns %.0f partitions; RSS %.1f MiB (goal ≤ %.1f MiB); %.0f commits in 20 s, mean commit %.1f ms\n",
			i, owned, float64(rss)/1024, goal/1024, dc, mean)
	}
	// The kill: every partition must move again, and everything produced
	// before the kill must be committed.
	var atKill map[int32]int64
	for atKill == nil {
		var err error
		if atKill, err = b.groupCommitted(ctx, t); err != nil {
			return err
		}
	}
	killed := time.Now()
	_ = rs[0].cmd.Process.Signal(syscall.SIGKILL)
	<-rs[0].done
	end, err := b.watermarks(t.src)
	if err != nil {
		return err
	}
	at := t
	at.end = end
	wctx, cancel := context.WithTimeout(ctx, b.o.timeout)
	defer cancel()
	var moved time.Duration // until every partition has committed past its offset at the kill
	for moved == 0 {
		got, err := b.groupCommitted(wctx, t)
		if err != nil {
			return fmt.Errorf("scale: after the kill: %w", err)
		}
		all := got != nil
		for p, off := range atKill {
			all = all && got[p] > off
		}
		if all {
			moved = time.Since(killed)
		} else if err := sleep(wctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("scale: after the kill: %w", err)
		}
	}
	for {
		ok, err := b.groupCaughtUp(wctx, at)
		if err != nil {
			return fmt.Errorf("scale: after the kill: %w", err)
		}
		if ok {
			break
		}
		for _, r := range rs[1:] {
			if err := r.check(); err != nil {
				return err
			}
		}
		if err := sleep(wctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("scale: after the kill: %w", err)
		}
	}
	stall := time.Since(killed)
	fmt.Printf("  SIGKILL of instance 0: every partition committed again %s later (goal ≤ the session timeout, 45 s, + 5 s; "+
		"up to transaction.timeout.ms, %s, + 5 s when the kill lands in a commit); what was produced before it, %s later\n",
		moved.Round(time.Millisecond), txnTimeout, stall.Round(time.Millisecond))
	for _, r := range rs[1:] {
		var res result
		if err := r.finish(ctx, &res); err != nil {
			return err
		}
	}
	return nil
}

// steadyLoad writes rate records/s round-robin over every partition of
// topic until ctx ends.
func (b *bench) steadyLoad(ctx context.Context, topic string, rate int, value []byte) error {
	pr, err := b.newProducer(nil)
	if err != nil {
		return err
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	next := int32(0)
	for {
		select {
		case <-ctx.Done():
			return pr.close(context.Background())
		case <-tick.C:
		}
		for range rate / 100 {
			if err := pr.send(topic, next, []byte("s"), value); err != nil {
				_ = pr.close(context.Background())
				return err
			}
			next = (next + 1) % int32(b.o.partitions)
		}
	}
}
