package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	provenancev1 "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// buildType names how relay's releases are built (scripts/image.sh,
// docs/DEPLOYMENT.md); builderID names who built it: a release's own
// make, on the machine it ran on.
const (
	buildType = "urn:relay:make-release:v1"
	builderID = "urn:relay:builder:make-release"
)

// provenance is the in-toto statement, with a SLSA v1 provenance
// predicate, of the index at digest in repo: the source commit and the
// build command (external parameters), the Go toolchain, librdkafka and
// the C libraries linked in (resolved dependencies, from what the binary
// reported: relay-version.json beside the layout), and the binaries and
// chart built with it (byproducts).
func provenance(o Options, repo string, digest v1.Hash, finished time.Time) ([]byte, error) {
	if o.Commit == "" {
		return nil, errNoCommit
	}
	dist := filepath.Dir(o.Layout)
	var linked struct {
		Go, Librdkafka string
		Libraries      []struct{ Name, Version string }
	}
	b, err := os.ReadFile(filepath.Join(dist, "relay-version.json")) //nolint:gosec // the release's own file
	if err != nil {
		return nil, fmt.Errorf("what the binary reported (relay-version.json): %w", err)
	}
	if err := json.Unmarshal(b, &linked); err != nil {
		return nil, err
	}
	ext, err := structpb.NewStruct(map[string]any{
		"version": o.Version,
		"source":  map[string]any{"uri": o.Source, "digest": map[string]any{"gitCommit": o.Commit}},
		"command": o.BuildCommand,
	})
	if err != nil {
		return nil, err
	}
	deps := []*intoto.ResourceDescriptor{
		{Uri: "git+" + trimGit(o.Source) + "@" + o.Commit, Digest: map[string]string{"gitCommit": o.Commit}},
		{Name: "go", Uri: "pkg:golang/stdlib@" + linked.Go},
		{Name: "librdkafka", Uri: "pkg:generic/librdkafka@" + linked.Librdkafka},
	}
	for _, l := range linked.Libraries {
		deps = append(deps, &intoto.ResourceDescriptor{Name: l.Name, Uri: "pkg:generic/" + l.Name + "@" + l.Version})
	}
	var byproducts []*intoto.ResourceDescriptor
	files, _ := filepath.Glob(filepath.Join(dist, "relay-linux-*"))
	if o.Chart != "" {
		files = append(files, o.Chart)
	}
	for _, f := range files {
		sum, err := fileDigest(f)
		if err != nil {
			return nil, err
		}
		byproducts = append(byproducts, &intoto.ResourceDescriptor{Name: filepath.Base(f), Digest: map[string]string{"sha256": sum}})
	}
	pred := &provenancev1.Provenance{
		BuildDefinition: &provenancev1.BuildDefinition{BuildType: buildType, ExternalParameters: ext, ResolvedDependencies: deps},
		RunDetails: &provenancev1.RunDetails{
			Builder:    &provenancev1.Builder{Id: builderID, Version: map[string]string{"go": runtime.Version()}},
			Metadata:   &provenancev1.BuildMetadata{InvocationId: o.Version + "@" + o.Commit, StartedOn: timestamppb.New(o.Started), FinishedOn: timestamppb.New(finished)},
			Byproducts: byproducts,
		},
	}
	predJSON, err := protojson.Marshal(pred)
	if err != nil {
		return nil, err
	}
	predStruct := &structpb.Struct{}
	if err := protojson.Unmarshal(predJSON, predStruct); err != nil {
		return nil, err
	}
	st := &intoto.Statement{
		Type:          intoto.StatementTypeUri,
		Subject:       []*intoto.ResourceDescriptor{{Name: repo, Digest: map[string]string{digest.Algorithm: digest.Hex}}},
		PredicateType: slsaProvenanceV1,
		Predicate:     predStruct,
	}
	if err := st.Validate(); err != nil {
		return nil, err
	}
	return protojson.Marshal(st)
}
