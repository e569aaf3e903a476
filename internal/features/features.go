// Package features is what the members of a relay group agree on before a
// change of what relay writes or how it reads takes effect: parking key
// order's followers today.
//
// Each instance announces its version and features in a member record of
// the state topic (partition 0, key "member|" and its member id), once it
// has joined the group and learnt the member id the group coordinator
// gave it. Every instance reads those records, and joins them with the
// group's members as DescribeConsumerGroups lists them, by member id: a
// member id changes at every join (also when a static member restarts
// within its session), so a record never speaks for another process, and
// a member without a record (a relay from before announcements, a member
// that has not written its record yet, or any other client in the group)
// supports nothing. A feature is in force when every member of the group
// announces it; it turns on by itself once the last member without it has
// left, and off as soon as one joins.
//
// The client.id that the group coordinator also reports cannot carry the
// announcement: a static member that rejoins keeps the client.id of its
// first join, so an upgraded pod would go on speaking for the older one.
package features

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Park is parking key order's followers in memory, their offsets carried
// in the committed offset's metadata (relay.park.1).
const Park = "park"

// All are the features this version knows, in the order they are shown.
var All = []string{Park}

// KeyPrefix starts the state-topic key of a member record; the member id
// follows.
const KeyPrefix = "member|"

// RecordVersion is the format of the member records this version writes.
const RecordVersion = 1

// Record is what a member announces.
type Record struct {
	V        int      `json:"v"`
	Instance string   `json:"instance,omitempty"` // group.instance.id
	Version  string   `json:"version"`            // relay's
	Features []string `json:"features"`
	// Settings are the member's values of the settings every member of
	// a group must share (variable → value; nil: not announced, a record
	// of a relay before it announced them).
	Settings map[string]string `json:"settings,omitempty"`
}

// Key is the state-topic key of memberID's record.
func Key(memberID string) string { return KeyPrefix + memberID }

// Encode is r as a state-topic value.
func (r Record) Encode() []byte {
	r.V = RecordVersion
	if r.Features == nil {
		r.Features = []string{}
	}
	b, _ := json.Marshal(r)
	return b
}

// Decode reads a member record. A newer format is read for what it shares
// with this one (a newer relay's features this one does not know are not
// in All, and so never agreed).
func Decode(v []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(v, &r); err != nil {
		return Record{}, fmt.Errorf("member record: %w", err)
	}
	if r.V < 1 {
		return Record{}, fmt.Errorf("member record: no format version")
	}
	return r, nil
}

// Member is a member of the group as DescribeConsumerGroups shows it, with
// the features its record announces (nil: no record).
type Member struct {
	InstanceID string   `json:"groupInstanceId,omitempty"`
	MemberID   string   `json:"memberId"`
	ClientID   string   `json:"clientId"`
	Host       string   `json:"host"`
	Features   []string `json:"features"`
	// Settings are those its record announces (nil: none known).
	Settings map[string]string `json:"settings,omitempty"`
}

// Name is how a member is named to an operator.
func (m Member) Name() string {
	if m.InstanceID != "" {
		return m.InstanceID
	}
	return m.ClientID + "@" + strings.TrimPrefix(m.Host, "/")
}

// Agreement is what a group's members agree on.
type Agreement struct {
	// On: the features every member announces (none when the group has
	// no member).
	On map[string]bool
	// Without: per known feature, the members that do not announce it.
	Without map[string][]string
}

// Agree is the agreement of members on the features this version knows.
func Agree(members []Member) Agreement {
	a := Agreement{On: map[string]bool{}, Without: map[string][]string{}}
	for _, f := range All {
		var without []string
		for _, m := range members {
			if !slices.Contains(m.Features, f) {
				without = append(without, m.Name())
			}
		}
		slices.Sort(without)
		a.Without[f] = without
		a.On[f] = len(members) > 0 && len(without) == 0
	}
	return a
}

// Conflict is a member that runs a shared setting with another value than
// this instance.
type Conflict struct {
	Member       string // its name (Member.Name)
	Setting      string // the variable
	Theirs, Ours string
}

func (c Conflict) String() string {
	return fmt.Sprintf("member %s runs %s=%q, this instance %q", c.Member, c.Setting, c.Theirs, c.Ours)
}

// Conflicts are the members whose records announce a shared setting with
// another value than ours, by member and setting; members with the
// group.instance.id self (this instance, about to replace its earlier
// process) and members without announced settings are not judged.
func Conflicts(ours map[string]string, members []Member, self string) []Conflict {
	var out []Conflict
	for _, m := range members {
		if m.Settings == nil || self != "" && m.InstanceID == self {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(ours)) {
			if theirs, ok := m.Settings[k]; ok && theirs != ours[k] {
				out = append(out, Conflict{Member: m.Name(), Setting: k, Theirs: theirs, Ours: ours[k]})
			}
		}
	}
	slices.SortFunc(out, func(a, b Conflict) int {
		return cmp.Or(cmp.Compare(a.Member, b.Member), cmp.Compare(a.Setting, b.Setting))
	})
	return out
}
