package config

import (
	"strings"
	"testing"
)

// librdkafka 2.11's JWT bearer assertion takes the passphrase of its
// private key: relay config masks it like every other Kafka secret.
func TestAssertionKeyPassphraseIsMasked(t *testing.T) {
	c, err := load(t, with(map[string]string{
		KafkaPrefix + "SASL_OAUTHBEARER_ASSERTION_PRIVATE_KEY_PASSPHRASE": "k3y-pass",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if out := strings.Join(c.Effective(), "\n"); strings.Contains(out, "k3y-pass") {
		t.Fatalf("relay config shows the assertion key's passphrase:\n%s", out)
	}
}
