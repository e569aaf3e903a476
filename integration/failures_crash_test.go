package integration

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"relay/internal/envelope"
)

// TestMixedClassesSurviveKills is the whole-run invariant of the failure
// state machine: a random mix of every class, a registry that fails a third
// of its answers, two instances (so partitions move between them) and six
// SIGKILLs, several inside long transactions. After the tiers drain, every
// source record is in exactly one of output, rejected and quarantine, once.
func TestMixedClassesSurviveKills(t *testing.T) {
	const partitions, kills = 3, 6
	o := registerOrders(t)
	proxy := newFaultProxy(t)
	s := newScenario(t, partitions, append(o.env(proxy.url()),
		"RELAY_RULES_FILE", rulesFile(t), "RELAY_RETRY_TIERS", "1s,2s",
		"RELAY_BLOCKING_ATTEMPTS", "1", "RELAY_BLOCKING_BACKOFF", "50ms",
		"RELAY_RETRY_MAX_ATTEMPTS", "4", "RELAY_RETRY_MAX_ELAPSED", "1m",
		// A one-entry cache makes most records look their schema up, so
		// transient failures keep happening.
		"RELAY_SCHEMA_CACHE_SIZE", "1")...)
	proxy.flaky.Store(35)
	batch := func(n int) []rec { return mixedBatch(t, o, n) }
	want := map[string]string{}
	add := func(m map[string]string) {
		for k, v := range m {
			want[k] = v
		}
	}
	ids := [2]string{uniq(t, "txn-a"), uniq(t, "txn-b")}
	start := func(n, i int, long bool) *relay {
		env := s.env(ids[n])
		if long {
			env["RELAY_COMMIT_INTERVAL"] = "1500ms"
		}
		return startRelay(t, fmt.Sprintf("relay-%c-%d", 'a'+n, i), env)
	}
	add(produceRecs(t, s.src.topic, batch(600)))
	rs := [2]*relay{start(0, 0, false), start(1, 0, true)}
	rs[0].waitLog("partitions assigned", 60*time.Second)
	for i := range kills {
		add(produceRecs(t, s.src.topic, batch(300)))
		time.Sleep(jitter(500*time.Millisecond, 2*time.Second))
		n := i % 2
		rs[n].signal(syscall.SIGKILL)
		rs[n].wait(10 * time.Second)
		rs[n] = start(n, i+1, i%3 == 0)
	}
	proxy.flaky.Store(10)
	waitSettled(t, s, 3*time.Minute)
	assertOutcomes(t, s, want)
	hops := 0
	for _, topic := range s.tiers {
		hops += len(readCommitted(t, topic, s.partitions))
	}
	t.Logf("%d tier records over the run", hops)
	if hops < 20 {
		t.Fatalf("only %d tier records: the run did not exercise retries", hops)
	}
	assertAuditClean(t, s) // a second oracle, beside assertOutcomes
	for _, r := range rs {
		r.stop()
	}
}

// TestCrashAfterTierWrite pins a crash after the tier write: relay is killed after it
// produced a record's tier copy but before the transaction committed. No
// tier record of that attempt becomes visible, and after the restart each
// record is in the first tier exactly once.
func TestCrashAfterTierWrite(t *testing.T) {
	o := registerOrders(t)
	proxy := newFaultProxy(t)
	s := newScenario(t, 2, append(o.env(proxy.url()),
		"RELAY_RETRY_TIERS", "3s", "RELAY_BLOCKING_ATTEMPTS", "0",
		"RELAY_RETRY_MAX_ATTEMPTS", "50", "RELAY_RETRY_MAX_ELAPSED", "5m")...)
	txnID := uniq(t, "txn")
	env := s.env(txnID, "RELAY_COMMIT_INTERVAL", "3s")
	r := startRelay(t, "relay-1", env)
	r.waitLog("partitions assigned", 60*time.Second)
	proxy.idsDown.Store(true)
	var recs []rec
	for i := range 30 {
		recs = append(recs, rec{[]byte(fmt.Sprint(i)), o.value(t, 3, map[string]any{"id": fmt.Sprint(i), "amount": int64(i), "currency": "EUR"}), "output"})
	}
	want := produceRecs(t, s.src.topic, recs)
	r.waitLog(`"outcome":"retry"`, 30*time.Second)
	r.signal(syscall.SIGKILL)
	r.wait(10 * time.Second)
	for p, off := range committed(t, s.group, s.src.topic, s.partitions) {
		if off > 0 {
			t.Fatalf("partition %d committed at %d before the kill: the kill did not land inside the transaction", p, off)
		}
	}
	if n := len(readCommitted(t, s.tiers[0], s.partitions)); n != 0 {
		t.Fatalf("%d tier records visible from a transaction that never committed", n)
	}
	r2 := startRelay(t, "relay-2", s.env(txnID))
	waitCaughtUp(t, s.group, s.src.topic, s.partitions, 60*time.Second)
	assertNoOpenTransaction(t, s.tiers[0], s.partitions, 30*time.Second)
	seen := map[string]int{}
	for _, m := range readCommitted(t, s.tiers[0], s.partitions) {
		f, err := envelope.Parse(toEnvelopeHeaders(m.Headers))
		if err != nil {
			t.Fatal(err)
		}
		if f.Attempt == 1 {
			seen[f.ID]++
		}
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("%s is in the first tier %d times from the source, want exactly once", id, seen[id])
		}
	}
	proxy.idsDown.Store(false)
	waitSettled(t, s, 90*time.Second)
	assertOutcomes(t, s, want)
	r2.stop()
}

