package tiers

import "slices"

// Row is one row of the classification table, as docs/REFERENCE.md shows
// it.
type Row struct {
	Cause Cause
	Class Class
	// Code is the code, or its pattern (REJECTED_<RULE>) when CodeOf builds
	// it from a rule's or the hook's name.
	Code    string
	Meaning string
}

// causeDoc says what each cause is, and gives the pattern of the codes
// built from a name.
var causeDoc = map[Cause]struct{ pattern, meaning string }{
	CauseWireFormat:           {"", "the value is not in the Confluent wire format (magic byte 0, 4-byte schema id, body; for Protobuf, a message-index array naming a message of the schema)"},
	CauseSchemaNotFound:       {"", "the registry does not know the schema id"},
	CauseSchemaUnsupported:    {"", "known schema, but its version is not among the accepted versions, or it is of another schema type, or (Protobuf) the record is another message than the canonical one"},
	CausePayloadMalformed:     {"", "the body does not decode with (JSON Schema: satisfy) its writer schema"},
	CauseFieldMissing:         {"", "the record cannot be read as the canonical version: a field it needs has no default (Avro), a field changed its kind or cardinality (Protobuf), the canonical schema refuses it (JSON Schema)"},
	CauseRegistryUnavailable:  {"", "the registry is unreachable, answers 5xx or times out"},
	CauseRuleReject:           {RejectedPrefix + "<RULE>", "a rule with `action: reject` matched"},
	CauseRuleQuarantine:       {RulePrefix + "<NAME>", "a rule with `action: quarantine` matched"},
	CauseHookReject:           {RejectedPrefix + "<hook code>", "the hook answered 422; without a code, `" + RejectCode("") + "`"},
	CauseHookInvalidInput:     {"", "the hook answered 400: it cannot read what relay sent"},
	CauseHookUnavailable:      {"", "the hook answered 5xx, timed out or refused the connection"},
	CauseHookRateLimited:      {"", "the hook answered 429 (its `Retry-After` is honoured)"},
	CauseHookUnexpected:       {"", "the hook answered a status its contract does not define"},
	CauseUnknown:              {"", "any other failure"},
	CauseRegistryUnauthorized: {"", "the registry answered 401 or 403: it refuses relay's credential (`RELAY_SCHEMA_REGISTRY_*`); never the record's fault, relay is not ready while it lasts"},
	CauseHookUnauthorized:     {"", "the hook answered 401 or 403: it refuses relay's credential (`RELAY_HOOK_*`); never the record's fault, relay is not ready while it lasts"},
}

// Table returns the classification table in the order of the causes.
func Table() []Row {
	out := make([]Row, 0, len(table))
	for c, r := range table {
		d := causeDoc[c]
		code := r.code
		if code == "" {
			code = d.pattern
		}
		out = append(out, Row{Cause: c, Class: r.class, Code: code, Meaning: d.meaning})
	}
	slices.SortFunc(out, func(a, b Row) int { return int(a.Cause) - int(b.Cause) })
	return out
}

// Classes lists every class, in order.
func Classes() []Class {
	out := make([]Class, 0, len(classNames))
	for c := range classNames {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}
