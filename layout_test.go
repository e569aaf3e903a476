package relay_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// mayImport is the dependency direction docs/ARCHITECTURE.md's Layout section draws:
// each package of relay and the packages of relay it may import. A package
// missing here, or an import not listed, fails the test, so a new
// dependency is a decision written down, not an accident.
var mayImport = map[string][]string{
	// Leaves: vocabulary and mechanisms, nothing of relay's.
	"internal/secret":    nil,
	"internal/config":    {"internal/secret"},
	"internal/envelope":  nil,
	"internal/tiers":     nil,
	"internal/kafkaerr":  nil,
	"internal/retry":     nil,
	"internal/buildinfo": nil,
	"internal/supervise": nil,
	// Two malloc arenas, set by a C constructor when relay is loaded.
	"internal/malloc": nil,
	// Key ordering's policy: blocked keys, their parked records, and how
	// those ride on a committed offset.
	"internal/keyorder": nil,
	// What the members of a group announce and agree on (parking).
	"internal/features": nil,
	// The tracer provider from the OTEL_* variables, and the W3C trace
	// context helpers.
	"internal/tracing": nil,
	// The transactional loop knows Kafka and nothing of what it carries.
	"internal/txn": {"internal/kafkaerr", "internal/retry"},

	"internal/ledger": {"internal/envelope"},
	"internal/schema": {"internal/secret", "internal/tiers"},
	"internal/rules":  {"internal/tiers"},
	"internal/hook":   {"internal/secret", "internal/tiers", "internal/tracing"},
	// The failure state machine: one record's fate, no Kafka clients, no
	// configuration.
	"internal/pipeline": {"internal/envelope", "internal/hook", "internal/keyorder", "internal/ledger", "internal/schema", "internal/tiers", "internal/tracing", "internal/txn"},

	"internal/telemetry":   {"internal/buildinfo", "internal/ledger", "internal/tracing"},
	"internal/topics":      {"internal/config", "internal/kafkaerr"},
	"internal/kafkaclient": {"internal/config", "internal/kafkaerr"},
	"internal/statetopic":  {"internal/config", "internal/kafkaclient", "internal/kafkaerr", "internal/ledger", "internal/retry"},

	// The checks before the hook and the retry policy, built from the
	// configuration: shared by the daemon and the replay's dry run.
	"internal/checks": {"internal/config", "internal/envelope", "internal/retry", "internal/rules", "internal/schema", "internal/tiers"},
	// The operator commands' domains: the quarantine read model, and the
	// replay workflow (which judges records by the pipeline's own path).
	"internal/quarantine": {"internal/config", "internal/envelope", "internal/kafkaclient", "internal/ledger", "internal/statetopic", "internal/topics"},
	"internal/replay": {"internal/checks", "internal/config", "internal/envelope", "internal/kafkaclient", "internal/ledger",
		"internal/pipeline", "internal/quarantine", "internal/secret", "internal/statetopic", "internal/tiers", "internal/topics", "internal/tracing"},
	"internal/console": {"internal/config", "internal/envelope", "internal/ledger", "internal/payload", "internal/quarantine", "internal/replay", "internal/schema", "internal/secret",
		"internal/topics"},
	// A record's bytes as an operator sees them, decoded and redacted.
	"internal/payload":     {"internal/checks", "internal/config", "internal/envelope", "internal/schema"},
	"internal/ledgerwatch": {"internal/config", "internal/kafkaclient", "internal/ledger", "internal/pipeline", "internal/txn"},
	// relay audit: reads relay's topics and the ledger, and judges.
	"internal/audit": {"internal/config", "internal/envelope", "internal/kafkaclient", "internal/keyorder", "internal/ledger", "internal/topics"},
	// relay run: assembles every part above into the running daemon.
	"internal/daemon": {"internal/buildinfo", "internal/checks", "internal/config", "internal/envelope", "internal/features", "internal/hook", "internal/kafkaclient", "internal/kafkaerr", "internal/keyorder",
		"internal/ledger", "internal/ledgerwatch", "internal/pipeline", "internal/retry", "internal/rules", "internal/schema", "internal/secret", "internal/statetopic",
		"internal/telemetry", "internal/tiers", "internal/topics", "internal/tracing", "internal/txn"},
	// The reference reads the names of the packages users see.
	"internal/reference": {"internal/config", "internal/envelope", "internal/kafkaclient", "internal/ledger", "internal/pipeline", "internal/telemetry", "internal/tiers"},

	// What every command shares: exit codes, output flags, printing, the
	// effective configuration (relay's, librdkafka's defaults, OTEL_*).
	"internal/cli": {"internal/config", "internal/kafkaclient", "internal/secret", "internal/tracing"},
	// The binary wires everything; only it exits.
	"cmd/relay": {"*"},
	// The demo and the benchmark stand outside: they drive relay as users do.
	"cmd/relay-demo": {"internal/envelope"},
	// -formats measures admission itself, in-process, per payload format;
	// -audit-failures writes ledger changes as relay writes them.
	"cmd/relay-bench": {"internal/config", "internal/envelope", "internal/ledger", "internal/schema"},
}

func TestPackagesImportOnlyWhatTheLayoutAllows(t *testing.T) {
	got := relayImports(t)
	for pkg, imports := range got {
		allowed, known := mayImport[pkg]
		if !known {
			t.Errorf("%s is not in the layout (layout_test.go mayImport, docs/ARCHITECTURE.md Layout): say what it may import", pkg)
			continue
		}
		if slices.Contains(allowed, "*") {
			continue
		}
		for _, imp := range imports {
			if !slices.Contains(allowed, imp) {
				t.Errorf("%s imports %s, which the layout does not allow", pkg, imp)
			}
		}
	}
	for pkg := range mayImport {
		if _, ok := got[pkg]; !ok {
			t.Errorf("the layout names %s, which does not exist (any more)", pkg)
		}
	}
}

// relayImports reads the non-test Go files of every package under
// internal/ and cmd/ and returns, by package directory, the packages of
// relay each imports.
func relayImports(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	for _, root := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			pkg := filepath.ToSlash(filepath.Dir(path))
			if _, ok := out[pkg]; !ok {
				out[pkg] = nil
			}
			for _, is := range f.Imports {
				imp := strings.Trim(is.Path.Value, `"`)
				if rest, ok := strings.CutPrefix(imp, "relay/"); ok && !slices.Contains(out[pkg], rest) {
					out[pkg] = append(out[pkg], rest)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}

// cmd/relay binds flags and prints; what a command does lives in the
// package of its concern, where it is tested without a command line.
func TestCommandStaysThin(t *testing.T) {
	const most = 1000
	files, err := filepath.Glob("cmd/relay/*.go")
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines += strings.Count(string(b), "\n")
	}
	if lines > most {
		t.Errorf("cmd/relay has %d lines besides its tests, more than %d: move what a command does to its package", lines, most)
	}
}
