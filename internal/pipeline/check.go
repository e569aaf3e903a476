package pipeline

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"relay/internal/schema"
	"relay/internal/tiers"
	"relay/internal/tracing"
)

// Admission checks a value against the registry and decodes it.
type Admission interface {
	Admit(ctx context.Context, value []byte) (schema.Admitted, error)
}

// Check is the part of an attempt before the hook: admission, then the
// business rules on the decoded record. The machine's attempts and relay
// replay's dry run both go through it. Without admission (no registry) a
// value passes unchecked and no rule runs: rules read the decoded record.
func Check(ctx context.Context, adm Admission, rules Rules, value []byte) (schema.Admitted, error) {
	if adm == nil {
		return unchecked{}.Admit(ctx, value)
	}
	a, err := adm.Admit(ctx, value)
	if err != nil || rules == nil {
		return a, err
	}
	if _, none := rules.(noRules); !none && trace.SpanFromContext(ctx).IsRecording() {
		// A child of the pass's process span; none when it is not
		// recorded (no tracer, or not sampled), or there are no rules.
		parent := trace.SpanFromContext(ctx)
		var span trace.Span
		ctx, span = parent.TracerProvider().Tracer(TracerName).Start(ctx, "rules")
		defer span.End()
		if err := rules.Check(ctx, a.Record); err != nil {
			tracing.Fail(span, fmt.Sprintf("%T", err), "a rule failed")
			return a, err
		}
		return a, nil
	}
	return a, rules.Check(ctx, a.Record)
}

// Predict is what a first attempt at value, read from a replay topic,
// comes to before its hook: it passes the checks, or the policy decides on
// its failure as the machine would (relay replay --dry-run).
func Predict(ctx context.Context, adm Admission, rules Rules, policy tiers.Policy, value []byte, now time.Time) (pass bool, d tiers.Decision) {
	_, err := Check(ctx, adm, rules, value)
	if err == nil {
		return true, tiers.Decision{}
	}
	return false, policy.Decide(err, firstAttempt(Origin{Tier: -1}, now), now)
}

// firstAttempt is the retry state of a record's first attempt from origin.
func firstAttempt(origin Origin, now time.Time) tiers.State {
	return tiers.State{Attempt: 1, FirstFailedAt: now, AtSource: origin.Tier < 0, Tier: origin.Tier}
}
