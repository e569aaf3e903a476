package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// load produces keyed records to a source from the host, at about rate a
// second, until stop is called: values "<key>:<seq>", seq counting up per
// key from 0. It counts what the broker acknowledged.
type load struct {
	p      *kafka.Producer
	topic  string
	keys   int
	acked  atomic.Int64
	failed atomic.Int64
	stop   chan struct{}
	events sync.WaitGroup // the delivery reports' reader
	sender sync.WaitGroup // the producing loop
	sent   map[string]int // per key, after stop
	frame  []byte         // the registry's framing, or none

	finished bool
}

func (c *cluster) startLoad(t *testing.T, topic string, keys, rate int) *load {
	t.Helper()
	return c.loadFrom(t, topic, rate, make([]int, keys), nil)
}

// startSchemaLoad is startLoad with each value a JSON string in the
// registry's wire format: frame (magic byte and the schema's id) before
// it, as relay decodes it for its hook.
func (c *cluster) startSchemaLoad(t *testing.T, topic string, keys, rate int, frame []byte) *load {
	t.Helper()
	return c.loadFrom(t, topic, rate, make([]int, keys), frame)
}

// resume starts a load on prev's topic and keys that goes on where prev
// (finished) stopped: its sent counts all the records of both.
func (c *cluster) resume(t *testing.T, prev *load, rate int) *load {
	t.Helper()
	seq := make([]int, prev.keys)
	for k := range seq {
		seq[k] = prev.sent[fmt.Sprintf("key-%d", k)]
	}
	return c.loadFrom(t, prev.topic, rate, seq, prev.frame)
}

// loadFrom starts a load whose key k's next value is seq[k], after frame.
func (c *cluster) loadFrom(t *testing.T, topic string, rate int, seq []int, frame []byte) *load {
	t.Helper()
	keys := len(seq)
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": c.hostKafka, "enable.idempotence": true,
		// log_level 2: the broker's restart is on purpose.
		"linger.ms": 5, "log_level": 2, "message.timeout.ms": 300000})
	if err != nil {
		t.Fatal(err)
	}
	l := &load{p: p, topic: topic, keys: keys, frame: frame, stop: make(chan struct{}), sent: map[string]int{}}
	// A test that fails before finish leaves no producer behind.
	t.Cleanup(func() {
		if !l.finished {
			close(l.stop)
			l.sender.Wait()
			l.p.Flush(5000)
			l.p.Close()
			l.events.Wait()
		}
	})
	l.events.Add(1)
	l.sender.Add(1)
	go func() {
		defer l.events.Done()
		for e := range p.Events() {
			if m, ok := e.(*kafka.Message); ok {
				if m.TopicPartition.Error != nil {
					l.failed.Add(1)
				} else {
					l.acked.Add(1)
				}
			}
		}
	}()
	go func() {
		defer l.sender.Done()
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				for k, n := range seq {
					l.sent[fmt.Sprintf("key-%d", k)] = n
				}
				return
			case <-tick.C:
			}
			k := i % keys
			key := fmt.Sprintf("key-%d", k)
			for {
				err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &l.topic, Partition: kafka.PartitionAny},
					Key: []byte(key), Value: l.value(fmt.Sprintf("%s:%d", key, seq[k]))}, nil)
				if err == nil {
					break
				}
				time.Sleep(50 * time.Millisecond) // the local queue is full while the broker is away
			}
			seq[k]++
		}
	}()
	return l
}

// value is v as the load writes it: with a frame, {"v": v} after it
// (loadSchema).
func (l *load) value(v string) []byte {
	if l.frame == nil {
		return []byte(v)
	}
	b, _ := json.Marshal(map[string]string{"v": v})
	return append(append([]byte{}, l.frame...), b...)
}

// unframed is what a load wrote in b: b itself, or v after the registry's
// framing (magic byte 0 and a 4-byte schema id).
func unframed(b []byte) string {
	if len(b) > 5 && b[0] == 0 {
		var v struct{ V string }
		if json.Unmarshal(b[5:], &v) == nil {
			return v.V
		}
	}
	return string(b)
}

// finish stops producing, waits for every acknowledgement, and returns how
// many records were acknowledged.
func (l *load) finish(t *testing.T) int64 {
	t.Helper()
	l.finished = true
	// The producing loop ends before the producer closes: a record it
	// was producing as stop came would be refused by a closed producer
	// forever (a run hung here for ten minutes).
	close(l.stop)
	l.sender.Wait()
	for l.p.Flush(1000) > 0 {
	}
	l.p.Close()
	l.events.Wait()
	if n := l.failed.Load(); n != 0 {
		t.Fatalf("%d records were not acknowledged (the idempotent producer's order per key would not hold)", n)
	}
	return l.acked.Load()
}

