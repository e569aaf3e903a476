package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// The CycloneDX 1.5 JSON document, in the parts relay's SBOM uses.
type (
	bom struct {
		BOMFormat    string       `json:"bomFormat"`
		SpecVersion  string       `json:"specVersion"`
		SerialNumber string       `json:"serialNumber"`
		Version      int          `json:"version"`
		Metadata     metadata     `json:"metadata"`
		Components   []component  `json:"components"`
		Dependencies []dependency `json:"dependencies"`
	}
	metadata struct {
		Timestamp string    `json:"timestamp"`
		Tools     tools     `json:"tools"`
		Component component `json:"component"`
	}
	tools struct {
		Components []component `json:"components"`
	}
	component struct {
		Type        string     `json:"type"`
		BOMRef      string     `json:"bom-ref,omitempty"`
		Name        string     `json:"name"`
		Version     string     `json:"version,omitempty"`
		Description string     `json:"description,omitempty"`
		PURL        string     `json:"purl,omitempty"`
		Licenses    []license  `json:"licenses,omitempty"`
		Properties  []property `json:"properties,omitempty"`
	}
	// license is a CycloneDX license choice by SPDX id.
	license struct {
		License struct {
			ID string `json:"id"`
		} `json:"license"`
	}
	property struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	dependency struct {
		Ref       string   `json:"ref"`
		DependsOn []string `json:"dependsOn,omitempty"`
	}
)

// cycloneDX is the SBOM of the relay binary in file: the Go modules linked
// into it, as its build information records them (the module graph the
// build used, not go.mod's wider one), the Go standard library, and the
// librdkafka bundled in confluent-kafka-go. Its serial number is derived
// from its content, so it is reproducible too.
func cycloneDX(file, version, librdkafka string, created time.Time) ([]byte, error) {
	info, err := buildinfo.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	main := component{Type: "application", Name: "relay", Version: version, PURL: "pkg:golang/relay@" + version}
	main.BOMRef = main.PURL
	var apache license
	apache.License.ID = "Apache-2.0" // the LICENSE file at the repository's root
	main.Licenses = []license{apache}
	goVersion := strings.TrimPrefix(info.GoVersion, "go")
	comps := []component{
		{Type: "library", Name: "stdlib", Version: goVersion, PURL: "pkg:golang/stdlib@" + goVersion, Description: "the Go standard library"},
		{Type: "library", Name: "librdkafka", Version: librdkafka, PURL: "pkg:generic/librdkafka@" + librdkafka,
			Description: "the C client of Apache Kafka, statically linked: the musl build bundled in github.com/confluentinc/confluent-kafka-go/v2"},
	}
	for _, m := range info.Deps {
		if m.Replace != nil {
			m = m.Replace
		}
		c := component{Type: "library", Name: m.Path, Version: m.Version, PURL: "pkg:golang/" + m.Path + "@" + m.Version}
		if m.Sum != "" {
			c.Properties = []property{{Name: "go:module:sum", Value: m.Sum}}
		}
		comps = append(comps, c)
	}
	refs := make([]string, len(comps))
	for i := range comps {
		comps[i].BOMRef = comps[i].PURL
		refs[i] = comps[i].PURL
	}
	doc := bom{
		BOMFormat: "CycloneDX", SpecVersion: "1.5", Version: 1,
		Metadata: metadata{
			Timestamp: created.Format(time.RFC3339),
			Tools:     tools{Components: []component{{Type: "application", Name: "relay deploy/image"}}},
			Component: main,
		},
		Components:   comps,
		Dependencies: []dependency{{Ref: main.BOMRef, DependsOn: refs}},
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	// A version 4 UUID's layout, from the content's digest.
	sum[6] = sum[6]&0x0f | 0x40
	sum[8] = sum[8]&0x3f | 0x80
	doc.SerialNumber = fmt.Sprintf("urn:uuid:%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
	return json.MarshalIndent(doc, "", "  ")
}
