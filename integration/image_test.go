package integration

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestImageRunsRelayAlone proves relay's image holds everything relay
// needs: the linux/amd64 file system of the image `make image` writes
// (dist/oci), unpacked as a container runtime would and run alone in it
// (chroot, as the image's user, with the image's environment and relay's
// variables and nothing else), starts, passes its preflight, relays
// records exactly once, and stops on SIGTERM with exit 0. It also checks
// what the image promises: its entrypoint, a non-root user, no shell.
func TestImageRunsRelayAlone(t *testing.T) {
	dir := os.Getenv("RELAY_TEST_IMAGE")
	if dir == "" {
		t.Skip("RELAY_TEST_IMAGE is not set: `make test` builds the image (make image) and names its layout")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the image test runs relay in a chroot, which needs root")
	}
	cfg, layers := ociImage(t, dir, "amd64")
	c := cfg.Config
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/relay", "run"}) || c.User != "65532:65532" || c.StopSignal != "SIGTERM" {
		t.Fatalf("image config: entrypoint %q, user %q, stop signal %q", c.Entrypoint, c.User, c.StopSignal)
	}
	if c.Labels["org.opencontainers.image.licenses"] != "Apache-2.0" {
		t.Errorf("the image does not name its license: %v", c.Labels)
	}
	if _, ok := c.ExposedPorts["9464/tcp"]; !ok {
		t.Errorf("the image does not expose relay's metrics port: %v", c.ExposedPorts)
	}
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil { // the image's / for user 65532
		t.Fatal(err)
	}
	for _, l := range layers {
		unpack(t, filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(l, "sha256:")), root)
	}
	for _, shell := range []string{"bin/sh", "bin/bash", "bin/busybox", "usr/bin/env"} {
		if _, err := os.Lstat(filepath.Join(root, shell)); err == nil {
			t.Errorf("the image has /%s: no shell at run time", shell)
		}
	}

	const partitions = 2
	s := newScenario(t, partitions)
	s.src.produce(t, 400)
	uid, gid := ids(t, c.User)
	cmd := &exec.Cmd{
		Path: c.Entrypoint[0],
		Args: c.Entrypoint,
		Dir:  "/",
		Env:  slices.Clone(c.Env),
		SysProcAttr: &syscall.SysProcAttr{
			Chroot:     root,
			Credential: &syscall.Credential{Uid: uid, Gid: gid},
		},
	}
	r := startRelayCmd(t, "image", cmd, s.env(uniq(t, "txn")))
	r.waitLog("partitions assigned", 60*time.Second)
	assertExactlyOnce(t, s.src, s.output, s.group, partitions)
	r.stop()
}

// imageConfig is the part of an OCI image configuration the test reads.
type imageConfig struct {
	Architecture string `json:"architecture"`
	Config       struct {
		Entrypoint   []string            `json:"Entrypoint"`
		User         string              `json:"User"`
		Env          []string            `json:"Env"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts"`
		StopSignal   string              `json:"StopSignal"`
		Labels       map[string]string   `json:"Labels"`
	} `json:"config"`
}

type ociDescriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Platform  *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

// ociImage reads the image for linux/arch from the OCI image layout dir
// (index.json, then the image index it names, then that platform's
// manifest), with the standard library only: the test reads the layout as
// any runtime would, not through the code that wrote it.
func ociImage(t *testing.T, dir, arch string) (imageConfig, []string) {
	t.Helper()
	blob := func(digest string, v any) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(digest, "sha256:")))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", digest, err)
		}
	}
	var top struct{ Manifests []ociDescriptor }
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	var manifest string
	for _, d := range top.Manifests {
		if d.MediaType != "application/vnd.oci.image.index.v1+json" {
			continue // the SBOM
		}
		var idx struct{ Manifests []ociDescriptor }
		blob(d.Digest, &idx)
		for _, m := range idx.Manifests {
			if m.Platform != nil && m.Platform.OS == "linux" && m.Platform.Architecture == arch {
				manifest = m.Digest
			}
		}
	}
	if manifest == "" {
		t.Fatalf("%s has no linux/%s image", dir, arch)
	}
	var m struct {
		Config ociDescriptor
		Layers []ociDescriptor
	}
	blob(manifest, &m)
	var cfg imageConfig
	blob(m.Config.Digest, &cfg)
	if cfg.Architecture != arch {
		t.Fatalf("the linux/%s manifest's config says %q", arch, cfg.Architecture)
	}
	layers := make([]string, len(m.Layers))
	for i, l := range m.Layers {
		layers[i] = l.Digest
	}
	return cfg, layers
}

// unpack extracts a gzip-compressed layer into root: directories, regular
// files and symbolic links, with their modes.
func unpack(t *testing.T, file, root string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(root, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(name, 0o755)
			if err == nil {
				err = os.Chmod(name, h.FileInfo().Mode())
			}
		case tar.TypeReg:
			var out *os.File
			if out, err = os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, h.FileInfo().Mode().Perm()); err == nil {
				_, err = io.Copy(out, tr) //nolint:gosec // the project's own image
				err = errors.Join(err, out.Close())
			}
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, name)
		default:
			t.Fatalf("layer entry %s: type %c not expected in relay's image", h.Name, h.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// ids parses an image's "uid:gid" user.
func ids(t *testing.T, user string) (uint32, uint32) {
	t.Helper()
	var uid, gid uint32
	u, g, ok := strings.Cut(user, ":")
	if _, err := fmt.Sscan(u, &uid); err != nil || !ok {
		t.Fatalf("image user %q is not uid:gid", user)
	}
	if _, err := fmt.Sscan(g, &gid); err != nil {
		t.Fatalf("image user %q is not uid:gid", user)
	}
	return uid, gid
}
