package envelope

import (
	"strings"
	"testing"
)

// Fourth pentest finding: a CDATA section that never closes made each
// secret-named element search to the end of the text (54 s for 256 KiB of
// "<pin><![CDATA["). A section is read to its end or to the text's, in one
// match: the rest of the text is masked, and nothing after it is read
// again.
func TestUnclosedCDATAIsMaskedToTheEnd(t *testing.T) {
	r := NewRedactor(nil, 1<<20)
	if got := r.Redact("<password><![CDATA[pw-1]]></password> ok"); got != "<password>***</password> ok" {
		t.Errorf("closed CDATA: %q", got)
	}
	in := "<pin><![CDATA[" + strings.Repeat("x <pin><![CDATA[", 3) + " tail"
	if got := r.Redact(in); got != "<pin>***" {
		t.Errorf("unclosed CDATA: %q, want everything after the first element masked", got)
	}
}

// A name is at most MaxName bytes: longer text is no field's name (read as
// one it cost a microsecond a byte, for every value a structure asked
// about: seventh pentest), and a key that long has its value masked unread.
func TestLongTextIsNoName(t *testing.T) {
	long := strings.Repeat("password-", MaxName/9+1)
	if SecretName(long) {
		t.Error("text longer than MaxName taken for a secret's name")
	}
	if !SecretKey(long) || !SecretKey("db_password") || SecretKey("orderId") {
		t.Errorf("SecretKey: long %v, db_password %v, orderId %v", SecretKey(long), SecretKey("db_password"), SecretKey("orderId"))
	}
	for _, n := range []string{"PHPSESSID", "connect.sid", "userSid"} {
		if !SecretName(n) {
			t.Errorf("%s is a session id's name", n)
		}
	}
}
