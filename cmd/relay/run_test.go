package main

import (
	"bytes"
	"errors"
	"testing"

	"relay/internal/cli"
	"relay/internal/daemon"
)

// How the daemon ends maps to 0, 2 (printed) or 1 (the daemon logged it).
func TestDaemonExit(t *testing.T) {
	var stderr bytes.Buffer
	if code := daemonExit(nil, &stderr); code != cli.OK {
		t.Errorf("graceful stop: %d", code)
	}
	if code := daemonExit(errors.New("fenced"), &stderr); code != cli.Failure || stderr.Len() != 0 {
		t.Errorf("runtime failure: %d, printed %q", code, stderr.String())
	}
	code := daemonExit(&daemon.ConfigError{Err: errors.New("RELAY_RULES_FILE: line 3")}, &stderr)
	if want := "relay: invalid configuration:\n  RELAY_RULES_FILE: line 3\n"; code != cli.Usage || stderr.String() != want {
		t.Errorf("configuration: %d, printed %q, want %q", code, stderr.String(), want)
	}
}
