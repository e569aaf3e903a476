package main

import (
	"strings"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// scriptedWatermarks answers each partition's queries with errs in turn,
// then with its high watermark.
type scriptedWatermarks struct {
	errs  []kafka.ErrorCode
	calls map[int32]int
}

func (s *scriptedWatermarks) QueryWatermarkOffsets(_ string, p int32, _ int) (int64, int64, error) {
	n := s.calls[p]
	s.calls[p]++
	if n < len(s.errs) {
		return 0, 0, kafka.NewError(s.errs[n], s.errs[n].String(), false)
	}
	return 0, int64(100 + p), nil
}

// TestEndOffsetsRidesOutTransientBrokerErrors: right after topics are
// created a fresh broker answers "not leader" for a while; the demo waits
// that out instead of failing, and still stops at once on a real error.
func TestEndOffsetsRidesOutTransientBrokerErrors(t *testing.T) {
	w := &scriptedWatermarks{errs: []kafka.ErrorCode{kafka.ErrNotLeaderForPartition, kafka.ErrLeaderNotAvailable}, calls: map[int32]int{}}
	got, err := endOffsets(w, "orders.valid", 2)
	if err != nil {
		t.Fatalf("transient errors ended the demo: %v", err)
	}
	if got[0] != 100 || got[1] != 101 || w.calls[0] != 3 || w.calls[1] != 3 {
		t.Errorf("offsets %v after %v calls", got, w.calls)
	}
	w = &scriptedWatermarks{errs: []kafka.ErrorCode{kafka.ErrTopicAuthorizationFailed}, calls: map[int32]int{}}
	if _, err := endOffsets(w, "orders.valid", 2); err == nil || !strings.Contains(err.Error(), "orders.valid[0]") || w.calls[0] != 1 {
		t.Errorf("authorization failure: %v after %d calls; want it at once, naming the partition", err, w.calls[0])
	}
}
