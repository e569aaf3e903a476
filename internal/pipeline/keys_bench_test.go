package pipeline

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkBlockedKeysMemory reports the heap held by 10,000 blocked keys
// (key ordering's only per-key memory), in bytes per key and MiB in all.
func BenchmarkBlockedKeysMemory(b *testing.B) {
	const n = 10_000
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		k := &KeyOrdering{StateTopic: "_relay.relay.state"}
		for i := range n {
			sk := stateKey("orders", int32(i%12), []byte(fmt.Sprintf("customer-%08d", i)))
			k.put(sk, int32(i%12), &keyState{Next: 0, Tail: 3, Tier: 1, NotBefore: time.Now(), Head: fmt.Sprintf("orders/%d/%d", i%12, 1000000+i)})
		}
		k.commit()
		runtime.GC()
		runtime.ReadMemStats(&after)
		if k.Blocked() != n {
			b.Fatal("not all keys blocked")
		}
		held := float64(after.HeapAlloc - before.HeapAlloc)
		b.ReportMetric(held/n, "B/key")
		b.ReportMetric(held/(1<<20), "MiB/10k-keys")
		runtime.KeepAlive(k)
	}
}
