// Package features is what the members of a relay group agree on before a
// change of what relay writes or how it reads takes effect: parking key
// order's followers today.
//
// Each instance announces its features in its consumer's client.id, which
// the group coordinator keeps per member and DescribeConsumerGroups
// returns: "relay-consumer;relay-features=park". The announcement lives
// and dies with the membership itself, so no record outlives the member,
// and a member that says nothing (a relay from before announcements, or
// any other client in the group) supports nothing. A feature is in force
// when every member of the group announces it; it turns on by itself once
// the last member without it has left, and off as soon as one joins.
package features

import (
	"slices"
	"strings"
)

// Park is parking key order's followers in memory, their offsets carried
// in the committed offset's metadata (relay.park.1).
const Park = "park"

// All are the features this version knows, in the order they are shown.
var All = []string{Park}

// tag separates the announcement from the client.id it is appended to.
const tag = ";relay-features="

// Announce is clientID carrying fs.
func Announce(clientID string, fs []string) string {
	return clientID + tag + strings.Join(fs, ",")
}

// Of is what clientID announces: nil for a client that announces nothing.
func Of(clientID string) []string {
	_, list, ok := strings.Cut(clientID, tag)
	if !ok || list == "" {
		return nil
	}
	return strings.Split(list, ",")
}

// Bare is clientID without its announcement.
func Bare(clientID string) string {
	id, _, _ := strings.Cut(clientID, tag)
	return id
}

// Member is a member of the group as DescribeConsumerGroups shows it.
type Member struct {
	InstanceID string `json:"groupInstanceId,omitempty"`
	ClientID   string `json:"clientId"`
	Host       string `json:"host"`
}

// Name is how a member is named to an operator.
func (m Member) Name() string {
	if m.InstanceID != "" {
		return m.InstanceID
	}
	return Bare(m.ClientID) + "@" + strings.TrimPrefix(m.Host, "/")
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
			if !slices.Contains(Of(m.ClientID), f) {
				without = append(without, m.Name())
			}
		}
		slices.Sort(without)
		a.Without[f] = without
		a.On[f] = len(members) > 0 && len(without) == 0
	}
	return a
}
