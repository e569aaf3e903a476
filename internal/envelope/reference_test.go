package envelope

import "testing"

// Every header relay writes has a row in the reference's header tables.
func TestEveryHeaderIsDocumented(t *testing.T) {
	documented := map[string]bool{}
	for _, rows := range [][]HeaderDoc{OutputHeaders, FailureHeaders} {
		for _, r := range rows {
			for _, n := range r.Names {
				documented[n] = true
			}
		}
	}
	for _, h := range []string{
		MessageID, TraceParent, TraceState, FailureID, SourceTopic, SourcePartition, SourceOffset, SourceTimestamp,
		ConsumerGroup, Attempt, FirstFailedAt, LastFailedAt, NotBefore, ErrorClass, ErrorCode, ErrorMessage,
		SchemaID, SchemaSubject, SchemaVersion, ReplayID, ReplayCount, KeySeq, KeyHead, RecordTimestamp,
	} {
		if !documented[h] {
			t.Errorf("header %s has no row in OutputHeaders or FailureHeaders", h)
		}
	}
}
