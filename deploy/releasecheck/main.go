// Command releasecheck checks that every artefact of a release in dist/
// names the same version, and that the SBOM names every C library linked
// into relay: the binaries (what `relay version -o json` printed, saved
// as relay-version.json by scripts/image.sh), the image index and each
// image's labels, the SBOM attached to the index, the Helm chart's
// version and appVersion, the release notes and SHA256SUMS. It also reads
// the symbols of the librdkafka archive relay links (-archive, with nm):
// a C library whose version symbol is in it must be in the SBOM.
//
// usage: go run ./releasecheck -dist ../dist -version V -archive FILE.a
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
)

func main() {
	dist := flag.String("dist", "../dist", "the release's directory")
	version := flag.String("version", "", "the version every artefact must name")
	archive := flag.String("archive", "", "the static librdkafka archive relay links (its symbols are read with nm)")
	flag.Parse()
	if *version == "" || *archive == "" {
		fmt.Fprintln(os.Stderr, "releasecheck: -version and -archive are required")
		os.Exit(2)
	}
	syms, err := exec.CommandContext(context.Background(), "nm", "--defined-only", *archive).Output()
	if err != nil {
		fmt.Fprintf(os.Stderr, "releasecheck: nm %s: %v\n", *archive, err)
		os.Exit(1)
	}
	errs := check(*dist, *version, linkedBySymbols(string(syms)))
	for _, e := range errs {
		fmt.Fprintln(os.Stderr, "releasecheck:", e)
	}
	if len(errs) > 0 {
		os.Exit(1)
	}
	fmt.Printf("releasecheck: %s: binaries, image, SBOM, chart, notes and SHA256SUMS agree\n", *version)
}
