package payload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"relay/internal/envelope"
)

// corpus reads the payloads of testdata/redaction/dir: each file lists
// the secrets it holds ("secret: <value>" lines), then "---", then the
// payload.
func corpus(t *testing.T, dir string) map[string]struct {
	secrets []string
	payload string
} {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "redaction", dir, "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus in %s: %v", dir, err)
	}
	out := map[string]struct {
		secrets []string
		payload string
	}{}
	for _, f := range files {
		b, err := os.ReadFile(f) //nolint:gosec // the test's own data
		if err != nil {
			t.Fatal(err)
		}
		head, body, ok := strings.Cut(string(b), "---\n")
		if !ok {
			t.Fatalf("%s: no --- line", f)
		}
		var secrets []string
		for _, l := range strings.Split(strings.TrimSpace(head), "\n") {
			if v, ok := strings.CutPrefix(l, "secret: "); ok {
				secrets = append(secrets, v)
			}
		}
		out[filepath.Base(f)] = struct {
			secrets []string
			payload string
		}{secrets, body}
	}
	return out
}

// Pentest finding: secrets the failure page showed. Every payload of the
// secret corpus comes out of the page's own rendering (Shown) without any
// of its secrets, nor the first dozen characters of a long one.
func TestSecretCorpusComesOutMasked(t *testing.T) {
	red := envelope.NewRedactor(nil, MaxShown)
	for name, c := range corpus(t, "secret") {
		if len(c.secrets) == 0 {
			t.Errorf("%s lists no secret", name)
		}
		out := Shown(red, []byte(c.payload))
		for _, s := range c.secrets {
			if strings.Contains(out, s) || (len(s) >= 16 && strings.Contains(out, s[:12])) {
				t.Errorf("%s: %q shown:\n%s", name, s, out)
			}
		}
	}
}

// ... and every payload of the ordinary corpus comes out with nothing
// masked: redaction that masks what holds no secret hides what an
// operator needs.
func TestPlainCorpusComesOutUnmasked(t *testing.T) {
	red := envelope.NewRedactor(nil, MaxShown)
	for name, c := range corpus(t, "plain") {
		if out := Shown(red, []byte(c.payload)); strings.Contains(out, envelope.Mask) {
			t.Errorf("%s: masked where nothing is secret:\n%s", name, out)
		}
	}
}

// A secret across the display limit is masked whole, never shown in
// part: the detector reads a margin past the cut, and the patterns run
// before it. Text, and a JSON document.
func TestSecretAcrossTheCutIsMaskedWhole(t *testing.T) {
	red := envelope.NewRedactor(nil, MaxShown)
	const tok = "ghp_R8x2Kq7ZtV4mN1pW9sL3cY6bH0fJ5dG2aE8u"
	for _, at := range []int{MaxShown - 20, MaxShown - 4, MaxShown + 2} {
		text := strings.Repeat("x ", at/2) + tok + " tail\n"
		if out := Shown(red, []byte(text)); strings.Contains(out, tok[:12]) {
			t.Errorf("text, the token at %d: its start is shown", at)
		}
		doc := `{"note": "` + strings.Repeat("y", at-12) + " " + tok + `"}`
		if out := Shown(red, []byte(doc)); strings.Contains(out, tok[:12]) {
			t.Errorf("JSON, the token at %d: its start is shown", at)
		}
	}
}

// Repeat pentest finding: a JSON document 10,000 levels deep (20 KB, a
// header's worth) was indented into hundreds of megabytes before the cut.
// Past maxNesting it is shown as text; one as deep as maxNesting is
// still read by its structure.
func TestDeepJSONIsShownAsText(t *testing.T) {
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	if _, ok := jsonTree([]byte(deep)); ok {
		t.Fatal("a document 10,000 levels deep was parsed for its structure")
	}
	fits := strings.Repeat(`{"a":`, maxNesting-1) + `{"password":"x-deep-9"}` + strings.Repeat("}", maxNesting-1)
	red := envelope.NewRedactor(nil, MaxShown)
	if out := Shown(red, []byte(fits)); strings.Contains(out, "x-deep-9") {
		t.Fatalf("a document %d levels deep: its secret shown", maxNesting)
	}
	inStrings := `{"s": "` + strings.Repeat("[", maxNesting+1) + `", "a": [[1]]}`
	if !shapely([]byte(inStrings)) {
		t.Fatal("brackets inside a string were counted")
	}
	// A megabyte of objects nested 63 deep indents to 300 MiB: text
	// (seventh pentest: four views at once took the console past its
	// memory limit). A megabyte of ordinary records stays structured.
	var b strings.Builder
	b.WriteString("[")
	for b.Len() < 1<<20 {
		b.WriteString(strings.Repeat(`{"":`, maxNesting-2) + "1" + strings.Repeat("}", maxNesting-2) + ",")
	}
	if wide := strings.TrimSuffix(b.String(), ",") + "]"; shapely([]byte(wide)) {
		t.Error("a megabyte nested 62 deep was taken for structure")
	}
	if !shapely(jsonMiB()) {
		t.Error("a megabyte of orders was not taken for structure")
	}
}
