package integration

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/envelope"
	"relay/internal/ledger"
)

// cliResult is what an operator command printed and returned.
type cliResult struct {
	stdout, stderr string
	code           int
}

// cli runs an operator command (relay quarantine ..., relay replay ...)
// with the scenario's environment plus extra name, value pairs.
func (s *scenario) cli(t *testing.T, extra []string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(relayBin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "RELAY_KAFKA_BOOTSTRAP_SERVERS=" + bootstrap}
	for k, v := range s.env("", extra...) {
		if k != "RELAY_TRANSACTIONAL_ID" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("relay %v: %v", args, err)
	}
	t.Logf("relay %s → exit %d\n%s%s", strings.Join(args, " "), code, tail(out.String(), 12), tail(errb.String(), 6))
	return cliResult{stdout: out.String(), stderr: errb.String(), code: code}
}

func (s *scenario) stateTopic() string  { return "_relay." + s.group + ".state" }
func (s *scenario) replayTopic() string { return s.src.topic + ".replay" }

// ledgerOf reads the scenario's ledger: failure id → entry.
func ledgerOf(t *testing.T, s *scenario) map[string]*ledger.Entry {
	t.Helper()
	var events []*ledger.Event
	for _, m := range readCommitted(t, s.stateTopic(), s.partitions) {
		e, ok, err := ledger.Decode(string(m.Key), m.Value)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			events = append(events, e)
		}
	}
	return ledger.Fold(events)
}

// byState counts ledger entries by state.
func byState(l map[string]*ledger.Entry) map[ledger.State]int {
	out := map[ledger.State]int{}
	for _, e := range l {
		out[e.State]++
	}
	return out
}

// outputsByID reads the output: relay.message.id → records.
func outputsByID(t *testing.T, s *scenario) map[string][]*kafka.Message {
	t.Helper()
	out := map[string][]*kafka.Message{}
	for _, m := range readCommitted(t, s.output, s.partitions) {
		id, _ := envelope.Lookup(toEnvelopeHeaders(m.Headers), envelope.MessageID)
		out[string(id)] = append(out[string(id)], m)
	}
	return out
}

// timedRec is a record with an explicit timestamp.
type timedRec struct {
	key, value []byte
	ts         time.Time
}

// quarantineFixture runs relay (accepting versions 2-3) over records that
// are quarantined — n v1 orders (SCHEMA_UNSUPPORTED), garbage ones
// (WIRE_FORMAT_INVALID) and truncated v3 ones (PAYLOAD_MALFORMED) — and
// one valid order, then stops it. fixed() is the environment of the fix:
// v1 accepted too.
type quarantineFixture struct {
	s                  *scenario
	o                  *orders
	v1, garbage, trunc []string
	valid              string
	extra              []string
}

func newQuarantineFixture(t *testing.T, v1, garbage, trunc int, recordAge time.Duration, extra ...string) *quarantineFixture {
	t.Helper()
	o := registerOrders(t)
	s := newScenario(t, 2, append(o.env(registryURL), extra...)...)
	f := &quarantineFixture{s: s, o: o, extra: extra}
	now := time.Now().Add(-recordAge)
	var recs []timedRec
	kinds := map[string]string{}
	add := func(kind string, value []byte, i int) {
		recs = append(recs, timedRec{key: fmt.Appendf(nil, "%s-%d", kind, i), value: value, ts: now})
	}
	for i := range v1 {
		add("v1", o.value(t, 1, map[string]any{"id": fmt.Sprint("v1-", i)}), i)
	}
	for i := range garbage {
		add("garbage", fmt.Appendf(nil, `{"not":"avro %d"}`, i), i)
	}
	good := o.value(t, 3, map[string]any{"id": "t", "amount": int64(5), "currency": "USD"})
	for i := range trunc {
		add("trunc", good[:len(good)-2], i)
	}
	add("valid", good, 0)
	produceTimedKinds(t, s.src.topic, recs, kinds)
	for id, k := range kinds {
		switch k {
		case "v1":
			f.v1 = append(f.v1, id)
		case "garbage":
			f.garbage = append(f.garbage, id)
		case "trunc":
			f.trunc = append(f.trunc, id)
		default:
			f.valid = id
		}
	}
	sort.Strings(f.v1)
	sort.Strings(f.garbage)
	sort.Strings(f.trunc)
	r := startRelay(t, "before-fix", s.env(uniq(t, "txn-a")))
	waitSettled(t, s, 90*time.Second)
	r.stop()
	if got := byState(ledgerOf(t, s)); got[ledger.Open] != v1+garbage+trunc {
		t.Fatalf("ledger before replay: %v, want %d open", got, v1+garbage+trunc)
	}
	return f
}

// produceTimedKinds writes recs and fills id → kind (the key's prefix).
func produceTimedKinds(t *testing.T, topic string, recs []timedRec, kinds map[string]string) {
	t.Helper()
	msgs := make([]*kafka.Message, len(recs))
	for i, r := range recs {
		kind, _, _ := strings.Cut(string(r.key), "-")
		msgs[i] = &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny}, Key: r.key, Value: r.value, Timestamp: r.ts, Opaque: kind}
	}
	for _, m := range deliver(t, msgs) {
		kinds[envelope.ID(topic, m.TopicPartition.Partition, int64(m.TopicPartition.Offset))] = m.Opaque.(string)
	}
}

// fixed is the environment after the fix: v1 is accepted (and upcast).
func (f *quarantineFixture) fixed() []string {
	return []string{"RELAY_SCHEMA_ACCEPT", "1-3"}
}

// startFixed starts relay with the fix.
func (f *quarantineFixture) startFixed(t *testing.T, extra ...string) *relay {
	t.Helper()
	return startRelay(t, "fixed", f.s.env(uniq(t, "txn-b"), append(f.fixed(), extra...)...))
}

// allTopics are every topic relay or the commands may write.
func (f *quarantineFixture) allTopics() []string {
	return append([]string{f.s.output, f.s.quarantine, f.s.rejected, f.s.replayTopic(), f.s.stateTopic()}, f.s.tiers...)
}

// freeAddr is a free local TCP address.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}
