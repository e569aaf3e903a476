// Command sign publishes a release's image to a registry and signs it,
// and its chart, in the formats cosign verifies with a key, with the
// sigstore Go libraries and the key pair it is given:
//
//   - the image index, pushed to REPOSITORY:VERSION with its SBOM, and its
//     signature (cosign's simple-signing payload, at the tag
//     sha256-<digest>.sig): `cosign verify --key`;
//   - an in-toto SLSA provenance attestation of the index (a DSSE envelope,
//     at sha256-<digest>.att): `cosign verify-attestation --key --type
//     slsaprovenance1`;
//   - the chart package's signature, written beside it (<chart>.sig):
//     `cosign verify-blob --key --signature`.
//
// Nothing goes to a transparency log (signing keyless, with Fulcio and
// Rekor, needs the internet): verify with --insecure-ignore-tlog.
//
// usage: go run ./sign -oci ../dist/oci -version V -repository HOST/relay
//
//	-key cosign.key -chart ../dist/relay-V.tgz -commit SHA -source URL
//	[-insecure]   (a registry over plain HTTP: a test's)
//
// The key is a PEM private key (cosign generate-key-pair's, its password
// in COSIGN_PASSWORD, or an unencrypted PKCS#8 one).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	var o Options
	flag.StringVar(&o.Layout, "oci", "../dist/oci", "the release's OCI image layout")
	flag.StringVar(&o.Version, "version", "", "the release's version (the index's tag in the layout and in the registry)")
	flag.StringVar(&o.Repository, "repository", "", "where the image goes: HOST/PATH")
	flag.StringVar(&o.Key, "key", "", "the signing key (PEM; password in COSIGN_PASSWORD when encrypted)")
	flag.StringVar(&o.Chart, "chart", "", "the chart package to sign (its signature goes to <chart>.sig)")
	flag.StringVar(&o.Commit, "commit", "", "the source commit the release was built from (for the provenance)")
	flag.StringVar(&o.Source, "source", "", "the source repository's URL (for the provenance)")
	flag.StringVar(&o.BuildCommand, "build-command", "make release", "the command that built the release (for the provenance)")
	flag.BoolVar(&o.Insecure, "insecure", false, "the registry speaks plain HTTP")
	flag.Parse()
	o.Started = time.Now().UTC()
	if o.Version == "" || o.Repository == "" || o.Key == "" {
		fmt.Fprintln(os.Stderr, "sign: -version, -repository and -key are required")
		os.Exit(2)
	}
	res, err := Run(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sign:", err)
		os.Exit(1)
	}
	fmt.Printf("sign: %s@%s signed, with its provenance attested", o.Repository, res.Digest)
	if res.ChartSignature != "" {
		fmt.Printf("; %s", res.ChartSignature)
	}
	fmt.Println()
}
