package tiers

import (
	"strings"
	"time"
)

// Codes relay writes in relay.error.code. They are metric labels: stable,
// upper-snake and bounded in number (rule codes are bounded by the rules
// file; hook codes are sanitised and capped, see RejectCode).
const (
	CodeWireFormatInvalid          = "WIRE_FORMAT_INVALID"
	CodeSchemaNotFound             = "SCHEMA_NOT_FOUND"
	CodeSchemaUnsupported          = "SCHEMA_UNSUPPORTED"
	CodePayloadMalformed           = "PAYLOAD_MALFORMED"
	CodeFieldMissing               = "FIELD_MISSING"
	CodeSchemaRegistryUnavailable  = "SCHEMA_REGISTRY_UNAVAILABLE"
	CodeSchemaRegistryUnauthorized = "SCHEMA_REGISTRY_UNAUTHORIZED"
	CodeHookUnauthorized           = "HOOK_UNAUTHORIZED"
	CodeHookUnavailable            = "HOOK_UNAVAILABLE"
	CodeHookRateLimited            = "HOOK_RATE_LIMITED"
	CodeHookInvalidInput           = "HOOK_INVALID_INPUT"
	CodeHookUnexpectedStatus       = "HOOK_UNEXPECTED_STATUS"
	CodeUnclassified               = "UNCLASSIFIED"
	// RejectedPrefix starts every business rejection code.
	RejectedPrefix = "REJECTED_"
	// RulePrefix starts the code of a rule whose action is quarantine.
	RulePrefix = "RULE_"
	// ExhaustedSuffix ends the code of a retry budget that ran out.
	ExhaustedSuffix = "_EXHAUSTED"
	// defaultHookRejectName is used when a 422 names no code.
	defaultHookRejectName = "HOOK"
)

// row is one line of the classification table.
type row struct {
	class Class
	code  string // "" when the code is built from Error.Name
}

// table maps every cause to its class and code. One row per cause; the
// comment says why the class is right.
var table = map[Cause]row{
	// Bytes that are not magic byte + schema id + body will not change.
	CauseWireFormat: {Invalid, CodeWireFormatInvalid},
	// Schema ids are immutable: an id the registry does not know (it
	// answered 404) will not appear for this record later.
	CauseSchemaNotFound: {Invalid, CodeSchemaNotFound},
	// The writer's version is outside what this deployment accepts; a
	// replay after a configuration change is the way back.
	CauseSchemaUnsupported: {Invalid, CodeSchemaUnsupported},
	// The body does not decode with its own writer schema.
	CausePayloadMalformed: {Invalid, CodePayloadMalformed},
	// The canonical version needs a field the writer lacks, without default.
	CauseFieldMissing: {Invalid, CodeFieldMissing},
	// Unreachable, 5xx or slow: the registry may come back.
	CauseRegistryUnavailable: {Transient, CodeSchemaRegistryUnavailable},
	// 401/403: the registry refuses relay's credential. Never the record's
	// fault: it waits, within the budget, for the credential to be fixed.
	CauseRegistryUnauthorized: {Transient, CodeSchemaRegistryUnauthorized},
	// A rule said no: a business decision, not a fault.
	CauseRuleReject: {Rejected, ""},
	// A rule asked for quarantine: the record is unfit, not rejected.
	CauseRuleQuarantine: {Invalid, ""},
	// The hook said no (422).
	CauseHookReject: {Rejected, ""},
	// The hook cannot read what relay sent (400): retrying sends the same.
	CauseHookInvalidInput: {Invalid, CodeHookInvalidInput},
	// 5xx, timeout, refused connection: the hook may come back.
	CauseHookUnavailable: {Transient, CodeHookUnavailable},
	// 429: the hook asks us to slow down, with Retry-After if it says so.
	CauseHookRateLimited: {Transient, CodeHookRateLimited},
	// 401/403: the hook refuses relay's credential, whatever the record.
	CauseHookUnauthorized: {Transient, CodeHookUnauthorized},
	// A status the contract does not define: a person must look.
	CauseHookUnexpected: {Invalid, CodeHookUnexpectedStatus},
	// Neither safely transient nor safely permanent: small budget.
	CauseUnknown: {Unknown, CodeUnclassified},
}

// Classify returns the class and code of err. Errors no stage recognised
// are Unknown/UNCLASSIFIED.
func Classify(err error) (Class, string) {
	e, ok := causeOf(err)
	if !ok {
		return Unknown, CodeUnclassified
	}
	return table[e.Cause].class, CodeOf(e)
}

// CodeOf returns the code of a recognised failure.
func CodeOf(e *Error) string {
	r, ok := table[e.Cause]
	if !ok {
		return CodeUnclassified
	}
	if r.code != "" {
		return r.code
	}
	switch e.Cause {
	case CauseRuleQuarantine:
		return RulePrefix + SanitizeName(e.Name, "RULE")
	default:
		return RejectCode(e.Name)
	}
}

// RejectCode is REJECTED_<name>, with name made upper-snake and capped so a
// hook cannot mint unbounded metric labels.
func RejectCode(name string) string {
	return RejectedPrefix + SanitizeName(name, defaultHookRejectName)
}

