package tracing

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The exception event's attributes (OpenTelemetry semantic conventions).
const (
	exceptionEvent   = "exception"
	exceptionType    = attribute.Key("exception.type")
	exceptionMessage = attribute.Key("exception.message")
)

// Fail marks span failed: status Error with msg, and an exception event
// of type typ (relay's failure code where there is one) and message msg.
// msg must already be redacted: it reaches the collector as it is.
func Fail(span trace.Span, typ, msg string) {
	span.AddEvent(exceptionEvent, trace.WithAttributes(exceptionType.String(typ), exceptionMessage.String(msg)))
	span.SetStatus(codes.Error, msg)
}
