// Package checks builds, from the configuration, the checks a record goes
// through before the hook — admission against the schema registry and the
// business rules — and the retry policy that decides on a failure. The
// daemon assembles the failure state machine from them, and relay
// replay's dry run judges records with the very same parts.
package checks

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v5"

	"relay/internal/config"
	"relay/internal/envelope"
	"relay/internal/retry"
	"relay/internal/rules"
	"relay/internal/schema"
	"relay/internal/tiers"
)

// Policy is the retry budget of cfg.
func Policy(cfg *config.Config) tiers.Policy {
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

// Rules reads the rules file before anything connects; nil without one.
func Rules(cfg *config.Config) (*rules.Set, error) {
	if cfg.RulesFile == "" {
		return nil, nil
	}
	return rules.Load(cfg.RulesFile)
}

// RegistryClient is a client of the registry cfg names, with relay's
// credential.
func RegistryClient(cfg *config.Config) (*schema.Client, error) {
	client := schema.NewClient(cfg.SchemaRegistryURL, cfg.SchemaTimeout)
	tlsConf, err := cfg.SchemaRegistryTLS.Config()
	if err != nil {
		return nil, err
	}
	a := schema.Auth{User: cfg.SchemaRegistryUser, TLS: tlsConf}
	if cfg.SchemaRegistrySecret != nil {
		a.Password = cfg.SchemaRegistrySecret.Get
	}
	if cc := cfg.SchemaRegistryOAuth; cc != nil {
		if tlsConf != nil && cc.HTTP == nil {
			// The token endpoint is reached with the registry's CA and
			// client certificate: a private PKI serves both.
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.TLSClientConfig = tlsConf
			cc.HTTP = &http.Client{Transport: tr, Timeout: 10 * time.Second}
		}
		a.Token = cc.Token
	}
	client.Authenticate(a)
	return client, nil
}

// Admitter connects admission to the registry and checks, before the first
// record, that the reader version exists and every accepted version can be
// read as it. It waits while the registry is unavailable, 1 s at first,
// doubling up to 5 s (retry.Schedule), until ctx ends.
//
// access, when not nil, hears whether the registry accepts relay's
// credential after each answer. A credential refused at start-up is a
// *schema.UnauthorizedError, at once.
func Admitter(ctx context.Context, cfg *config.Config, log *slog.Logger, access schema.AccessFunc) (*schema.Admitter, error) {
	client, err := RegistryClient(cfg)
	if err != nil {
		return nil, err
	}
	client.OnAccess(access)
	set := schema.Settings{
		Subject: cfg.SchemaSubject, Accept: cfg.Accepted(), ReaderVersion: cfg.SchemaReaderVersion,
		Timeout: cfg.SchemaTimeout, CacheSize: cfg.SchemaCacheSize,
	}
	check := func() (*schema.Reader, error) {
		c, cancel := context.WithTimeout(ctx, 4*cfg.SchemaTimeout)
		defer cancel()
		r, err := schema.CheckAccepted(c, client, set)
		var un *schema.UnavailableError
		if err != nil && !errors.As(err, &un) {
			return nil, backoff.Permanent(err)
		}
		return r, err
	}
	redactor := envelope.NewRedactor(cfg.RedactPattern, 512)
	r, err := retry.Do(ctx, check, time.Second, 5*time.Second, func(err error, in time.Duration) {
		log.Warn("schema registry unavailable at start-up; retrying", "err", redactor.Redact(err.Error()), "in", in.String())
	})
	if err != nil {
		return nil, err
	}
	log.Info("schema admission ready", "subject", set.Subject, "accept", set.Accept.String(), "reader_version", set.ReaderVersion, "reader_id", r.ID, "format", string(r.Format))
	return schema.NewAdmitter(client, set, r)
}
