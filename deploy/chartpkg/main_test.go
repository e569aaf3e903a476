package main

import (
	"os"
	"path/filepath"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
)

// The package carries the release's version as the chart's version and
// appVersion; a version Helm cannot read is refused.
func TestPackageCarriesTheVersion(t *testing.T) {
	out := t.TempDir()
	os.Args = []string{"chartpkg", "-version", "0.7.0-dev.g1a2b3c4", "-chart", "../helm/relay", "-out", out}
	if err := run(); err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load(filepath.Join(out, "relay-0.7.0-dev.g1a2b3c4.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != "0.7.0-dev.g1a2b3c4" || ch.Metadata.AppVersion != "0.7.0-dev.g1a2b3c4" {
		t.Fatalf("packaged %s, app %s", ch.Metadata.Version, ch.Metadata.AppVersion)
	}
}
