package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"testing"

	"github.com/spf13/cobra"

	"relay/internal/cli"
	"relay/internal/reference"
)

//go:generate go test -run ^TestReferenceIsCurrent$ . -update

var update = flag.Bool("update", false, "rewrite docs/REFERENCE.md from the code")

const referenceFile = "../../docs/REFERENCE.md"

// docs/REFERENCE.md is what the code says: its tables and this command tree.
func TestReferenceIsCurrent(t *testing.T) {
	root := newRoot(&app{lookup: func(string) (string, bool) { return "", false }, stdout: io.Discard, stderr: io.Discard})
	want := reference.Render(commandsOf(root))
	if *update {
		if err := os.WriteFile(referenceFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(referenceFile)
	if err != nil || !bytes.Equal(have, want) {
		t.Fatalf("docs/REFERENCE.md is stale (%v); run: go generate ./cmd/relay", err)
	}
}

// The exit codes the reference documents are the ones relay returns.
func TestReferenceExitCodes(t *testing.T) {
	codes := []int{cli.OK, cli.Failure, cli.Usage, cli.Stopped, cli.Incomplete}
	if len(reference.ExitCodes) != len(codes) {
		t.Fatalf("the reference documents %d exit codes, relay has %d", len(reference.ExitCodes), len(codes))
	}
	for i, c := range codes {
		if reference.ExitCodes[i].Code != c {
			t.Errorf("exit code %d is documented as %d", c, reference.ExitCodes[i].Code)
		}
	}
}

// commandsOf lists the runnable commands under c, depth first, as users
// type them; cobra's own (help, completion) are left out.
func commandsOf(c *cobra.Command) []reference.Command {
	var out []reference.Command
	for _, sub := range c.Commands() {
		if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
			continue
		}
		if sub.Runnable() && !sub.HasSubCommands() {
			out = append(out, reference.Command{Path: sub.CommandPath(), Short: sub.Short})
		}
		out = append(out, commandsOf(sub)...)
	}
	return out
}
