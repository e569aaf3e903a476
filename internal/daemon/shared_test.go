package daemon

import (
	"maps"
	"testing"

	"relay/internal/config"
)

// The tiers are announced as written: two spellings of one delay name
// different tier topics (orders.retry.5m, orders.retry.300s), so a change
// from one to the other is one the members must not roll.
func TestSharedTiersAsWritten(t *testing.T) {
	a := &config.Config{Ordering: "key", RetryTopic: "{topic}.retry.{delay}", RetryTiers: []config.Tier{{Delay: 30e9, Label: "30s"}, {Delay: 300e9, Label: "5m"}}}
	b := &config.Config{Ordering: "key", RetryTopic: "{topic}.retry.{delay}", RetryTiers: []config.Tier{{Delay: 30e9, Label: "30s"}, {Delay: 300e9, Label: "300s"}}}
	if maps.Equal(shared(a), shared(b)) {
		t.Errorf("tiers 30s,5m and 30s,300s (topics *.retry.5m vs *.retry.300s) announce the same settings %v", shared(a))
	}
}
