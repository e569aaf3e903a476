package main

import (
	"os"
	"path/filepath"
	"regexp"
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

// The chart in the repository is at the last release CHANGELOG.md gives,
// its version and appVersion alike (it said 0.1.0 and dev at 0.6.0).
func TestChartIsAtTheLastRelease(t *testing.T) {
	ch, err := loader.Load("../helm/relay")
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## \[(\d+\.\d+\.\d+)\]`).FindSubmatch(log)
	if m == nil {
		t.Fatal("CHANGELOG.md names no release")
	}
	if last := string(m[1]); ch.Metadata.Version != last || ch.Metadata.AppVersion != last {
		t.Errorf("Chart.yaml: version %s, appVersion %s; CHANGELOG.md's last release is %s", ch.Metadata.Version, ch.Metadata.AppVersion, last)
	}
}
