package main

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"relay/internal/buildinfo"
	"relay/internal/cli"

	"github.com/spf13/cobra"
)

// commandPaths walks the command tree: every command's path below relay,
// cobra's help and completion included.
func commandPaths(t *testing.T) [][]string {
	t.Helper()
	lookup, environ := env(nil)
	root := newRoot(&app{lookup: lookup, environ: environ, stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}})
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var out [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		out = append(out, path)
		for _, sub := range c.Commands() {
			if !sub.Hidden {
				walk(sub, append(append([]string{}, path...), sub.Name()))
			}
		}
	}
	walk(root, nil)
	if len(out) < 12 {
		t.Fatalf("only %d commands in the tree: %v", len(out), out)
	}
	return out
}

// runArgs runs relay with args against a broker that is not there.
func runArgs(t *testing.T, broker string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	lookup, environ := env(map[string]string{"RELAY_SOURCE_TOPICS": "orders", "RELAY_KAFKA_BOOTSTRAP_SERVERS": broker, "RELAY_TRANSACTIONAL_ID": "relay-0"})
	var o, e bytes.Buffer
	code = run(context.Background(), args, lookup, environ, &o, &e)
	return code, o.String(), e.String()
}

// Every command answers --help and -h with its help, exit 0, and starts
// nothing.
func TestEveryCommandHasHelp(t *testing.T) {
	for _, path := range commandPaths(t) {
		for _, h := range []string{"--help", "-h"} {
			args := append(append([]string{}, path...), h)
			code, out, errs := runArgs(t, "127.0.0.1:1", args...)
			if code != cli.OK || !strings.Contains(out, "Usage:") {
				t.Errorf("relay %v: exit %d, stdout %q, stderr %q; want 0 and the help", args, code, out, errs)
			}
		}
	}
	if code, out, _ := runArgs(t, "127.0.0.1:1", "help", "replay"); code != cli.OK || !strings.Contains(out, "--max-failure-rate") {
		t.Errorf("relay help replay: exit %d:\n%s", code, out)
	}
}

