package main

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// blockedKeys measures relay's whole-process RSS with n keys blocked at
// once against the same process idle: relay with key ordering and a hook
// that fails the first call for every key, in-place retries off and a tier
// of an hour, so each key's one record waits in the tier and its key stays
// blocked. The records are produced only once the idle RSS is read.
func (b *bench) blockedKeys(ctx context.Context, n int) error {
	t := topics{src: fmt.Sprintf("bench-%s-blocked", b.runID)}
	t.out, t.group = t.src+".valid", t.src+"-grp"
	b.groups = append(b.groups, t.group)
	if err := b.createTopics(ctx, t.src, t.out); err != nil {
		return err
	}
	// The hook needs the registry (it reads the decoded record): the
	// records are the admission modes' Avro values.
	a, err := b.setupAdmission()
	if err != nil {
		return err
	}
	h, err := startFlakyHook(100, true, 0)
	if err != nil {
		return err
	}
	defer h.close()
	env := append(a.env(b.o.registry), "RELAY_ORDERING=key", "RELAY_HOOK_URL="+h.url(), "RELAY_HOOK_TIMEOUT=1s",
		"RELAY_BLOCKING_ATTEMPTS=0", "RELAY_RETRY_TIERS=1h", "RELAY_RETRY_MAX_ATTEMPTS=2")
	pt, err := b.relayStarter(env)(ctx, t)
	if err != nil {
		return err
	}
	r := pt.(*relayProc)
	defer r.kill()
	idle, err := idleRSS(ctx, r)
	if err != nil {
		return err
	}
	pr, err := b.newProducer(nil)
	if err != nil {
		return err
	}
	for i := range n {
		if err := pr.send(t.src, int32(i%b.o.partitions), []byte("blocked-"+strconv.Itoa(i)), a.value); err != nil {
			_ = pr.close(ctx)
			return err
		}
	}
	if err := pr.close(ctx); err != nil {
		return err
	}
	if r.t.end, err = b.watermarks(t.src); err != nil { // relay's copy of t
		return err
	}
	return b.reportBlocked(ctx, r, h, n, idle)
}

// idleRSS reads relay's RSS once it is idle: serving metrics, and given
// time to join its group.
func idleRSS(ctx context.Context, r *relayProc) (int64, error) {
	for {
		if _, err := scrape(ctx, "http://"+r.addr+"/metrics"); err == nil {
			break
		}
		if err := r.check(); err != nil {
			return 0, err
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return 0, err
		}
	}
	if err := sleep(ctx, 5*time.Second); err != nil {
		return 0, err
	}
	return relayMemory(r.cmd.Process.Pid, "VmRSS")
}

// reportBlocked waits until every record is committed at the source (each
// in the tier, its key blocked), lets relay settle, and prints the RSS.
func (b *bench) reportBlocked(ctx context.Context, r *relayProc, h *flakyHook, n int, idle int64) error {
	wctx, cancel := context.WithTimeout(ctx, b.o.timeout)
	defer cancel()
	for {
		ok, err := b.groupCaughtUp(wctx, r.t)
		if err != nil {
			return err
		}
		if ok {
			break
		}
		if err := r.check(); err != nil {
			return err
		}
		if err := sleep(wctx, 100*time.Millisecond); err != nil {
			m, _ := scrape(ctx, "http://"+r.addr+"/metrics")
			return fmt.Errorf("blocked keys: not committed: %w (relay consumed %.0f, committed %.0f, outcomes %.0f; hook failed %d); relay's output:\n%s",
				err, m["relay_records_consumed_total"], m["relay_records_committed_total"], m["relay_records_outcome_total"], h.failed(), r.stderr.String())
		}
	}
	if err := sleep(ctx, 5*time.Second); err != nil {
		return err
	}
	pid := r.cmd.Process.Pid
	rss, err := relayMemory(pid, "VmRSS")
	if err != nil {
		return err
	}
	peak, err := relayMemory(pid, "VmHWM")
	if err != nil {
		return err
	}
	fails := h.failed()
	fmt.Printf("\nblocked keys: %d keys, one record each, failed once by the hook (%d failures) and waiting in a 1h tier\n", n, fails)
	fmt.Printf("  relay RSS idle:            %7.1f MiB\n", float64(idle)/1024)
	fmt.Printf("  relay RSS, keys blocked:   %7.1f MiB  (+%.1f MiB over idle)\n", float64(rss)/1024, float64(rss-idle)/1024)
	fmt.Printf("  relay peak RSS (VmHWM):    %7.1f MiB  (+%.1f MiB over idle)\n", float64(peak)/1024, float64(peak-idle)/1024)
	var res result
	return r.finish(ctx, &res)
}

func (h *flakyHook) failed() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fails
}
