package envelope

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// Source is where a failed record first appeared.
type Source struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Timestamp string `json:"timestamp,omitempty"`
}

// View is the envelope as `relay quarantine show` prints it: the published
// shape (failureId, source, attempt, firstFailedAt, lastFailedAt,
// errorCode, payloadSchema, traceId), plus what else relay knows.
type View struct {
	FailureID     string  `json:"failureId"`
	Source        Source  `json:"source"`
	Attempt       int     `json:"attempt"`
	FirstFailedAt string  `json:"firstFailedAt"`
	LastFailedAt  string  `json:"lastFailedAt"`
	ErrorClass    string  `json:"errorClass"`
	ErrorCode     string  `json:"errorCode"`
	ErrorMessage  string  `json:"errorMessage,omitempty"`
	PayloadSchema string  `json:"payloadSchema,omitempty"`
	SchemaID      int     `json:"schemaId,omitempty"`
	ConsumerGroup string  `json:"consumerGroup"`
	TraceID       string  `json:"traceId,omitempty"`
	ReplayID      string  `json:"replayId,omitempty"`
	ReplayCount   int     `json:"replayCount,omitempty"`
	Location      *Where  `json:"location,omitempty"`
	Key           *string `json:"keyBase64,omitempty"`
	ValueBytes    int     `json:"valueBytes"`
}

// Where is where the envelope itself is stored.
type Where struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// NewView builds the printable view of f. traceparent may be empty.
func NewView(f *Failure, traceparent string, key []byte, valueLen int) View {
	v := View{
		FailureID:     f.ID,
		Source:        Source{Topic: f.SourceTopic, Partition: f.SourcePartition, Offset: f.SourceOffset},
		Attempt:       f.Attempt,
		FirstFailedAt: formatTime(f.FirstFailedAt),
		LastFailedAt:  formatTime(f.LastFailedAt),
		ErrorClass:    f.Class,
		ErrorCode:     f.Code,
		ErrorMessage:  f.Message,
		SchemaID:      f.SchemaID,
		ConsumerGroup: f.ConsumerGroup,
		TraceID:       TraceID(traceparent),
		ReplayID:      f.ReplayID,
		ReplayCount:   f.ReplayCount,
		ValueBytes:    valueLen,
	}
	if !f.SourceTimestamp.IsZero() {
		v.Source.Timestamp = f.SourceTimestamp.UTC().Format(time.RFC3339Nano)
	}
	if f.SchemaSubject != "" && f.SchemaVersion > 0 {
		v.PayloadSchema = f.SchemaSubject + ".v" + strconv.Itoa(f.SchemaVersion)
	}
	if key != nil {
		k := base64.StdEncoding.EncodeToString(key)
		v.Key = &k
	}
	return v
}

// TraceID returns the trace id of a W3C traceparent
// (version-traceid-parentid-flags), or "" if it is not one.
func TraceID(traceparent string) string {
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 || len(parts[1]) != 32 || strings.Trim(parts[1], "0123456789abcdef") != "" {
		return ""
	}
	return parts[1]
}
