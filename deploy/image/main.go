// Command image builds relay's container image without a container engine:
// an OCI image layout holding one index for linux/amd64 and linux/arm64,
// each image an empty base plus one layer (the static relay, CA
// certificates, and passwd and group files naming the user it runs as),
// with relay's CycloneDX SBOM attached to the index as an OCI artifact;
// and, for `docker load`, one docker-archive tarball per architecture.
//
// The image is reproducible like the binaries it holds: every time in it
// is SOURCE_DATE_EPOCH, and the layer's tar is written in a fixed order
// with fixed owners.
//
// usage: go run ./image -version V -out DIR -bin amd64=FILE [-bin arm64=FILE]
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image is: these are what the image test checks.
const (
	binPath  = "/usr/local/bin/relay"
	certPath = "/etc/ssl/certs/ca-certificates.crt"
	user     = "65532"
	// metricsPort is RELAY_HTTP_ADDR's default port.
	metricsPort = "9464/tcp"
	sbomType    = "application/vnd.cyclonedx+json"
)

type binaries map[string]string // architecture → file

func (b binaries) String() string { return fmt.Sprint(map[string]string(b)) }

func (b binaries) Set(v string) error {
	arch, file, ok := strings.Cut(v, "=")
	if !ok || (arch != "amd64" && arch != "arm64") || file == "" {
		return fmt.Errorf("%q is not amd64=FILE or arm64=FILE", v)
	}
	b[arch] = file
	return nil
}

func main() {
	bins := binaries{}
	var o options
	flag.StringVar(&o.version, "version", "", "relay's version (the image's tag and label)")
	flag.StringVar(&o.revision, "revision", "", "the commit relay was built from (a label)")
	flag.StringVar(&o.out, "out", "dist", "directory for oci/ (the image layout) and the docker-archive tarballs")
	flag.StringVar(&o.certs, "ca-certificates", certPath, "the CA bundle to put in the image")
	flag.StringVar(&o.repository, "repository", "relay", "the repository name of the docker-archive tags")
	flag.StringVar(&o.linked, "linked", "", "what `relay version -o json` of the binary prints: the librdkafka and C libraries linked in, for the SBOM")
	flag.Var(bins, "bin", "ARCH=FILE: the static relay for linux/ARCH (repeat for each architecture)")
	flag.Parse()
	o.bins = bins
	if err := o.build(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

type options struct {
	version, revision, out, certs, repository, linked string
	bins                                              binaries
}

func (o *options) build() error {
	if o.version == "" || o.linked == "" || len(o.bins) == 0 {
		return errors.New("-version, -linked and at least one -bin are required")
	}
	linked, err := readLinked(o.linked, o.version)
	if err != nil {
		return err
	}
	created, err := sourceDate()
	if err != nil {
		return err
	}
	certs, err := os.ReadFile(o.certs)
	if err != nil {
		return fmt.Errorf("CA certificates: %w", err)
	}
	labels := labelsOf(o.version, o.revision, created)

	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	arches := make([]string, 0, len(o.bins))
	for arch := range o.bins {
		arches = append(arches, arch)
	}
	slices.Sort(arches)
	images := map[string]v1.Image{}
	var sbom []byte
	for _, arch := range arches {
		bin, err := os.ReadFile(o.bins[arch])
		if err != nil {
			return err
		}
		img, err := image(arch, bin, certs, labels, created)
		if err != nil {
			return fmt.Errorf("linux/%s: %w", arch, err)
		}
		images[arch] = img
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}},
		})
		if sbom == nil {
			if sbom, err = cycloneDX(o.bins[arch], o.version, linked, created); err != nil {
				return err
			}
		}
	}
	idx = mutate.Annotations(idx, labels).(v1.ImageIndex)

	dir := filepath.Join(o.out, "oci")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	ref := o.repository + ":" + o.version
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": o.version})); err != nil {
		return err
	}
	if err := attach(p, idx, sbom, created); err != nil {
		return fmt.Errorf("SBOM: %w", err)
	}
	for _, arch := range arches {
		tag, err := name.NewTag(ref + "-" + arch)
		if err != nil {
			return err
		}
		file := filepath.Join(o.out, "relay-image-linux-"+arch+".tar")
		if err := tarball.WriteToFile(file, tag, images[arch]); err != nil {
			return err
		}
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("image: %s (%s), index %s, SBOM attached; docker load -i %s/relay-image-linux-<arch>.tar\n", ref, strings.Join(arches, ", "), d, o.out)
	return nil
}