// SanitizeName makes s an upper-snake code part of at most 40 characters,
// or def when nothing is left.
func SanitizeName(s, def string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(s) {
		switch {
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 40 {
			break
		}
	}
	out := strings.Trim(b.String(), "_")
	if out == "" {
		return def
	}
	return out
}

// Kind is what to do with a failed record.
type Kind int

const (
	// RetryInPlace: try again now, after Delay, in the same transaction.
	RetryInPlace Kind = iota + 1
	// RetryTier: write the record to tier Tier, due after Delay.
	RetryTier
	// Quarantine: terminal, the quarantine topic.
	Quarantine
	// Reject: terminal, the rejected topic.
	Reject
)

var kindNames = map[Kind]string{RetryInPlace: "retry-in-place", RetryTier: "retry-tier", Quarantine: "quarantine", Reject: "reject"}

func (k Kind) String() string { return kindNames[k] }

// Decision is what becomes of a failed record.
type Decision struct {
	Kind  Kind
	Class Class
	Code  string
	// Delay is the wait before the next attempt (RetryInPlace, RetryTier).
	Delay time.Duration
	// Tier is the index of the tier to write to (RetryTier).
	Tier int
}

// Policy is the retry budget and the tiers.
type Policy struct {
	// BlockingAttempts is the number of in-place retries after a first
	// failure at the source, each after BlockingBackoff.
	BlockingAttempts int
	BlockingBackoff  time.Duration
	// BlockingMaxWait caps one in-place wait; a dependency asking for a
	// longer pause (Retry-After) is waited for in a tier instead.
	BlockingMaxWait time.Duration
	// Tiers are the delays of the non-blocking tiers, in order. After the
	// last one, further attempts stay in the last tier.
	Tiers []time.Duration
	// MaxAttempts bounds all attempts of a record, the first included.
	MaxAttempts int
	// MaxElapsed bounds the time from the first failure to the last
	// attempt: a retry that would be due later is not made.
	MaxElapsed time.Duration
	// UnknownAttempts bounds all attempts of a record whose failure is of
	// the Unknown class (at most MaxAttempts).
	UnknownAttempts int
	// WaitInPlace: the tiers are waits of the record at its place in its
	// own partition (partition ordering), not shared tier topics, so a
	// Retry-After is simply waited for.
	WaitInPlace bool
}

// State is what is known of a record's failures so far.
type State struct {
	// Attempt is the number of attempts made, the failed one included.
	Attempt int
	// FirstFailedAt is when the record first failed.
	FirstFailedAt time.Time
	// InPlace is the number of in-place retries already made in this pass.
	InPlace int
	// AtSource is true when the record was read from its source (or a
	// replay), false when it came from a tier.
	AtSource bool
	// Tier is the index of the tier the record came from (AtSource false).
	Tier int
}

// Decide maps a failure to a decision. now is the time of the failure.
func (p Policy) Decide(err error, s State, now time.Time) Decision {
	class, code := Classify(err)
	switch class {
	case Invalid:
		return Decision{Kind: Quarantine, Class: class, Code: code}
	case Rejected:
		return Decision{Kind: Reject, Class: class, Code: code}
	}
	maxAttempts := p.MaxAttempts
	if class == Unknown {
		maxAttempts = min(maxAttempts, p.UnknownAttempts)
	}
	exhausted := Decision{Kind: Quarantine, Class: class, Code: code + ExhaustedSuffix}
	if s.Attempt >= maxAttempts {
		return exhausted
	}
	var hint time.Duration
	if e, ok := causeOf(err); ok {
		hint = e.RetryAfter
	}
	within := func(d time.Duration) bool {
		return now.Add(d).Sub(s.FirstFailedAt) <= p.MaxElapsed
	}
	if s.AtSource && s.InPlace < p.BlockingAttempts {
		d := max(p.BlockingBackoff, hint)
		if d <= p.BlockingMaxWait {
			if !within(d) {
				return exhausted
			}
			return Decision{Kind: RetryInPlace, Class: class, Code: code, Delay: d}
		}
	}
	if len(p.Tiers) == 0 {
		return exhausted
	}
	tier := 0
	if !s.AtSource {
		tier = min(s.Tier+1, len(p.Tiers)-1)
	}
	if p.WaitInPlace {
		d := max(p.Tiers[tier], hint)
		if !within(d) {
			return exhausted
		}
		return Decision{Kind: RetryTier, Class: class, Code: code, Delay: d, Tier: tier}
	}
	tier = p.tierFor(tier, hint, within)
	d := p.Tiers[tier]
	if !within(d) {
		return exhausted
	}
	return Decision{Kind: RetryTier, Class: class, Code: code, Delay: d, Tier: tier}
}

// tierFor picks the tier for a record whose next tier is natural and whose
// dependency asked for a pause of hint. A tier partition is read in order
// and paused until its head is due, so every record in a tier must be due
// its tier's delay after it was written: one due later would hold every
// record behind it. A Retry-After therefore picks the first tier whose
// delay is at least that long — or, when that tier would pass the elapsed
// budget or there is none, the longest tier from natural on that fits
// (tried sooner than asked; the attempt counts).
func (p Policy) tierFor(natural int, hint time.Duration, within func(time.Duration) bool) int {
	best := natural
	for t := natural; t < len(p.Tiers); t++ {
		if !within(p.Tiers[t]) {
			break
		}
		best = t
		if p.Tiers[t] >= hint {
			break
		}
	}
	return best
}

// WorstInPlace is the longest a record can be retried in place, given the
// longest single attempt: what the transaction and poll budgets must fit.
func (p Policy) WorstInPlace(attempt time.Duration) time.Duration {
	return time.Duration(p.BlockingAttempts+1)*attempt + time.Duration(p.BlockingAttempts)*p.BlockingMaxWait
}
