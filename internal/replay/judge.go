package replay

import (
	"context"
	"log/slog"
	"time"

	"relay/internal/config"
	"relay/internal/daemon"
	"relay/internal/schema"
	"relay/internal/tiers"
)

// Judge says what today's relay would do with a record before its hook:
// the pipeline's admission (schema), business rules, and the decide table
// of the retry budget, in the pipeline's order. It is built from the same
// building blocks as the pipeline (schema.Admitter, rules.Set,
// tiers.Policy), as the daemon assembles them (daemon.LoadRules,
// NewAdmitter, Policy), not from the pipeline itself, which has no such
// call.
type Judge struct {
	Admitter interface {
		Admit(ctx context.Context, value []byte) (schema.Admitted, error)
	} // nil: values are not checked (no schema registry)
	Rules interface {
		Check(ctx context.Context, rec map[string]any) error
	} // nil: no rules
	Policy tiers.Policy
}

// Verdict is the judge's answer for one value: it passes, or the decision
// on its failure as a first attempt read from the replay topic.
func (j *Judge) Verdict(ctx context.Context, value []byte, now time.Time) (pass bool, d tiers.Decision) {
	if j.Admitter == nil {
		// The pipeline checks rules on the decoded record only.
		return true, tiers.Decision{}
	}
	a, err := j.Admitter.Admit(ctx, value)
	if err == nil && j.Rules != nil {
		err = j.Rules.Check(ctx, a.Record)
	}
	if err == nil {
		return true, tiers.Decision{}
	}
	return false, j.Policy.Decide(err, tiers.State{Attempt: 1, FirstFailedAt: now, AtSource: true, Tier: -1}, now)
}

// RulesError is a rules file that cannot be loaded: a configuration
// problem.
type RulesError struct{ Err error }

func (e *RulesError) Error() string { return config.EnvRulesFile + ": " + e.Err.Error() }
func (e *RulesError) Unwrap() error { return e.Err }

// NewJudge builds the judge of cfg: its rules file (a *RulesError if it
// cannot be read), its retry budget, and, with a schema registry, an
// admitter whose accepted versions are checked first (waiting up to 30s
// while the registry is unavailable). It also returns how many rules there
// are.
func NewJudge(ctx context.Context, cfg *config.Config) (*Judge, int, error) {
	j := &Judge{Policy: daemon.Policy(cfg)}
	n := 0
	rs, err := daemon.LoadRules(cfg)
	if err != nil {
		return nil, 0, &RulesError{err}
	}
	if rs != nil {
		j.Rules, n = rs, rs.Len()
	}
	if cfg.SchemaRegistryURL == "" {
		return j, n, nil
	}
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	adm, err := daemon.NewAdmitter(c, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, n, err
	}
	j.Admitter = adm
	return j, n, nil
}