// sourceDate is SOURCE_DATE_EPOCH, the time every file and record of the
// image carries.
func sourceDate() (time.Time, error) {
	v := os.Getenv("SOURCE_DATE_EPOCH")
	if v == "" {
		return time.Time{}, errors.New("SOURCE_DATE_EPOCH is not set (scripts/image.sh sets it to the commit's time)")
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", v, err)
	}
	return time.Unix(n, 0).UTC(), nil
}

// image is relay's image for linux/arch.
func image(arch string, bin, certs []byte, labels map[string]string, created time.Time) (v1.Image, error) {
	fs, err := rootFS(bin, certs, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(fs)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: created}
	cf.History = []v1.History{{Created: v1.Time{Time: created}, CreatedBy: "relay's deploy/image", Comment: "relay, CA certificates, passwd"}}
	cf.Config = v1.Config{
		Entrypoint: []string{binPath, "run"},
		User:       user + ":" + user,
		WorkingDir: "/",
		Env: []string{
			"PATH=/usr/local/bin",
			"SSL_CERT_FILE=" + certPath,
		},
		ExposedPorts: map[string]struct{}{metricsPort: {}},
		Labels:       labels,
		StopSignal:   "SIGTERM",
	}
	return mutate.ConfigFile(img, cf)
}

// rootFS is the image's one layer: a tar in a fixed order, every entry
// owned by root at the source date, so the same inputs give the same
// bytes.
func rootFS(bin, certs []byte, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: created, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: created, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	passwd := "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:" + user + ":" + user + ":nonroot:/home/nonroot:/sbin/nologin\n"
	group := "root:x:0:\nnonroot:x:" + user + ":\n"
	steps := []func() error{
		func() error { return dir("etc", 0o755) },
		func() error { return file("etc/group", 0o644, []byte(group)) },
		func() error { return file("etc/passwd", 0o644, []byte(passwd)) },
		func() error { return dir("etc/ssl", 0o755) },
		func() error { return dir("etc/ssl/certs", 0o755) },
		func() error { return file(strings.TrimPrefix(certPath, "/"), 0o644, certs) },
		// relay writes no file; /tmp is there for what a library may want.
		func() error { return dir("tmp", 0o1777) },
		func() error { return dir("usr", 0o755) },
		func() error { return dir("usr/local", 0o755) },
		func() error { return dir("usr/local/bin", 0o755) },
		func() error { return file(strings.TrimPrefix(binPath, "/"), 0o755, bin) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// attach writes sbom as an OCI artifact whose subject is the index: a
// manifest with the empty config and one layer, listed in the layout's
// index.json, where `oras discover` or a registry's referrers API finds it
// once pushed.
func attach(p layout.Path, idx v1.ImageIndex, sbom []byte, created time.Time) error {
	subject, err := partial.Descriptor(idx)
	if err != nil {
		return err
	}
	emptyConfig := []byte("{}")
	config := v1.Descriptor{MediaType: "application/vnd.oci.empty.v1+json", Size: int64(len(emptyConfig)), Digest: digestOf(emptyConfig)}
	layer := v1.Descriptor{MediaType: sbomType, Size: int64(len(sbom)), Digest: digestOf(sbom),
		Annotations: map[string]string{"org.opencontainers.image.title": "relay.cdx.json"}}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  sbomType,
		Config:        config,
		Layers:        []v1.Descriptor{layer},
		Subject:       subject,
		Annotations:   map[string]string{"org.opencontainers.image.created": created.Format(time.RFC3339)},
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	for _, blob := range [][]byte{emptyConfig, sbom, raw} {
		if err := p.WriteBlob(digestOf(blob), io.NopCloser(bytes.NewReader(blob))); err != nil {
			return err
		}
	}
	return p.AppendDescriptor(v1.Descriptor{MediaType: types.OCIManifestSchema1, ArtifactType: sbomType, Size: int64(len(raw)), Digest: digestOf(raw)})
}

func digestOf(b []byte) v1.Hash {
	sum := sha256.Sum256(b)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}

// labelsOf are the image's OCI annotations and config labels; the
// Dockerfile and docs/DEPLOYMENT.md list the same (a test checks).
func labelsOf(version, revision string, created time.Time) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "relay",
		"org.opencontainers.image.description": "the single ingress stage in front of Kafka consumers: every record processed, rejected, quarantined or in a bounded retry tier, in the transaction that commits its offset",
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.revision":    revision,
		"org.opencontainers.image.created":     created.Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
}
