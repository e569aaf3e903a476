package integration

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExpiredTransactionIsNotAZombie pins an exit on a fence that no other
// instance caused: relay is frozen (SIGSTOP, as a long GC pause, a starved
// CPU or a suspended VM would) with a transaction open, past
// transaction.timeout.ms; the coordinator aborts the transaction and bumps
// the epoch, and when relay thaws its next call is fenced. relay must start
// a new producer and carry on, exactly once, instead of exiting.
func TestExpiredTransactionIsNotAZombie(t *testing.T) {
	const partitions = 2
	s := newScenario(t, partitions)
	s.src.produce(t, 500)
	r := startRelay(t, "relay", s.env(uniq(t, "txn"),
		"RELAY_KAFKA_TRANSACTION_TIMEOUT_MS", "4000",
		"RELAY_OP_TIMEOUT", "2s",
		"RELAY_COMMIT_INTERVAL", "1s",
		"RELAY_MAX_RECORDS_PER_TXN", "100000",
		// The freeze must cost the transaction, not the membership.
		"RELAY_KAFKA_SESSION_TIMEOUT_MS", "45000",
		"RELAY_KAFKA_HEARTBEAT_INTERVAL_MS", "3000"))
	r.waitLog("partitions assigned", 60*time.Second)
	waitCaughtUp(t, s.group, s.src.topic, partitions, time.Minute)

	// Records keep coming, so a transaction is open when relay freezes.
	producing := s.src.produceInBackground(t, 30, 20, 50*time.Millisecond)
	time.Sleep(600 * time.Millisecond)
	r.signal(syscall.SIGSTOP)
	// Past the timeout, and past the broker's sweep for timed-out
	// transactions (transaction.abort.timed.out.transaction.cleanup.interval.ms, 10s).
	time.Sleep(16 * time.Second)
	r.signal(syscall.SIGCONT)
	producing.Wait()
	s.src.produce(t, 300)
	assertExactlyOnce(t, s.src, s.output, s.group, partitions)
	if r.exited() {
		t.Fatalf("relay exited (code %d) after its expired transaction was fenced; it must recover:\n%s",
			r.cmd.ProcessState.ExitCode(), tail(r.stderr.String(), 15))
	}
	if !strings.Contains(r.stderr.String(), "not by another instance") {
		t.Errorf("relay was not fenced after its transaction expired: the test did not exercise the fence")
	}
	r.stop()
}

// TestFrozenPastSessionResumes pins an exit on a freeze no twin caused:
// one of two instances frozen (SIGSTOP) past session.timeout.ms and
// transaction.timeout.ms loses its partitions to the other, and the
// coordinator aborts its open transaction with an epoch bump. Thawed, it
// exited 1 ("stops rather than fence it back"). As a static member it
// asks the group coordinator, which holds no twin of its
// group.instance.id, and resumes: no exit, exactly once.
func TestFrozenPastSessionResumes(t *testing.T) {
	const partitions = 4
	s := newScenario(t, partitions)
	s.src.produce(t, 500)
	// Long transactions, so one is open when the freeze comes.
	frozen := startRelay(t, "frozen", s.env(uniq(t, "txn-a"), "RELAY_COMMIT_INTERVAL", "2s", "RELAY_MAX_RECORDS_PER_TXN", "100000"))
	other := startRelay(t, "other", s.env(uniq(t, "txn-b")))
	frozen.waitLog("partitions assigned", 60*time.Second)
	other.waitLog("partitions assigned", 60*time.Second)
	waitCaughtUp(t, s.group, s.src.topic, partitions, time.Minute)

	// Records keep coming through the freeze and after it.
	producing := s.src.produceInBackground(t, 120, 8, 150*time.Millisecond)
	time.Sleep(1500 * time.Millisecond)
	frozen.signal(syscall.SIGSTOP)
	// Past the session (6 s), the transaction timeout (10 s) and the
	// broker's sweep for timed-out transactions (10 s).
	time.Sleep(25 * time.Second)
	frozen.signal(syscall.SIGCONT)
	producing.Wait()
	s.src.produce(t, 300)
	assertExactlyOnce(t, s.src, s.output, s.group, partitions)
	for _, r := range []*relay{frozen, other} {
		if r.exited() {
			t.Fatalf("%s exited (code %d) after a freeze no twin caused; it must resume:\n%s",
				r.name, r.cmd.ProcessState.ExitCode(), tail(r.stderr.String(), 20))
		}
	}
	if log := frozen.stderr.String(); !strings.Contains(log, "no other instance holds this group.instance.id") &&
		!strings.Contains(log, "not by another instance") {
		t.Errorf("the thawed instance met no fence: the test did not exercise the verdict:\n%s", tail(log, 20))
	}
	frozen.stop()
	other.stop()
}

