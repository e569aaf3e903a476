package envelope

import (
	"testing"

	"relay/internal/readme"
)

// TestReadmeListsEveryHeader: header names are part of relay's interface;
// the README lists each, from these constants.
func TestReadmeListsEveryHeader(t *testing.T) {
	readme.Lists(t, "header",
		MessageID, TraceParent, TraceState, FailureID, SourceTopic, SourcePartition, SourceOffset, SourceTimestamp,
		ConsumerGroup, Attempt, FirstFailedAt, LastFailedAt, NotBefore, ErrorClass, ErrorCode, ErrorMessage,
		SchemaID, SchemaSubject, SchemaVersion, ReplayID, ReplayCount, KeySeq, RecordTimestamp)
}
