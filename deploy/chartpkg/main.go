// Command chartpkg packages relay's Helm chart for a release, as `helm
// package --version V --app-version V` does, through Helm's SDK: the
// chart's version and appVersion (and so its default image tag) are the
// release's version. make release runs it.
//
// usage: go run ./chartpkg -version V [-chart helm/relay] [-out ../dist]
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "chartpkg:", err)
		os.Exit(1)
	}
}

func run() error {
	version := flag.String("version", "", "the release version (SemVer 2), the chart's version and appVersion")
	dir := flag.String("chart", "helm/relay", "the chart's directory")
	out := flag.String("out", "../dist", "where the package goes")
	flag.Parse()
	if *version == "" {
		return errors.New("-version is required")
	}
	ch, err := loader.LoadDir(*dir)
	if err != nil {
		return err
	}
	ch.Metadata.Version, ch.Metadata.AppVersion = *version, *version
	if err := ch.Validate(); err != nil {
		return fmt.Errorf("version %q: %w", *version, err)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	path, err := chartutil.Save(ch, *out)
	if err != nil {
		return err
	}
	fmt.Println(path)
	return nil
}
