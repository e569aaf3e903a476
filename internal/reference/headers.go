package reference

import (
	"strings"

	"relay/internal/envelope"
)

// headers renders the output headers and the failure envelope.
func headers(d *doc) {
	d.heading(3, "On every output record")
	d.table([]string{"header", "value"}, headerRows(envelope.OutputHeaders))
	d.para(strings.ToUpper(envelope.KeptHeaders[:1]) + envelope.KeptHeaders[1:] + ".")
	d.heading(3, "The failure envelope")
	d.para("Every retry-tier, quarantine and rejected record keeps the original key, value bytes and headers, and adds:")
	d.table([]string{"header", "value"}, headerRows(envelope.FailureHeaders))
}

func headerRows(docs []envelope.HeaderDoc) [][]string {
	rows := make([][]string, 0, len(docs))
	for _, h := range docs {
		rows = append(rows, []string{codes(h.Names...), h.Meaning})
	}
	return rows
}