// TestFrozenWithATwinStops: while an instance is frozen (SIGSTOP), a twin
// starts with its transactional id and group.instance.id (a rescheduled
// pod whose old process is not dead yet) and takes its partitions. When
// the old process thaws, the group coordinator decides which of the two
// holds the group.instance.id: the latest to join. Thawed within its
// session, the old process's heartbeat is refused (FENCED_INSTANCE_ID)
// and it stops. Thawed past it, librdkafka expires the session first and
// rejoins by itself, and the coordinator gives the id to that join: the
// twin is refused, and it stops. Near the session timeout which comes
// first is a race on the old process's first moments awake, so each case
// asks what must hold either way: exactly one process keeps relaying,
// the other exits non-zero within a bound, naming the shared ids,
// neither fences the other back (the survivor starts at most one new
// producer, the loser none), and exactly once holds.
func TestFrozenWithATwinStops(t *testing.T) {
	for _, tc := range []struct {
		name string
		// thawAfter is how long the old process stays frozen after the
		// twin got its partitions; the session timeout is 6 s.
		thawAfter time.Duration
	}{
		{"within the session", 3 * time.Second},
		{"past the session", 12 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) { frozenWithATwin(t, tc.thawAfter) })
	}
}

func frozenWithATwin(t *testing.T, thawAfter time.Duration) {
	const partitions = 2
	s := newScenario(t, partitions)
	txnID := uniq(t, "txn")
	s.src.produce(t, 500)
	old := startRelay(t, "old", s.env(txnID))
	old.waitLog("partitions assigned", 60*time.Second)
	waitCaughtUp(t, s.group, s.src.topic, partitions, time.Minute)

	producing := s.src.produceInBackground(t, 60, 20, 100*time.Millisecond)
	time.Sleep(time.Second)
	old.signal(syscall.SIGSTOP)
	twin := startRelay(t, "twin", s.env(txnID))
	twin.waitLog("partitions assigned", 90*time.Second)
	time.Sleep(thawAfter)
	old.signal(syscall.SIGCONT)

	// The loser's bound: the wait for the coordinator's verdict
	// (session.timeout.ms + RELAY_OP_TIMEOUT), the watch of the group
	// (the same + 2 s), and a close of each client.
	loser, survivor := firstToExit(t, 90*time.Second, old, twin)
	if code := loser.cmd.ProcessState.ExitCode(); code == 0 {
		t.Errorf("%s exited 0 beside its twin; want non-zero", loser.name)
	}
	if log := loser.stderr.String(); !strings.Contains(log, "shared by two instances") {
		t.Errorf("%s did not say another instance holds its ids:\n%s", loser.name, tail(log, 15))
	}
	producing.Wait()
	s.src.produce(t, 300)
	assertExactlyOnce(t, s.src, s.output, s.group, partitions)
	if survivor.exited() {
		t.Fatalf("both processes exited; %s (code %d) must keep relaying:\n%s",
			survivor.name, survivor.cmd.ProcessState.ExitCode(), tail(survivor.stderr.String(), 20))
	}
	// No ping-pong: each new producer fences the other process's.
	if n := strings.Count(loser.stderr.String(), newProducer); n != 0 {
		t.Errorf("%s started %d new producers before it stopped, fencing its twin; want none", loser.name, n)
	}
	if n := strings.Count(survivor.stderr.String(), newProducer); n > 1 {
		t.Errorf("%s started %d new producers; want at most one (the fence of the thaw)", survivor.name, n)
	}
	t.Logf("the %s process kept relaying; the %s one stopped", survivor.name, loser.name)
	survivor.stop()
}

// newProducer is what relay logs when it recovers from a fence with a
// new producer, which fences the previous epoch's.
const newProducer = "starting a new producer and rewinding"

// firstToExit waits at most d for one of a and b to exit, and returns it
// first.
func firstToExit(t *testing.T, d time.Duration, a, b *relay) (exited, running *relay) {
	t.Helper()
	select {
	case <-a.done:
		return a, b
	case <-b.done:
		return b, a
	case <-time.After(d):
		a.dumpGoroutines()
		b.dumpGoroutines()
		t.Fatalf("neither %s nor %s exited within %s (their goroutines, dumped on SIGQUIT, end their logs)", a.name, b.name, d)
		return nil, nil
	}
}
