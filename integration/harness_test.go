package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/envelope"
	"relay/internal/keyorder"
)

var (
	bootstrap = envOr("RELAY_TEST_BOOTSTRAP", "127.0.0.1:9092")
	// replication is the replication factor of the topics tests create:
	// 1 on the single broker, 3 on the three-broker cluster (cluster_test.go).
	replication = envOr("RELAY_TEST_REPLICATION_FACTOR", "1")
	relayBin    string // built once in TestMain
	repoRoot    string
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if os.Getenv(childDescribe) != "" {
		return m.Run() // a child of a test: no broker check, no build
	}
	wd, _ := os.Getwd()
	repoRoot = filepath.Dir(wd)
	conn, err := net.DialTimeout("tcp", strings.Split(bootstrap, ",")[0], 2*time.Second)
	if err != nil {
		if os.Getenv("RELAY_TEST_REQUIRE_BROKER") == "1" {
			fmt.Fprintf(os.Stderr, "integration: no broker at %s (%v); start it with scripts/stack/up.sh\n", bootstrap, err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "integration: no broker at %s; skipping (set RELAY_TEST_REQUIRE_BROKER=1 to fail instead)\n", bootstrap)
		return 0
	}
	_ = conn.Close()
	dir, err := os.MkdirTemp("", "relay-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	relayBin = filepath.Join(dir, "relay")
	build := exec.Command("go", "build", "-o", relayBin, "./cmd/relay")
	build.Dir = repoRoot
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "integration: build relay:", err)
		return 1
	}
	return m.Run()
}

// uniq makes names unique per test run, so tests never share topics, groups
// or transactional ids.
func uniq(t *testing.T, what string) string {
	name := strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())
	return fmt.Sprintf("it-%s-%s-%d", strings.ToLower(name), what, time.Now().UnixNano()%1e9)
}

func replicationFactor() int {
	n, err := strconv.Atoi(replication)
	if err != nil || n < 1 {
		panic("RELAY_TEST_REPLICATION_FACTOR is not a positive number: " + replication)
	}
	return n
}

func admin(t *testing.T) *kafka.AdminClient {
	t.Helper()
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": bootstrap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

func createTopics(t *testing.T, partitions int, names ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	specs := make([]kafka.TopicSpecification, len(names))
	for i, n := range names {
		specs[i] = kafka.TopicSpecification{Topic: n, NumPartitions: partitions, ReplicationFactor: replicationFactor()}
	}
	a := admin(t)
	res, err := a.CreateTopics(ctx, specs, kafka.SetAdminOperationTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Error.Code() != kafka.ErrNoError && r.Error.Code() != kafka.ErrTopicAlreadyExists {
			t.Fatalf("create topic %s: %v", r.Topic, r.Error)
		}
	}
	waitTopics(t, partitions, names...)
}

// waitTopics waits until the broker's metadata shows every topic with the
// partition count: CreateTopics returns when the controller has the topics,
// and a client asking the broker right after may be told they do not exist.
func waitTopics(t *testing.T, partitions int, names ...string) {
	t.Helper()
	a := admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, n := range names {
		for {
			md, err := a.GetMetadata(&n, false, 5000)
			if err == nil && md.Topics[n].Error.Code() == kafka.ErrNoError && len(md.Topics[n].Partitions) == partitions {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("topic %s not visible with %d partitions: %v", n, partitions, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// source is what a test produced: id (topic/partition/offset) → value, as
// the delivery reports said. The exactly-once check reads the topic itself.
type source struct {
	mu     sync.Mutex
	topic  string
	values map[string]string
}

func newSource(topic string) *source { return &source{topic: topic, values: map[string]string{}} }

// produce writes n records with distinct values and keys over 64 key values,
// synchronously, and records where each landed.
//
// The producer is not idempotent on purpose: after a broker restart the
// single-node broker was once seen to hand out no new producer ids for five
// minutes, and an idempotent producer that must re-acquire its id after the
// disconnect stalls that long. A plain producer's retries may write a
// record twice instead; the exactly-once check takes the source from the
// topic, so such a twin is simply one more source record to relay.
func (s *source) produce(t *testing.T, n int) {
	t.Helper()
	p, err := kafka.NewProducer(&kafka.ConfigMap{
		"bootstrap.servers": bootstrap, "enable.idempotence": false, "acks": "all", "linger.ms": 5,
		"message.timeout.ms": 120000,
	})
	if err != nil {
		t.Error(err)
		return
	}
	defer p.Close()
	dr := make(chan kafka.Event, n)
	s.mu.Lock()
	base := len(s.values)
	s.mu.Unlock()
	for i := range n {
		v := fmt.Sprintf("v-%07d-%s", base+i, strings.Repeat("x", 100))
		err := p.Produce(&kafka.Message{
			TopicPartition: kafka.TopicPartition{Topic: &s.topic, Partition: kafka.PartitionAny},
			Key:            []byte(fmt.Sprintf("k-%02d", (base+i)%64)),
			Value:          []byte(v),
			Headers:        []kafka.Header{{Key: "origin", Value: []byte("it")}},
		}, dr)
		if err != nil {
			// Errorf, not Fatalf: produce also runs on helper goroutines.
			t.Errorf("produce: %v", err)
			return
		}
	}
	for range n {
		m := (<-dr).(*kafka.Message)
		if m.TopicPartition.Error != nil {
			t.Errorf("delivery: %v", m.TopicPartition.Error)
			return
		}
		s.mu.Lock()
		s.values[envelope.ID(s.topic, m.TopicPartition.Partition, int64(m.TopicPartition.Offset))] = string(m.Value)
		s.mu.Unlock()
	}
}

// produceInBackground produces batches of n records with a pause between
// them on its own goroutine; Wait on the result before asserting.
func (s *source) produceInBackground(t *testing.T, batches, n int, pause time.Duration) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range batches {
			s.produce(t, n)
			time.Sleep(pause)
		}
	}()
	return &wg
}

// snapshot copies what the delivery reports said.
func (s *source) snapshot() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.values))
	for k, v := range s.values {
		out[k] = v
	}
	return out
}

func (s *source) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.values)
}

