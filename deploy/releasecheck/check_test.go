package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
)

// release is what a test release is made of; each field can be made to
// disagree.
type release struct {
	binary, indexAnnotation, label, armLabel, sbomRelay, chartVersion, appVersion, notes string
	sbomLibs                                                                             map[string]string // name → version
	corruptSum                                                                           bool
	sbomOnOther                                                                          bool   // the SBOM's subject is another index
	unlisted                                                                             string // a file SHA256SUMS leaves out
}

func good(v string) release {
	return release{binary: v, indexAnnotation: v, label: v, armLabel: v, sbomRelay: v, chartVersion: v, appVersion: v, notes: "# relay " + v,
		sbomLibs: map[string]string{"librdkafka": "2.11.1", "openssl": "3.0.15", "zlib": "1.3.1", "curl": "8.10.1"}}
}

func digest(b []byte) v1.Hash {
	s := sha256.Sum256(b)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(s[:])}
}

// write lays r out in a new dist directory, as scripts/image.sh does.
func (r release) write(t *testing.T, v string) string {
	t.Helper()
	dist := t.TempDir()
	put := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dist, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("relay-linux-amd64", []byte("a static relay"))
	put("relay-image-linux-amd64.tar", []byte("a docker archive"))
	put("relay-version.json", fmt.Appendf(nil, `{"version":%q,"librdkafka":"2.11.1","libraries":[{"name":"openssl","version":"3.0.15"},{"name":"zlib","version":"1.3.1"},{"name":"libcurl","version":"8.10.1"}]}`, r.binary))
	put("RELEASE-NOTES.md", []byte(r.notes+"\n\n### Added\n"))
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "relay", Version: r.chartVersion, AppVersion: r.appVersion, Type: "application"}}
	saved, err := chartutil.Save(ch, dist)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dist, "relay-"+v+".tgz"); saved != want {
		if err := os.Rename(saved, want); err != nil {
			t.Fatal(err)
		}
	}

	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, a := range [][2]string{{"amd64", r.label}, {"arm64", r.armLabel}} {
		img, err := random.Image(64, 1)
		if err != nil {
			t.Fatal(err)
		}
		cfg, _ := img.ConfigFile()
		cfg.Config.Labels = map[string]string{"org.opencontainers.image.version": a[1]}
		if img, err = mutate.ConfigFile(img, cfg); err != nil {
			t.Fatal(err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: a[0]}}})
	}
	idx = mutate.Annotations(idx, map[string]string{"org.opencontainers.image.version": r.indexAnnotation}).(v1.ImageIndex)
	p, err := layout.Write(filepath.Join(dist, "oci"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": v})); err != nil {
		t.Fatal(err)
	}
	bom := cdx.NewBOM()
	bom.Metadata = &cdx.Metadata{Component: &cdx.Component{Name: "relay", Version: r.sbomRelay}}
	var comps []cdx.Component
	for n, ver := range r.sbomLibs {
		comps = append(comps, cdx.Component{Name: n, Version: ver})
	}
	bom.Components = &comps
	var sb bytes.Buffer
	if err := cdx.NewBOMEncoder(&sb, cdx.BOMFileFormatJSON).Encode(bom); err != nil {
		t.Fatal(err)
	}
	subject, _ := partial.Descriptor(idx)
	if r.sbomOnOther {
		other, _ := random.Index(64, 1, 1)
		subject, _ = partial.Descriptor(other)
	}
	cfgBlob := []byte("{}")
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: sbomType, Subject: subject,
		Config: v1.Descriptor{MediaType: "application/vnd.oci.empty.v1+json", Size: 2, Digest: digest(cfgBlob)},
		Layers: []v1.Descriptor{{MediaType: sbomType, Size: int64(sb.Len()), Digest: digest(sb.Bytes())}}}
	raw, _ := json.Marshal(m)
	for _, b := range [][]byte{cfgBlob, sb.Bytes(), raw} {
		if err := p.WriteBlob(digest(b), io.NopCloser(bytes.NewReader(b))); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.AppendDescriptor(v1.Descriptor{MediaType: types.OCIManifestSchema1, ArtifactType: sbomType, Size: int64(len(raw)), Digest: digest(raw)}); err != nil {
		t.Fatal(err)
	}

	var sums strings.Builder
	for _, f := range []string{"relay-linux-amd64", "relay-image-linux-amd64.tar", "relay-" + v + ".tgz", "RELEASE-NOTES.md"} {
		if f == r.unlisted {
			continue
		}
		b, _ := os.ReadFile(filepath.Join(dist, f))
		d := digest(b).Hex
		if r.corruptSum && f == "RELEASE-NOTES.md" {
			d = strings.Repeat("0", 64)
		}
		fmt.Fprintf(&sums, "%s  %s\n", d, f)
	}
	put("SHA256SUMS", []byte(sums.String()))
	return dist
}

