package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"fmt"
	"path"
	"runtime/debug"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/package-url/packageurl-go"
)

const (
	// specVersion is the CycloneDX version relay's SBOM is written in.
	specVersion = cdx.SpecVersion1_5
	// relayLicense is the SPDX id of the LICENSE file at the repository's
	// root.
	relayLicense = "Apache-2.0"
	// moduleSumProperty holds a Go module's go.sum hash (h1:…), as the
	// binary's build information records it.
	moduleSumProperty = "go:module:sum"
	// cyclonedxModule is the library that writes the SBOM, named among its
	// tools.
	cyclonedxModule = "github.com/CycloneDX/cyclonedx-go"
)

// cycloneDX is the SBOM of the relay binary in file: the Go modules linked
// into it, as its build information records them (the module graph the
// build used, not go.mod's wider one), the Go standard library, and the
// librdkafka bundled in confluent-kafka-go and the C libraries its static
// build links in (linked: as `relay version -o json` prints them). Its timestamp is created and its serial
// number is derived from its content, so the same inputs give the same
// bytes.
func cycloneDX(file, version string, linked Linked, created time.Time) ([]byte, error) {
	info, err := buildinfo.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	relay := cdx.Component{
		Type: cdx.ComponentTypeApplication, Name: "relay", Version: version, PackageURL: golangPURL("relay", version),
		Licenses: &cdx.Licenses{{License: &cdx.License{ID: relayLicense}}},
	}
	relay.BOMRef = relay.PackageURL
	// A toolchain built with experiments says so after a space
	// ("go1.26.8 X:…"): the version is the first word.
	goVersion, _, _ := strings.Cut(strings.TrimPrefix(info.GoVersion, "go"), " ")
	comps := []cdx.Component{
		{Type: cdx.ComponentTypeLibrary, Name: "stdlib", Version: goVersion, PackageURL: golangPURL("stdlib", goVersion),
			Description: "the Go standard library"},
	}
	cs, err := linked.components()
	if err != nil {
		return nil, err
	}
	comps = append(comps, cs...)
	for _, m := range info.Deps {
		comps = append(comps, moduleComponent(m))
	}
	refs := make([]string, len(comps))
	for i := range comps {
		comps[i].BOMRef = comps[i].PackageURL
		refs[i] = comps[i].BOMRef
	}

	bom := cdx.NewBOM()
	bom.Metadata = &cdx.Metadata{
		Timestamp: created.Format(time.RFC3339),
		Tools:     &cdx.ToolsChoice{Components: tools()},
		Component: &relay,
	}
	bom.Components = &comps
	// What the build information knows is which modules relay links, not
	// which of them needs which: relay depends on every component, and the
	// graph says nothing of the components' own dependencies.
	bom.Dependencies = &[]cdx.Dependency{{Ref: relay.BOMRef, Dependencies: &refs}}

	body, err := encode(bom, false)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	// A version 4 UUID's layout, from the content's digest.
	sum[6] = sum[6]&0x0f | 0x40
	sum[8] = sum[8]&0x3f | 0x80
	bom.SerialNumber = fmt.Sprintf("urn:uuid:%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
	return encode(bom, true)
}

// moduleComponent is the component of a Go module linked into relay: the
// module that replaced it, if one did.
func moduleComponent(m *debug.Module) cdx.Component {
	if m.Replace != nil {
		m = m.Replace
	}
	c := cdx.Component{Type: cdx.ComponentTypeLibrary, Name: m.Path, Version: m.Version, PackageURL: golangPURL(m.Path, m.Version)}
	if m.Sum != "" {
		c.Properties = &[]cdx.Property{{Name: moduleSumProperty, Value: m.Sum}}
	}
	return c
}

// golangPURL is the package URL of the Go module (or "stdlib") at version:
// pkg:golang/<module path>@<version>, each part percent-encoded as the
// purl specification says.
func golangPURL(module, version string) string {
	ns, name := path.Split(module)
	return packageurl.NewPackageURL(packageurl.TypeGolang, strings.TrimSuffix(ns, "/"), name, version, nil, "").ToString()
}

// tools are the SBOM's tools: this program, and the CycloneDX library it
// writes the SBOM with, at the version it was built with.
func tools() *[]cdx.Component {
	t := []cdx.Component{{Type: cdx.ComponentTypeApplication, Name: "relay deploy/image"}}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == cyclonedxModule {
				t = append(t, moduleComponent(m))
			}
		}
	}
	return &t
}

// encode is bom as CycloneDX JSON in specVersion, indented if pretty.
func encode(bom *cdx.BOM, pretty bool) ([]byte, error) {
	var buf bytes.Buffer
	if err := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON).SetPretty(pretty).EncodeVersion(bom, specVersion); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
