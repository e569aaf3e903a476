package audit

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"relay/internal/config"
	"relay/internal/ledger"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

func slotOf(outs, rejs, quars int, extra slot) slot {
	s := present | extra
	for range outs {
		s.add(outShift)
	}
	for range rejs {
		s.add(rejShift)
	}
	for range quars {
		s.add(quarShift)
	}
	return s
}

// withLedger gives s the ledger state of a failure whose changes were
// events, in order: the last one's, at its replay count.
func withLedger(s slot, events ...ledger.State) slot {
	if n := len(events); n > 0 {
		s.ledgered(events[n-1], (n-1)/2)
	}
	return s
}

// Every combination the scan can see, and its verdict.
func TestJudge(t *testing.T) {
	cases := []struct {
		name              string
		s                 slot
		consumed, deleted bool
		want              Verdict
	}{
		{"no record (aborted, marker)", 0, true, false, Gone},
		{"one output", slotOf(1, 0, 0, 0), true, false, Processed},
		{"one rejected", slotOf(0, 1, 0, 0), true, false, Rejected},
		{"quarantined, no ledger entry", slotOf(0, 0, 1, 0), true, false, Quarantined},
		{"quarantined open", withLedger(slotOf(0, 0, 1, 0), ledger.Open), true, false, Quarantined},
		{"quarantine record deleted, ledger open", withLedger(slotOf(0, 0, 0, 0), ledger.Open), true, true, Unverifiable},
		{"resolved by a replay's output", withLedger(slotOf(1, 0, 1, 0), ledger.Open, ledger.Replaying, ledger.Resolved), true, false, Quarantined},
		{"resolved, replay rejected", withLedger(slotOf(0, 1, 1, 0), ledger.Open, ledger.Replaying, ledger.Resolved), true, false, Quarantined},
		{"resolved, output missing", withLedger(slotOf(0, 0, 1, 0), ledger.Open, ledger.Replaying, ledger.Resolved), true, false, Lost},
		{"resolved, output may be deleted", withLedger(slotOf(0, 0, 1, 0), ledger.Open, ledger.Replaying, ledger.Resolved), true, true, Unverifiable},
		{"discarded and output", withLedger(slotOf(1, 0, 1, 0), ledger.Open, ledger.Discarded), true, false, Duplicated},
		{"failed again twice", withLedger(slotOf(0, 0, 2, 0), ledger.Open, ledger.Replaying, ledger.FailedAgain), true, false, Quarantined},
		{"quarantined twice, ledger open", withLedger(slotOf(0, 0, 2, 0), ledger.Open), true, false, Duplicated},
		{"quarantined twice, no ledger entry (before the ledger)", slotOf(0, 0, 2, 0), true, false, Quarantined},
		{"failed again, then discarded", withLedger(slotOf(0, 0, 2, 0), ledger.Open, ledger.Replaying, ledger.FailedAgain, ledger.Discarded), true, false, Quarantined},
		{"two outputs", slotOf(2, 0, 0, 0), true, false, Duplicated},
		{"three outputs", slotOf(3, 0, 0, 0), true, false, Duplicated},
		{"output and rejected", slotOf(1, 1, 0, 0), true, false, Duplicated},
		{"two rejected", slotOf(0, 2, 0, 0), true, false, Duplicated},
		{"not consumed", slotOf(0, 0, 0, 0), false, false, NotConsumed},
		{"not consumed, partial outputs", slotOf(1, 0, 0, 0), false, false, NotConsumed},
		{"copy waits in a tier", slotOf(0, 0, 0, tierFlight), true, false, InTier},
		{"copy replaying", withLedger(slotOf(0, 0, 1, replFlight), ledger.Open, ledger.Replaying), true, false, InReplay},
		{"nothing anywhere", slotOf(0, 0, 0, 0), true, false, Lost},
		{"nothing, derived records deleted", slotOf(0, 0, 0, 0), true, true, Unverifiable},
		{"output, and a tier copy consumed after the cut", slotOf(1, 0, 0, tierFlight), true, false, InTier},
		{"two outputs, a replay copy in flight", withLedger(slotOf(2, 0, 1, replFlight), ledger.Open, ledger.Replaying), true, false, Duplicated},
		{"output and rejected, a tier copy in flight", slotOf(1, 1, 0, tierFlight), true, false, Duplicated},
		{"ledger open, quarantine record gone, nothing deleted", withLedger(slotOf(0, 0, 0, 0), ledger.Open), true, false, Lost},
		{"ledger failed-again, quarantine records gone", withLedger(slotOf(0, 0, 0, 0), ledger.Open, ledger.Replaying, ledger.FailedAgain), true, false, Lost},
		{"ledger discarded, no quarantine record (a discard alone)", withLedger(slotOf(0, 0, 0, 0), ledger.Open, ledger.Discarded), true, false, Lost},
		{"ledger discarded, the quarantine record deleted", withLedger(slotOf(0, 0, 0, 0), ledger.Open, ledger.Discarded), true, true, Unverifiable},
		{"discarded with its quarantine record", withLedger(slotOf(0, 0, 1, 0), ledger.Open, ledger.Discarded), true, false, Quarantined},
		{"ledger replaying, the copy consumed, nothing after it", withLedger(slotOf(0, 0, 1, 0), ledger.Open, ledger.Replaying), true, false, Lost},
		{"ledger replaying, the copy in a tier", withLedger(slotOf(0, 0, 1, tierFlight), ledger.Open, ledger.Replaying), true, false, InTier},
		{"ledger replaying, no copy, end states may be deleted", withLedger(slotOf(0, 0, 1, 0), ledger.Open, ledger.Replaying), true, true, Unverifiable},
	}
	for _, c := range cases {
		if got, why := judge(c.s, c.consumed, false, c.deleted, false); got != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, got, why, c.want)
		}
	}
}