// A release whose artefacts agree passes; each disagreement, alone, is
// found and named.
func TestCheckFindsEachDisagreement(t *testing.T) {
	const v = "0.7.0"
	linked := []string{"libcurl", "librdkafka", "openssl", "zlib"}
	pre := good(v)
	pre.notes = "# relay " + v + " (a pre-release: the changes since the last release)"
	for _, r := range []release{good(v), pre} {
		if errs := check(r.write(t, v), v, linked); len(errs) != 0 {
			t.Fatalf("an agreeing release (notes %q): %v", r.notes, errs)
		}
	}
	for name, c := range map[string]struct {
		edit   func(r *release)
		linked []string
		want   string
	}{
		"binary":            {edit: func(r *release) { r.binary = "0.6.9" }, want: "relay version says"},
		"index annotation":  {edit: func(r *release) { r.indexAnnotation = "dev" }, want: "version annotation"},
		"image label":       {edit: func(r *release) { r.label = "dev" }, want: "version label"},
		"arm64 image label": {edit: func(r *release) { r.armLabel = "dev" }, want: "arm64 image's version label"},
		"sbom relay":        {edit: func(r *release) { r.sbomRelay = "0.6.0" }, want: "the SBOM's component"},
		"sbom library":      {edit: func(r *release) { delete(r.sbomLibs, "zlib") }, want: "the SBOM names zlib"},
		"sbom lib version":  {edit: func(r *release) { r.sbomLibs["openssl"] = "3.0.14" }, want: "the SBOM names openssl at"},
		"sbom librdkafka":   {edit: func(r *release) { r.sbomLibs["librdkafka"] = "2.10.0" }, want: "the SBOM names librdkafka at"},
		"sbom subject":      {edit: func(r *release) { r.sbomOnOther = true }, want: "not attached to the tagged index"},
		"archive links":     {edit: func(*release) {}, linked: append(linked, "zstd"), want: "does not name zstd"},
		"chart version":     {edit: func(r *release) { r.chartVersion = "0.1.0" }, want: "the chart is version"},
		"app version":       {edit: func(r *release) { r.appVersion = "dev" }, want: "appVersion"},
		"chart of another":  {edit: func(r *release) { r.chartVersion, r.appVersion = "0.6.0", "0.6.0" }, want: "the chart is version"},
		"notes":             {edit: func(r *release) { r.notes = "# relay 0.6.0" }, want: "release notes begin"},
		"notes of an rc":    {edit: func(r *release) { r.notes = "# relay 0.7.0-rc.1" }, want: "release notes begin"},
		"sums":              {edit: func(r *release) { r.corruptSum = true }, want: "RELEASE-NOTES.md does not match"},
		"sums list":         {edit: func(r *release) { r.unlisted = "relay-image-linux-amd64.tar" }, want: "does not list relay-image-linux-amd64.tar"},
	} {
		r := good(v)
		r.sbomLibs = map[string]string{"librdkafka": "2.11.1", "openssl": "3.0.15", "zlib": "1.3.1", "curl": "8.10.1"}
		c.edit(&r)
		l := linked
		if c.linked != nil {
			l = c.linked
		}
		errs := check(r.write(t, v), v, l)
		if len(errs) == 0 || !strings.Contains(fmt.Sprint(errs), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, errs, c.want)
		}
	}
}

// nm's output: each library whose version symbol is defined.
func TestLinkedBySymbols(t *testing.T) {
	out := "\nlibcrypto-lib-cversion.o:\n0000000000000010 T OpenSSL_version\n                 U zlibVersion\n                 U curl_version\n" +
		"zutil.o:\n0000000000000000 T zlibVersion\n0000000000000000 T rd_kafka_version\n0000000000000000 T OpenSSL_version\n"
	if got := strings.Join(linkedBySymbols(out), ","); got != "librdkafka,openssl,zlib" {
		t.Errorf("linkedBySymbols = %s", got)
	}
}
