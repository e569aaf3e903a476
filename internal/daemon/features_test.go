package daemon

import (
	"slices"
	"testing"

	"relay/internal/features"
)

// Records speak for a member id, never for a group.instance.id: a static
// member that restarts (or an older relay that takes its place at the same
// group.instance.id) gets a new member id, and the record of the earlier
// one does not speak for it. This instance knows its own features without
// reading its record.
func TestRecordsJoinMembersByMemberID(t *testing.T) {
	records := map[string]features.Record{
		"relay-1-old": {Instance: "relay-1", Features: []string{features.Park}},
		"relay-2-a":   {Instance: "relay-2", Features: []string{features.Park}},
		"relay-3-a":   {Instance: "relay-3", Features: []string{}},
	}
	ms := []features.Member{
		{InstanceID: "relay-0", MemberID: "relay-0-new"},
		{InstanceID: "relay-1", MemberID: "relay-1-new"}, // replaced: its record is the earlier join's
		{InstanceID: "relay-2", MemberID: "relay-2-a"},
		{InstanceID: "relay-3", MemberID: "relay-3-a"},
	}
	own := withRecords(ms, records, "relay-0", []string{features.Park})
	if own != "relay-0-new" {
		t.Errorf("own member id %q, want relay-0-new", own)
	}
	want := [][]string{{features.Park}, nil, {features.Park}, {}}
	for i, m := range ms {
		if !slices.Equal(m.Features, want[i]) || (m.Features == nil) != (want[i] == nil) {
			t.Errorf("%s (%s): features %v, want %v", m.InstanceID, m.MemberID, m.Features, want[i])
		}
	}
	if a := features.Agree(ms); a.On[features.Park] || !slices.Equal(a.Without[features.Park], []string{"relay-1", "relay-3"}) {
		t.Errorf("agreement %+v, want park off without relay-1 and relay-3", a)
	}
	if own := withRecords([]features.Member{{MemberID: "x"}}, records, "", nil); own != "" {
		t.Errorf("a dynamic member found its own member id %q", own)
	}
}

// A member tombstones only its own earlier joins' records: never another
// instance's (that would withdraw parking from the group), never its
// current one.
func TestStaleOwnRecords(t *testing.T) {
	records := map[string]features.Record{
		"relay-0-a": {Instance: "relay-0"}, "relay-0-b": {Instance: "relay-0"}, "relay-0-c": {Instance: "relay-0"},
		"relay-1-a": {Instance: "relay-1"}, "x": {},
	}
	if got := staleOwn(records, "relay-0", "relay-0-c"); !slices.Equal(got, []string{"relay-0-a", "relay-0-b"}) {
		t.Errorf("stale records of relay-0 now at relay-0-c: %v", got)
	}
	if got := staleOwn(records, "", "x"); got != nil {
		t.Errorf("a dynamic member's stale records: %v, want none", got)
	}
}
