package replay

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"relay/internal/envelope"
	"relay/internal/ledger"
	"relay/internal/quarantine"
)

func failures(keys ...string) []*quarantine.Failure {
	var out []*quarantine.Failure
	for i, k := range keys {
		var key []byte
		if k != "" {
			key = []byte(k)
		}
		id := fmt.Sprintf("orders/0/%d", i)
		out = append(out, &quarantine.Failure{ID: id, Source: ledger.Source{Topic: "orders", Offset: int64(i)},
			Record: &quarantine.Record{Failure: &envelope.Failure{ID: id}, Key: key}})
	}
	return out
}

// The sample is deterministic and takes whole keys, so a key's records
// never straddle the sample and the rest; both keep source order.
func TestSampleIsDeterministicWholeKeys(t *testing.T) {
	recs := failures("a", "b", "a", "c", "d", "b", "", "e", "a", "", "f", "c")
	first, rest := Sample(recs, 4)
	again, _ := Sample(recs, 4)
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
	for _, phase := range [][]*quarantine.Failure{first, rest} {
		for i := 1; i < len(phase); i++ {
			if phase[i].Source.Offset < phase[i-1].Source.Offset {
				t.Fatal("a phase must keep source order")
			}
		}
	}
	if all, none := Sample(recs, 0); len(all) != len(recs) || none != nil {
		t.Fatal("no sample: everything in one phase")
	}
}

func ids(fs []*quarantine.Failure) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.ID
	}
	return out
}

func TestChooseSkipsSettledAndCountsThem(t *testing.T) {
	now := time.Now()
	s := &quarantine.Snapshot{ByID: map[string]*quarantine.Failure{}}
	for i, st := range []ledger.State{ledger.Open, ledger.Resolved, ledger.Discarded, ledger.Replaying, ledger.FailedAgain, ledger.Open} {
		f := failures("k")[0]
		f.ID, f.State, f.Since, f.Code = fmt.Sprintf("orders/0/%d", i), st, now.Add(-time.Hour), "X"
		if i == 5 {
			f.Record = nil // past retention
		}
		s.Failures = append(s.Failures, f)
		s.ByID[f.ID] = f
	}
	o := options(t, now, func(o *Options) { o.Filter.Codes = "X" })
	sel, err := choose(s, o, now)
	if err != nil || len(sel.Records) != 1 || sel.Records[0].ID != "orders/0/0" {
		t.Fatalf("selected %v %v", ids(sel.Records), err)
	}
	for _, k := range []string{"already resolved", "discarded", "being replayed", "failed again (add --include-failed-again)", "record gone (retention)"} {
		if sel.Skipped[k] != 1 {
			t.Errorf("skipped %v: want one %q", sel.Skipped, k)
		}
	}
	o = options(t, now, func(o *Options) { o.IDs = "orders/0/4,orders/0/9" })
	var in *quarantine.InputError
	if _, err := choose(s, o, now); !errors.As(err, &in) || !strings.Contains(err.Error(), "orders/0/9") {
		t.Fatalf("an unknown id must be refused as bad input: %v", err)
	}
	o = options(t, now, func(o *Options) { o.IDs = "orders/0/4" })
	if sel, _ := choose(s, o, now); len(sel.Records) != 1 {
		t.Fatal("a failed-again record named by id is replayed: that is a person's decision")
	}
}

// options are checked replay options with a reason, changed by set.
func options(t *testing.T, now time.Time, set func(o *Options)) *Options {
	t.Helper()
	o := Defaults()
	o.Reason = "r"
	set(&o)
	if err := o.Check(now); err != nil {
		t.Fatal(err)
	}
	return &o
}

// Every problem of the options is named at once, before anything is read.
func TestCheckNamesEveryProblem(t *testing.T) {
	o := Defaults()
	o.Rate, o.MaxFailureRate, o.MinOutcomes, o.Wait, o.Sample = 0, 2, 0, 0, -1
	o.IDs, o.Filter.Since = "not-an-id", "yesterday"
	err := o.Check(time.Now())
	for _, want := range []string{"--reason is required", "--rate 0", "--max-failure-rate 2", "--min-outcomes 0", "--wait 0s",
		"--sample -1", "not a failure id", "--since"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: want %q", err, want)
		}
	}
	o = Defaults()
	o.Reason = "r"
	if err := o.Check(time.Now()); err == nil || !strings.Contains(err.Error(), "no selection") {
		t.Errorf("no selection: %v", err)
	}
}

// choose is the selection on a snapshot as Prepare makes it on the index
// and then on the failures it read whole: explicit ids must exist.
func choose(s *quarantine.Snapshot, o *Options, now time.Time) (*Selection, error) {
	if err := missing(o, func(id string) bool { return s.ByID[id] != nil }); err != nil {
		return nil, err
	}
	return chooseFrom(s, o, now, nil), nil
}
