package pipeline

import (
	"context"
	"errors"
	"testing"

	"relay/internal/hook"
	"relay/internal/schema"
	"relay/internal/tiers"
)

// replacingHook answers every record with a replacement.
type replacingHook struct{}

func (replacingHook) Call(context.Context, *hook.Request) (map[string]any, error) {
	return map[string]any{"amount": int64(2)}, nil
}

// refusingAdmitter admits but cannot encode.
type refusingAdmitter struct{ scriptedAdmitter }

func (*refusingAdmitter) Encode(map[string]any) ([]byte, error) {
	return nil, errors.New("no field amount")
}

// A hook's replacement is what is output; one the canonical schema cannot
// hold is the hook's fault.
func TestAttemptHookReplacement(t *testing.T) {
	now := t0
	m, _ := newMachine(&scriptedAdmitter{}, &now)
	m.callHook = callerOf(replacingHook{})
	out, _ := one(t)(m.Handle(context.Background(), source(1)))
	if string(out.Value) != "enc" {
		t.Fatalf("value %q, want the encoded replacement", out.Value)
	}
	m, _ = newMachine(&refusingAdmitter{}, &now)
	m.callHook = callerOf(replacingHook{})
	p := &pass{rec: source(2), origin: Origin{Routes: &Routes{Source: "orders"}, Tier: -1}, id: "orders/3/2"}
	_, info, err := m.attempt(context.Background(), p)
	var te *tiers.Error
	if !errors.As(err, &te) || te.Cause != tiers.CauseHookUnexpected || info != (schema.Info{ID: 11, Subject: "orders-value", Version: 2}) {
		t.Fatalf("err %v, info %+v", err, info)
	}
}

// A shutdown while the record waits for its next in-place attempt leaves
// it where it is.
func TestAttemptsStopOnShutdown(t *testing.T) {
	now := t0
	unavailable := tiers.Failf(tiers.CauseRegistryUnavailable, "503")
	m, _ := newMachine(&scriptedAdmitter{errs: []error{unavailable, unavailable, unavailable}}, &now)
	m.policy.BlockingBackoff = 0
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if outs, err := m.Handle(ctx, source(3)); !errors.Is(err, context.Canceled) || len(outs) != 0 {
		t.Fatalf("outs %v, err %v", topics(outs), err)
	}
}