// A record the commit's parked set holds is in flight, even with one end
// state: relay may have handled it at its key's turn after the cut. Two
// end states are a duplicate.
func TestJudgeParked(t *testing.T) {
	cases := []struct {
		name string
		s    slot
		want Verdict
	}{
		{"parked, nothing written", slotOf(0, 0, 0, 0), Parked},
		{"parked and output since", slotOf(1, 0, 0, 0), Parked},
		{"parked and rejected since", slotOf(0, 1, 0, 0), Parked},
		{"parked, output twice", slotOf(2, 0, 0, 0), Duplicated},
		{"parked, output and rejected", slotOf(1, 1, 0, 0), Duplicated},
	}
	for _, c := range cases {
		for _, consumed := range []bool{true, false} {
			if got, why := judge(c.s, consumed, true, false, false); got != c.want {
				t.Errorf("%s (consumed %v): %s (%s), want %s", c.name, consumed, got, why, c.want)
			}
		}
	}
}

// Regression (found by mutation testing): a parked record's turn after the cut writes one end state — an
// output, a rejected record or a quarantine record — never two. judge's
// "parked && outs+rejs > 1" leaves the quarantine out: a parked record
// with an output and an open quarantine is judged parked (in flight,
// clean), though the same record unparked is a duplicate. Only a replay
// the ledger says resolved its quarantine with may add the output.
func TestJudgeParkedQuarantinedAndOutput(t *testing.T) {
	if got, why := judge(withLedger(slotOf(1, 0, 1, 0), ledger.Open), true, false, false, false); got != Duplicated {
		t.Fatalf("unparked, output and quarantined: %s (%s), want duplicated", got, why)
	}
	for _, consumed := range []bool{true, false} {
		if got, why := judge(withLedger(slotOf(1, 0, 1, 0), ledger.Open), consumed, true, false, false); got != Duplicated {
			t.Errorf("parked (consumed %v), output and quarantined (open): %s (%s), want duplicated", consumed, got, why)
		}
		if got, why := judge(slotOf(0, 1, 1, 0), consumed, true, false, false); got != Duplicated {
			t.Errorf("parked (consumed %v), rejected and quarantined: %s (%s), want duplicated", consumed, got, why)
		}
	}
}

