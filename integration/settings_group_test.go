package integration

import (
	"strings"
	"testing"
	"time"
)

// TestRefusesAGroupWithOtherSettings: a member runs key ordering with
// tiers 1s,2s. An instance with other tiers, and one with partition
// ordering, refuse to join its group (exit 2, naming the setting, both
// values and the procedure) and write nothing; the member goes on alone.
// Once the member has stopped (its farewell record no longer announces
// its settings, though it stays in the group until its session expires),
// an instance with other tiers starts: the change after a stop of every
// instance.
func TestRefusesAGroupWithOtherSettings(t *testing.T) {
	o := registerOrders(t)
	h := newOrderHook(t)
	s := keyScenario(t, o, h, 1)
	createTopics(t, 1, s.src.topic+".retry.5s")
	r := startRelay(t, "relay", s.env(uniq(t, "txn")))
	waitMemberRecord(t, s, r)
	for _, tc := range []struct{ name, env, value, want string }{
		{"tiers", "RELAY_RETRY_TIERS", "1s,5s", `RELAY_RETRY_TIERS=\"1s,2s\", this instance \"1s,5s\"`},
		{"ordering", "RELAY_ORDERING", "partition", `RELAY_ORDERING=\"key\", this instance \"partition\"`},
	} {
		n := startRelay(t, "other-"+tc.name, s.env(uniq(t, "txn-"+tc.name), tc.env, tc.value))
		if code := n.wait(90 * time.Second); code != 2 {
			r.stop()
			t.Fatalf("%s: exit %d, want 2 (refused)", tc.name, code)
		}
		out := n.stderr.String()
		for _, want := range []string{tc.want, "stop every instance of the group", "relay does not join"} {
			if !strings.Contains(out, want) {
				r.stop()
				t.Fatalf("%s: the refusal lacks %q:\n%s", tc.name, want, out)
			}
		}
		if strings.Contains(out, "partitions assigned") {
			r.stop()
			t.Fatalf("%s: the refused instance joined the group", tc.name)
		}
	}
	if r.exited() || strings.Contains(r.stderr.String(), "partitions revoked") {
		t.Fatal("the member was disturbed by instances that refused to join")
	}
	r.stop()
	after := startRelay(t, "other-after-stop", s.env(uniq(t, "txn-after"), "RELAY_RETRY_TIERS", "1s,5s"))
	defer after.stop()
	after.waitLog("partitions assigned", 60*time.Second)
}
