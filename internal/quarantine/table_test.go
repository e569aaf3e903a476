package quarantine

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"relay/internal/cli"
)

// The streamed list prints what the list of items printed: the table,
// the JSON array and JSON Lines, byte for byte, whatever is selected.
func TestStreamedListsAsWritten(t *testing.T) {
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 11))
		events, records := randomQuarantine(r)
		x := NewIndex()
		x.mu.Lock()
		for i, e := range events {
			x.apply(e, loc{0, int64(i)})
		}
		x.mu.Unlock()
		for _, m := range records {
			x.addRecord(m, *m.TopicPartition.Topic, "orders")
		}
		for _, f := range []*Filter{{Partition: -1}, {Partition: 1}, {Partition: -1, Codes: []string{"HOOK_TIMEOUT"}}} {
			items := x.Items(f, now)
			var want, got bytes.Buffer
			WriteTable(&want, items, now)
			if err := x.StreamTable(&got, f, now); err != nil || got.String() != want.String() {
				t.Fatalf("seed %d table:\n%s\nwant\n%s", seed, got.String(), want.String())
			}
			want.Reset()
			got.Reset()
			_ = cli.WriteJSON(&want, items)
			if err := x.StreamJSON(&got, f, now, false); err != nil || got.String() != want.String() {
				t.Fatalf("seed %d json:\n%s\nwant\n%s", seed, got.String(), want.String())
			}
			want.Reset()
			got.Reset()
			WriteJSONLines(&want, items)
			if err := x.StreamJSON(&got, f, now, true); err != nil || got.String() != want.String() {
				t.Fatalf("seed %d json lines:\n%s\nwant\n%s", seed, got.String(), want.String())
			}
		}
	}
}
