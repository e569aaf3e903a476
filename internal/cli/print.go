package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"

	"relay/internal/config"
)

// Print writes v to w as one JSON document with -o json, one YAML
// document with -o yaml, else as text writes it.
func Print(w io.Writer, out Output, v any, text func(w io.Writer)) {
	switch out {
	case JSON:
		_ = WriteJSON(w, v)
	case YAML:
		_ = WriteYAML(w, v)
	default:
		text(w)
	}
}

// Write writes v as one JSON or YAML document (out).
func Write(w io.Writer, out Output, v any) error {
	if out == YAML {
		return WriteYAML(w, v)
	}
	return WriteJSON(w, v)
}

// WriteYAML writes v as YAML: the document WriteJSON writes, with the
// same names in the same order (read through YAML's own parser, which
// reads JSON, then written in block style).
func WriteYAML(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		return err
	}
	block(&n)
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return err
	}
	return enc.Close()
}

// block clears the styles JSON's syntax gave n (flow, quoted): the encoder
// quotes a string only where YAML would read it as something else.
func block(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		block(c)
	}
}

// WriteJSON writes v as one pretty-printed JSON document.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// LoadConfig loads and validates the configuration, printing every problem
// with its variable's name.
func LoadConfig(lookup func(string) (string, bool), environ []string, stderr io.Writer) (*config.Config, bool) {
	cfg, err := config.Load(lookup, environ)
	if err != nil {
		fmt.Fprintln(stderr, "relay: invalid configuration:")
		var joined interface{ Unwrap() []error }
		if errors.As(err, &joined) {
			for _, e := range joined.Unwrap() {
				fmt.Fprintln(stderr, "  "+e.Error())
			}
		} else {
			fmt.Fprintln(stderr, "  "+err.Error())
		}
		return nil, false
	}
	return cfg, true
}
