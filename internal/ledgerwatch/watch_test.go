package ledgerwatch

import (
	"fmt"
	"slices"
	"testing"

	"relay/internal/pipeline"
	"relay/internal/txn"
)

// Only source partitions count: tier and replay partitions of the same
// number are their sources' failures, and a state partition is read again
// when the set of sources it holds for this instance changes.
func TestLedgerWatchFollowsOwnedSources(t *testing.T) {
	table := pipeline.NewTable([]pipeline.Routes{
		{Source: "a", Replay: "a.replay", Tiers: []string{"a.retry.30s"}},
		{Source: "b", Replay: "b.replay"},
	})
	before := ownershipOf(table, []txn.TopicPartition{{Topic: "a", Partition: 1}, {Topic: "a.retry.30s", Partition: 1},
		{Topic: "a.replay", Partition: 1}, {Topic: "b", Partition: 0}})
	if fmt.Sprint(before) != "map[0:map[b|0:true] 1:map[a|1:true]]" {
		t.Fatalf("ownership %v", before)
	}
	// b[1] joins a[1] on state partition 1; b[0] goes.
	after := ownershipOf(table, []txn.TopicPartition{{Topic: "a", Partition: 1}, {Topic: "b", Partition: 1}, {Topic: "a", Partition: 2}})
	stop, read := before.diff(after)
	slices.Sort(stop)
	slices.Sort(read)
	if fmt.Sprint(stop) != "[0 1]" || fmt.Sprint(read) != "[1 2]" {
		t.Fatalf("stop %v, read %v; want partition 0 dropped, 1 read again, 2 read", stop, read)
	}
	if stop, read := after.diff(after); len(stop)+len(read) != 0 {
		t.Fatal("no change, nothing to do")
	}
}