// drained waits until group has committed every source record (its
// committed offsets at the high watermarks), up to five minutes.
func (c *cluster) drained(t *testing.T, group, topic string, partitions int) {
	t.Helper()
	cons, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": c.hostKafka, "group.id": group})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cons.Close() }()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var tps []kafka.TopicPartition
		for p := range partitions {
			tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: int32(p)}) //nolint:gosec // a partition count
		}
		committed, err := cons.Committed(tps, 10000)
		lag := int64(0)
		if err == nil {
			for _, tp := range committed {
				_, high, err := cons.QueryWatermarkOffsets(topic, tp.Partition, 10000)
				if err != nil {
					lag = -1
					break
				}
				lag += high - max(int64(tp.Offset), 0)
			}
		}
		if err == nil && lag == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s still %d records behind after five minutes (err %v)", group, lag, err)
		}
		time.Sleep(2 * time.Second)
	}
}

// outputs reads topic to its end as a read_committed consumer and checks
// that every key's records are there once each and in the order they
// were produced (seq 0, 1, 2, ...), as many as sent.
func (c *cluster) outputs(t *testing.T, topic string, sent map[string]int) {
	t.Helper()
	cons, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": c.hostKafka, "group.id": uniq("k8s-witness"),
		"isolation.level": "read_committed", "auto.offset.reset": "earliest", "enable.auto.commit": false})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cons.Close() }()
	if err := cons.Subscribe(topic, nil); err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, n := range sent {
		want += n
	}
	next := map[string]int{}
	part := map[string]int32{}
	// To the end, not to the count: a duplicate after the last original
	// (a zombie's transaction, say) must be read too. The group has
	// committed every record already (drained), so the output is whole
	// once nothing comes for five seconds after the count is reached.
	got, idle := 0, 0
	for idle < 30 && (got < want || idle < 5) {
		m, err := cons.ReadMessage(time.Second)
		if err != nil {
			idle++
			continue
		}
		idle = 0
		key, seq, ok := strings.Cut(unframed(m.Value), ":")
		n, err := strconv.Atoi(seq)
		if !ok || err != nil || key != string(m.Key) {
			t.Fatalf("%s: a record that is not the load's: key %q value %q", m.TopicPartition, m.Key, m.Value)
		}
		if n != next[key] || n >= sent[key] {
			t.Fatalf("%s: %s seq %d where %d was next (%d sent): lost, duplicated or out of order", m.TopicPartition, key, n, next[key], sent[key])
		}
		if p, ok := part[key]; ok && p != m.TopicPartition.Partition {
			t.Fatalf("%s: %s also in partition %d", m.TopicPartition, key, p)
		}
		part[key] = m.TopicPartition.Partition
		next[key]++
		got++
	}
	for k, n := range sent {
		if next[k] != n {
			t.Errorf("%s: %d of %d records in %s", k, next[k], n, topic)
		}
	}
	t.Logf("%s: %d records, every key's in order, none twice", topic, got)
}

// audit runs relay audit from the host (the release binary make image
// built) over the last hour of source: exit 0, nothing lost, duplicated,
// misrouted or stuck, and every one of the acked records judged
// processed (an audit that could verify nothing would pass exit 0 too).
func (c *cluster) audit(t *testing.T, source, group string, acked int64) {
	t.Helper()
	bin := os.Getenv("RELAY_TEST_K8S_RELAY")
	if bin == "" {
		t.Fatal("RELAY_TEST_K8S_RELAY: the relay binary for the host (make test-k8s sets it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "audit", "--source", source, "--from", "1h", "--progress", "none", "-o", "json")
	cmd.Env = append(os.Environ(), "RELAY_KAFKA_BOOTSTRAP_SERVERS="+c.hostKafka, "RELAY_SOURCE_TOPICS="+source, "RELAY_GROUP_ID="+group)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("relay audit: %v\n%s", err, out)
	}
	var rep struct {
		Partitions []struct {
			Records, Processed, Unverifiable, Lost, Duplicated int64
		} `json:"partitions"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("relay audit -o json: %v\n%s", err, out)
	}
	var records, processed, unverifiable int64
	for _, p := range rep.Partitions {
		records, processed, unverifiable = records+p.Records, processed+p.Processed, unverifiable+p.Unverifiable
	}
	if records != acked || processed != acked || unverifiable != 0 {
		t.Fatalf("relay audit judged %d records, %d processed, %d unverifiable; %d were acknowledged", records, processed, unverifiable, acked)
	}
	t.Logf("relay audit: clean, %d records processed", processed)
}
