// Credentials read again while relay runs, and a registry that refuses
// relay's.

package daemon

import (
	"context"
	"errors"
	"time"

	"relay/internal/config"
	"relay/internal/schema"
	"relay/internal/secret"
	"relay/internal/telemetry"
)

// What sets relay's credential for the registry and the hook, for the
// messages that say a credential is refused.
const (
	registryCredentialVars = config.EnvSchemaRegistryUser + ", " + config.EnvSchemaRegistrySecret + " (or its _FILE), " +
		config.EnvRegistryClientID + ", " + config.EnvRegistryClientSecret + ", " + config.EnvSchemaRegistryCert
	hookCredentialVars = config.EnvHookToken + ", " + config.EnvHookSigningSecret + " (or their _FILE), " + config.EnvHookCert
)

// secretChanged gives a Kafka SASL secret read again to the clients
// running now (new connections authenticate with it; new clients are
// built with it anyway). The registry's and the hook's are asked for at
// every request.
func (d *daemon) secretChanged(v *secret.Value) {
	user, pass, sasl := d.cfg.SASLCredentials(v)
	if !sasl {
		for _, k := range d.cfg.KafkaSecrets {
			if k == v {
				d.log.Warn("librdkafka reads this secret only when a client is built: the running clients keep the old value; restart relay to use the new one now",
					"var", v.Var)
			}
		}
		return
	}
	// Each only while it is open: librdkafka's handle is gone after Close.
	errs := []error{d.lag.setSaslCredentials(user, pass)}
	if p := d.producer.Load(); p != nil {
		errs = append(errs, p.setSaslCredentials(user, pass))
	}
	if err := errors.Join(errs...); err != nil {
		d.log.Warn("cannot give a client the new SASL credentials; it keeps the old ones until it is built again", "err", err)
		return
	}
	d.log.Info("the running Kafka clients authenticate with the new SASL credentials from their next connection or re-authentication", "var", v.Var)
}

// registryProbeEvery is how often relay asks a registry that refuses its
// credential whether it still does.
const registryProbeEvery = 15 * time.Second

// probeRefusedRegistry asks the registry again, while it refuses relay's
// credential, until ctx ends: records may no longer need it (schemas are
// cached by id), and relay must still see the credential fixed, and be
// ready again.
func probeRefusedRegistry(ctx context.Context, adm *schema.Admitter, metrics *telemetry.Metrics, timeout time.Duration) {
	t := time.NewTicker(registryProbeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if metrics.RefusedBy(telemetry.DependencyRegistry) {
				c, cancel := context.WithTimeout(ctx, timeout)
				_ = adm.Probe(c) // the answer reaches the metrics through the client
				cancel()
			}
		}
	}
}
