package ledger

import (
	"testing"

	"relay/internal/readme"
)

// The README lists every ledger state.
func TestReadmeListsEveryState(t *testing.T) {
	readme.Lists(t, "state", States...)
}
