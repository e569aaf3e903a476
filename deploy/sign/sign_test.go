package main

import (
	"bytes"
	"context"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// testDist is the release to sign: RELAY_TEST_DIST's (make test: the
// image make image built), else a small one made here.
func testDist(t *testing.T) (dist, version string) {
	t.Helper()
	if d := os.Getenv("RELAY_TEST_DIST"); d != "" {
		var v struct{ Version string }
		b, err := os.ReadFile(filepath.Join(d, "relay-version.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		// Signing writes the chart's signature beside it: a copy.
		out := t.TempDir()
		if err := os.CopyFS(out, os.DirFS(d)); err != nil {
			t.Fatal(err)
		}
		return out, v.Version
	}
	dist, version = t.TempDir(), "0.7.0"
	p, err := layout.Write(filepath.Join(dist, "oci"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	// Another version's index first: the one signed is the one tagged.
	for _, tag := range []string{"0.6.0", version} {
		idx, err := random.Index(256, 1, 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag})); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{
		"relay-version.json":        `{"version":"0.7.0","go":"go1.26.8","librdkafka":"2.11.1","libraries":[{"name":"openssl","version":"3.0.15"}]}`,
		"relay-linux-amd64":         "a static relay",
		"relay-" + version + ".tgz": "a chart package",
	} {
		if err := os.WriteFile(filepath.Join(dist, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dist, version
}

// keyPair writes a cosign-style key pair (the private key encrypted with
// COSIGN_PASSWORD) and returns the files.
func keyPair(t *testing.T, password string) (priv, pub string) {
	t.Helper()
	privPEM, pubPEM, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), cryptoutils.StaticPasswordFunc([]byte(password)))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	priv, pub = filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
	if err := os.WriteFile(priv, privPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pub, pubPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

// cosignCLI is cosign's own verification (RELAY_COSIGN: the binary
// scripts/tools/cosign.sh builds from its module), not relay's.
func cosignCLI(t *testing.T) string {
	t.Helper()
	c := os.Getenv("RELAY_COSIGN")
	if c == "" {
		if os.Getenv("RELAY_TEST_REQUIRE_COSIGN") != "" {
			t.Fatal("RELAY_COSIGN is not set: scripts/tools/cosign.sh path")
		}
		t.Skip("RELAY_COSIGN is not set (make test sets it: scripts/tools/cosign.sh path)")
	}
	return c
}

func cosign(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "COSIGN_YES=true", "SIGSTORE_NO_CACHE=true", "TUF_ROOT="+t.TempDir())
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	err := cmd.Run()
	return out.String() + errs.String(), err
}

// A signed release verifies with cosign's own code and the public key:
// the image's signature, its SLSA provenance, the chart's signature. What
// cosign verified is the release's: the index the layout tags VERSION, at
// REPOSITORY:VERSION with its SBOM, and one provenance naming that index,
// the commit, the command, the linked libraries and the files built. With
// another key, or once the tag points at another index, or the chart
// changed, cosign refuses it.
func TestCosignVerifiesTheRelease(t *testing.T) {
	bin := cosignCLI(t)
	dist, version := testDist(t)
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	repo := strings.TrimPrefix(reg.URL, "http://") + "/relay"
	t.Setenv("COSIGN_PASSWORD", "a test password")
	priv, pub := keyPair(t, "a test password")
	_, otherPub := keyPair(t, "another")
	chart := filepath.Join(dist, "relay-"+version+".tgz")
	o := Options{Layout: filepath.Join(dist, "oci"), Version: version, Repository: repo, Key: priv, Chart: chart,
		Commit: "0123456789abcdef0123456789abcdef01234567", Source: "https://example.invalid/relay.git",
		BuildCommand: "scripts/image.sh amd64 arm64", Insecure: true, Started: time.Now()}
	want := built(t, o) // before Run, which writes the chart's signature
	res, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Digest.String() != want.index {
		t.Fatalf("signed %s, the layout tags %s %s", res.Digest, version, want.index)
	}
	ref := repo + "@" + res.Digest.String()
	http := "--allow-http-registry=true"
	tlog := "--insecure-ignore-tlog=true"

	out, err := cosign(t, bin, "verify", "--key", pub, tlog, http, repo+":"+version)
	if err != nil {
		t.Fatalf("cosign verify: %v\n%s", err, out)
	}
	checkSigned(t, out, repo, want.index)
	r, _ := name.NewRepository(repo, name.Insecure)
	checkReferrers(t, r, want)
	out, err = cosign(t, bin, "verify-attestation", "--key", pub, "--type", "slsaprovenance1", tlog, http, ref)
	if err != nil {
		t.Fatalf("cosign verify-attestation: %v\n%s", err, out)
	}
	checkProvenance(t, out, o, want)
	if out, err := cosign(t, bin, "verify-blob", "--key", pub, "--signature", res.ChartSignature, tlog, chart); err != nil {
		t.Fatalf("cosign verify-blob of the chart: %v\n%s", err, out)
	}

	// Refused: another key; another provenance type.
	for _, args := range [][]string{
		{"verify", "--key", otherPub, tlog, http, ref},
		{"verify-attestation", "--key", otherPub, "--type", "slsaprovenance1", tlog, http, ref},
		{"verify-attestation", "--key", pub, "--type", "spdxjson", tlog, http, ref},
		{"verify-blob", "--key", otherPub, "--signature", res.ChartSignature, tlog, chart},
	} {
		if out, err := cosign(t, bin, args...); err == nil {
			t.Errorf("cosign %v accepted it:\n%s", args, out)
		}
	}
	// Refused: the tag moved to an index nobody signed; a changed chart.
	other, _ := random.Index(128, 1, 1)
	if err := remote.WriteIndex(r.Tag(version), other); err != nil {
		t.Fatal(err)
	}
	if out, err := cosign(t, bin, "verify", "--key", pub, tlog, http, repo+":"+version); err == nil {
		t.Errorf("cosign verify accepted an index the tag was moved to:\n%s", out)
	}
	if err := os.WriteFile(chart, append(mustRead(t, chart), '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := cosign(t, bin, "verify-blob", "--key", pub, "--signature", res.ChartSignature, tlog, chart); err == nil {
		t.Errorf("cosign verify-blob accepted a changed chart:\n%s", out)
	}
}

func mustRead(t *testing.T, f string) []byte {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// release is what a signature and the provenance must name, read from
// the files themselves, not through sign's code.
type release struct {
	index      string            // the digest of the index the layout tags VERSION
	referrers  []string          // the artifacts (the SBOM) attached to it
	deps       []string          // resolvedDependencies' URIs: the source, Go, librdkafka, C libraries
	byproducts map[string]string // file → sha256: the binaries, the chart
}

func built(t *testing.T, o Options) release {
	t.Helper()
	var idx struct {
		Manifests []struct {
			Digest, ArtifactType string
			Annotations          map[string]string
		}
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(o.Layout, "index.json")), &idx); err != nil {
		t.Fatal(err)
	}
	var r release
	for _, m := range idx.Manifests {
		switch {
		case m.Annotations["org.opencontainers.image.ref.name"] == o.Version:
			r.index = m.Digest
		case m.ArtifactType != "":
			r.referrers = append(r.referrers, m.Digest)
		}
	}
	dist := filepath.Dir(o.Layout)
	var linked struct {
		Go, Librdkafka string
		Libraries      []struct{ Name, Version string }
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(dist, "relay-version.json")), &linked); err != nil {
		t.Fatal(err)
	}
	r.deps = []string{"git+" + strings.TrimSuffix(o.Source, ".git") + "@" + o.Commit, "pkg:golang/stdlib@" + linked.Go, "pkg:generic/librdkafka@" + linked.Librdkafka}
	for _, l := range linked.Libraries {
		r.deps = append(r.deps, "pkg:generic/"+l.Name+"@"+l.Version)
	}
	files, _ := filepath.Glob(filepath.Join(dist, "relay-linux-*"))
	r.byproducts = map[string]string{}
	for _, f := range append(files, o.Chart) {
		r.byproducts[filepath.Base(f)] = fmt.Sprintf("%x", sha256.Sum256(mustRead(t, f)))
	}
	if r.index == "" || len(files) == 0 {
		t.Fatalf("%s: no index tagged %s, or no binaries beside it", o.Layout, o.Version)
	}
	return r
}

// checkSigned reads what cosign verify verified: simple-signing payloads,
// each of the index in repo.
func checkSigned(t *testing.T, out, repo, index string) {
	t.Helper()
	var payloads []struct {
		Critical struct {
			Identity struct {
				DockerReference string `json:"docker-reference"`
			}
			Image struct {
				DockerManifestDigest string `json:"docker-manifest-digest"`
			}
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "[") && json.Unmarshal([]byte(line), &payloads) == nil {
			break
		}
	}
	if len(payloads) == 0 {
		t.Fatalf("no signed payload in cosign's output:\n%s", out)
	}
	for _, p := range payloads {
		if p.Critical.Image.DockerManifestDigest != index || p.Critical.Identity.DockerReference != repo {
			t.Errorf("cosign verified a signature of %s@%s, want %s@%s", p.Critical.Identity.DockerReference, p.Critical.Image.DockerManifestDigest, repo, index)
		}
	}
}

// checkReferrers: the registry lists the SBOM as the index's referrer.
func checkReferrers(t *testing.T, repo name.Repository, want release) {
	t.Helper()
	ri, err := remote.Referrers(repo.Digest(want.index))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ri.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var pushed []string
	for _, d := range m.Manifests {
		pushed = append(pushed, d.Digest.String())
	}
	for _, d := range want.referrers {
		if !slices.Contains(pushed, d) {
			t.Errorf("the registry's referrers of the index are %v, not %s (the SBOM)", pushed, d)
		}
	}
}

// checkProvenance reads the statements cosign verified: exactly one,
// whose subject is the index in the repository, and which names the
// commit, the source, the command, the version, the linked libraries at
// their versions and the files built, with their digests.
func checkProvenance(t *testing.T, out string, o Options, want release) {
	t.Helper()
	var payloads [][]byte
	for _, line := range strings.Split(out, "\n") {
		var env struct{ PayloadType, Payload string }
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &env) != nil || env.Payload == "" {
			continue
		}
		payload, err := base64.StdEncoding.DecodeString(env.Payload)
		if err != nil || env.PayloadType != inTotoType {
			t.Fatalf("not an in-toto envelope (%v): %s", err, line)
		}
		payloads = append(payloads, payload)
	}
	if len(payloads) != 1 {
		t.Fatalf("cosign verified %d attestations, want 1:\n%s", len(payloads), out)
	}
	var st struct {
		Subject []struct {
			Name   string
			Digest map[string]string
		}
		PredicateType string
		Predicate     struct {
			BuildDefinition struct {
				ExternalParameters struct {
					Version, Command string
					Source           struct {
						URI    string
						Digest map[string]string
					}
				}
				ResolvedDependencies []struct {
					URI    string
					Digest map[string]string
				}
			}
			RunDetails struct {
				Builder    struct{ ID string }
				Byproducts []struct {
					Name   string
					Digest map[string]string
				}
			}
		}
	}
	if err := json.Unmarshal(payloads[0], &st); err != nil {
		t.Fatal(err)
	}
	bd, ext := st.Predicate.BuildDefinition, st.Predicate.BuildDefinition.ExternalParameters
	if len(st.Subject) != 1 || st.Subject[0].Name != o.Repository || "sha256:"+st.Subject[0].Digest["sha256"] != want.index ||
		st.PredicateType != slsaProvenanceV1 || st.Predicate.RunDetails.Builder.ID != builderID {
		t.Errorf("the provenance's subject, type or builder: %s", payloads[0])
	}
	if ext.Version != o.Version || ext.Command != o.BuildCommand || ext.Source.URI != o.Source || ext.Source.Digest["gitCommit"] != o.Commit {
		t.Errorf("the provenance's external parameters: %+v", ext)
	}
	var deps []string
	for _, d := range bd.ResolvedDependencies {
		deps = append(deps, d.URI)
		if strings.HasPrefix(d.URI, "git+") && d.Digest["gitCommit"] != o.Commit {
			t.Errorf("the provenance's source %s has commit %v", d.URI, d.Digest)
		}
	}
	if !slices.Equal(deps, want.deps) {
		t.Errorf("the provenance's resolved dependencies %v, want %v", deps, want.deps)
	}
	by := map[string]string{}
	for _, b := range st.Predicate.RunDetails.Byproducts {
		by[b.Name] = b.Digest["sha256"]
	}
	if !maps.Equal(by, want.byproducts) {
		t.Errorf("the provenance's byproducts %v, want %v", by, want.byproducts)
	}
}
