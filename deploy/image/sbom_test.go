package main

import (
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The SBOM is made from a Go binary's build information; the test binary
// is one, with modules of its own (this module's), so the tests need no
// relay build.
func testSBOM(t *testing.T, created time.Time) ([]byte, *buildinfo.BuildInfo) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	info, err := buildinfo.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	sbom, err := cycloneDX(exe, "1.2.3-dev.gabcdef0", testLinked, created)
	if err != nil {
		t.Fatal(err)
	}
	return sbom, info
}

var testCreated = time.Date(2025, 12, 1, 10, 0, 0, 0, time.UTC)

// testLinked is what relay version -o json says of the C code linked in.
var testLinked = func() Linked {
	var l Linked
	_ = json.Unmarshal([]byte(`{"version":"1.2.3-dev.gabcdef0","librdkafka":"2.11.1","libraries":[{"name":"openssl","version":"3.0.15"},
		{"name":"zlib","version":"1.3.1"},{"name":"zstd","version":"1.5.6"},{"name":"lz4","version":"1.9.4"},{"name":"libcurl","version":"8.10.1"}]}`), &l)
	return l
}()

// TestCycloneDXReproducible: the image build is reproducible, so its SBOM
// is too: the same inputs give the same bytes (serial number included),
// and another time another serial number.
func TestCycloneDXReproducible(t *testing.T) {
	a, _ := testSBOM(t, testCreated)
	b, _ := testSBOM(t, testCreated)
	if !bytes.Equal(a, b) {
		t.Fatal("two SBOMs of the same binary at the same time differ")
	}
	c, _ := testSBOM(t, testCreated.Add(time.Second))
	var x, y struct{ SerialNumber string }
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(c, &y); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(x.SerialNumber) {
		t.Errorf("serial number %q is not a version 4 UUID URN", x.SerialNumber)
	}
	if x.SerialNumber == y.SerialNumber {
		t.Errorf("SBOMs of another time have the same serial number %s", x.SerialNumber)
	}
}

// TestCycloneDXContent reads the SBOM back with the CycloneDX library:
// relay with its license, the standard library, librdkafka, every module
// of the binary's build information with its purl and go.sum hash, and
// relay depending on each.
func TestCycloneDXContent(t *testing.T) {
	sbom, info := testSBOM(t, testCreated)
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(sbom), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	if bom.SpecVersion != specVersion || bom.Metadata == nil || bom.Metadata.Component == nil || bom.Components == nil || bom.Dependencies == nil {
		t.Fatalf("spec version %s, or no metadata, components or dependencies:\n%s", bom.SpecVersion, sbom)
	}
	if got := bom.Metadata.Timestamp; got != "2025-12-01T10:00:00Z" {
		t.Errorf("timestamp %q", got)
	}
	relay := bom.Metadata.Component
	if relay.Name != "relay" || relay.Version != "1.2.3-dev.gabcdef0" || relay.PackageURL != "pkg:golang/relay@1.2.3-dev.gabcdef0" || relay.BOMRef != relay.PackageURL {
		t.Errorf("metadata.component: %+v", relay)
	}
	if relay.Licenses == nil || len(*relay.Licenses) != 1 || (*relay.Licenses)[0].License == nil || (*relay.Licenses)[0].License.ID != relayLicense {
		t.Errorf("relay's licenses: %+v, want %s", relay.Licenses, relayLicense)
	}
	license, err := os.ReadFile("../../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(license, []byte("Apache License\n                           Version 2.0")) {
		t.Errorf("LICENSE is not the Apache License 2.0 the SBOM names")
	}
	if bom.Metadata.Tools == nil || bom.Metadata.Tools.Components == nil || !slices.ContainsFunc(*bom.Metadata.Tools.Components,
		func(c cdx.Component) bool { return c.Name == cyclonedxModule && c.Version != "" }) {
		t.Errorf("tools do not name %s at its version: %+v", cyclonedxModule, bom.Metadata.Tools)
	}

	byRef := map[string]cdx.Component{}
	for _, c := range *bom.Components {
		if c.BOMRef == "" || c.BOMRef != c.PackageURL {
			t.Errorf("component %s: bom-ref %q, purl %q", c.Name, c.BOMRef, c.PackageURL)
		}
		if _, dup := byRef[c.BOMRef]; dup {
			t.Errorf("bom-ref %s twice", c.BOMRef)
		}
		byRef[c.BOMRef] = c
	}
	goVersion := strings.TrimPrefix(strings.Fields(runtime.Version())[0], "go")
	want := map[string]string{ // purl → go.sum hash ("" for none)
		"pkg:golang/stdlib@" + goVersion: "",
		"pkg:generic/librdkafka@2.11.1":  "",
		"pkg:generic/openssl@3.0.15":     "",
		"pkg:generic/zlib@1.3.1":         "",
		"pkg:generic/zstd@1.5.6":         "",
		"pkg:generic/lz4@1.9.4":          "",
		"pkg:generic/curl@8.10.1":        "",
	}
	for _, m := range info.Deps {
		if m.Replace != nil {
			m = m.Replace
		}
		want["pkg:golang/"+m.Path+"@"+m.Version] = m.Sum
	}
	if len(info.Deps) == 0 {
		t.Fatal("the test binary's build information lists no module")
	}
	for purl, sum := range want {
		c, ok := byRef[purl]
		switch {
		case !ok:
			t.Errorf("no component %s", purl)
		case sum == "" && c.Properties != nil:
			t.Errorf("%s: properties %+v", purl, *c.Properties)
		case sum != "" && (c.Properties == nil || !slices.Equal(*c.Properties, []cdx.Property{{Name: moduleSumProperty, Value: sum}})):
			t.Errorf("%s: properties %+v, want %s %s", purl, c.Properties, moduleSumProperty, sum)
		}
	}
	if len(byRef) != len(want) {
		t.Errorf("%d components, want %d", len(byRef), len(want))
	}

	deps := *bom.Dependencies
	if len(deps) != 1 || deps[0].Ref != relay.BOMRef || deps[0].Dependencies == nil {
		t.Fatalf("dependencies: %+v", deps)
	}
	on := slices.Sorted(slices.Values(*deps[0].Dependencies))
	all := make([]string, 0, len(byRef))
	for ref := range byRef {
		all = append(all, ref)
	}
	if slices.Sort(all); !slices.Equal(on, all) {
		t.Errorf("relay depends on %v, want every component %v", on, all)
	}
}

