package tiers

import (
	"errors"
	"fmt"
	"time"
)

// Class is a failure class: invalid, rejected, transient, unknown (and ordering).
type Class int

const (
	// Invalid input never improves with time: quarantine at once.
	Invalid Class = iota + 1
	// Rejected is a permanent business "no": the rejected topic.
	Rejected
	// Transient dependency failures may heal: retry within the budget.
	Transient
	// Unknown failures get a small budget, then quarantine.
	Unknown
	// Ordering marks records that did not fail themselves but wait behind
	// (or were held with) an earlier record of their key.
	Ordering
)

var classNames = map[Class]string{Invalid: "invalid", Rejected: "rejected", Transient: "transient", Unknown: "unknown", Ordering: "ordering"}

// String is the class as relay.error.class carries it.
func (c Class) String() string {
	if s, ok := classNames[c]; ok {
		return s
	}
	return fmt.Sprintf("class(%d)", int(c))
}

// ParseClass reads a relay.error.class value.
func ParseClass(s string) (Class, bool) {
	for c, n := range classNames {
		if n == s {
			return c, true
		}
	}
	return 0, false
}

// Cause names what went wrong, as the stage that saw it knows it. The table
// in decide.go maps every cause to its class and code.
type Cause int

const (
	CauseWireFormat           Cause = iota + 1 // not Confluent wire format
	CauseSchemaNotFound                        // the registry does not know the schema id
	CauseSchemaUnsupported                     // known schema, version outside the accepted set
	CausePayloadMalformed                      // body does not decode with its writer schema
	CauseFieldMissing                          // upcast needs a field the writer lacks and that has no default
	CauseRegistryUnavailable                   // registry unreachable, 5xx or timed out
	CauseRuleReject                            // a rule with action reject matched
	CauseRuleQuarantine                        // a rule with action quarantine matched
	CauseHookReject                            // hook answered 422
	CauseHookInvalidInput                      // hook answered 400
	CauseHookUnavailable                       // hook 5xx, timeout, refused
	CauseHookRateLimited                       // hook 429
	CauseHookUnexpected                        // hook answered another status
	CauseUnknown                               // anything else
	CauseRegistryUnauthorized                  // registry answered 401 or 403: relay's credential is refused
	CauseHookUnauthorized                      // hook answered 401 or 403: relay's credential is refused
)

// Error is a failure a stage has recognised. Any other error is CauseUnknown.
type Error struct {
	Cause Cause
	// Name refines the code of rule and hook rejections
	// (REJECTED_<Name>) and rule quarantines (<Name>).
	Name string
	// RetryAfter is a dependency's own hint (HTTP Retry-After); zero if none.
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	c := CodeOf(e)
	if e.Err == nil {
		return c
	}
	return c + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Fail wraps err as a recognised failure.
func Fail(c Cause, err error) *Error { return &Error{Cause: c, Err: err} }

// Failf is Fail with a formatted message.
func Failf(c Cause, format string, args ...any) *Error {
	return &Error{Cause: c, Err: fmt.Errorf(format, args...)}
}

// causeOf finds the recognised failure in err's chain.
func causeOf(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}