// An offset without a committed source record (an aborted record, a
// transaction marker, or a record compaction removed) that relay's
// records name.
func TestJudgeOffsetsWithoutASourceRecord(t *testing.T) {
	cases := []struct {
		name string
		s    slot
		gaps bool
		want Verdict
	}{
		{"aborted record or marker", 0, false, Gone},
		{"a gap in a compacted source", 0, true, Unverifiable},
		{"an output names an aborted record", slotOf(1, 0, 0, 0) &^ present, false, Phantom},
		{"a quarantine record names a marker", slotOf(0, 0, 1, 0) &^ present, false, Phantom},
		{"a ledger entry names a marker", withLedger(0, ledger.Open), false, Phantom},
		{"a tier copy names a marker", tierFlight, false, Phantom},
		{"an output names a compacted-away record", slotOf(1, 0, 0, 0) &^ present, true, Unverifiable},
	}
	for _, c := range cases {
		for _, consumed := range []bool{true, false} {
			if got, why := judge(c.s, consumed, false, false, c.gaps); got != c.want {
				t.Errorf("%s (consumed %v): %s (%s), want %s", c.name, consumed, got, why, c.want)
			}
		}
	}
}

// The audit's ledger state of a failure is ledger.Fold's, whatever order
// compaction left the changes in: a replay's later count wins, a
// duplicate note settles a replaying failure as the copy's state, a
// discard raced by a replay that failed again stays discarded.
func TestLedgerStateIsTheFolds(t *testing.T) {
	ev := func(off int64, st ledger.State, count int, dup bool) *ledger.Event {
		e := &ledger.Event{ID: fmt.Sprintf("orders/0/%d", off), State: st, ReplayCount: count,
			Source: ledger.Source{Topic: "orders", Partition: 0, Offset: off}, At: time.Unix(int64(count)*10+int64(len(st)), 0)}
		if dup {
			e.Outcome = ledger.OutcomeDuplicate
		}
		return e
	}
	pt := &part{p: 0, base: 0, slots: make([]slot, 4)}
	s := &scan{source: "orders", parts: map[int32]*part{0: pt}, batch: map[int32]*part{0: pt}}
	for _, e := range []*ledger.Event{
		ev(0, ledger.Resolved, 1, false), ev(0, ledger.Open, 0, false), ev(0, ledger.Replaying, 1, false),
		ev(1, ledger.Open, 0, false), ev(1, ledger.Replaying, 1, false), ev(1, ledger.Resolved, 1, true),
		ev(2, ledger.Open, 0, false), ev(2, ledger.Discarded, 0, false), ev(2, ledger.Replaying, 1, false), ev(2, ledger.FailedAgain, 1, false),
		ev(3, ledger.Open, 0, false), ev(3, ledger.Replaying, 1, false), ev(3, ledger.FailedAgain, 1, false), ev(3, ledger.Replaying, 2, false),
	} {
		s.ledgerRecord(msg("_relay.relay.state", 0, []byte(e.Key()), e.Value()))
	}
	s.foldLedger()
	for off, want := range []ledger.State{ledger.Resolved, ledger.Resolved, ledger.Discarded, ledger.Replaying} {
		if got := s.parts[0].slots[off].state(); got != want {
			t.Errorf("offset %d: %q, want %q", off, got, want)
		}
	}
	sl := s.parts[0].slots[2]
	sl.add(outShift)
	if sl.count(outShift) != 1 || sl.state() != ledger.Discarded {
		t.Fatal("counts and the ledger state overlap in the slot")
	}
}

func TestParseID(t *testing.T) {
	for _, c := range []struct {
		id    string
		topic string
		p     int32
		off   int64
		ok    bool
	}{
		{"orders/3/42", "orders", 3, 42, true},
		{"a.b-c_d/0/0", "a.b-c_d", 0, 0, true},
		{"orders/3", "", 0, 0, false},
		{"/3/4", "", 0, 0, false},
		{"orders/x/4", "", 0, 0, false},
		{"", "", 0, 0, false},
	} {
		topic, p, off, err := parseID(c.id)
		if (err == nil) != c.ok || topic != c.topic || p != c.p || off != c.off {
			t.Errorf("parseID(%q) = %q %d %d %v", c.id, topic, p, off, err)
		}
	}
}