// relay is one relay subprocess.
type relay struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	err    error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startRelay runs relay with the test defaults and env on top.
func startRelay(t *testing.T, name string, env map[string]string) *relay {
	t.Helper()
	return startRelayCmd(t, name, exec.Command(relayBin, "run"), env)
}

// startRelayCmd runs cmd, a relay, as startRelay does; cmd's environment
// is set here.
func startRelayCmd(t *testing.T, name string, cmd *exec.Cmd, env map[string]string) *relay {
	t.Helper()
	base := map[string]string{
		"RELAY_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
		"RELAY_HTTP_ADDR":               "",
		"RELAY_LOG_LEVEL":               "info",
		// The broker's minimum: a killed member is noticed in seconds.
		"RELAY_KAFKA_SESSION_TIMEOUT_MS":    "6000",
		"RELAY_KAFKA_HEARTBEAT_INTERVAL_MS": "500",
		// Shorter than relay's default (a minute or more): tests SIGKILL
		// instances that never come back, and read_committed readers wait
		// until the broker aborts what such an instance left open.
		"RELAY_KAFKA_TRANSACTION_TIMEOUT_MS": "10000",
	}
	for k, v := range env {
		base[k] = v
	}
	// A relay in a chroot (the image test) has its environment already:
	// the image's; it gets relay's variables only on top.
	if cmd.Env == nil {
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	}
	for k, v := range base {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	r := &relay{t: t, name: name, cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	// The whole stderr also goes to a file, kept after the run: a failure's
	// cause is often far above the tail printed below.
	logPath := filepath.Join(repoRoot, ".cache", "logs", "it", strings.ReplaceAll(t.Name(), "/", "_")+"-"+name+".log")
	var sink io.Writer = r.stderr
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err == nil {
		if f, err := os.Create(logPath); err == nil {
			t.Cleanup(func() { _ = f.Close() })
			sink = io.MultiWriter(r.stderr, f)
		}
	}
	cmd.Stderr = sink
	cmd.Stdout = sink
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.err = cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-r.done
		if t.Failed() {
			t.Logf("--- %s stderr (tail; whole in %s) ---\n%s", name, logPath, tail(r.stderr.String(), 40))
		}
	})
	return r
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// signal sends s to relay. SIGSTOP and SIGCONT go to its daemon process
// too: `relay run` is a supervisor and the daemon it runs, and a frozen
// supervisor alone freezes nothing (the daemon takes no other signal of
// its own; the supervisor relays them).
func (r *relay) signal(s syscall.Signal) {
	if s == syscall.SIGSTOP || s == syscall.SIGCONT {
		daemons := childrenOf(r.cmd.Process.Pid)
		if len(daemons) == 0 {
			r.t.Fatalf("%s: no daemon process under the supervisor (pid %d) to send %v", r.name, r.cmd.Process.Pid, s)
		}
		for _, pid := range daemons {
			_ = syscall.Kill(pid, s)
		}
	}
	_ = r.cmd.Process.Signal(s)
}

// childrenOf lists the child processes of pid (of any of its threads).
func childrenOf(pid int) []int {
	var out []int
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, field := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(field); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// wait waits up to d for exit and returns the exit code (-1 if killed by a
// signal), failing the test on timeout.
func (r *relay) wait(d time.Duration) int {
	r.t.Helper()
	select {
	case <-r.done:
	case <-time.After(d):
		r.dumpGoroutines()
		r.t.Fatalf("%s did not exit within %s (its goroutines, dumped on SIGQUIT, are at the end of its log)", r.name, d)
	}
	return r.cmd.ProcessState.ExitCode()
}

// dumpGoroutines has relay's daemon print its goroutines (the Go
// runtime's answer to SIGQUIT) into its log, for a test that found it
// stuck: the dump names the call it is stuck in.
func (r *relay) dumpGoroutines() {
	for _, pid := range childrenOf(r.cmd.Process.Pid) {
		_ = syscall.Kill(pid, syscall.SIGQUIT)
	}
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
	}
}

// stop sends SIGTERM and requires a graceful exit (code 0).
func (r *relay) stop() {
	r.t.Helper()
	r.signal(syscall.SIGTERM)
	if code := r.wait(40 * time.Second); code != 0 {
		r.t.Fatalf("%s exited %d after SIGTERM, want 0", r.name, code)
	}
}

func (r *relay) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// waitLog waits until relay's stderr contains s.
func (r *relay) waitLog(s string, d time.Duration) {
	r.t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(r.stderr.String(), s) {
		if time.Now().After(deadline) || r.exited() {
			r.t.Fatalf("%s: no %q in its log within %s", r.name, s, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitParking waits until relay says parking is in force (every member of
// its group announces it; until then, followers are copied into the
// tiers), and has said nothing else for two seconds: right after a
// rebalance, a member whose record has not been read yet turns it off for
// a moment.
func (r *relay) waitParking() {
	r.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var since time.Time
	for {
		log := r.stderr.String()
		on := strings.LastIndex(log, "feature in force")
		switch {
		case on < 0 || on < strings.LastIndex(log, "feature off"):
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		case time.Since(since) >= 2*time.Second:
			return
		}
		if time.Now().After(deadline) || r.exited() {
			r.t.Fatalf("%s: parking not in force within 60s:\n%s", r.name, tail(log, 20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// endOffsets returns the high watermark of each partition of topic.
func endOffsets(t *testing.T, topic string, partitions int) map[int32]int64 {
	t.Helper()
	c := plainConsumer(t)
	out := map[int32]int64{}
	for p := range int32(partitions) {
		_, hi, err := c.QueryWatermarkOffsets(topic, p, 10000)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = hi
	}
	return out
}

func plainConsumer(t *testing.T) *kafka.Consumer {
	t.Helper()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers": bootstrap, "group.id": "it-reader", "enable.auto.commit": false,
		"isolation.level": "read_committed", "enable.partition.eof": true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// committed returns the group's committed offsets for topic, as a
// read_committed consumer of the group sees them: stable offsets only, and
// a partition whose offsets are in an open transaction reads as none
// (kafka.OffsetInvalid). The consumer never joins the group.
//
// It is not asked through the admin client on purpose: librdkafka
// (2.11) handles an OffsetFetch answer of NOT_COORDINATOR, which a broker
// gives right after a restart, by re-querying the coordinator of the
// client's own consumer group, and an admin client has none: the process
// dies of a segmentation fault. A consumer with the group's id has one.
func committed(t *testing.T, group, topic string, partitions int) map[int32]int64 {
	t.Helper()
	offs, _ := committedWithParked(t, group, topic, partitions)
	return offs
}

// handled is how far the group has handled each partition of topic in
// committed transactions: its committed offset, or, when key ordering
// parks records above it, the handled position the commit's parked set
// gives (every record below it is settled or parked).
func handled(t *testing.T, group, topic string, partitions int) map[int32]int64 {
	t.Helper()
	offs, parked := committedWithParked(t, group, topic, partitions)
	for p, ps := range parked {
		offs[p] = ps.Hi
	}
	return offs
}

func committedWithParked(t *testing.T, group, topic string, partitions int) (map[int32]int64, map[int32]keyorder.Parked) {
	t.Helper()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": false,
		"isolation.level": "read_committed",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	tps := make([]kafka.TopicPartition, partitions)
	for p := range partitions {
		tps[p] = kafka.TopicPartition{Topic: &topic, Partition: int32(p)}
	}
	// A broker that has just started answers COORDINATOR_LOAD_IN_PROGRESS
	// while it loads the group's offsets: ask again until the deadline.
	deadline := time.Now().Add(20 * time.Second)
	var res []kafka.TopicPartition
	for {
		res, err = c.Committed(tps, 5000)
		for i, tp := range res {
			var ke kafka.Error
			if errors.As(tp.Error, &ke) && ke.Code() == kafka.ErrUnstableOffsetCommit {
				// A transaction that has sent its offsets is still open (or
				// its instance was killed before the commit): nothing
				// stable yet, as the admin client's answer used to say.
				res[i].Offset, res[i].Error = kafka.OffsetInvalid, nil
				continue
			}
			if err == nil && tp.Error != nil {
				err = fmt.Errorf("partition %d: %w", tp.Partition, tp.Error)
			}
		}
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	out, parked := map[int32]int64{}, map[int32]keyorder.Parked{}
	for _, tp := range res {
		out[tp.Partition] = int64(tp.Offset)
		if tp.Metadata == nil || tp.Offset < 0 {
			continue
		}
		ps, ok, err := keyorder.Decode(int64(tp.Offset), *tp.Metadata)
		if err != nil {
			t.Fatalf("%s[%d]: %v", topic, tp.Partition, err)
		}
		if ok {
			parked[tp.Partition] = ps
		}
	}
	return out, parked
}

// waitCaughtUp waits until the group has handled the source up to its end
// offsets in committed transactions: every source record is settled, or
// parked by key ordering behind an earlier record of its key.
func waitCaughtUp(t *testing.T, group, topic string, partitions int, d time.Duration) {
	t.Helper()
	want := endOffsets(t, topic, partitions)
	deadline := time.Now().Add(d)
	for {
		got := handled(t, group, topic, partitions)
		for p, o := range got {
			if o < 0 && want[p] == 0 {
				got[p] = 0 // nothing to commit on an empty partition
			}
		}
		if equalOffsets(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s did not catch up on %s within %s: committed %v, end %v", group, topic, d, got, want)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func equalOffsets(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for p, o := range a {
		if b[p] != o {
			return false
		}
	}
	return true
}

// readCommitted reads every committed record of topic, from the start to the
// end of each partition, as an independent read_committed consumer.
func readCommitted(t *testing.T, topic string, partitions int) []*kafka.Message {
	t.Helper()
	c := plainConsumer(t)
	tps := make([]kafka.TopicPartition, partitions)
	for p := range partitions {
		tps[p] = kafka.TopicPartition{Topic: &topic, Partition: int32(p), Offset: kafka.OffsetBeginning}
	}
	if err := c.Assign(tps); err != nil {
		t.Fatal(err)
	}
	var out []*kafka.Message
	eof := map[int32]bool{}
	deadline := time.Now().Add(2 * time.Minute)
	for len(eof) < partitions {
		if time.Now().After(deadline) {
			t.Fatalf("reading %s: reached the end of only %d of %d partitions", topic, len(eof), partitions)
		}
		switch e := c.Poll(200).(type) {
		case *kafka.Message:
			out = append(out, e)
			delete(eof, e.TopicPartition.Partition)
		case kafka.PartitionEOF:
			eof[e.Partition] = true
		case kafka.Error:
			t.Logf("reader: %v", e)
		}
	}
	return out
}

// assertExactlyOnce checks the whole-run invariant: every source record is
// in the output exactly once, with its value, key order kept per partition,
// and the group's committed offsets equal the source's end offsets.
func assertExactlyOnce(t *testing.T, src *source, output, group string, partitions int) {
	t.Helper()
	waitCaughtUp(t, group, src.topic, partitions, 2*time.Minute)
	// A killed instance that never returns leaves its transaction open
	// until the broker aborts it (transaction.timeout.ms, 10s in these
	// tests, see startRelay); until then read_committed readers stop at it. Wait for
	// that before reading, or later committed records look missing.
	assertNoOpenTransaction(t, output, partitions, 30*time.Second)
	// The source is what the topic holds, not what the delivery reports
	// said: every record there must come out once.
	sources := map[string]string{}
	for _, m := range readCommitted(t, src.topic, partitions) {
		sources[envelope.ID(src.topic, m.TopicPartition.Partition, int64(m.TopicPartition.Offset))] = string(m.Value)
	}
	for id, v := range src.snapshot() {
		if sources[id] != v {
			t.Errorf("delivered source record %s is not in %s as produced", id, src.topic)
		}
	}
	outs := readCommitted(t, output, partitions)
	seen := map[string]int{}
	lastOffset := map[int32]int64{}
	for _, m := range outs {
		var id string
		for _, h := range m.Headers {
			if h.Key == envelope.MessageID {
				id = string(h.Value)
			}
		}
		seen[id]++
		if seen[id] == 2 {
			t.Errorf("saw %s twice in %s (duplicate)", id, output)
		}
		want, ok := sources[id]
		switch {
		case !ok:
			t.Errorf("output record %q has no source record", id)
		case want != string(m.Value):
			t.Errorf("output %s has value %q, source had %q", id, m.Value, want)
		}
		// Partition order: the source offsets of a partition's outputs rise.
		var p int32
		var off int64
		if _, err := fmt.Sscanf(id[len(src.topic)+1:], "%d/%d", &p, &off); err == nil {
			if p != m.TopicPartition.Partition {
				t.Errorf("%s written to partition %d", id, m.TopicPartition.Partition)
			}
			if last, ok := lastOffset[p]; ok && off <= last {
				t.Errorf("partition %d order broken: %s after offset %d", p, id, last)
			}
			lastOffset[p] = off
		}
	}
	missing := 0
	for id := range sources {
		if seen[id] == 0 {
			missing++
			if missing <= 5 {
				t.Errorf("source record %s is missing from %s", id, output)
			}
		}
	}
	if missing > 0 || len(outs) != len(sources) {
		t.Fatalf("%d source records, %d outputs, %d missing", len(sources), len(outs), missing)
	}
	t.Logf("exactly once: %d source records (%d produced), %d outputs", len(sources), src.len(), len(outs))
}

// scenario is one test's topics, group and relay environment.
type scenario struct {
	src        *source
	output     string
	quarantine string
	rejected   string
	tiers      []string
	group      string
	partitions int
	extra      []string // settings every relay of the scenario gets
}

// newScenario creates a source topic and, through relay topics apply,
// every topic relay needs for the settings in extra (name, value pairs),
// which every relay of the scenario then gets.
func newScenario(t *testing.T, partitions int, extra ...string) *scenario {
	t.Helper()
	return newScenarioOn(t, uniq(t, "src"), uniq(t, "grp"), partitions, extra...)
}

// newScenarioOn is newScenario with a source topic named in and a group.
func newScenarioOn(t *testing.T, in, group string, partitions int, extra ...string) *scenario {
	t.Helper()
	createTopics(t, partitions, in)
	s := &scenario{src: newSource(in), output: in + ".valid", group: group, partitions: partitions,
		quarantine: in + ".quarantine", rejected: in + ".rejected", extra: extra}
	tiers := "30s,5m"
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i] == "RELAY_RETRY_TIERS" {
			tiers = extra[i+1]
		}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i] == "RELAY_ORDERING" && extra[i+1] == "partition" {
			tiers = "" // records wait in place; there are no tier topics
		}
	}
	for _, d := range strings.Split(tiers, ",") {
		if d != "" {
			s.tiers = append(s.tiers, in+".retry."+d)
		}
	}
	s.create(t)
	return s
}

// applyTopics creates relay's topics for env through `relay topics apply`,
// as an operator would, and waits until the broker shows them.
func applyTopics(t *testing.T, partitions int, env map[string]string, names ...string) {
	t.Helper()
	cmd := exec.Command(relayBin, "topics", "apply", "--replication-factor", replication)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "RELAY_KAFKA_BOOTSTRAP_SERVERS=" + bootstrap}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("relay topics apply: %v; output: %q", err, out)
	}
	waitTopics(t, partitions, names...)
}

// create makes relay's topics for the scenario's env (with extra settings).
func (s *scenario) create(t *testing.T) {
	t.Helper()
	applyTopics(t, s.partitions, s.env("unused"), append([]string{s.output, s.quarantine, s.rejected}, s.tiers...)...)
}

func (s *scenario) env(txnID string, extra ...string) map[string]string {
	env := map[string]string{
		"RELAY_SOURCE_TOPICS":    s.src.topic,
		"RELAY_GROUP_ID":         s.group,
		"RELAY_TRANSACTIONAL_ID": txnID,
	}
	extra = append(append([]string{}, s.extra...), extra...)
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return env
}

func jitter(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rand.Int64N(int64(hi-lo)))
}

func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }

// operatorConfig is relay's configuration for an operator command with
// env as its whole environment.
func operatorConfig(t *testing.T, env map[string]string) *config.Config {
	t.Helper()
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(config.ForOperators(func(k string) (string, bool) { v, ok := env[k]; return v, ok }), environ)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
