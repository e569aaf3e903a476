package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"sigs.k8s.io/yaml"
)

const sbomType = "application/vnd.cyclonedx+json"

// versionSymbols are the symbols by which a C library in the archive is
// known, and its name in `relay version` and the SBOM.
var versionSymbols = map[string]string{
	"OpenSSL_version":      "openssl",
	"zlibVersion":          "zlib",
	"ZSTD_versionString":   "zstd",
	"LZ4_versionString":    "lz4",
	"curl_version":         "libcurl",
	"sasl_client_init":     "cyrus-sasl",
	"gss_init_sec_context": "gssapi",
	"snappy_compress":      "snappy",
	"rd_kafka_version":     "librdkafka",
}

// linkedBySymbols are the libraries whose symbols nm's output defines.
func linkedBySymbols(nm string) []string {
	var out []string
	for _, line := range strings.Split(nm, "\n") {
		f := strings.Fields(line) // address, type, name; U (undefined) has no address
		if len(f) != 3 || f[1] == "U" || f[1] == "w" {
			continue
		}
		if lib, ok := versionSymbols[f[len(f)-1]]; ok && !slices.Contains(out, lib) {
			out = append(out, lib)
		}
	}
	slices.Sort(out)
	return out
}

// sbomNames maps a library's name in relay version to its SBOM
// component's name (deploy/image/clibs.go).
var sbomNames = map[string]string{"libcurl": "curl"}

// check returns every disagreement among the artefacts in dist.
func check(dist, version string, linked []string) []error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	// The binary, as it printed itself.
	var bin struct {
		Version    string `json:"version"`
		Librdkafka string `json:"librdkafka"`
		Libraries  []struct {
			Name, Version string
		} `json:"libraries"`
	}
	if b, err := os.ReadFile(filepath.Join(dist, "relay-version.json")); err != nil {
		fail("the binary's version: %v", err)
	} else if err := json.Unmarshal(b, &bin); err != nil || bin.Version != version {
		fail("relay version says %q (%v), want %s", bin.Version, err, version)
	}

	// The image and its SBOM.
	sbom, err := imageSBOM(filepath.Join(dist, "oci"), version)
	if err != nil {
		fail("image: %v", err)
	} else {
		if sbom.Metadata == nil || sbom.Metadata.Component == nil || sbom.Metadata.Component.Version != version {
			fail("the SBOM's component is not relay %s", version)
		}
		have := map[string]string{}
		if sbom.Components != nil {
			for _, c := range *sbom.Components {
				have[c.Name] = c.Version
			}
		}
		for _, lib := range linked {
			name := lib
			if n, ok := sbomNames[lib]; ok {
				name = n
			}
			if _, ok := have[name]; !ok {
				fail("the SBOM does not name %s, which the librdkafka archive links in", lib)
			}
		}
		// librdkafka is a field of its own in relay version's output.
		bin.Libraries = append(bin.Libraries, struct{ Name, Version string }{"librdkafka", bin.Librdkafka})
		for _, l := range bin.Libraries {
			name := l.Name
			if n, ok := sbomNames[name]; ok {
				name = n
			}
			if have[name] != l.Version {
				fail("the SBOM names %s at %q, relay version at %q", l.Name, have[name], l.Version)
			}
		}
	}

	// The chart.
	if meta, err := chartMeta(filepath.Join(dist, "relay-"+version+".tgz")); err != nil {
		fail("chart: %v", err)
	} else if meta.Version != version || meta.AppVersion != version {
		fail("the chart is version %q, appVersion %q, want %s", meta.Version, meta.AppVersion, version)
	}

	// The release notes.
	if b, err := os.ReadFile(filepath.Join(dist, "RELEASE-NOTES.md")); err != nil {
		fail("release notes: %v", err)
	} else if first, _, _ := strings.Cut(string(b), "\n"); !notesHeading(first, version) {
		fail("the release notes begin %q, not with relay %s", first, version)
	}

	// SHA256SUMS: every file listed, and right.
	errs = append(errs, checkSums(dist, version)...)
	return errs
}

