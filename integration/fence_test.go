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

// TestFrozenWithATwinStops: while an instance is frozen (about 5 s,
// within its session), a twin starts with its transactional id (a
// rescheduled pod whose old process is not dead yet) and takes its
// partitions. Thawed, the old process must stop — the group coordinator
// refuses its group.instance.id, and the group shows the twin holding it
// — rather than fence the live twin's producer back; the twin keeps
// relaying, exactly once. (Frozen past its session, librdkafka rejoins by
// itself on thaw, and the coordinator gives the id to the thawed process:
// then the twin is the one refused, and it stops. One process runs either
// way; see docs/CONFIGURATION.md.)
func TestFrozenWithATwinStops(t *testing.T) {
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
	time.Sleep(5 * time.Second)
	old.signal(syscall.SIGCONT)
	if code := old.wait(90 * time.Second); code == 0 {
		t.Fatalf("the thawed process exited 0 beside its twin; want non-zero")
	}
	// Thawed, two refusals race: the group coordinator's of the consumer's
	// heartbeat (FENCED_INSTANCE_ID: relay finds the twin holding the id
	// in the group) and the transaction coordinator's of the producer's
	// next call (the twin's InitTransactions bumped the epoch of a
	// transaction too young for the coordinator to have aborted it). Each
	// says another instance holds the ids, and each stops relay.
	if log := old.stderr.String(); !strings.Contains(log, "shared by two instances") {
		t.Errorf("the thawed process did not say another instance holds its ids:\n%s", tail(log, 15))
	}
	producing.Wait()
	s.src.produce(t, 300)
	assertExactlyOnce(t, s.src, s.output, s.group, partitions)
	if twin.exited() {
		t.Fatalf("the twin exited (code %d); the thawed process must not fence it:\n%s",
			twin.cmd.ProcessState.ExitCode(), tail(twin.stderr.String(), 20))
	}
	twin.stop()
}
