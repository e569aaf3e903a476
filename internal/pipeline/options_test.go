package pipeline

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"relay/internal/envelope"
	"relay/internal/hook"
)

func TestNewNamesMissingRequiredOptions(t *testing.T) {
	_, err := New(Options{})
	for _, name := range []string{"Options.Table", "Options.Group", "Options.Redactor"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("error %v does not name %s", err, name)
		}
	}
	m, err := New(Options{Table: NewTable(nil), Group: "g", Redactor: envelope.NewRedactor(nil, 64)})
	if err != nil || m == nil {
		t.Fatalf("minimal options: %v", err)
	}
}

// hookSpy records that it was called.
type hookSpy struct{ calls int }

func (h *hookSpy) Call(context.Context, *hook.Request) (map[string]any, error) {
	h.calls++
	return nil, nil
}

// Without an admitter, values are not checked and there is no decoded
// record for rules or the hook: neither is used.
func TestNewWithoutAdmitterUsesNoRulesNorHook(t *testing.T) {
	h := &hookSpy{}
	m, err := New(Options{
		Table: NewTable([]Routes{{Source: "orders", Output: "orders.valid"}}), Group: "g", Redactor: envelope.NewRedactor(nil, 64),
		Rules: rulesFunc(func(map[string]any) error { return errors.New("must not be asked") }), Hook: h,
	})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := m.Handle(context.Background(), source(1))
	if err != nil || len(outs) != 1 || outs[0].Topic != "orders.valid" || string(outs[0].Value) != "raw" || h.calls != 0 {
		t.Fatalf("outs %v, err %v, hook calls %d", topics(outs), err, h.calls)
	}
	m.OnCommit() // no Outcomes: nothing to report to, nothing fails
}

func TestNewWithAdmitterCallsTheHook(t *testing.T) {
	h := &hookSpy{}
	now := t0
	m, err := New(Options{
		Table: NewTable([]Routes{{Source: "orders", Output: "orders.valid"}}), Group: "g", Redactor: envelope.NewRedactor(nil, 64),
		Admitter: &scriptedAdmitter{}, Hook: h, Now: func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Handle(context.Background(), source(1)); err != nil || h.calls != 1 {
		t.Fatalf("err %v, hook calls %d", err, h.calls)
	}
}

func TestTopicsAndTable(t *testing.T) {
	now := t0
	m, _ := newMachine(nil, &now)
	got := m.Topics()
	slices.Sort(got)
	want := []string{"orders", "orders.retry.30s", "orders.retry.5m"}
	if !slices.Equal(got, want) {
		t.Fatalf("topics %v, want %v", got, want)
	}
	if o, ok := m.Table().Of("orders.retry.5m"); !ok || o.Tier != 1 {
		t.Fatalf("origin %+v %v", o, ok)
	}
}