// TestCLibrariesWithLicenseAndCPE: each C library linked in is in the SBOM
// with its license (an SPDX id, or an expression) and a CPE of its
// version, which scanners match vulnerabilities by; a library the SBOM
// knows nothing of fails the build rather than being left out.
func TestCLibrariesWithLicenseAndCPE(t *testing.T) {
	sbom, _ := testSBOM(t, testCreated)
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(sbom), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	byPURL := map[string]cdx.Component{}
	for _, c := range *bom.Components {
		byPURL[c.PackageURL] = c
	}
	for purl, want := range map[string][2]string{ // license, CPE
		"pkg:generic/librdkafka@2.11.1": {"BSD-2-Clause", "cpe:2.3:a:confluent:librdkafka:2.11.1:*:*:*:*:*:*:*"},
		"pkg:generic/openssl@3.0.15":    {"Apache-2.0", "cpe:2.3:a:openssl:openssl:3.0.15:*:*:*:*:*:*:*"},
		"pkg:generic/zlib@1.3.1":        {"Zlib", "cpe:2.3:a:zlib:zlib:1.3.1:*:*:*:*:*:*:*"},
		"pkg:generic/zstd@1.5.6":        {"BSD-3-Clause OR GPL-2.0-only", "cpe:2.3:a:facebook:zstandard:1.5.6:*:*:*:*:*:*:*"},
		"pkg:generic/lz4@1.9.4":         {"BSD-2-Clause", "cpe:2.3:a:lz4_project:lz4:1.9.4:*:*:*:*:*:*:*"},
		"pkg:generic/curl@8.10.1":       {"curl", "cpe:2.3:a:haxx:libcurl:8.10.1:*:*:*:*:*:*:*"},
	} {
		c := byPURL[purl]
		license := ""
		if c.Licenses != nil && len(*c.Licenses) == 1 {
			if l := (*c.Licenses)[0]; l.License != nil {
				license = l.License.ID
			} else {
				license = l.Expression
			}
		}
		if license != want[0] || c.CPE != want[1] {
			t.Errorf("%s: license %q, CPE %q; want %q, %q", purl, license, c.CPE, want[0], want[1])
		}
	}

	unknown := testLinked
	unknown.Libraries = append(slices.Clone(testLinked.Libraries), struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}{"snappy", "1.2.1"})
	exe, _ := os.Executable()
	if _, err := cycloneDX(exe, "1.2.3-dev.gabcdef0", unknown, testCreated); err == nil || !strings.Contains(err.Error(), `"snappy"`) {
		t.Errorf("a C library the SBOM does not know: %v, want an error naming it", err)
	}
}