// notesHeading: the notes' first line is scripts/release.sh's heading of
// version ("# relay V", or "# relay V (a pre-release: …)"), and of no
// version V is a prefix of (0.7.0-rc.1 is not 0.7.0).
func notesHeading(first, version string) bool {
	rest, ok := strings.CutPrefix(first, "# relay "+version)
	return ok && (rest == "" || strings.HasPrefix(rest, " "))
}

// imageSBOM checks the layout's index tagged version (its annotations and
// each image's labels) and returns the SBOM attached to it.
func imageSBOM(dir, version string) (*cdx.BOM, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	root, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	im, err := root.IndexManifest()
	if err != nil {
		return nil, err
	}
	var tagged *v1.Descriptor
	var sbomManifest *v1.Descriptor
	for i, d := range im.Manifests {
		switch {
		case d.Annotations["org.opencontainers.image.ref.name"] == version:
			tagged = &im.Manifests[i]
		case d.ArtifactType == sbomType:
			sbomManifest = &im.Manifests[i]
		}
	}
	if tagged == nil {
		return nil, fmt.Errorf("no index tagged %s in %s", version, dir)
	}
	idx, err := root.ImageIndex(tagged.Digest)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if got := m.Annotations["org.opencontainers.image.version"]; got != version {
		return nil, fmt.Errorf("the index's version annotation is %q", got)
	}
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		if got := cfg.Config.Labels["org.opencontainers.image.version"]; got != version {
			return nil, fmt.Errorf("the %s image's version label is %q", d.Platform.Architecture, got)
		}
	}
	if sbomManifest == nil {
		return nil, errors.New("no SBOM attached")
	}
	raw, err := p.Bytes(sbomManifest.Digest)
	if err != nil {
		return nil, err
	}
	var am v1.Manifest
	if err := json.Unmarshal(raw, &am); err != nil {
		return nil, err
	}
	if am.Subject == nil || am.Subject.Digest != tagged.Digest || len(am.Layers) != 1 {
		return nil, errors.New("the SBOM is not attached to the tagged index")
	}
	body, err := p.Bytes(am.Layers[0].Digest)
	if err != nil {
		return nil, err
	}
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(body), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		return nil, err
	}
	return &bom, nil
}

type chartYAML struct {
	Version    string `json:"version"`
	AppVersion string `json:"appVersion"`
}

// chartMeta is the Chart.yaml in the chart package file.
func chartMeta(file string) (chartYAML, error) {
	var c chartYAML
	f, err := os.Open(file) //nolint:gosec // the release's own file
	if err != nil {
		return c, err
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return c, err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			return c, fmt.Errorf("%s: no Chart.yaml (%w)", file, err)
		}
		if filepath.Base(h.Name) == "Chart.yaml" && strings.Count(h.Name, "/") == 1 {
			b, err := io.ReadAll(tr)
			if err != nil {
				return c, err
			}
			return c, yaml.Unmarshal(b, &c)
		}
	}
}

var sumLine = regexp.MustCompile(`^([0-9a-f]{64})  (\S+)$`)

// checkSums checks SHA256SUMS: it lists the binaries, the chart, the
// image tarballs and the notes, each with its digest.
func checkSums(dist, version string) []error {
	var errs []error
	b, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		return []error{err}
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		m := sumLine.FindStringSubmatch(line)
		if m == nil {
			errs = append(errs, fmt.Errorf("SHA256SUMS: %q is not a digest and a file", line))
			continue
		}
		listed[m[2]] = true
		data, err := os.ReadFile(filepath.Join(dist, m[2])) //nolint:gosec // a file of the release
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != m[1] {
			errs = append(errs, fmt.Errorf("SHA256SUMS: %s does not match", m[2]))
		}
	}
	want, _ := filepath.Glob(filepath.Join(dist, "relay-linux-*"))
	tars, _ := filepath.Glob(filepath.Join(dist, "relay-image-linux-*.tar"))
	want = append(append(want, tars...), filepath.Join(dist, "relay-"+version+".tgz"), filepath.Join(dist, "RELEASE-NOTES.md"))
	for _, f := range want {
		if !listed[filepath.Base(f)] {
			errs = append(errs, fmt.Errorf("SHA256SUMS does not list %s", filepath.Base(f)))
		}
	}
	return errs
}
