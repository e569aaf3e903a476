package replay

import (
	"context"
	"log/slog"
	"time"

	"relay/internal/checks"
	"relay/internal/config"
	"relay/internal/pipeline"
	"relay/internal/tiers"
)

// Judge says what today's relay would do with a record before its hook.
// It is the pipeline's own path (pipeline.Predict: admission, the rules on
// the decoded record, and the decide table as a first attempt), with the
// parts the daemon builds for the machine (package checks).
type Judge struct {
	Admitter pipeline.Admission // nil: values are not checked (no schema registry)
	Rules    pipeline.Rules     // nil: no rules
	Policy   tiers.Policy
}

// Verdict is the judge's answer for one value: it passes, or the decision
// on its failure as a first attempt read from the replay topic.
func (j *Judge) Verdict(ctx context.Context, value []byte, now time.Time) (pass bool, d tiers.Decision) {
	return pipeline.Predict(ctx, j.Admitter, j.Rules, j.Policy, value, now)
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
	j := &Judge{Policy: checks.Policy(cfg)}
	n := 0
	rs, err := checks.Rules(cfg)
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
	adm, err := checks.Admitter(c, cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		return nil, n, err
	}
	j.Admitter = adm
	return j, n, nil
}
