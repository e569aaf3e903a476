package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// keyedLoad produces orders of keys K0…K(keys-1) without pause but
// rate, key k always to partition k%partitions, each id "K<k>-<n>" with
// n the key's own sequence, until stop is closed.
type keyedLoad struct {
	mu       sync.Mutex
	produced map[string][]string // key → ids, in the order the broker acknowledged them
	done     sync.WaitGroup
	stop     chan struct{}
	err      error
}

func startKeyedLoad(t *testing.T, o *orders, topic string, partitions, keys int, every time.Duration) *keyedLoad {
	t.Helper()
	pr, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": true,
		"max.in.flight.requests.per.connection": 1, "message.timeout.ms": 300000})
	if err != nil {
		t.Fatal(err)
	}
	l := &keyedLoad{produced: map[string][]string{}, stop: make(chan struct{})}
	l.done.Add(1)
	go func() {
		defer l.done.Done()
		defer pr.Close()
		for n := 0; ; n++ {
			select {
			case <-l.stop:
				return
			case <-time.After(every):
			}
			k := n % keys
			key, id := "K"+strconv.Itoa(k), fmt.Sprintf("K%d-%d", k, n/keys)
			done := make(chan kafka.Event, 1)
			err := pr.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: int32(k % partitions)},
				Key: []byte(key), Value: o.value(t, 3, map[string]any{"id": id, "amount": int64(1), "currency": "EUR"})}, done)
			if err == nil {
				if m := (<-done).(*kafka.Message); m.TopicPartition.Error != nil {
					err = m.TopicPartition.Error
				}
			}
			l.mu.Lock()
			if err != nil {
				l.err = fmt.Errorf("producing %s: %w", id, err)
				l.mu.Unlock()
				return
			}
			l.produced[key] = append(l.produced[key], id)
			l.mu.Unlock()
		}
	}()
	return l
}

// end stops the load and returns what it produced, by key.
func (l *keyedLoad) end(t *testing.T) (map[string][]string, int) {
	t.Helper()
	close(l.stop)
	l.done.Wait()
	if l.err != nil {
		t.Fatal(l.err)
	}
	n := 0
	for _, ids := range l.produced {
		n += len(ids)
	}
	return l.produced, n
}

// TestUpgradeUnderLoad: three instances of the previous release relay
// three partitions with key ordering at relay's defaults while keyed
// records arrive without pause and some heads keep failing (their
// followers wait behind them). They are replaced one by one by this
// tree's relay — by SIGTERM, by SIGKILL, by SIGTERM — with the broker
// restarted after the first replacement; an instance that stops by
// itself is started again with its version, as its supervisor would.
// Parking turns on only once the last previous member has left. Once
// the heads pass, every record is in the output once, each key in its
// source order, and the audit is clean.
func TestUpgradeUnderLoad(t *testing.T) {
	if os.Getenv("RELAY_TEST_PREVIOUS_BIN") == "" {
		t.Skip("needs the previous release's relay: make test-upgrade")
	}
	const partitions, keys = 3, 24
	o := registerOrders(t)
	h := newOrderHook(t)
	failing := []string{"K1-2", "K5-3", "K9-1", "K14-4", "K22-2"}
	for _, id := range failing {
		h.setFailing(id, true)
	}
	s := keyScenario(t, o, h, partitions)
	txns := []string{uniq(t, "txn-1"), uniq(t, "txn-2"), uniq(t, "txn-3")}
	insts := make([]*relay, len(txns))
	for i, txn := range txns {
		insts[i] = previousRelay(t, fmt.Sprintf("prev-%d", i+1), s.env(txn))
	}
	for _, r := range insts {
		r.waitLog("partitions assigned", 60*time.Second)
	}
	load := startKeyedLoad(t, o, s.src.topic, partitions, keys, 25*time.Millisecond)
	// supervise restarts an instance that exited by itself (a previous
	// release may stop on a broker restart), as Kubernetes would.
	supervise := func(i int, start func(*testing.T, string, map[string]string) *relay, name string) {
		if insts[i].exited() {
			t.Logf("%s exited by itself (code %d); started again", insts[i].name, insts[i].cmd.ProcessState.ExitCode())
			insts[i] = start(t, name+"-again", s.env(txns[i]))
		}
	}
	time.Sleep(3 * time.Second)

	insts[0].stop()
	insts[0] = startRelay(t, "new-1", s.env(txns[0]))
	insts[0].waitLog("partitions assigned", 60*time.Second)
	time.Sleep(3 * time.Second)
	// (Read before the broker restart: just after it, its group
	// coordinator may still be loading the offsets for a while.)
	if _, p := committedWithParked(t, s.group, s.src.topic, partitions); len(p[0].Offsets)+len(p[1].Offsets)+len(p[2].Offsets) != 0 {
		t.Fatalf("parked sets %+v while previous members are in the group, want none", p)
	}
	restart := exec.Command("bash", filepath.Join(repoRoot, "scripts/stack/kafka.sh"), "restart")
	if out, err := restart.CombinedOutput(); err != nil {
		t.Fatalf("broker restart: %v\n%s", err, out)
	}
	time.Sleep(5 * time.Second)
	supervise(1, previousRelay, "prev-2")
	supervise(2, previousRelay, "prev-3")

	insts[1].signal(syscall.SIGKILL)
	insts[1].wait(10 * time.Second)
	insts[1] = startRelay(t, "new-2", s.env(txns[1]))
	insts[1].waitLog("partitions assigned", 60*time.Second)
	time.Sleep(3 * time.Second)
	supervise(2, previousRelay, "prev-3")
	insts[2].stop()
	insts[2] = startRelay(t, "new-3", s.env(txns[2]))
	for _, r := range insts {
		r.waitParking()
	}
	time.Sleep(5 * time.Second) // parking, with heads still failing
	produced, total := load.end(t)
	_, parked := committedWithParked(t, s.group, s.src.topic, partitions)
	for _, id := range failing {
		h.setFailing(id, false)
	}
	deadline := time.Now().Add(120 * time.Second)
	var out []string
	for {
		out = out[:0]
		for p := range int32(partitions) {
			out = append(out, outputOrder(t, s, p)...)
		}
		if len(out) >= total || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	waitCaughtUp(t, s.group, s.src.topic, partitions, 60*time.Second)
	for _, r := range insts {
		if r.exited() {
			t.Errorf("%s exited by itself (code %d)", r.name, r.cmd.ProcessState.ExitCode())
		}
		r.stop()
	}
	byKey := map[string][]string{}
	for _, id := range out {
		k, _, _ := strings.Cut(id, "-")
		byKey[k] = append(byKey[k], id)
	}
	for k, want := range produced {
		if !slices.Equal(byKey[k], want) {
			t.Errorf("key %s in the output: %v, want %v (each once, in source order)", k, byKey[k], want)
		}
	}
	if len(out) != total {
		t.Errorf("%d records in the output, %d produced", len(out), total)
	}
	t.Logf("%d records over %d keys; parked sets once every member was this version: %+v", total, keys, parked)
	if rep, res := auditOf(t, s); res.code != 0 || !rep.Clean {
		t.Fatalf("relay audit after the upgrade under load: exit %d, clean %v, findings %v", res.code, rep.Clean, rep.Findings)
	}
}
