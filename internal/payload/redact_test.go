package payload

import (
	"strings"
	"testing"

	"relay/internal/envelope"
)

// Each leak a review found in what the failure page shows is masked: JSON
// is redacted by its structure (a value under a secret's name is masked
// whole, whatever it is), PEM blocks and JWTs in any string, and the cut
// comes after the redaction.
func TestEveryKnownLeakIsMasked(t *testing.T) {
	red := envelope.NewRedactor(nil, MaxShown)
	jwt := "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLWJ5dGVz"
	pem := "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----"
	for name, c := range map[string]struct {
		in     string
		leaks  []string
		stays  []string
		header bool
	}{
		"a password of two words":    {in: `{"password":"hunter2 two words"}`, leaks: []string{"hunter2", "two words"}},
		"an array under a name":      {in: `{"tokens":["a-secret-1","b-secret-2"]}`, leaks: []string{"a-secret-1", "b-secret-2"}},
		"an object under a name":     {in: `{"apiKey":{"value":"sk_live_51HXyz"}}`, leaks: []string{"sk_live_51HXyz"}},
		"a private key field":        {in: `{"privateKey":"MIIEvQIBADANBg","id":7}`, leaks: []string{"MIIEvQIBADANBg"}, stays: []string{`"id": 7`}},
		"a session and a passphrase": {in: `{"session_id":"s-123","passphrase":"open sesame","auth":{"user":"u"}}`, leaks: []string{"s-123", "open sesame", `"u"`}},
		"a PEM block in a string":    {in: `{"note":"` + strings.ReplaceAll(pem, "\n", `\n`) + `"}`, leaks: []string{"MIIEvQIBADANBgkqhkiG9w0B"}},
		"a PEM block as text":        {in: "see " + pem + " above", leaks: []string{"MIIEvQIBADANBgkqhkiG9w0B"}, stays: []string{"see"}},
		"a JWT in a string":          {in: `{"note":"Bearer-less ` + jwt + `"}`, leaks: []string{"c2lnbmF0dXJlLWJ5dGVz", "eyJzdWIiOiJhbGljZSJ9"}},
		"a JWT in a header":          {in: jwt, leaks: []string{"eyJzdWIiOiJhbGljZSJ9"}, header: true},
		"a card as a JSON number":    {in: `{"pan":4111111111111111,"amount":12}`, leaks: []string{"4111111111111111", "41111111"}, stays: []string{`"amount": 12`}},
		"nested in arrays":           {in: `[{"user":{"credentials":["x1","x2"]}}]`, leaks: []string{"x1", "x2"}},
		// Found by an attack on the finished console:
		"JSON inside a JSON string": {in: `{"body":"{\"password\":\"correct horse battery\",\"session\":\"sess-abc\",\"privateKey\":\"MIIEvQ\"}"}`,
			leaks: []string{"horse", "battery", "sess-abc", "MIIEvQ"}},
		"JSON Lines":                   {in: "{\"cookie\":\"c=abc\"}\n{\"pw\":\"p4ss\",\"n\":1}\n", leaks: []string{"c=abc", "p4ss"}, stays: []string{`"n":1`}},
		"JSON after a byte order mark": {in: "\xef\xbb\xbf{\"session\":\"sess-xyz\"}", leaks: []string{"sess-xyz"}},
		"a JWT split over lines":       {in: "token follows eyJhbGciOiJIUzI1NiJ9\n.eyJzdWIiOiJhbGljZSJ9\n.c2lnbmF0dXJlLWJ5dGVz", leaks: []string{"eyJzdWIiOiJhbGljZSJ9", "c2lnbmF0dXJlLWJ5dGVz"}},
		"short secret names":           {in: `{"pw":"a1","creds":"a2","pin":"1234","bearer":"a3","shipping":"ok"}`, leaks: []string{"a1", "a2", "1234", "a3"}, stays: []string{`"shipping": "ok"`}},
		"session= in text":             {in: "login failed session=sess-123 cookie: c-456", leaks: []string{"sess-123", "c-456"}},
		// Found by a second attack:
		"a document sent as a JSON string": {in: `"{\"password\":\"hunter2\",\"api_key\":\"sk_live_abc\"}"`, leaks: []string{"hunter2", "sk_live_abc"}},
		"escaped JSON in text":             {in: `request failed body={\"password\":\"hunter2\"}`, leaks: []string{"hunter2"}},
	} {
		got := Shown(red, []byte(c.in))
		for _, l := range c.leaks {
			if strings.Contains(got, l) {
				t.Errorf("%s: %q shown in %s", name, l, got)
			}
		}
		for _, k := range c.stays {
			if !strings.Contains(got, k) {
				t.Errorf("%s: %q masked too: %s", name, k, got)
			}
		}
	}
}

// A card number across the display limit is masked whole: the cut comes
// after the redaction, never before it.
func TestTheCutComesAfterTheRedaction(t *testing.T) {
	red := envelope.NewRedactor(nil, MaxShown)
	for name, v := range map[string]string{
		"text": strings.Repeat("a", MaxShown-8) + " 4111111111111111 end",
		"json": `{"pad":"` + strings.Repeat("a", MaxShown-30) + `","n":"4111 1111 1111 1111"}`,
	} {
		got := Shown(red, []byte(v))
		if strings.Contains(got, "4111") || strings.Contains(got, "1111 1111") {
			t.Errorf("%s: part of the card shown: …%s", name, got[max(0, len(got)-60):])
		}
		if len(got) > MaxShown+len("\n… (cut)") {
			t.Errorf("%s: %d bytes shown, more than the bound", name, len(got))
		}
	}
	text, _, _ := Render(t.Context(), nil, red, []byte(strings.Repeat("b", MaxShown-4)+" 4111111111111111"))
	if strings.Contains(text, "4111") {
		t.Errorf("a raw payload cut before its redaction: …%s", text[len(text)-40:])
	}
}
