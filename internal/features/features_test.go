package features

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRecordRoundTrips(t *testing.T) {
	v := Record{Instance: "relay-0", Version: "0.7.0", Features: []string{Park}}.Encode()
	if string(v) != `{"v":1,"instance":"relay-0","version":"0.7.0","features":["park"]}` {
		t.Fatalf("Encode = %s", v)
	}
	r, err := Decode(v)
	if err != nil || r.Instance != "relay-0" || !slices.Equal(r.Features, []string{Park}) {
		t.Fatalf("Decode = %+v, %v", r, err)
	}
	if v := (Record{Version: "0.7.0"}).Encode(); !strings.Contains(string(v), `"features":[]`) {
		t.Errorf("a member without features: %s", v)
	}
	newer, err := Decode([]byte(`{"v":2,"version":"0.9.0","features":["park","later"],"more":true}`))
	if err != nil || !slices.Equal(newer.Features, []string{Park, "later"}) {
		t.Errorf("a newer record: %+v, %v", newer, err)
	}
	for _, bad := range []string{`{`, `{"features":["park"]}`, `null`} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%s): no error", bad)
		}
	}
}

func member(instance string, fs ...string) Member {
	return Member{InstanceID: instance, MemberID: instance + "-1", ClientID: "relay-consumer", Host: "/10.0.0.1", Features: fs}
}

func TestAgreeNeedsEveryMember(t *testing.T) {
	cases := []struct {
		name    string
		members []Member
		on      bool
		without []string
	}{
		{"empty group", nil, false, nil},
		{"every member parks", []Member{member("relay-0", Park), member("relay-1", Park)}, true, nil},
		{"an older relay (no record)", []Member{member("relay-0", Park), member("relay-1")}, false, []string{"relay-1"}},
		{"one with parking off", []Member{member("relay-0", Park), {InstanceID: "relay-1", Features: []string{}}}, false, []string{"relay-1"}},
		{"a newer relay with more", []Member{member("relay-0", Park), member("relay-1", "later", Park)}, true, nil},
		{"a dynamic foreign client", []Member{member("relay-0", Park), {ClientID: "console-consumer", Host: "/10.0.0.1"}}, false, []string{"console-consumer@10.0.0.1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := Agree(c.members)
			if a.On[Park] != c.on || !slices.Equal(a.Without[Park], c.without) {
				t.Errorf("Agree = on %v without %v, want on %v without %v", a.On[Park], a.Without[Park], c.on, c.without)
			}
		})
	}
}

// TestWatchFollowsTheGroup: off before the first look, on when every
// member announces the feature, off when one joins without it, kept
// through a failed look, and each change told once.
func TestWatchFollowsTheGroup(t *testing.T) {
	var logs bytes.Buffer
	var next []Member
	var fail error
	var told []bool
	w := &Watch{
		Describe: func(context.Context) ([]Member, error) { return next, fail },
		Log:      slog.New(slog.NewTextHandler(&logs, nil)),
		Changed:  func(f string, on bool) { told = append(told, on) },
	}
	if w.On(Park) {
		t.Fatal("on before the group was described")
	}
	failing := 0
	look := func(ms []Member, err error) bool {
		next, fail = ms, err
		w.look(context.Background(), &failing)
		return w.On(Park)
	}
	if look([]Member{member("relay-0", Park)}, nil) != true {
		t.Error("a group of one that parks: off")
	}
	if look([]Member{member("relay-0", Park), member("relay-1")}, nil) != false {
		t.Error("an older member joined: still on")
	}
	if !strings.Contains(logs.String(), "without=relay-1") {
		t.Errorf("the log does not name the member without it:\n%s", logs.String())
	}
	if look(nil, errors.New("coordinator away")) != false {
		t.Error("a failed look changed the agreement")
	}
	if look([]Member{member("relay-0", Park), member("relay-1", Park)}, nil) != true {
		t.Error("the older member left: still off")
	}
	if look(nil, errors.New("coordinator away")) != true {
		t.Error("a failed look turned the feature off")
	}
	if look([]Member{member("relay-0", Park), member("relay-1", Park)}, nil); !slices.Equal(told, []bool{true, false, true}) {
		t.Errorf("Changed was told %v, want [true false true]", told)
	}
	look(nil, errors.New("coordinator away"))
	if look(nil, errors.New("coordinator away")) != true {
		t.Error("two failed looks in a row turned the feature off")
	}
	if look(nil, errors.New("coordinator away")) != false {
		t.Errorf("%d failed looks in a row: still on", failingAfter)
	}
	if w.Withdrawn(Park) {
		t.Error("failed looks withdrew the feature: what relies on it would be undone while nothing is known")
	}
	if look([]Member{member("relay-0", Park), member("relay-1", Park)}, nil) != true {
		t.Error("a look that succeeds again: still off")
	}
}

