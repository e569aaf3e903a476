package pipeline

import (
	"testing"

	"relay/internal/readme"
)

// TestReadmeListsPipelineCodes: the codes the pipeline adds to the
// classifier's are listed in the README too.
func TestReadmeListsPipelineCodes(t *testing.T) {
	readme.Lists(t, "code or outcome", CodeEnvelopeInvalid, CodeKeyBlocked, CodeKeyHeld,
		OutcomeProcessed, OutcomeRetry, OutcomeQuarantined, OutcomeRejected)
}