// An unknown flag or subcommand is a bad command line everywhere: exit 2
// with a hint, and no broker is contacted.
func TestEveryCommandRefusesBadFlags(t *testing.T) {
	broker, accepted := countingListener(t)
	for _, path := range commandPaths(t) {
		args := append(append([]string{}, path...), "--no-such-flag")
		code, _, errs := runArgs(t, broker, args...)
		if code != cli.Usage || !strings.Contains(errs, "unknown flag") || !strings.Contains(errs, "--help") {
			t.Errorf("relay %v: exit %d, stderr %q; want 2 naming the flag, with a hint", args, code, errs)
		}
	}
	for _, args := range [][]string{{"frobnicate"}, {"quarantine", "purge"}, {"topics", "destroy"}, {"run", "now"}, {"config", "x"},
		{"quarantine", "show"}, {"quarantine", "stats", "x"}, {"topics", "plan", "-o", "toml"}, {"quarantine", "list", "--output=xml"}, {"quarantine", "show", "x", "-o", "table"}} {
		if code, _, errs := runArgs(t, broker, args...); code != cli.Usage {
			t.Errorf("relay %v: exit %d, stderr %q; want 2", args, code, errs)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("bad command lines reached the broker %d times", n)
	}
}

// --flag=value and --flag value are the same, before, between or after
// arguments.
func TestFlagForms(t *testing.T) {
	broker, accepted := countingListener(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"topics", "apply", "--replication-factor=0"}, "--replication-factor 0"},
		{[]string{"topics", "apply", "--replication-factor", "0"}, "--replication-factor 0"},
		{[]string{"replay", "--reason=fix", "--code=X", "--rate=0"}, "--rate 0"},
		{[]string{"replay", "--code", "X", "--reason", "fix", "--max-failure-rate", "2"}, "--max-failure-rate 2"},
		{[]string{"quarantine", "list", "--state=lost"}, "--state"},
		{[]string{"quarantine", "discard", "orders/0/1", "--include-replaying", "x"}, "not a failure id"},
		{[]string{"quarantine", "discard", "--reason=", "orders/0/1"}, "--reason is required"},
		{[]string{"audit"}, "--source is required"},
		{[]string{"audit", "--source", "orders", "--from", "yesterday"}, "--from \"yesterday\""},
		{[]string{"audit", "--source", "orders", "--from", "1h", "--from-offsets", "0:1"}, "exclude each other"},
		{[]string{"audit", "--source", "orders", "--from", "1h", "--to", "2h"}, "--from must be before --to"},
		{[]string{"audit", "--source", "orders", "--to-offsets", "0:5,0:6"}, "partition 0 given twice"},
		{[]string{"audit", "--source", "orders", "--from-offsets", "0=5"}, "PARTITION:OFFSET"},
		{[]string{"audit", "--source", "orders", "--from-offsets", "0:-1"}, "PARTITION:OFFSET"},
		{[]string{"audit", "--source", "orders", "--progress", "fancy"}, "--progress"},
		{[]string{"audit", "--source", "orders", "extra"}, "unexpected argument"},
		{[]string{"audit", "--source", "orders", "--max-memory", "96MB"}, "--max-memory \"96MB\""},
		{[]string{"audit", "--source", "orders", "--stuck-after", "-1h"}, "--stuck-after"},
		{[]string{"audit", "--source", "orders", "--read-timeout", "-1s"}, "--read-timeout"},
	} {
		if code, _, errs := runArgs(t, broker, tc.args...); code != cli.Usage || !strings.Contains(errs, tc.want) {
			t.Errorf("relay %v: exit %d, stderr %q; want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("bad input reached the broker %d times", n)
	}
	for _, args := range [][]string{{"config", "-o", "json"}, {"config", "--output=json"}, {"config", "-ojson"}} {
		code, out, errs := runArgs(t, broker, args...)
		var m map[string]string
		if code != cli.OK || json.Unmarshal([]byte(out), &m) != nil || m["RELAY_SOURCE_TOPICS"] != "orders" {
			t.Errorf("relay %v: exit %d, stdout %q, stderr %q; want one JSON object", args, code, out, errs)
		}
	}
}

// A deprecated flag works, and says so on stderr: stdout stays the output.
func TestDeprecatedJSONNoticeOnStderr(t *testing.T) {
	code, out, errs := runArgs(t, "127.0.0.1:1", "replay", "--json", "--reason", "x")
	if code != cli.Usage || out != "" || !strings.Contains(errs, "--json has been deprecated") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runArgs(t, "127.0.0.1:1", "version")
	for _, want := range []string{"relay " + buildinfo.Version, "commit: " + buildinfo.Commit, "date: " + buildinfo.Date, "go: go1.", "librdkafka: "} {
		if code != cli.OK || !strings.Contains(out, want) {
			t.Errorf("relay version: exit %d, missing %q in:\n%s", code, want, out)
		}
	}
	// -o json and -o yaml: the same document, with the C libraries linked
	// in and their versions (the SBOM reads them there).
	var fromJSON, fromYAML buildinfo.Info
	code, out, _ = runArgs(t, "127.0.0.1:1", "version", "-o", "json")
	if err := json.Unmarshal([]byte(out), &fromJSON); code != cli.OK || err != nil || fromJSON.Version != buildinfo.Version || fromJSON.Librdkafka == "" {
		t.Errorf("relay version -o json: exit %d, %v:\n%s", code, err, out)
	}
	names := map[string]bool{}
	for _, l := range fromJSON.Libraries {
		if !regexp.MustCompile(`^\d+\.\d+\.\d+`).MatchString(l.Version) {
			t.Errorf("relay version -o json: %s at %q", l.Name, l.Version)
		}
		names[l.Name] = true
	}
	for _, want := range []string{"openssl", "zlib", "zstd", "lz4", "libcurl"} {
		if !names[want] {
			t.Errorf("relay version -o json does not name %s: %v", want, fromJSON.Libraries)
		}
	}
	code, out, _ = runArgs(t, "127.0.0.1:1", "version", "-o", "yaml")
	if err := yaml.Unmarshal([]byte(out), &fromYAML); code != cli.OK || err != nil || !reflect.DeepEqual(fromYAML, fromJSON) {
		t.Errorf("relay version -o yaml: exit %d, %v: %+v, -o json %+v", code, err, fromYAML, fromJSON)
	}
	if code, out, _ := runArgs(t, "127.0.0.1:1", "completion", "bash"); code != cli.OK || !strings.Contains(out, "bash completion") {
		t.Errorf("relay completion bash: exit %d", code)
	}
}

// relay topics acls needs no broker: it lists what the configuration
// needs, as a table, as kafka-acls.sh commands, or as JSON.
func TestTopicsACLs(t *testing.T) {
	code, out, errs := runArgs(t, "127.0.0.1:1", "topics", "acls", "run")
	if code != cli.OK || !strings.Contains(out, "orders.valid") || !strings.Contains(out, "relay-0") || strings.Contains(out, "audit ") {
		t.Fatalf("exit %d:\n%s%s", code, out, errs)
	}
	code, out, _ = runArgs(t, "127.0.0.1:1", "topics", "acls", "run", "--principal", "User:relay")
	if code != cli.OK || !strings.Contains(out, "kafka-acls.sh --bootstrap-server $BOOTSTRAP --add --allow-principal User:relay --operation Read --group relay --resource-pattern-type prefixed") {
		t.Fatalf("--principal: exit %d:\n%s", code, out)
	}
	code, out, _ = runArgs(t, "127.0.0.1:1", "topics", "acls", "-o", "json")
	var rows []struct {
		Command, Resource, Name, Operation string
	}
	if code != cli.OK || json.Unmarshal([]byte(out), &rows) != nil || len(rows) < 20 {
		t.Fatalf("-o json: exit %d:\n%s", code, out)
	}
	if code, _, errs := runArgs(t, "127.0.0.1:1", "topics", "acls", "nope"); code != cli.Usage || !strings.Contains(errs, `no command "nope"`) {
		t.Fatalf("unknown command: exit %d %q", code, errs)
	}
	if code, _, errs := runArgs(t, "127.0.0.1:1", "topics", "acls", "--principal", "relay"); code != cli.Usage || !strings.Contains(errs, "User:<name>") {
		t.Fatalf("bad principal: exit %d %q", code, errs)
	}
}

// -o yaml is -o json's document wherever there is -o (those that need no
// broker, run here).
func TestOutputYAMLIsTheJSONDocument(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"config"}, {"topics", "acls", "run"}, {"topics", "acls", "audit"}} {
		cj, j, _ := runArgs(t, "127.0.0.1:1", append(args, "-o", "json")...)
		cy, y, _ := runArgs(t, "127.0.0.1:1", append(args, "-o", "yaml")...)
		var fromJSON, fromYAML any
		if err := json.Unmarshal([]byte(j), &fromJSON); cj != cli.OK || err != nil {
			t.Fatalf("relay %v -o json: exit %d, %v", args, cj, err)
		}
		if err := yaml.Unmarshal([]byte(y), &fromYAML); cy != cli.OK || err != nil {
			t.Fatalf("relay %v -o yaml: exit %d, %v", args, cy, err)
		}
		back, _ := json.Marshal(fromYAML)
		var again any
		_ = json.Unmarshal(back, &again)
		if !reflect.DeepEqual(again, fromJSON) {
			t.Errorf("relay %v: -o yaml reads back as\n%v\n-o json as\n%v", args, again, fromJSON)
		}
	}
}
