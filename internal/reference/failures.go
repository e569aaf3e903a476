package reference

import (
	"relay/internal/config"
	"relay/internal/pipeline"
	"relay/internal/tiers"
)

// codeRow is one code of relay.error.code and its class.
type codeRow struct {
	code    string
	class   tiers.Class
	meaning string
	ends    bool // the end of a retry budget, not a cause
}

// codeRows are the classifier's codes, the codes the pipeline adds and the
// codes of a budget that ran out.
func codeRows() []codeRow {
	var out []codeRow
	for _, r := range tiers.Table() {
		out = append(out, codeRow{r.Code, r.Class, r.Meaning, false})
	}
	return append(out,
		codeRow{"<CODE>" + tiers.ExhaustedSuffix, tiers.Transient, "a transient failure's retry budget ran out: quarantined with its code and this suffix", true},
		codeRow{tiers.CodeUnclassified + tiers.ExhaustedSuffix, tiers.Unknown, "an unclassified failure's attempts (`" + config.EnvUnclassifiedAttempts + "`) ran out: quarantined", true},
		codeRow{pipeline.CodeEnvelopeInvalid, tiers.Invalid, "a tier or replay record whose failure envelope cannot be read", false},
		codeRow{pipeline.CodeKeyBlocked, tiers.Ordering, "key ordering: the record waits in a tier behind an earlier record of its key; it has not failed itself and no attempt is counted", false},
		codeRow{pipeline.CodeKeyHeld, tiers.Ordering, "key ordering with `" + config.EnvOrderingOnQuarantine + "=hold`: quarantined because an earlier record of its key was, so they can be replayed together", false},
	)
}

// decisions says what becomes of a record of each class.
var decisions = map[tiers.Class]string{
	tiers.Invalid:   "quarantine at once, attempt 1",
	tiers.Rejected:  "rejected topic",
	tiers.Transient: "retry in place, then the tiers, within the budget; then quarantine `<CODE>" + tiers.ExhaustedSuffix + "`",
	tiers.Unknown:   "at most `" + config.EnvUnclassifiedAttempts + "` attempts, then `" + tiers.CodeUnclassified + tiers.ExhaustedSuffix + "`",
	tiers.Ordering:  "not a failure of its own: follows an earlier record of its key through the tiers, or is quarantined with it",
}

// failures renders the classes and the codes.
func failures(d *doc) {
	d.para("Every tier, quarantine and rejected record carries its class in `relay.error.class` and its code in " +
		"`relay.error.code`; codes are also the `code` label of the metrics.")
	all := codeRows()
	d.heading(3, "Classes")
	rows := [][]string{}
	for _, c := range tiers.Classes() {
		var of []string
		for _, r := range all {
			if r.class == c && !r.ends {
				of = append(of, r.code)
			}
		}
		rows = append(rows, []string{c.String(), codes(of...), decisions[c]})
	}
	d.table([]string{"class", "causes (codes)", "decision"}, rows)
	d.heading(3, "Codes")
	rows = rows[:0]
	for _, r := range all {
		rows = append(rows, []string{code(r.code), r.class.String(), r.meaning})
	}
	d.table([]string{"code", "class", "meaning"}, rows)
}
