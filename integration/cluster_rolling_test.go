package integration

import (
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestClusterRollingRestart is a rolling restart of a replicated cluster
// under load, as a platform team runs one: three relay instances, each
// broker taken away in turn — first by SIGTERM (a controlled shutdown, as
// a rolling upgrade does it), then again by SIGKILL (a crash) — and while
// it is away a relay instance is SIGKILLed and started again, so relay
// starts with a node missing. The transaction timeout is the harness's
// 10 s, shorter than a broker's absence: coordinators abort what relay
// had open and bump its epoch, which relay must tell from a twin's fence.
// Nothing may be lost or duplicated, no relay may exit on its own, and
// /livez must never fail. The longest time any source partition went
// without a commit while it had records to commit is measured and
// reported, for the runbook.
func TestClusterRollingRestart(t *testing.T) {
	needCluster(t)
	const partitions, instances = 6, 3
	s := newScenario(t, partitions)
	type instance struct {
		r    *relay
		addr string
		txn  string
		runs int
	}
	insts := make([]*instance, instances)
	start := func(i int) {
		in := insts[i]
		in.r = startRelay(t, fmt.Sprintf("relay-%d-%d", i, in.runs), s.env(in.txn, "RELAY_HTTP_ADDR", in.addr))
		in.runs++
	}
	for i := range insts {
		insts[i] = &instance{addr: freeAddr(t), txn: uniq(t, fmt.Sprintf("txn-%d", i))}
		start(i)
	}
	addrs := make([]string, len(insts))
	for i, in := range insts {
		addrs[i] = in.addr
	}
	live := watchLivez(t, addrs)
	s.src.produce(t, 2000)
	waitCaughtUp(t, s.group, s.src.topic, partitions, 2*time.Minute)
	prog := watchProgress(t, s.group, s.src.topic, partitions)
	// About 200 records a second for the whole roll.
	feed := s.src.produceInBackground(t, 250, 100, 500*time.Millisecond)
	kills := 0
	killOne := func() {
		i := kills % instances
		kills++
		prog.enter("relay instance SIGKILLed and restarted")
		insts[i].r.signal(syscall.SIGKILL)
		insts[i].r.wait(10 * time.Second)
		start(i)
		// The gap a kill causes (the session timeout, the rebalance, the
		// killed transaction aborted) ends in its own phase.
		time.Sleep(8 * time.Second)
	}
	step := func(what string, args ...string) {
		prog.enter(what)
		began := time.Now()
		cluster(t, args...)
		t.Logf("%s: %s", what, time.Since(began).Round(100*time.Millisecond))
		for _, in := range insts {
			if in.r.exited() {
				t.Fatalf("%s exited on its own during %s:\n%s", in.r.name, what, tail(in.r.stderr.String(), 30))
			}
		}
	}
	// Each broker away in turn, a relay restarted while it is.
	for _, how := range []struct{ stop, what string }{{"stop-node", "stopped by SIGTERM"}, {"kill-node", "killed"}} {
		for n := 1; n <= 3; n++ {
			step(fmt.Sprintf("broker %d %s", n, how.what), how.stop, fmt.Sprint(n))
			killOne()
			step(fmt.Sprintf("broker %d started again", n), "start-node", fmt.Sprint(n))
			time.Sleep(3 * time.Second)
		}
	}
	feed.Wait()
	assertExactlyOnce(t, s.src, s.output, s.group, partitions)
	prog.end()
	live.end()
	wedges, verdicts, rejoins := 0, 0, 0
	for _, in := range insts {
		if in.r.exited() {
			t.Fatalf("%s exited on its own:\n%s", in.r.name, tail(in.r.stderr.String(), 30))
		}
		wedges += strings.Count(in.r.stderr.String(), "librdkafka call wedged")
		verdicts += strings.Count(in.r.stderr.String(), "no other instance holds this group.instance.id")
		rejoins += strings.Count(in.r.stderr.String(), "rejoining the group with a new consumer")
	}
	if f := live.failures(); len(f) > 0 {
		t.Fatalf("/livez failed %d times, first: %s", len(f), f[0])
	}
	t.Logf("rolling restart: %d relay kills, longest time a partition went without a commit: %s (partition %d); wedged calls abandoned by the last instances: %d; fences after a lost assignment found to be the coordinator's: %d; group.instance.id refusals found stale, rejoined: %d; longest gap ending in each phase:%s",
		kills, prog.longest.Round(100*time.Millisecond), prog.longestP, wedges, verdicts, rejoins, prog.report())
	for _, in := range insts {
		in.r.stop()
	}
}

// livezWatch asks every instance's /livez twice a second and keeps the
// failed answers.
type livezWatch struct {
	mu    sync.Mutex
	fails []string
	stop  chan struct{}
	done  chan struct{}
}

func watchLivez(t *testing.T, addrs []string) *livezWatch {
	w := &livezWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			for _, a := range addrs {
				if ok, body := livez(a); !ok {
					w.mu.Lock()
					w.fails = append(w.fails, fmt.Sprintf("%s at %s: %s", a, time.Now().Format(time.TimeOnly), body))
					w.mu.Unlock()
				}
			}
		}
	}()
	t.Cleanup(w.end)
	return w
}

func (w *livezWatch) end() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func (w *livezWatch) failures() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.fails...)
}
