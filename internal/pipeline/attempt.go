package pipeline

import (
	"context"
	"encoding/base64"
	"time"
	"unicode/utf8"

	"relay/internal/hook"
	"relay/internal/schema"
	"relay/internal/tiers"
)

// tried is what the attempts at a record came to: processed with value
// (v nil), a verdict other than an in-place retry, decided at now, or err
// (a shutdown).
type tried struct {
	value []byte
	info  schema.Info
	v     *verdict
	now   time.Time
	err   error
}

// try attempts the record, retrying in place as the policy says, until it
// passes or the policy decides otherwise. It reads nothing of the
// machine's state but its fixed parts (admission, rules, the hook, the
// policy), and writes only p: tries of different records may run at once.
func (m *Machine) try(ctx context.Context, p *pass) tried {
	for {
		value, info, err := m.attempt(ctx, p)
		if err == nil {
			return tried{value: value, info: info}
		}
		if ctx.Err() != nil {
			// Shutting down: the record stays where it is.
			return tried{err: ctx.Err()}
		}
		now := m.now()
		v := verdict{Decision: m.policy.Decide(err, p.st, now), cause: err, info: info}
		if v.Kind != tiers.RetryInPlace {
			return tried{v: &v, now: now, info: info}
		}
		m.traceRetry(p, v)
		m.log.Debug("retrying in place", append([]any{"id", p.id, "code", v.Code, "attempt", p.st.Attempt, "in", v.Delay}, p.traceAttrs()...)...)
		if err := sleep(ctx, v.Delay); err != nil {
			return tried{err: err}
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
