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
