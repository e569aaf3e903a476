package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"relay/internal/config"
)

// Print writes v to w as one JSON document with -o json, else as text
// writes it.
func Print(w io.Writer, out Output, v any, text func(w io.Writer)) {
	if out == JSON {
		_ = WriteJSON(w, v)
		return
	}
	text(w)
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
