package pipeline

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeListsPipelineCodes: the codes the pipeline adds to the
// classifier's are listed in the README too.
func TestReadmeListsPipelineCodes(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{CodeEnvelopeInvalid, CodeKeyBlocked, CodeKeyHeld, OutcomeProcessed, OutcomeRetry, OutcomeQuarantined, OutcomeRejected} {
		if !strings.Contains(string(b), "`"+c+"`") {
			t.Errorf("README does not list %s", c)
		}
	}
}
