package features

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestAnnouncementRoundTrips(t *testing.T) {
	id := Announce("relay-consumer", []string{Park})
	if id != "relay-consumer;relay-features=park" {
		t.Fatalf("Announce = %q", id)
	}
	if got := Of(id); !slices.Equal(got, []string{Park}) {
		t.Errorf("Of(%q) = %v", id, got)
	}
	if got := Bare(id); got != "relay-consumer" {
		t.Errorf("Bare(%q) = %q", id, got)
	}
	for _, old := range []string{"relay-consumer", "rdkafka", Announce("relay-consumer", nil), ""} {
		if got := Of(old); got != nil {
			t.Errorf("Of(%q) = %v, want nothing announced", old, got)
		}
	}
}

func member(instance, clientID string) Member {
	return Member{InstanceID: instance, ClientID: clientID, Host: "/10.0.0.1"}
}

func TestAgreeNeedsEveryMember(t *testing.T) {
	parks := Announce("relay-consumer", []string{Park})
	cases := []struct {
		name    string
		members []Member
		on      bool
		without []string
	}{
		{"empty group", nil, false, nil},
		{"every member parks", []Member{member("relay-0", parks), member("relay-1", parks)}, true, nil},
		{"an older relay", []Member{member("relay-0", parks), member("relay-1", "relay-consumer")}, false, []string{"relay-1"}},
		{"one with parking off", []Member{member("relay-0", parks), member("relay-1", Announce("relay-consumer", nil))}, false, []string{"relay-1"}},
		{"a newer relay with more", []Member{member("relay-0", parks), member("relay-1", Announce("x", []string{"later", Park}))}, true, nil},
		{"a dynamic foreign client", []Member{member("relay-0", parks), member("", "console-consumer")}, false, []string{"console-consumer@10.0.0.1"}},
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
	parks := Announce("relay-consumer", []string{Park})
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
	failing := false
	look := func(ms []Member, err error) bool {
		next, fail = ms, err
		w.look(context.Background(), &failing)
		return w.On(Park)
	}
	if look([]Member{member("relay-0", parks)}, nil) != true {
		t.Error("a group of one that parks: off")
	}
	if look([]Member{member("relay-0", parks), member("relay-1", "relay-consumer")}, nil) != false {
		t.Error("an older member joined: still on")
	}
	if !strings.Contains(logs.String(), "without=relay-1") {
		t.Errorf("the log does not name the member without it:\n%s", logs.String())
	}
	if look(nil, errors.New("coordinator away")) != false {
		t.Error("a failed look changed the agreement")
	}
	if look([]Member{member("relay-0", parks), member("relay-1", parks)}, nil) != true {
		t.Error("the older member left: still off")
	}
	if look(nil, errors.New("coordinator away")) != true {
		t.Error("a failed look turned the feature off")
	}
	if look([]Member{member("relay-0", parks), member("relay-1", parks)}, nil); !slices.Equal(told, []bool{true, false, true}) {
		t.Errorf("Changed was told %v, want [true false true]", told)
	}
}

// A poke (a rebalance) makes the watch look at once, not at its next tick.
func TestWatchLooksWhenPoked(t *testing.T) {
	looks := make(chan struct{}, 10)
	w := NewWatch(func(context.Context) ([]Member, error) {
		looks <- struct{}{}
		return []Member{member("relay-0", Announce("relay-consumer", []string{Park}))}, nil
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
