// Command binimage writes an image of one static program as an archive
// that containerd imports, for the cluster of make test-k8s
// (scripts/k8s), where no registry is reachable: the program at -path, its
// entrypoint, run as -user, named by -name. It makes the pods' sandbox
// image (deploy/k8s/pause) and the console's oauth2-proxy sidecar.
//
// usage: binimage -bin PATH -path /IN/IMAGE -user UID:GID -name REF -out FILE
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	bin := flag.String("bin", "", "the static program")
	path := flag.String("path", "", "where the image holds it (absolute), its entrypoint")
	user := flag.String("user", "65535:65535", "the user and group it runs as")
	ref := flag.String("name", "", "the image's name")
	out := flag.String("out", "", "the archive to write")
	flag.Parse()
	if err := run(*bin, *path, *user, *ref, *out); err != nil {
		fmt.Fprintln(os.Stderr, "binimage:", err)
		os.Exit(1)
	}
}

func run(bin, path, user, ref, out string) error {
	if bin == "" || ref == "" || out == "" {
		return fmt.Errorf("-bin, -name and -out are required")
	}
	if !strings.HasPrefix(path, "/") || strings.HasSuffix(path, "/") || strings.Contains(path, "..") {
		return fmt.Errorf("-path %q: an absolute file path is required", path)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("-name %q: %w", ref, err)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	// The directories above the program, then the program.
	dirs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i := 1; i < len(dirs); i++ {
		if err := tw.WriteHeader(&tar.Header{Name: strings.Join(dirs[:i], "/") + "/", Mode: 0o755, Typeflag: tar.TypeDir}); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(path, "/"), Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(b); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layer.Bytes())), nil })
	if err != nil {
		return err
	}
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Architecture: runtime.GOARCH, OS: "linux",
		Config: v1.Config{Entrypoint: []string{path}, User: user},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return err
	}
	if img, err = mutate.AppendLayers(img, l); err != nil {
		return err
	}
	return tarball.WriteToFile(out, tag, img)
}
