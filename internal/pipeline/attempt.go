package pipeline

import (
	"context"
	"encoding/base64"
	"time"
	"unicode/utf8"

	"relay/internal/hook"
	"relay/internal/schema"
	"relay/internal/tiers"
	"relay/internal/txn"
)

// attempts tries the record, retrying in place as the policy says, until
// it is processed or decided otherwise.
func (m *Machine) attempts(ctx context.Context, p *pass) ([]txn.Output, error) {
	for {
		value, info, err := m.attempt(ctx, p)
		if err == nil {
			return m.processed(p, value, info), nil
		}
		if ctx.Err() != nil {
			// Shutting down: the record stays where it is.
			return nil, ctx.Err()
		}
		now := m.now()
		v := verdict{Decision: m.policy.Decide(err, p.st, now), cause: err, info: info}
		switch {
		case v.Kind == tiers.RetryTier && m.waitInPlace:
			return nil, m.waitHere(p, v, now)
		case v.Kind != tiers.RetryInPlace:
			return m.decided(p, v), nil
		}
		m.traceRetry(p, v)
		m.log.Debug("retrying in place", append([]any{"id", p.id, "code", v.Code, "attempt", p.st.Attempt, "in", v.Delay}, p.traceAttrs()...)...)
		if err := sleep(ctx, v.Delay); err != nil {
			return nil, err
		}
		p.st.Attempt++
		p.st.InPlace++
	}
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// attempt runs admission, rules and the hook once, and gives the value
// the output carries.
func (m *Machine) attempt(ctx context.Context, p *pass) ([]byte, schema.Info, error) {
	a, err := Check(ctx, m.admitter, m.rules, p.rec.Value)
	if err != nil {
		return nil, a.Writer, err
	}
	repl, err := m.callHook(ctx, p, a.Record)
	if err != nil || repl == nil {
		return a.Value, a.Writer, err
	}
	value, err := m.admitter.Encode(repl)
	if err != nil {
		// The hook answered with a record the canonical schema cannot
		// hold: the hook's fault, not a transient one.
		return nil, a.Writer, tiers.Failf(tiers.CauseHookUnexpected, "replacement record does not fit the canonical schema: %v", err)
	}
	return value, a.Writer, nil
}

// hookCall is the hook step: it asks the hook about the decoded record
// of a pass; a replacement record, if it answers one, is what is output.
type hookCall func(ctx context.Context, p *pass, record map[string]any) (map[string]any, error)

// callerOf is the hook step of h.
func callerOf(h Hook) hookCall {
	return func(ctx context.Context, p *pass, record map[string]any) (map[string]any, error) {
		return h.Call(ctx, &hook.Request{
			MessageID: p.id, Topic: p.origin.Routes.Source, Partition: p.rec.Partition, Offset: p.srcOffset,
			Key: keyString(p.rec.Key), Record: record,
		})
	}
}

// noHook is the hook step without a hook: it answers nothing.
func noHook(context.Context, *pass, map[string]any) (map[string]any, error) { return nil, nil }

// keyString renders a key for the hook's JSON: text as is, other bytes in
// base64, no key as null.
func keyString(k []byte) *string {
	if k == nil {
		return nil
	}
	s := string(k)
	if !utf8.ValidString(s) {
		s = base64.StdEncoding.EncodeToString(k)
	}
	return &s
}
