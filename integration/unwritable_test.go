package integration

import (
	"strconv"
	"testing"
	"time"
)

// TestClusterUnwritableOutputBlocksTheTransactionalID pins what relay does
// when an output partition exists but takes no writes: its topic asks for
// three in-sync replicas and a broker is down, so every write is refused
// with NOT_ENOUGH_REPLICAS (librdkafka retries it until the record
// expires). The commit times out, and the coordinator cannot abort that
// transaction either: its abort markers need the same in-sync replicas
// (the brokers retry them). Kafka then refuses every InitTransactions of
// the transactional id with CONCURRENT_TRANSACTIONS, so nothing commits
// under it, whichever source — no client can change that. relay must say
// so in plain words, lose nothing, not exit, and resume by itself once the
// partition takes writes again: every record of both sources output exactly
// once.
func TestClusterUnwritableOutputBlocksTheTransactionalID(t *testing.T) {
	needCluster(t)
	const partitions = 2
	a := newScenario(t, partitions)
	b := newScenarioOn(t, uniq(t, "srcb"), a.group, partitions)
	a.src.produce(t, 200)
	b.src.produce(t, 200)
	r := startRelay(t, "relay", a.env(uniq(t, "txn"),
		"RELAY_SOURCE_TOPICS", a.src.topic+","+b.src.topic,
		"RELAY_OP_TIMEOUT", "2s"))
	r.waitLog("partitions assigned", 60*time.Second)
	waitCaughtUp(t, a.group, a.src.topic, partitions, time.Minute)
	waitCaughtUp(t, b.group, b.src.topic, partitions, time.Minute)

	setTopicConfig(t, a.output, "min.insync.replicas", strconv.Itoa(replicationFactor()))
	cluster(t, "stop-node", "3")
	t.Cleanup(func() { cluster(t, "start-node", "3") })
	a.src.produce(t, 200)
	b.src.produce(t, 200)
	r.waitLog("cannot complete this instance's previous transaction", 2*time.Minute)

	cluster(t, "start-node", "3")
	assertExactlyOnce(t, a.src, a.output, a.group, partitions)
	assertExactlyOnce(t, b.src, b.output, b.group, partitions)
	if r.exited() {
		t.Fatalf("relay exited (code %d); it must wait for the coordinator:\n%s", r.cmd.ProcessState.ExitCode(), tail(r.stderr.String(), 20))
	}
	r.stop()
}