// A feature off is withdrawn (what relies on it undone) only once it has
// been off for Settle at every look: a member that has just joined and
// not written its record yet only stops new uses.
func TestWithdrawnAfterSettle(t *testing.T) {
	next := []Member{member("relay-0", Park), member("relay-1", Park)}
	w := NewWatch(func(context.Context) ([]Member, error) { return next, nil }, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil)))
	w.Settle = 200 * time.Millisecond
	failing := 0
	w.look(context.Background(), &failing)
	if !w.On(Park) || w.Withdrawn(Park) {
		t.Fatal("every member parks: not on, or withdrawn")
	}
	next = []Member{member("relay-0", Park), {InstanceID: "relay-1", MemberID: "relay-1-2"}}
	w.look(context.Background(), &failing)
	if w.On(Park) || w.Withdrawn(Park) {
		t.Fatalf("a member just restarted without its record: on %v, withdrawn %v; want off, not withdrawn", w.On(Park), w.Withdrawn(Park))
	}
	time.Sleep(250 * time.Millisecond)
	w.look(context.Background(), &failing)
	if !w.Withdrawn(Park) {
		t.Fatal("off for longer than Settle at every look: not withdrawn")
	}
	next = []Member{member("relay-0", Park), member("relay-1", Park)}
	w.look(context.Background(), &failing)
	if !w.On(Park) || w.Withdrawn(Park) {
		t.Fatal("every member parks again: not on, or still withdrawn")
	}
}

// One look that finds the feature off, then looks that fail for longer
// than Settle: not withdrawn (nothing confirms the member without it is
// still there), only paused.
func TestFailedLooksNeverWithdraw(t *testing.T) {
	next := []Member{member("relay-0", Park), {InstanceID: "relay-1", MemberID: "relay-1-2"}}
	var fail error
	w := NewWatch(func(context.Context) ([]Member, error) { return next, fail }, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil)))
	w.Settle = 100 * time.Millisecond
	failing := 0
	w.look(context.Background(), &failing)
	fail = errors.New("coordinator away")
	time.Sleep(150 * time.Millisecond)
	for range failingAfter + 1 {
		w.look(context.Background(), &failing)
		if w.Withdrawn(Park) || w.On(Park) {
			t.Fatalf("after %d failed looks: withdrawn %v, on %v; want neither", failing, w.Withdrawn(Park), w.On(Park))
		}
	}
}

// A poke (a rebalance) makes the watch look at once, not at its next tick.
func TestWatchLooksWhenPoked(t *testing.T) {
	looks := make(chan struct{}, 10)
	w := NewWatch(func(context.Context) ([]Member, error) {
		looks <- struct{}{}
		return []Member{member("relay-0", Park)}, nil
	}, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	<-looks // the first look, at start
	w.Poke()
	select {
	case <-looks:
	case <-time.After(10 * time.Second):
		t.Fatal("no look within 10s of a poke (the next tick is an hour away)")
	}
	cancel()
	<-done
	if !w.On(Park) {
		t.Error("park not in force after looking at a group that announces it")
	}
	var nilWatch *Watch
	nilWatch.Poke()
}

// A member whose record announces a shared setting with another value
// conflicts; a member without announced settings, a setting it does not
// announce, and this instance's own group.instance.id (the process it
// replaces) do not.
func TestConflicts(t *testing.T) {
	ours := map[string]string{"RELAY_ORDERING": "key", "RELAY_RETRY_TIERS": "30s,5m0s"}
	ms := []Member{
		{InstanceID: "a", Settings: map[string]string{"RELAY_ORDERING": "key", "RELAY_RETRY_TIERS": "30s,5m0s"}},
		{InstanceID: "b", Settings: map[string]string{"RELAY_ORDERING": "partition", "RELAY_RETRY_TIERS": "30s"}},
		{InstanceID: "c"},
		{InstanceID: "d", Settings: map[string]string{"RELAY_RETRY_TOPIC": "x"}},
		{InstanceID: "self", Settings: map[string]string{"RELAY_ORDERING": "partition"}},
	}
	got := Conflicts(ours, ms, "self")
	want := []Conflict{
		{Member: "b", Setting: "RELAY_ORDERING", Theirs: "partition", Ours: "key"},
		{Member: "b", Setting: "RELAY_RETRY_TIERS", Theirs: "30s", Ours: "30s,5m0s"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("conflicts %v, want %v", got, want)
	}
	if got := Conflicts(ours, ms, ""); len(got) != 3 {
		t.Fatalf("without self: %v, want the member at self too", got)
	}
	r, err := Decode(Record{Settings: ours}.Encode())
	if err != nil || !maps.Equal(r.Settings, ours) {
		t.Fatalf("settings through a record: %v %v", r.Settings, err)
	}
}
