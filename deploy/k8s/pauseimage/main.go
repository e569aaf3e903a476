// Command pauseimage writes the sandbox image of the cluster of make
// test-k8s (scripts/k8s) as an image archive that containerd imports: the
// static pause program (deploy/k8s/pause, built by the caller) at /pause,
// its entrypoint, run as 65535, named by -name.
//
// usage: pauseimage -bin PATH -name REF -out FILE
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	bin := flag.String("bin", "", "the static pause program")
	ref := flag.String("name", "", "the image's name")
	out := flag.String("out", "", "the archive to write")
	flag.Parse()
	if err := run(*bin, *ref, *out); err != nil {
		fmt.Fprintln(os.Stderr, "pauseimage:", err)
		os.Exit(1)
	}
}

func run(bin, ref, out string) error {
	if bin == "" || ref == "" || out == "" {
		return fmt.Errorf("-bin, -name and -out are required")
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
	if err := tw.WriteHeader(&tar.Header{Name: "pause", Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
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
		Config: v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"},
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
