package pipeline

import (
	"testing"

	"relay/internal/ledger"
	"relay/internal/readme"
)

// TestReadmeListsPipelineCodes: the codes the pipeline adds to the
// classifier's are listed in the README too.
func TestReadmeListsPipelineCodes(t *testing.T) {
	names := []string{CodeEnvelopeInvalid, CodeKeyBlocked, CodeKeyHeld}
	for _, o := range ledger.RecordOutcomes {
		names = append(names, string(o))
	}
	readme.Lists(t, "code or outcome", names...)
}
