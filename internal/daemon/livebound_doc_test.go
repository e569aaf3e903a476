package daemon

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"relay/internal/config"
)

// docs/CONFIGURATION.md gives the liveness bound for the three derived
// transaction timeouts; a change of either the bound or the timeouts
// shows here (it said 2 min 50 s, from a 60 s timeout, long after).
func TestLivenessBoundInTheDocs(t *testing.T) {
	b, err := os.ReadFile("../../docs/CONFIGURATION.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(string(b)), " ")
	base := map[string]string{"RELAY_SOURCE_TOPICS": "orders", "RELAY_TRANSACTIONAL_ID": "relay-0", "RELAY_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"}
	both := map[string]string{"RELAY_SCHEMA_REGISTRY_URL": "http://127.0.0.1:1/apis/ccompat/v7", "RELAY_SCHEMA_SUBJECT": "orders-value", "RELAY_SCHEMA_ACCEPT": "1", "RELAY_HOOK_URL": "http://127.0.0.1:2/hook"}
	for _, c := range []struct {
		what string
		vars map[string]string
		text string
	}{
		{"no registry and no hook", nil, "%d s with no registry and no hook"},
		{"both", both, "%d s with both"},
		{"batch", map[string]string{"RELAY_HOOK_BATCH": "64"}, "%d s under the hook's batch protocol"},
	} {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		if c.what == "batch" { // the batch protocol is the hook's, with the registry too
			for k, v := range both {
				m[k] = v
			}
		}
		for k, v := range c.vars {
			m[k] = v
		}
		lookup, environ := env(m)
		cfg, err := config.Load(lookup, environ)
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		want := fmt.Sprintf(c.text, int(livenessBound(cfg).Seconds()))
		if !strings.Contains(doc, want) {
			t.Errorf("docs/CONFIGURATION.md does not say %q (transaction timeout %s)", want, cfg.TransactionTimeout)
		}
	}
}
