package ledger

import (
	"testing"

	"relay/internal/readme"
)

// The README lists every ledger state.
func TestReadmeListsEveryState(t *testing.T) {
	names := make([]string, len(States))
	for i, s := range States {
		names[i] = string(s)
	}
	readme.Lists(t, "state", names...)
}
