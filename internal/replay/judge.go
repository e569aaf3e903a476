package replay

import (
	"context"
	"errors"
	"time"

	"relay/internal/config"
	"relay/internal/rules"
	"relay/internal/schema"
	"relay/internal/tiers"
)

// Judge says what today's relay would do with a record before its hook:
// the pipeline's admission (schema), business rules, and the decide table
// of the retry budget, in the pipeline's order. It is built from the same
// building blocks as the pipeline (schema.Admitter, rules.Set,
// tiers.Policy), not from the pipeline itself, which has no such call.
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
	j := &Judge{Policy: policyOf(cfg)}
	n := 0
	if cfg.RulesFile != "" {
		rs, err := rules.Load(cfg.RulesFile)
		if err != nil {
			return nil, 0, &RulesError{err}
		}
		j.Rules, n = rs, rs.Len()
	}
	if cfg.SchemaRegistryURL == "" {
		return j, n, nil
	}
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	adm, err := admitter(c, cfg)
	if err != nil {
		return nil, n, err
	}
	j.Admitter = adm
	return j, n, nil
}

// admitter connects admission to the registry as relay does at start-up.
func admitter(ctx context.Context, cfg *config.Config) (*schema.Admitter, error) {
	client := schema.NewClient(cfg.SchemaRegistryURL, cfg.SchemaTimeout)
	if cfg.SchemaRegistryUser != "" || cfg.SchemaRegistrySecret != "" {
		client.SetCredentials(cfg.SchemaRegistryUser, cfg.SchemaRegistrySecret)
	}
	set := schema.Settings{
		Subject: cfg.SchemaSubject, Accept: cfg.Accepted(), ReaderVersion: cfg.SchemaReaderVersion,
		Timeout: cfg.SchemaTimeout, CacheSize: cfg.SchemaCacheSize,
	}
	backoff := time.Second
	for {
		c, cancel := context.WithTimeout(ctx, 4*cfg.SchemaTimeout)
		id, text, err := schema.CheckAccepted(c, client, set)
		cancel()
		if err == nil {
			return schema.NewAdmitter(client, set, id, text)
		}
		var un *schema.UnavailableError
		if !errors.As(err, &un) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// policyOf is the retry budget of cfg, as relay runs it.
func policyOf(cfg *config.Config) tiers.Policy {
	p := tiers.Policy{
		BlockingAttempts: cfg.BlockingAttempts, BlockingBackoff: cfg.BlockingBackoff, BlockingMaxWait: cfg.BlockingBackoff,
		MaxAttempts: cfg.RetryMaxAttempts, MaxElapsed: cfg.RetryMaxElapsed, UnknownAttempts: cfg.UnclassifiedAttempts,
		WaitInPlace: cfg.WaitsInPlace(),
	}
	for _, t := range cfg.RetryTiers {
		p.Tiers = append(p.Tiers, t.Delay)
	}
	return p
}
