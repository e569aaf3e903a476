package tiers

import (
	"errors"
	"testing"
	"time"
)

var policy = Policy{
	BlockingAttempts: 2, BlockingBackoff: 200 * time.Millisecond, BlockingMaxWait: time.Second,
	Tiers: []time.Duration{30 * time.Second, 5 * time.Minute}, MaxAttempts: 5, MaxElapsed: time.Hour, UnknownAttempts: 2,
}

func TestEveryCauseHasARow(t *testing.T) {
	for c := CauseWireFormat; c <= CauseUnknown; c++ {
		r, ok := table[c]
		if !ok || r.class == 0 {
			t.Errorf("cause %d has no row", c)
		}
	}
}

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 7, 31, 9, 10, 0, 0, time.UTC)
	unavailable := Failf(CauseRegistryUnavailable, "dial tcp: refused")
	cases := []struct {
		name string
		err  error
		s    State
		now  time.Time
		want Decision
	}{
		{"malformed quarantines at once", Failf(CauseWireFormat, "short"), State{Attempt: 1, AtSource: true, FirstFailedAt: t0}, t0,
			Decision{Kind: Quarantine, Class: Invalid, Code: CodeWireFormatInvalid}},
		{"unsupported quarantines at once", Failf(CauseSchemaUnsupported, "v2"), State{Attempt: 1, AtSource: true, FirstFailedAt: t0}, t0,
			Decision{Kind: Quarantine, Class: Invalid, Code: CodeSchemaUnsupported}},
		{"rule rejects with its name", &Error{Cause: CauseRuleReject, Name: "NEGATIVE_AMOUNT"}, State{Attempt: 1, AtSource: true, FirstFailedAt: t0}, t0,
			Decision{Kind: Reject, Class: Rejected, Code: "REJECTED_NEGATIVE_AMOUNT"}},
		{"hook 422 without code", &Error{Cause: CauseHookReject}, State{Attempt: 1, AtSource: true, FirstFailedAt: t0}, t0,
			Decision{Kind: Reject, Class: Rejected, Code: "REJECTED_HOOK"}},
		{"rule quarantine", &Error{Cause: CauseRuleQuarantine, Name: "bad tenant"}, State{Attempt: 1, AtSource: true, FirstFailedAt: t0}, t0,
			Decision{Kind: Quarantine, Class: Invalid, Code: "RULE_BAD_TENANT"}},
		{"transient first retries in place", unavailable, State{Attempt: 1, AtSource: true, FirstFailedAt: t0}, t0,
			Decision{Kind: RetryInPlace, Class: Transient, Code: CodeSchemaRegistryUnavailable, Delay: 200 * time.Millisecond}},
		{"blocking budget spent goes to tier 0", unavailable, State{Attempt: 3, AtSource: true, InPlace: 2, FirstFailedAt: t0}, t0.Add(time.Second),
			Decision{Kind: RetryTier, Class: Transient, Code: CodeSchemaRegistryUnavailable, Delay: 30 * time.Second, Tier: 0}},
		{"tier 0 goes to tier 1", unavailable, State{Attempt: 4, Tier: 0, FirstFailedAt: t0}, t0.Add(31 * time.Second),
			Decision{Kind: RetryTier, Class: Transient, Code: CodeSchemaRegistryUnavailable, Delay: 5 * time.Minute, Tier: 1}},
		{"attempts exhausted", unavailable, State{Attempt: 5, Tier: 1, FirstFailedAt: t0}, t0.Add(6 * time.Minute),
			Decision{Kind: Quarantine, Class: Transient, Code: "SCHEMA_REGISTRY_UNAVAILABLE_EXHAUSTED"}},
		{"elapsed budget would be passed", unavailable, State{Attempt: 4, Tier: 0, FirstFailedAt: t0}, t0.Add(58 * time.Minute),
			Decision{Kind: Quarantine, Class: Transient, Code: "SCHEMA_REGISTRY_UNAVAILABLE_EXHAUSTED"}},
		// Regression: a Retry-After longer than the tier's delay made the
		// record due after it, and it held every record behind it in the
		// tier partition. It picks the first tier that is long enough.
		{"retry-after longer than in-place cap picks a tier long enough", &Error{Cause: CauseHookRateLimited, RetryAfter: 45 * time.Second}, State{Attempt: 1, AtSource: true, FirstFailedAt: t0}, t0,
			Decision{Kind: RetryTier, Class: Transient, Code: CodeHookRateLimited, Delay: 5 * time.Minute, Tier: 1}},
		{"retry-after within the tier's delay keeps the tier", &Error{Cause: CauseHookRateLimited, RetryAfter: 20 * time.Second}, State{Attempt: 1, AtSource: true, FirstFailedAt: t0}, t0,
			Decision{Kind: RetryTier, Class: Transient, Code: CodeHookRateLimited, Delay: 30 * time.Second}},
		{"retry-after past the last tier is due after the last tier's delay", &Error{Cause: CauseHookRateLimited, RetryAfter: 20 * time.Minute}, State{Attempt: 2, Tier: 0, FirstFailedAt: t0}, t0.Add(time.Minute),
			Decision{Kind: RetryTier, Class: Transient, Code: CodeHookRateLimited, Delay: 5 * time.Minute, Tier: 1}},
		{"retry-after within cap is honoured in place", &Error{Cause: CauseHookRateLimited, RetryAfter: 700 * time.Millisecond}, State{Attempt: 1, AtSource: true, FirstFailedAt: t0}, t0,
			Decision{Kind: RetryInPlace, Class: Transient, Code: CodeHookRateLimited, Delay: 700 * time.Millisecond}},
		{"unknown error retried once", errors.New("boom"), State{Attempt: 1, AtSource: true, FirstFailedAt: t0}, t0,
			Decision{Kind: RetryInPlace, Class: Unknown, Code: CodeUnclassified, Delay: 200 * time.Millisecond}},
		{"unknown error budget is small", errors.New("boom"), State{Attempt: 2, AtSource: true, InPlace: 1, FirstFailedAt: t0}, t0,
			Decision{Kind: Quarantine, Class: Unknown, Code: "UNCLASSIFIED_EXHAUSTED"}},
		{"last tier repeats", unavailable, State{Attempt: 5, Tier: 1, FirstFailedAt: t0}, t0.Add(6 * time.Minute),
			Decision{Kind: Quarantine, Class: Transient, Code: "SCHEMA_REGISTRY_UNAVAILABLE_EXHAUSTED"}},
	}
	for _, tc := range cases {
		if got := policy.Decide(tc.err, tc.s, tc.now); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
	// A Retry-After never escalates past the elapsed budget: with 2m left,
	// a 45s hint that the 5m tier would honour stays in the 30s tier.
	tight := policy
	tight.MaxElapsed = 2 * time.Minute
	rl := &Error{Cause: CauseHookRateLimited, RetryAfter: 45 * time.Second}
	if got := tight.Decide(rl, State{Attempt: 1, AtSource: true, FirstFailedAt: t0}, t0); got.Kind != RetryTier || got.Tier != 0 || got.Delay != 30*time.Second {
		t.Errorf("retry-after with a tight budget: %+v, want tier 0 after 30s", got)
	}
	// Waiting in place (partition ordering) there is no shared tier: the
	// Retry-After is waited for as asked.
	inPlace := policy
	inPlace.WaitInPlace = true
	if got := inPlace.Decide(rl, State{Attempt: 1, AtSource: true, FirstFailedAt: t0}, t0); got.Kind != RetryTier || got.Tier != 0 || got.Delay != 45*time.Second {
		t.Errorf("retry-after waiting in place: %+v, want tier 0 after 45s", got)
	}
	p := policy
	p.MaxAttempts = 10
	got := p.Decide(unavailable, State{Attempt: 6, Tier: 1, FirstFailedAt: t0}, t0.Add(10*time.Minute))
	if got.Kind != RetryTier || got.Tier != 1 {
		t.Errorf("after the last tier, records stay in it: %+v", got)
	}
	p.Tiers = nil
	got = p.Decide(unavailable, State{Attempt: 3, AtSource: true, InPlace: 2, FirstFailedAt: t0}, t0)
	if got.Kind != Quarantine || got.Code != "SCHEMA_REGISTRY_UNAVAILABLE_EXHAUSTED" {
		t.Errorf("no tiers: blocking budget is all: %+v", got)
	}
}

func TestSanitizeName(t *testing.T) {
	for in, want := range map[string]string{
		"negative amount": "NEGATIVE_AMOUNT", "": "X", "__": "X", "a-b.c": "A_B_C",
		"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz": "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJKLMN",
	} {
		if got := SanitizeName(in, "X"); got != want {
			t.Errorf("SanitizeName(%q) = %q, want %q", in, got, want)
		}
	}
}
