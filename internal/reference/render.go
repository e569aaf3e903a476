package reference

import (
	"strings"
)

// Command is one command of relay's command line, for the commands
// section: its full path ("relay quarantine list") and what it does.
type Command struct {
	Path  string
	Short string
}

// section is one top-level section of the reference.
type section struct {
	title  string
	render func(d *doc)
}

// Render returns the text of docs/REFERENCE.md. cmds fills the commands
// section, which is left out when cmds is empty.
func Render(cmds []Command) []byte {
	sections := []section{
		{"Environment variables", variables},
		{"Kafka client properties", passthrough},
		{"Headers", headers},
		{"Failure classes and codes", failures},
		{"Quarantine ledger", ledgerStates},
		{"Metrics", metrics},
		{"Exit codes", exits},
	}
	if len(cmds) > 0 {
		sections = append([]section{{"Commands", func(d *doc) { commands(d, cmds) }}}, sections...)
	}
	d := &doc{}
	d.heading(1, "relay reference")
	d.para("Generated from relay's code by `go generate ./cmd/relay`: do not edit it by hand. " +
		"The [user guide](GUIDE.md) explains how relay works; this file lists the names its users see and set.")
	var toc []string
	for _, s := range sections {
		toc = append(toc, "- ["+s.title+"](#"+anchor(s.title)+")")
	}
	d.para(strings.Join(toc, "\n"))
	for _, s := range sections {
		d.heading(2, s.title)
		s.render(d)
	}
	return []byte(d.String())
}

// commands renders the commands the caller passed.
func commands(d *doc, cmds []Command) {
	rows := make([][]string, 0, len(cmds))
	for _, c := range cmds {
		rows = append(rows, []string{code(c.Path), c.Short})
	}
	d.table([]string{"command", "what it does"}, rows)
}

// doc builds Markdown.
type doc struct{ strings.Builder }

func (d *doc) heading(level int, text string) {
	d.WriteString(strings.Repeat("#", level) + " " + text + "\n\n")
}

func (d *doc) para(text string) { d.WriteString(text + "\n\n") }

// table writes a table; cells may hold Markdown, and '|' in them is escaped.
func (d *doc) table(head []string, rows [][]string) {
	d.row(head)
	sep := make([]string, len(head))
	for i := range sep {
		sep[i] = "---"
	}
	d.row(sep)
	for _, r := range rows {
		d.row(r)
	}
	d.WriteString("\n")
}

func (d *doc) row(cells []string) {
	esc := make([]string, len(cells))
	for i, c := range cells {
		esc[i] = strings.ReplaceAll(c, "|", `\|`)
	}
	d.WriteString("| " + strings.Join(esc, " | ") + " |\n")
}

// code is s as inline code.
func code(s string) string { return "`" + s + "`" }

// codes is each of names as inline code, joined by ", ".
func codes(names ...string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = code(n)
	}
	return strings.Join(out, ", ")
}

// anchor is the GitHub anchor of a heading.
func anchor(title string) string {
	return strings.ReplaceAll(strings.ToLower(title), " ", "-")
}

// str reads a string constant whether or not it has a named type.
func str[T ~string](v T) string { return string(v) }
