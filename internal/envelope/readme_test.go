package envelope

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeListsEveryHeader: header names are part of relay's interface;
// the README lists each, from these constants.
func TestReadmeListsEveryHeader(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{
		MessageID, TraceParent, TraceState, FailureID, SourceTopic, SourcePartition, SourceOffset, SourceTimestamp,
		ConsumerGroup, Attempt, FirstFailedAt, LastFailedAt, NotBefore, ErrorClass, ErrorCode, ErrorMessage,
		SchemaID, SchemaSubject, SchemaVersion, ReplayID, ReplayCount, KeySeq,
	} {
		if !strings.Contains(string(b), "`"+h+"`") {
			t.Errorf("README does not list the header %s", h)
		}
	}
}
