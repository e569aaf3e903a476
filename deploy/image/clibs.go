package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/package-url/packageurl-go"
)

// Linked is what `relay version -o json` says of the C code linked into
// relay: librdkafka and the libraries its static build bundles, each with
// the version it reports at run time.
type Linked struct {
	Version    string `json:"version"`
	Librdkafka string `json:"librdkafka"`
	Libraries  []struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"libraries"`
}

// readLinked reads file, the output of the binary's `relay version -o
// json`, which must be of version.
func readLinked(file, version string) (Linked, error) {
	var l Linked
	b, err := os.ReadFile(file) //nolint:gosec // the build's own file
	if err != nil {
		return l, err
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return l, fmt.Errorf("%s: %w", file, err)
	}
	if l.Version != version || l.Librdkafka == "" {
		return l, fmt.Errorf("%s: relay %q with librdkafka %q, want relay %s", file, l.Version, l.Librdkafka, version)
	}
	return l, nil
}

// cLibrary is what the SBOM says of a C library besides its version: its
// package URL's name, its license (an SPDX expression) and its CPE, with
// which scanners (Grype, Trivy) match it against vulnerability databases.
// The versions come from the binary; these are properties of the
// libraries themselves.
type cLibrary struct {
	name, license, cpeVendor, cpeProduct, description string
}

var cLibraries = map[string]cLibrary{
	"librdkafka": {"librdkafka", "BSD-2-Clause", "confluent", "librdkafka", "the C client of Apache Kafka, statically linked: the build bundled in github.com/confluentinc/confluent-kafka-go/v2"},
	"openssl":    {"openssl", "Apache-2.0", "openssl", "openssl", "TLS and cryptography for librdkafka, statically linked"},
	"zlib":       {"zlib", "Zlib", "zlib", "zlib", "gzip compression for librdkafka, statically linked"},
	"zstd":       {"zstd", "BSD-3-Clause OR GPL-2.0-only", "facebook", "zstandard", "zstd compression for librdkafka, statically linked"},
	"lz4":        {"lz4", "BSD-2-Clause", "lz4_project", "lz4", "lz4 compression, librdkafka's own copy"},
	"libcurl":    {"curl", "curl", "haxx", "libcurl", "HTTP for librdkafka's OAUTHBEARER/OIDC token requests, statically linked"},
}

// components are the SBOM's components of the linked C code; a library
// the table does not know is an error, so that none is left out.
func (l Linked) components() ([]cdx.Component, error) {
	type lib struct{ name, version string }
	all := []lib{{"librdkafka", l.Librdkafka}}
	for _, x := range l.Libraries {
		all = append(all, lib{x.Name, x.Version})
	}
	var comps []cdx.Component
	for _, x := range all {
		c, ok := cLibraries[x.name]
		if !ok || x.version == "" {
			return nil, fmt.Errorf("the C library %q at %q linked into relay: the SBOM knows no license and CPE for it (deploy/image/clibs.go)", x.name, x.version)
		}
		lic := cdx.LicenseChoice{License: &cdx.License{ID: c.license}}
		if strings.Contains(c.license, " OR ") || strings.Contains(c.license, " AND ") {
			lic = cdx.LicenseChoice{Expression: c.license}
		}
		comps = append(comps, cdx.Component{
			Type: cdx.ComponentTypeLibrary, Name: c.name, Version: x.version,
			PackageURL:  packageurl.NewPackageURL(packageurl.TypeGeneric, "", c.name, x.version, nil, "").ToString(),
			CPE:         fmt.Sprintf("cpe:2.3:a:%s:%s:%s:*:*:*:*:*:*:*", c.cpeVendor, c.cpeProduct, x.version),
			Licenses:    &cdx.Licenses{lic},
			Description: c.description,
		})
	}
	return comps, nil
}