// mixedBatch makes n records of every class, on 50 keys. Records that need
// the registry may also end as SCHEMA_REGISTRY_UNAVAILABLE_EXHAUSTED when the
// registry keeps failing them.
func mixedBatch(t *testing.T, o *orders, n int) []rec {
	t.Helper()
	const transient = "|quarantine:SCHEMA_REGISTRY_UNAVAILABLE_EXHAUSTED"
	good3 := o.value(t, 3, map[string]any{"id": "g", "amount": int64(1), "currency": "EUR"})
	out := make([]rec, 0, n)
	for i := range n {
		k := []byte(fmt.Sprintf("k%d", rand.IntN(50)))
		amount := int64(rand.IntN(1000))
		switch x := rand.IntN(100); {
		case x < 55:
			out = append(out, rec{k, o.value(t, 3, map[string]any{"id": fmt.Sprint(i), "amount": amount, "currency": "USD"}), "output" + transient})
		case x < 70:
			out = append(out, rec{k, o.value(t, 2, map[string]any{"id": fmt.Sprint(i), "amount": amount}), "output" + transient})
		case x < 80:
			out = append(out, rec{k, o.value(t, 3, map[string]any{"id": fmt.Sprint(i), "amount": -1 - amount, "currency": "EUR"}), "rejected:REJECTED_NEGATIVE_AMOUNT" + transient})
		case x < 87:
			out = append(out, rec{k, o.value(t, 1, map[string]any{"id": fmt.Sprint(i)}), "quarantine:SCHEMA_UNSUPPORTED" + transient})
		case x < 94:
			out = append(out, rec{k, []byte(fmt.Sprintf("garbage %d", i)), "quarantine:WIRE_FORMAT_INVALID"})
		default:
			out = append(out, rec{k, good3[:len(good3)-1-rand.IntN(3)], "quarantine:PAYLOAD_MALFORMED" + transient})
		}
	}
	return out
}

// TestRebalanceMidFailures pins a rebalance mid-failures: records of every class
// while a second instance joins in the middle of the first one's long
// transactions, and the first then leaves: partitions, with records on
// their way through the tiers, move between instances twice. Every record
// still reaches one terminal state, once.
func TestRebalanceMidFailures(t *testing.T) {
	const partitions = 4
	o := registerOrders(t)
	proxy := newFaultProxy(t)
	s := newScenario(t, partitions, append(o.env(proxy.url()),
		"RELAY_RULES_FILE", rulesFile(t), "RELAY_RETRY_TIERS", "1s,2s",
		"RELAY_BLOCKING_ATTEMPTS", "1", "RELAY_BLOCKING_BACKOFF", "50ms",
		"RELAY_RETRY_MAX_ATTEMPTS", "5", "RELAY_RETRY_MAX_ELAPSED", "1m", "RELAY_SCHEMA_CACHE_SIZE", "1")...)
	proxy.flaky.Store(35)
	want := produceRecs(t, s.src.topic, mixedBatch(t, o, 1500))
	a := startRelay(t, "relay-a", s.env(uniq(t, "txn-a"), "RELAY_COMMIT_INTERVAL", "1500ms"))
	a.waitLog("partitions assigned", 60*time.Second)
	time.Sleep(jitter(300*time.Millisecond, 1200*time.Millisecond))
	b := startRelay(t, "relay-b", s.env(uniq(t, "txn-b")))
	b.waitLog("partitions assigned", 60*time.Second)
	for k, v := range produceRecs(t, s.src.topic, mixedBatch(t, o, 500)) {
		want[k] = v
	}
	time.Sleep(jitter(time.Second, 2*time.Second))
	a.stop()
	proxy.flaky.Store(10)
	waitSettled(t, s, 2*time.Minute)
	assertOutcomes(t, s, want)
	if !strings.Contains(b.stderr.String(), "partitions revoked") {
		t.Error("relay-b saw no rebalance: the test did not move partitions")
	}
	b.stop()
}
