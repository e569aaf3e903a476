package main

import (
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The image's labels are the Dockerfile's and the ones docs/DEPLOYMENT.md
// lists (the Dockerfile and the docs lacked licenses).
func TestLabelsAgreeWithDockerfileAndDocs(t *testing.T) {
	want := slices.Sorted(maps.Keys(labelsOf("1.2.3", "abc", time.Unix(0, 0))))
	df, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var inDockerfile []string
	for _, m := range regexp.MustCompile(`(org\.opencontainers\.image\.[a-z]+)=`).FindAllStringSubmatch(string(df), -1) {
		inDockerfile = append(inDockerfile, m[1])
	}
	slices.Sort(inDockerfile)
	if !slices.Equal(inDockerfile, want) {
		t.Errorf("the Dockerfile's labels %v, the image's %v", inDockerfile, want)
	}
	doc, err := os.ReadFile("../../docs/DEPLOYMENT.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("`org\\.opencontainers\\.image\\.\\{([a-z,]+)\\}`").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/DEPLOYMENT.md lists no labels")
	}
	var inDocs []string
	for _, n := range strings.Split(string(m[1]), ",") {
		inDocs = append(inDocs, "org.opencontainers.image."+n)
	}
	slices.Sort(inDocs)
	if !slices.Equal(inDocs, want) {
		t.Errorf("docs/DEPLOYMENT.md's labels %v, the image's %v", inDocs, want)
	}
}
