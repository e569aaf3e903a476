package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// relayProc is mode (b): relay as a subprocess, transactional.
type relayProc struct {
	b      *bench
	t      topics
	cmd    *exec.Cmd
	addr   string
	stderr *tailBuffer
	done   chan struct{}
	once   sync.Once
	hook   *flakyHook // (e) only
}

// admissionStarter runs relay with schema admission and rules; with
// hookFailPct >= 0 also with a hook that fails that share of records once.
// The in-place retry is off (RELAY_BLOCKING_ATTEMPTS=0): failed records go
// to a 1s tier at once, so the run measures the tier path, not sleeps.
func (b *bench) admissionStarter(hookFailPct int, extra ...string) func(context.Context, topics) (passthrough, error) {
	return func(ctx context.Context, t topics) (passthrough, error) {
		a, err := b.setupAdmission()
		if err != nil {
			return nil, err
		}
		env := a.env(b.o.registry)
		var h *flakyHook
		byKey := false
		for _, e := range extra {
			byKey = byKey || e == "RELAY_ORDERING=key"
		}
		if hookFailPct >= 0 {
			if h, err = startFlakyHook(hookFailPct, byKey); err != nil {
				return nil, err
			}
			env = append(env, "RELAY_HOOK_URL="+h.url(), "RELAY_HOOK_TIMEOUT=1s",
				"RELAY_BLOCKING_ATTEMPTS=0", "RELAY_RETRY_TIERS=1s", "RELAY_RETRY_MAX_ATTEMPTS=5")
		}
		env = append(env, extra...)
		pt, err := b.relayStarter(env)(ctx, t)
		if err != nil {
			if h != nil {
				h.close()
			}
			return nil, err
		}
		pt.(*relayProc).hook = h
		return pt, nil
	}
}

func (b *bench) relayStarter(extra []string) func(context.Context, topics) (passthrough, error) {
	return func(_ context.Context, t topics) (passthrough, error) {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(b.o.relayBin, "run")
		cmd.Env = []string{
			"PATH=" + os.Getenv("PATH"),
			"RELAY_SOURCE_TOPICS=" + t.src,
			"RELAY_GROUP_ID=" + t.group,
			"RELAY_TRANSACTIONAL_ID=relay-bench-" + b.runID + "-" + t.src,
			"RELAY_KAFKA_BOOTSTRAP_SERVERS=" + b.o.bootstrap,
			"RELAY_HTTP_ADDR=" + addr,
			"RELAY_LOG_LEVEL=warn",
		}
		cmd.Env = append(cmd.Env, extra...)
		if err := b.applyTopics(cmd.Env); err != nil {
			return nil, err
		}
		r := &relayProc{b: b, t: t, cmd: cmd, addr: addr, stderr: &tailBuffer{max: 64 << 10}, done: make(chan struct{})}
		cmd.Stdout, cmd.Stderr = r.stderr, r.stderr
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start relay: %w", err)
		}
		go func() { _ = cmd.Wait(); close(r.done) }()
		return r, nil
	}
}

// freeAddr picks a free loopback port for relay's HTTP endpoint.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String(), nil
}

func (r *relayProc) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

func (r *relayProc) check() error {
	if r.exited() {
		return fmt.Errorf("relay exited early (%s); its output:\n%s", r.cmd.ProcessState, r.stderr.String())
	}
	return nil
}

// caughtUp: relay's group has committed (require-stable) the source's end
// offsets, so every backlog record is in a committed transaction, and
// every record is in a terminal state.
func (r *relayProc) caughtUp(ctx context.Context) (bool, error) {
	if ok, err := r.committedAll(ctx); !ok || err != nil {
		return ok, err
	}
	// Records in a retry tier are committed at the source but not done:
	// done is every record in a terminal state, by relay's own count. A
	// failed scrape is asked again.
	n, err := terminal(ctx, "http://"+r.addr+"/metrics")
	return err == nil && n >= sum(r.t.end), nil
}

// committedAll: relay's group has committed (require-stable) the source's
// end offsets.
func (r *relayProc) committedAll(ctx context.Context) (bool, error) {
	src := r.t.src
	tps := make([]kafka.TopicPartition, 0, len(r.t.end))
	for p := range r.t.end {
		tps = append(tps, kafka.TopicPartition{Topic: &src, Partition: p})
	}
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := r.b.admin.ListConsumerGroupOffsets(c, []kafka.ConsumerGroupTopicPartitions{{Group: r.t.group, Partitions: tps}},
		kafka.SetAdminRequireStableOffsets(true))
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		// Transient (e.g. coordinator loading): ask again.
		return false, nil
	}
	if len(res.ConsumerGroupsTopicPartitions) != 1 {
		return false, nil
	}
	g := res.ConsumerGroupsTopicPartitions[0]
	for _, tp := range g.Partitions {
		if tp.Error != nil || int64(tp.Offset) != r.t.end[tp.Partition] {
			return false, nil
		}
	}
	return len(g.Partitions) == len(r.t.end), nil
}

// finish reads peak RSS and the counters, then stops relay with SIGTERM
// and expects exit 0.
func (r *relayProc) finish(ctx context.Context, res *result) error {
	if err := r.check(); err != nil {
		return err
	}
	res.relay = true
	var err error
	if res.rssKB, err = vmHWM(r.cmd.Process.Pid); err != nil {
		return err
	}
	if res.cpuSec, err = cpuSeconds(r.cmd.Process.Pid); err != nil {
		return err
	}
	m, err := scrape(ctx, "http://"+r.addr+"/metrics")
	if err != nil {
		return err
	}
	res.txnCommitted = m["relay_transactions_committed_total"]
	res.txnAborted = m["relay_transactions_aborted_total"]
	for name, v := range m {
		if strings.HasPrefix(name, "relay_commit_duration") {
			switch {
			case strings.HasSuffix(name, "_sum"):
				res.commitSum = v
			case strings.HasSuffix(name, "_count"):
				res.commitCount = v
			}
		}
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(40 * time.Second):
		r.kill()
		return fmt.Errorf("relay did not stop within 40s of SIGTERM; its output:\n%s", r.stderr.String())
	}
	if code := r.cmd.ProcessState.ExitCode(); code != 0 {
		return fmt.Errorf("relay exited %d after SIGTERM; its output:\n%s", code, r.stderr.String())
	}
	return nil
}

func (r *relayProc) kill() {
	r.once.Do(func() {
		if r.hook != nil {
			defer r.hook.close()
		}
		if !r.exited() {
			_ = r.cmd.Process.Kill()
		}
		<-r.done
	})
}

// scrape reads a Prometheus text endpoint and sums each metric's samples
// over their labels.
func scrape(ctx context.Context, url string) (map[string]float64, error) {
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(c, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 8<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if j := strings.LastIndex(rest, "}"); j >= 0 {
			rest = rest[j+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
			out[name] += v
		}
	}
	return out, sc.Err()
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(p)
	if over := t.b.Len() - t.max; over > 0 {
		t.b.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}
