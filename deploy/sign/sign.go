package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// Options are what Run publishes and signs.
type Options struct {
	Layout, Version, Repository, Key, Chart string
	Commit, Source, BuildCommand            string
	Insecure                                bool
	Started                                 time.Time
}

// Result is what Run made.
type Result struct {
	Digest         v1.Hash // the index's, as pushed
	ChartSignature string  // the chart signature's file, when a chart was signed
}

// cosign's formats: the layer media types and the annotation its
// verification reads a signature from.
const (
	simpleSigningType = "application/vnd.dev.cosign.simplesigning.v1+json"
	dsseType          = "application/vnd.dsse.envelope.v1+json"
	signatureKey      = "dev.cosignproject.cosign/signature"
	inTotoType        = "application/vnd.in-toto+json"
	slsaProvenanceV1  = "https://slsa.dev/provenance/v1"
)

// Run pushes the layout's index tagged o.Version (and the artifacts that
// refer to it: the SBOM) to o.Repository, then signs it, attests its
// provenance, and signs the chart.
func Run(ctx context.Context, o Options) (Result, error) {
	var res Result
	signer, err := loadSigner(o.Key)
	if err != nil {
		return res, fmt.Errorf("the key %s: %w", o.Key, err)
	}
	var nameOpts []name.Option
	if o.Insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	repo, err := name.NewRepository(o.Repository, nameOpts...)
	if err != nil {
		return res, err
	}
	ropts := []remote.Option{remote.WithContext(ctx)}

	idx, referrers, err := fromLayout(o.Layout, o.Version)
	if err != nil {
		return res, err
	}
	if err := remote.WriteIndex(repo.Tag(o.Version), idx, ropts...); err != nil {
		return res, fmt.Errorf("pushing the index: %w", err)
	}
	for _, r := range referrers {
		d, err := r.Digest()
		if err != nil {
			return res, err
		}
		if err := remote.Write(repo.Digest(d.String()), r, ropts...); err != nil {
			return res, fmt.Errorf("pushing the SBOM: %w", err)
		}
	}
	if res.Digest, err = idx.Digest(); err != nil {
		return res, err
	}

	// The signature: cosign's simple-signing payload naming the digest.
	payload, err := json.Marshal(map[string]any{
		"critical": map[string]any{
			"identity": map[string]string{"docker-reference": repo.String()},
			"image":    map[string]string{"docker-manifest-digest": res.Digest.String()},
			"type":     "cosign container image signature",
		},
		"optional": nil,
	})
	if err != nil {
		return res, err
	}
	sig, err := signer.SignMessage(bytes.NewReader(payload))
	if err != nil {
		return res, err
	}
	if err := pushAttached(repo, res.Digest, "sig", payload, simpleSigningType,
		map[string]string{signatureKey: base64.StdEncoding.EncodeToString(sig)}, ropts); err != nil {
		return res, fmt.Errorf("pushing the signature: %w", err)
	}

	// The provenance, as an in-toto statement in a DSSE envelope.
	statement, err := provenance(o, repo.String(), res.Digest, time.Now().UTC())
	if err != nil {
		return res, err
	}
	es, err := dsse.NewEnvelopeSigner(dsseSigner{signer})
	if err != nil {
		return res, err
	}
	env, err := es.SignPayload(ctx, inTotoType, statement)
	if err != nil {
		return res, err
	}
	envJSON, err := json.Marshal(env)
	if err != nil {
		return res, err
	}
	if err := pushAttached(repo, res.Digest, "att", envJSON, dsseType,
		map[string]string{signatureKey: "", "predicateType": slsaProvenanceV1}, ropts); err != nil {
		return res, fmt.Errorf("pushing the attestation: %w", err)
	}

	// The chart: a signature of the package's bytes, as cosign sign-blob
	// writes one.
	if o.Chart != "" {
		chart, err := os.ReadFile(o.Chart)
		if err != nil {
			return res, err
		}
		sig, err := signer.SignMessage(bytes.NewReader(chart))
		if err != nil {
			return res, err
		}
		res.ChartSignature = o.Chart + ".sig"
		if err := os.WriteFile(res.ChartSignature, []byte(base64.StdEncoding.EncodeToString(sig)), 0o644); err != nil {
			return res, err
		}
	}
	return res, nil
}

// loadSigner reads a PEM private key, cosign's encrypted one (its
// password in COSIGN_PASSWORD) included.
func loadSigner(file string) (signature.Signer, error) {
	pemBytes, err := os.ReadFile(file) //nolint:gosec // the release's key, named by its operator
	if err != nil {
		return nil, err
	}
	priv, err := cryptoutils.UnmarshalPEMToPrivateKey(pemBytes, func(bool) ([]byte, error) {
		return []byte(os.Getenv("COSIGN_PASSWORD")), nil
	})
	if err != nil {
		return nil, err
	}
	return signature.LoadSigner(priv, crypto.SHA256)
}

// dsseSigner signs DSSE's pre-authentication encoding with the key.
type dsseSigner struct{ s signature.Signer }

func (d dsseSigner) Sign(_ context.Context, data []byte) ([]byte, error) {
	return d.s.SignMessage(bytes.NewReader(data))
}
func (d dsseSigner) KeyID() (string, error) { return "", nil }

// fromLayout is the index tagged version in the layout and the
// manifests whose subject it is (the SBOM).
func fromLayout(dir, version string) (v1.ImageIndex, []v1.Image, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, nil, err
	}
	root, err := p.ImageIndex()
	if err != nil {
		return nil, nil, err
	}
	m, err := root.IndexManifest()
	if err != nil {
		return nil, nil, err
	}
	var idx v1.ImageIndex
	for _, d := range m.Manifests {
		if d.Annotations["org.opencontainers.image.ref.name"] == version {
			if idx, err = root.ImageIndex(d.Digest); err != nil {
				return nil, nil, err
			}
		}
	}
	if idx == nil {
		return nil, nil, fmt.Errorf("%s has no index tagged %s", dir, version)
	}
	want, err := idx.Digest()
	if err != nil {
		return nil, nil, err
	}
	var referrers []v1.Image
	for _, d := range m.Manifests {
		if d.ArtifactType == "" || d.MediaType != types.OCIManifestSchema1 {
			continue
		}
		img, err := root.Image(d.Digest)
		if err != nil {
			return nil, nil, err
		}
		mf, err := img.Manifest()
		if err != nil {
			return nil, nil, err
		}
		if mf.Subject != nil && mf.Subject.Digest == want {
			referrers = append(referrers, img)
		}
	}
	return idx, referrers, nil
}

// pushAttached pushes, at cosign's tag for digest (sha256-<hex>.<kind>),
// an image of one layer: the payload, with its annotations.
func pushAttached(repo name.Repository, digest v1.Hash, kind string, payload []byte, mediaType types.MediaType, annotations map[string]string, ropts []remote.Option) error {
	layer := static.NewLayer(payload, mediaType)
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{Layer: layer, Annotations: annotations})
	if err != nil {
		return err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	tag := repo.Tag(fmt.Sprintf("%s-%s.%s", digest.Algorithm, digest.Hex, kind))
	return remote.Write(tag, img, ropts...)
}

// fileDigest is the sha256 of a file, for the provenance's materials.
func fileDigest(file string) (string, error) {
	b, err := os.ReadFile(file) //nolint:gosec // the release's own files
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

var errNoCommit = errors.New("-commit is required for the provenance")

func trimGit(s string) string { return strings.TrimSuffix(s, ".git") }
