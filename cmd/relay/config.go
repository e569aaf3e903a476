package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"relay/internal/config"
)

// loadConfig loads and validates the configuration, printing every problem
// with its variable's name.
func loadConfig(lookup func(string) (string, bool), environ []string, stderr io.Writer) (*config.Config, bool) {
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

func (a *app) configCmd() *cobra.Command {
	var out output
	c := &cobra.Command{
		Use:   "config",
		Short: "print the effective configuration, secrets masked",
		Long: `Prints every relay variable with its value, default or derived value, and
the librdkafka properties passed through, secrets masked; a RELAY_ variable
relay does not know is named on stderr. With -o json, one JSON object of
variable names to values.`,
		Args: noArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			return status(a.printConfig(out))
		},
	}
	outputFlag(c, &out, false)
	return c
}

func (a *app) printConfig(out output) int {
	cfg, ok := loadConfig(a.lookup, a.environ, a.stderr)
	if !ok {
		return exitUsage
	}
	lines, m := cfg.Effective(), map[string]string{}
	for _, line := range lines {
		k, v, _ := strings.Cut(line, "=")
		m[k] = v
	}
	a.print(out, m, func(w io.Writer) { fmt.Fprintln(w, strings.Join(lines, "\n")) })
	for _, name := range config.Unknown(a.environ) {
		fmt.Fprintf(a.stderr, "warning: %s is not a relay variable (typo?); it is ignored\n", name)
	}
	return exitOK
}
