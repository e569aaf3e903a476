package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"relay/internal/envelope"
	"relay/internal/ledger"
)

// Bad input to the operator commands exits 2, names the problem, and
// reaches no broker: nothing can have been written.
func TestOperatorCommandsRefuseBadInput(t *testing.T) {
	broker, accepted := countingListener(t)
	lookup, environ := env(map[string]string{"RELAY_SOURCE_TOPICS": "orders", "RELAY_KAFKA_BOOTSTRAP_SERVERS": broker})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "--all"}, "--reason is required"},
		{[]string{"replay", "--reason", "fix"}, "no selection"},
		{[]string{"replay", "--reason", "fix", "--all", "--rate", "0"}, "--rate 0"},
		{[]string{"replay", "--reason", "fix", "--all", "--max-failure-rate", "2"}, "--max-failure-rate 2"},
		{[]string{"replay", "--reason", "fix", "--ids", "not-an-id"}, "not a failure id"},
		{[]string{"replay", "--reason", "fix", "--since", "yesterday"}, "--since"},
		{[]string{"replay", "--reason", "fix", "--all", "--progress", "fancy"}, "--progress"},
		{[]string{"replay", "--reason", "fix", "orders/0/1"}, "failure ids go in --ids"},
		{[]string{"quarantine", "discard", "orders/0/1"}, "--reason is required"},
		{[]string{"quarantine", "discard", "--reason", "x"}, "no failure id"},
		{[]string{"quarantine", "list", "--state", "lost"}, "--state"},
		{[]string{"quarantine", "list", "--min-age", "ages"}, "--min-age"},
		{[]string{"quarantine", "show", "x"}, "not a failure id"},
		{[]string{"quarantine", "purge"}, "unknown command"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, lookup, environ, &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("relay %v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("bad input reached the broker %d times", n)
	}
}

func failures(keys ...string) []*failure {
	var out []*failure
	for i, k := range keys {
		var key []byte
		if k != "" {
			key = []byte(k)
		}
		id := fmt.Sprintf("orders/0/%d", i)
		out = append(out, &failure{ID: id, Source: ledger.Source{Topic: "orders", Offset: int64(i)},
			Record: &quarantined{F: &envelope.Failure{ID: id}, Key: key}})
	}
	return out
}

// The sample is deterministic and takes whole keys, so a key's records
// never straddle the sample and the rest; both keep source order.
func TestSampleIsDeterministicWholeKeys(t *testing.T) {
	recs := failures("a", "b", "a", "c", "d", "b", "", "e", "a", "", "f", "c")
	first, rest := sample(recs, 4)
	again, _ := sample(recs, 4)
	if fmt.Sprint(ids(first)) != fmt.Sprint(ids(again)) {
		t.Fatal("the sample must be the same every time")
	}
	if len(first) < 4 || len(first)+len(rest) != len(recs) {
		t.Fatalf("sample %d, rest %d", len(first), len(rest))
	}
	in := map[string]bool{}
	for _, f := range first {
		if f.Record.Key != nil {
			in[string(f.Record.Key)] = true
		}
	}
	for _, f := range rest {
		if f.Record.Key != nil && in[string(f.Record.Key)] {
			t.Fatalf("key %s is in both phases", f.Record.Key)
		}
	}
	for _, phase := range [][]*failure{first, rest} {
		for i := 1; i < len(phase); i++ {
			if phase[i].Source.Offset < phase[i-1].Source.Offset {
				t.Fatal("a phase must keep source order")
			}
		}
	}
	if all, none := sample(recs, 0); len(all) != len(recs) || none != nil {
		t.Fatal("no sample: everything in one phase")
	}
}

func ids(fs []*failure) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.ID
	}
	return out
}

func TestChooseSkipsSettledAndCountsThem(t *testing.T) {
	now := time.Now()
	s := &snapshot{byID: map[string]*failure{}}
	for i, st := range []string{ledger.Open, ledger.Resolved, ledger.Discarded, ledger.Replaying, ledger.FailedAgain, ledger.Open} {
		f := failures("k")[0]
		f.ID, f.State, f.Since, f.Code = fmt.Sprintf("orders/0/%d", i), st, now.Add(-time.Hour), "X"
		if i == 5 {
			f.Record = nil // past retention
		}
		s.failures = append(s.failures, f)
		s.byID[f.ID] = f
	}
	o, err := parseReplay([]string{"--reason", "r", "--code", "X"}, &bytes.Buffer{}, now)
	if err != nil {
		t.Fatal(err)
	}
	sel, err := choose(s, o, now)
	if err != nil || len(sel.records) != 1 || sel.records[0].ID != "orders/0/0" {
		t.Fatalf("selected %v %v", ids(sel.records), err)
	}
	for _, k := range []string{"already resolved", "discarded", "being replayed", "failed again (add --include-failed-again)", "record gone (retention)"} {
		if sel.skipped[k] != 1 {
			t.Errorf("skipped %v: want one %q", sel.skipped, k)
		}
	}
	o, _ = parseReplay([]string{"--reason", "r", "--ids", "orders/0/4,orders/0/9"}, &bytes.Buffer{}, now)
	if _, err := choose(s, o, now); err == nil || !strings.Contains(err.Error(), "orders/0/9") {
		t.Fatalf("an unknown id must be refused: %v", err)
	}
	o, _ = parseReplay([]string{"--reason", "r", "--ids", "orders/0/4"}, &bytes.Buffer{}, now)
	if sel, _ := choose(s, o, now); len(sel.records) != 1 {
		t.Fatal("a failed-again record named by id is replayed: that is a person's decision")
	}
}
