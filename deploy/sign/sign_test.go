package main

import (
	"bytes"
	"context"
	"crypto/elliptic"
	"encoding/base64"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
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
	idx, err := random.Index(256, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout.Write(filepath.Join(dist, "oci"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": version})); err != nil {
		t.Fatal(err)
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
// the image's signature, its SLSA provenance, the chart's signature. With
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
	res, err := Run(t.Context(), Options{Layout: filepath.Join(dist, "oci"), Version: version, Repository: repo, Key: priv, Chart: chart,
		Commit: "0123456789abcdef0123456789abcdef01234567", Source: "https://example.invalid/relay.git", BuildCommand: "make release", Insecure: true, Started: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	ref := repo + "@" + res.Digest.String()
	http := "--allow-http-registry=true"
	tlog := "--insecure-ignore-tlog=true"

	if out, err := cosign(t, bin, "verify", "--key", pub, tlog, http, ref); err != nil {
		t.Fatalf("cosign verify: %v\n%s", err, out)
	}
	out, err := cosign(t, bin, "verify-attestation", "--key", pub, "--type", "slsaprovenance1", tlog, http, ref)
	if err != nil {
		t.Fatalf("cosign verify-attestation: %v\n%s", err, out)
	}
	checkProvenance(t, out, res.Digest)
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
	r, _ := name.NewRepository(repo, name.Insecure)
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

// checkProvenance reads the statement cosign verified: its subject is the
// index, and it names the commit, the build command and the libraries.
func checkProvenance(t *testing.T, out string, digest v1.Hash) {
	t.Helper()
	var env struct{ PayloadType, Payload string }
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &env) == nil && env.Payload != "" {
			break
		}
	}
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil || env.PayloadType != inTotoType {
		t.Fatalf("no in-toto envelope in cosign's output (%v):\n%s", err, out)
	}
	var st struct {
		Subject []struct {
			Digest map[string]string
		}
		PredicateType string
		Predicate     struct {
			BuildDefinition struct {
				ExternalParameters struct {
					Command string
					Source  struct{ Digest map[string]string }
				}
				ResolvedDependencies []struct{ Name, URI string }
			}
			RunDetails struct {
				Builder struct{ ID string }
			}
		}
	}
	if err := json.Unmarshal(payload, &st); err != nil {
		t.Fatal(err)
	}
	bd := st.Predicate.BuildDefinition
	libs := ""
	for _, d := range bd.ResolvedDependencies {
		libs += d.Name + " "
	}
	if len(st.Subject) != 1 || st.Subject[0].Digest["sha256"] != digest.Hex || st.PredicateType != slsaProvenanceV1 ||
		bd.ExternalParameters.Command != "make release" || bd.ExternalParameters.Source.Digest["gitCommit"] == "" ||
		!strings.Contains(libs, "openssl") || st.Predicate.RunDetails.Builder.ID != builderID {
		t.Errorf("the provenance: %s", payload)
	}
}