// The tiers the audit reads are relay's own: today's, and retired ones
// found as relay run finds them, whatever the ordering; never another of
// relay's topics, nor a name that only looks like a tier.
func TestTierTopics(t *testing.T) {
	md := &kafka.Metadata{Topics: map[string]kafka.TopicMetadata{}}
	for _, n := range []string{"orders", "orders.valid", "orders.retry.2s", "orders.retry.30s", "orders.retry.soon", "orders.retry.1h",
		"pay", "pay.retry.1h", "orders.quarantine", "orders.replay", "orders.retry"} {
		md.Topics[n] = kafka.TopicMetadata{Topic: n}
	}
	for _, c := range []struct {
		name string
		vars map[string]string
		want string
	}{
		{"tiers", map[string]string{"RELAY_RETRY_TIERS": "2s"}, "[orders.retry.2s orders.retry.1h orders.retry.30s]"},
		{"partition ordering: every tier topic is retired", map[string]string{"RELAY_RETRY_TIERS": "2s", "RELAY_ORDERING": "partition"},
			"[orders.retry.1h orders.retry.2s orders.retry.30s]"},
		{"a template without {delay}", map[string]string{"RELAY_RETRY_TIERS": "2s", "RELAY_RETRY_TOPIC": "{topic}.retry"}, "[orders.retry]"},
		{"an output named like a tier", map[string]string{"RELAY_RETRY_TIERS": "2s", "RELAY_OUTPUT_TOPIC": "{topic}.retry.1h"},
			"[orders.retry.2s orders.retry.30s]"},
	} {
		if got := fmt.Sprint(tierTopics(configOf(t, c.vars), "orders", md)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func configOf(t *testing.T, vars map[string]string) *config.Config {
	t.Helper()
	m := map[string]string{"RELAY_SOURCE_TOPICS": "orders,pay", "RELAY_TRANSACTIONAL_ID": "relay-0", "RELAY_KAFKA_BOOTSTRAP_SERVERS": "x:9092"}
	for k, v := range vars {
		m[k] = v
	}
	var environ []string
	for k, v := range m {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := m[k]; return v, ok }, environ)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Partitions are audited in batches whose state fits the memory bound, in
// order; a partition whose window alone does not fit names the flag.
func TestBatchesFitTheMemoryBound(t *testing.T) {
	s := &scan{source: "orders", o: &Options{MaxMemory: 100 * perOffset}, parts: map[int32]*part{
		0: {p: 0, base: 0, hi: 60}, 1: {p: 1, base: 10, hi: 50}, 2: {p: 2, base: 0, hi: 100}, 3: {p: 3, base: 5, hi: 5},
	}}
	got, err := s.batches()
	if err != nil || fmt.Sprint(got) != "[[0 1] [2 3]]" {
		t.Fatalf("batches %v, %v; want [[0 1] [2 3]]", got, err)
	}
	s.parts[4] = &part{p: 4, base: 0, hi: 101}
	if _, err := s.batches(); err == nil || !strings.Contains(err.Error(), "--max-memory") || !strings.Contains(err.Error(), "orders[4]") {
		t.Fatalf("a partition over the bound: %v; want an error naming it and --max-memory", err)
	}
}

// A batch's failures are bounded by --max-memory too: one past the bound
// is no verdict naming the flag, however many changes each failure has
// (a failure's second change takes no more room).
func TestFailuresBeyondTheBudgetAreNoVerdict(t *testing.T) {
	pt := &part{p: 0, base: 0, slots: make([]slot, 4)}
	s := &scan{source: "orders", o: &Options{MaxMemory: 2 * perFailure}, parts: map[int32]*part{0: pt}, batch: map[int32]*part{0: pt}}
	change := func(off int64, st ledger.State) {
		e := &ledger.Event{ID: fmt.Sprintf("orders/0/%d", off), State: st, Source: ledger.Source{Topic: "orders", Partition: 0, Offset: off}, At: time.Unix(off, 0)}
		s.ledgerRecord(msg("_relay.relay.state", 0, []byte(e.Key()), e.Value()))
	}
	change(0, ledger.Open)
	change(1, ledger.Open)
	change(0, ledger.Discarded)
	if err := s.failuresFit(); err != nil || len(s.ledger) != 2 {
		t.Fatalf("two failures in a budget of two: %v (%d held)", err, len(s.ledger))
	}
	change(2, ledger.Open)
	if err := s.failuresFit(); err == nil || !strings.Contains(err.Error(), "--max-memory") || len(s.ledger) != 2 {
		t.Fatalf("a third failure in a budget of two: %v (%d held); want no verdict naming --max-memory", err, len(s.ledger))
	}
}