func TestGolangPURL(t *testing.T) {
	for _, c := range []struct{ module, version, want string }{
		{"stdlib", "1.26.8", "pkg:golang/stdlib@1.26.8"},
		{"github.com/confluentinc/confluent-kafka-go/v2", "v2.11.1", "pkg:golang/github.com/confluentinc/confluent-kafka-go/v2@v2.11.1"},
		{"github.com/docker/docker", "v28.0.0+incompatible", "pkg:golang/github.com/docker/docker@v28.0.0%2Bincompatible"},
	} {
		if got := golangPURL(c.module, c.version); got != c.want {
			t.Errorf("golangPURL(%q, %q) = %q, want %q", c.module, c.version, got, c.want)
		}
	}
}

// TestCycloneDXSchema validates the SBOM against the official CycloneDX
// JSON schema of its spec version, and the spdx and jsf schemas it
// references, all read from RELAY_CYCLONEDX_SCHEMA: the directory
// scripts/tools/cyclonedx-schema.sh prints (make test and make rules set
// it). Nothing is loaded from the network. Formats (date-time,
// iri-reference, …) are asserted too.
func TestCycloneDXSchema(t *testing.T) {
	dir := os.Getenv("RELAY_CYCLONEDX_SCHEMA")
	if dir == "" {
		if os.Getenv("RELAY_TEST_REQUIRE_CYCLONEDX_SCHEMA") == "1" {
			t.Fatal("RELAY_CYCLONEDX_SCHEMA is not set: scripts/tools/cyclonedx-schema.sh path fetches the schemas and prints their directory")
		}
		t.Skip("RELAY_CYCLONEDX_SCHEMA is not set (make test and make rules set it: scripts/tools/cyclonedx-schema.sh path)")
	}
	schema := compileCycloneDXSchema(t, dir)
	sbom, _ := testSBOM(t, testCreated)
	if err := schema.Validate(decodeJSON(t, sbom)); err != nil {
		t.Fatalf("the SBOM is not valid CycloneDX %s: %v", specVersion, err)
	}

	// The validation is real: a component of an unknown type, a
	// timestamp that is no date-time, a license id SPDX does not know,
	// each fails.
	for _, bad := range []struct{ old, new string }{
		{`"type": "library"`, `"type": "module"`},
		{`"timestamp": "2025-12-01T10:00:00Z"`, `"timestamp": "yesterday"`},
		{`"id": "` + relayLicense + `"`, `"id": "Apache-2"`},
	} {
		doc := bytes.Replace(sbom, []byte(bad.old), []byte(bad.new), 1)
		if bytes.Equal(doc, sbom) {
			t.Fatalf("the SBOM has no %s", bad.old)
		}
		if err := schema.Validate(decodeJSON(t, doc)); err == nil {
			t.Errorf("an SBOM with %s passes the schema", bad.new)
		}
	}
}

// cyclonedxSchemaBase is the base of the CycloneDX schemas' $ids: their
// references are relative to it.
const cyclonedxSchemaBase = "http://cyclonedx.org/schema/"

// schemaDir loads the CycloneDX schemas from a directory, and nothing
// else.
type schemaDir string

func (d schemaDir) Load(url string) (any, error) {
	name, ok := strings.CutPrefix(url, cyclonedxSchemaBase)
	if !ok || name != filepath.Base(name) {
		return nil, fmt.Errorf("%s: not a CycloneDX schema (nothing is loaded from the network)", url)
	}
	f, err := os.Open(filepath.Join(string(d), name))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return jsonschema.UnmarshalJSON(f)
}

// compileCycloneDXSchema compiles bom-<specVersion>: the npm package's
// files are named bom-1.5.SNAPSHOT.schema.json, which reference
// spdx.SNAPSHOT.schema.json and jsf-0.82.SNAPSHOT.schema.json beside them.
func compileCycloneDXSchema(t *testing.T, dir string) *jsonschema.Schema {
	t.Helper()
	name := "bom-" + specVersion.String() + ".SNAPSHOT.schema.json"
	for _, f := range []string{name, "spdx.SNAPSHOT.schema.json", "jsf-0.82.SNAPSHOT.schema.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("RELAY_CYCLONEDX_SCHEMA=%s: %v", dir, err)
		}
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(schemaDir(dir))
	c.AssertFormat()
	s, err := c.Compile(cyclonedxSchemaBase + name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return v
}
