package integration

// The three-broker cluster's tests (scripts/stack/cluster.sh: KRaft,
// replication factor 3, min.insync.replicas 2). They run in a pass of
// their own, with the harness pointed at the cluster:
//
//	RELAY_TEST_CLUSTER=1 RELAY_TEST_BOOTSTRAP=$(scripts/stack/cluster.sh bootstrap) \
//	RELAY_TEST_REPLICATION_FACTOR=3 go test -run '^TestCluster' ./integration/
//
// make test runs that pass after the single-broker one; elsewhere these
// tests skip.

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

var onCluster = os.Getenv("RELAY_TEST_CLUSTER") == "1"

func needCluster(t *testing.T) {
	t.Helper()
	if !onCluster {
		t.Skip("needs the three-broker cluster: RELAY_TEST_CLUSTER=1 (see cluster_test.go)")
	}
}

// cluster runs scripts/stack/cluster.sh with args.
func cluster(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot, "scripts", "stack", "cluster.sh"), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cluster.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// livez asks relay's /livez; ok is false only on an answer other than 200
// (an instance not serving yet, or just killed, is not a liveness failure).
func livez(addr string) (ok bool, body string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/livez")
	if err != nil {
		return true, ""
	}
	defer func() { _ = resp.Body.Close() }()
	b := make([]byte, 512)
	n, _ := resp.Body.Read(b)
	return resp.StatusCode == http.StatusOK, string(b[:n])
}

// progress watches a group's committed offsets on a source and keeps the
// longest time any partition went without a commit while it had records
// to commit, overall and by the phase of the test it ended in.
type progress struct {
	t          *testing.T
	group      string
	topic      string
	partitions int
	stop       chan struct{}
	done       chan struct{}
	mu         sync.Mutex
	phase      string
	byPhase    map[string]time.Duration
	phases     []string
	longest    time.Duration
	longestP   int32
}

// enter starts a phase: the gaps that end from now on are counted in it.
func (p *progress) enter(phase string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.phase = phase
	if _, ok := p.byPhase[phase]; !ok {
		p.byPhase[phase] = 0
		p.phases = append(p.phases, phase)
	}
}

// report is the longest gap of each phase, in their order.
func (p *progress) report() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for _, ph := range p.phases {
		fmt.Fprintf(&b, "\n  %-45s %s", ph, p.byPhase[ph].Round(100*time.Millisecond))
	}
	return b.String()
}

func watchProgress(t *testing.T, group, topic string, partitions int) *progress {
	p := &progress{t: t, group: group, topic: topic, partitions: partitions, stop: make(chan struct{}), done: make(chan struct{}),
		byPhase: map[string]time.Duration{}}
	p.enter("start")
	go p.run()
	t.Cleanup(p.end)
	return p
}

func (p *progress) run() {
	defer close(p.done)
	last := map[int32]int64{}
	since := map[int32]time.Time{}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		now := time.Now()
		got, err := committedOffsets(p.group, p.topic, p.partitions)
		if err != nil {
			continue // a broker away: the gap goes on counting
		}
		ends, err := endOffsetsOf(p.topic, p.partitions)
		if err != nil {
			continue
		}
		for part := range int32(p.partitions) {
			off, ok := got[part]
			if ok && off != last[part] || ends[part] <= off {
				// Committed more, or has nothing to commit.
				last[part], since[part] = off, now
				continue
			}
			if since[part].IsZero() {
				since[part] = now
			}
			gap := now.Sub(since[part])
			p.mu.Lock()
			if gap > p.longest {
				p.longest, p.longestP = gap, part
			}
			if gap > p.byPhase[p.phase] {
				p.byPhase[p.phase] = gap
			}
			p.mu.Unlock()
		}
	}
}

func (p *progress) end() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// quiet keeps the watchers' clients from logging every refused connection
// while a broker is down (librdkafka's critical messages only).
const quiet = 2

// committedOffsets is committed without the test's failure on an error:
// the progress watch asks while brokers come and go.
func committedOffsets(group, topic string, partitions int) (map[int32]int64, error) {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "group.id": group,
		"isolation.level": "read_committed", "enable.auto.commit": false, "log_level": quiet})
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	tps := make([]kafka.TopicPartition, partitions)
	for i := range tps {
		tps[i] = kafka.TopicPartition{Topic: &topic, Partition: int32(i)}
	}
	got, err := c.Committed(tps, 5000)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, tp := range got {
		if tp.Error == nil && tp.Offset >= 0 {
			out[tp.Partition] = int64(tp.Offset)
		}
	}
	return out, nil
}

func endOffsetsOf(topic string, partitions int) (map[int32]int64, error) {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "group.id": "unused", "log_level": quiet})
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	out := map[int32]int64{}
	for i := range int32(partitions) {
		_, hi, err := c.QueryWatermarkOffsets(topic, i, 5000)
		if err != nil {
			return nil, err
		}
		out[i] = hi
	}
	return out, nil
}
