package main

import (
	"errors"
	"fmt"
	"io"

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

func printConfig(lookup func(string) (string, bool), environ []string, stdout, stderr io.Writer) int {
	cfg, ok := loadConfig(lookup, environ, stderr)
	if !ok {
		return exitUsage
	}
	for _, line := range cfg.Effective() {
		fmt.Fprintln(stdout, line)
	}
	for _, name := range config.Unknown(environ) {
		fmt.Fprintf(stderr, "warning: %s is not a relay variable (typo?); it is ignored\n", name)
	}
	return exitOK
}
