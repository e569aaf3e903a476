package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// problems are the variables Load names, joined.
func problems(err error) string {
	var names []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var ce *Error
		if errors.As(e, &ce) {
			names = append(names, ce.Var+": "+ce.Problem)
		}
	}
	return strings.Join(names, "\n")
}

func TestSecretsComeFromFiles(t *testing.T) {
	pw := writeFile(t, "sasl", "s3cret\n")
	tok := writeFile(t, "token", "h00k-token\n")
	c, err := load(t, with(map[string]string{
		KafkaPrefix + "SASL_PASSWORD_FILE": pw, KafkaPrefix + "SASL_USERNAME": "relay",
		EnvHookToken + "_FILE": tok, EnvHookSigningSecret: "sign-key",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Kafka["sasl.password"] != "s3cret" || c.KafkaSecrets["sasl.password"].Get() != "s3cret" {
		t.Fatalf("sasl.password %q", c.Kafka["sasl.password"])
	}
	if c.HookToken.Get() != "h00k-token" || c.HookToken.File != tok || c.HookSigningSecret.Get() != "sign-key" {
		t.Fatalf("hook token %q from %q, signing %q", c.HookToken.Get(), c.HookToken.File, c.HookSigningSecret.Get())
	}
	if got := c.VarForProperty("sasl.password"); got != KafkaPrefix+"SASL_PASSWORD_FILE" {
		t.Errorf("VarForProperty = %q", got)
	}
	out := strings.Join(c.Effective(), "\n")
	for _, leak := range []string{"s3cret", "h00k-token", "sign-key"} {
		if strings.Contains(out, leak) {
			t.Fatalf("relay config shows %q:\n%s", leak, out)
		}
	}
	for _, want := range []string{EnvHookToken + "_FILE=" + tok, KafkaPrefix + "SASL_PASSWORD_FILE=" + pw, EnvHookSigningSecret + "=****"} {
		if !strings.Contains(out, want) {
			t.Errorf("relay config lacks %q:\n%s", want, out)
		}
	}
	if len(c.FileSecrets()) != 2 {
		t.Errorf("file secrets %d, want 2", len(c.FileSecrets()))
	}
	// Rotated by a symlink swap or a rewrite: Reload sees it.
	if err := os.WriteFile(pw, []byte("n3w\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := c.KafkaSecrets["sasl.password"].Reload(); !changed || err != nil || c.KafkaSecrets["sasl.password"].Get() != "n3w" {
		t.Fatalf("reload: %v %v %q", changed, err, c.KafkaSecrets["sasl.password"].Get())
	}
	if unknown := Unknown([]string{EnvHookToken + "_FILE=x", EnvSchemaRegistrySecret + "_FILE=y", "RELAY_SOURCE_TOPICS_FILE=z"}); strings.Join(unknown, ",") != "RELAY_SOURCE_TOPICS_FILE" {
		t.Errorf("unknown %v: only secrets have a _FILE form", unknown)
	}
}

func TestBadSecretsAreNamed(t *testing.T) {
	pw := writeFile(t, "pw", "x")
	empty := writeFile(t, "empty", "\n")
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{EnvHookToken: "a", EnvHookToken + "_FILE": pw}, EnvHookToken + ": set together with " + EnvHookToken + "_FILE"},
		{map[string]string{KafkaPrefix + "SASL_PASSWORD": "a", KafkaPrefix + "SASL_PASSWORD_FILE": pw}, KafkaPrefix + "SASL_PASSWORD: set together with"},
		{map[string]string{EnvSchemaRegistrySecret + "_FILE": "/nonexistent/pw"}, EnvSchemaRegistrySecret + "_FILE: cannot read the secret"},
		{map[string]string{EnvHookSigningSecret + "_FILE": empty}, EnvHookSigningSecret + "_FILE: " + empty + " is empty"},
		{map[string]string{KafkaPrefix + "BOOTSTRAP_SERVERS_FILE": pw}, KafkaPrefix + "BOOTSTRAP_SERVERS_FILE: only secret properties"},
		{map[string]string{KafkaPrefix + "SASL_JAAS_CONFIG": `org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";`},
			KafkaPrefix + "SASL_JAAS_CONFIG: sasl.jaas.config is a property of Kafka's Java client, which librdkafka does not have: set RELAY_KAFKA_SASL_USERNAME and RELAY_KAFKA_SASL_PASSWORD"},
		{map[string]string{KafkaPrefix + "SSL_TRUSTSTORE_LOCATION": "/etc/kafka/truststore.jks"}, "set RELAY_KAFKA_SSL_CA_LOCATION"},
		{map[string]string{EnvHookCert: pw}, EnvHookCert + ": goes with " + EnvHookKey},
		{map[string]string{EnvSchemaRegistryCA: pw}, EnvSchemaRegistryCA + ": " + pw + " holds no PEM certificate"},
	}
	for _, tc := range cases {
		_, err := load(t, with(tc.env))
		if err == nil || !strings.Contains(problems(err), tc.want) {
			t.Errorf("%v: %v; want %q", tc.env, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), `password="p"`)) {
			t.Errorf("the error shows the secret: %v", err)
		}
	}
}

// The console token's minimum holds for a token from a file, at start and
// at every reload: a rotated token too short is refused, and the token in
// use stays.
func TestConsoleTokenFromAFileIsLongEnough(t *testing.T) {
	short := writeFile(t, "short", "tooshort\n")
	if _, err := load(t, with(map[string]string{EnvConsoleToken + "_FILE": short})); err == nil ||
		!strings.Contains(problems(err), EnvConsoleToken+"_FILE: shorter than 16 characters") {
		t.Fatalf("a short token file at start: %v", err)
	}
	f := writeFile(t, "token", "a-token-of-twenty-chars\n")
	c, err := load(t, with(map[string]string{EnvConsoleToken + "_FILE": f}))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	changed, err := c.Console.Token.Reload()
	if changed || err == nil || !strings.Contains(err.Error(), "shorter than 16") || c.Console.Token.Get() != "a-token-of-twenty-chars" {
		t.Fatalf("a rotated short token: changed %v, %v, in use %q", changed, err, c.Console.Token.Get())
	}
	if err := os.WriteFile(f, []byte("another-token-of-twenty\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := c.Console.Token.Reload(); !changed || err != nil || c.Console.Token.Get() != "another-token-of-twenty" {
		t.Fatalf("a rotated good token: changed %v, %v", changed, err)
	}
}

// A user header believed from a range of addresses is one any pod there
// can set: refused unless RELAY_CONSOLE_TRUST_UNSIGNED_HEADER says so; one
// address outside the pod is fine, loopback never, and trusted proxies without a
// user header (an ingress whose forwarded client address the limiter
// keys on) too. Reading needs sign-in by default beyond loopback.
func TestConsoleTrustAndReading(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		fail string
	}{
		{map[string]string{EnvConsoleUserHeader: "X-User", EnvConsoleTrustedProxy: "10.0.0.0/8"}, EnvConsoleTrustedProxy + ": 10.0.0.0/8 is a range"},
		{map[string]string{EnvConsoleUserHeader: "X-User", EnvConsoleTrustedProxy: "10.0.0.0/8", EnvConsoleTrustUnsigned: "true"}, ""},
		{map[string]string{EnvConsoleUserHeader: "X-User", EnvConsoleTrustedProxy: "10.1.2.3"}, ""},
		// Pentest finding: loopback is where kubectl port-forward and any
		// local process arrive from; refused with a user header, even
		// with TRUST_UNSIGNED; the socket is the proxy's place.
		{map[string]string{EnvConsoleUserHeader: "X-User", EnvConsoleTrustedProxy: "127.0.0.1"}, EnvConsoleTrustedProxy + ": 127.0.0.1/32 is a loopback address"},
		{map[string]string{EnvConsoleUserHeader: "X-User", EnvConsoleTrustedProxy: "127.0.0.2", EnvConsoleTrustUnsigned: "true"}, "is a loopback address"},
		{map[string]string{EnvConsoleUserHeader: "X-User", EnvConsoleTrustedProxy: "::1/128"}, "::1/128 is a loopback address"},
		{map[string]string{EnvConsoleUserHeader: "X-User", EnvConsoleTrustedProxy: "0.0.0.0/0", EnvConsoleTrustUnsigned: "true"}, "0.0.0.0/0 is a loopback address"},
		{map[string]string{EnvConsoleUserHeader: "X-User", EnvConsoleProxySocket: "/run/relay/console.sock"}, ""},
		{map[string]string{EnvConsoleTrustedProxy: "127.0.0.1"}, ""},
		{map[string]string{EnvConsoleTrustedProxy: "10.0.0.0/8"}, ""},
		{map[string]string{EnvConsoleUserHeader: "X-User"}, EnvConsoleUserHeader + ": set without"},
		{map[string]string{EnvConsoleReadAuth: "maybe"}, EnvConsoleReadAuth + `: "maybe" is not open or signed-in`},
		{map[string]string{EnvConsoleForwardedBy: "0.0.0.0/0"}, EnvConsoleForwardedBy + ": 0.0.0.0/0 is wider than a pod network"},
		{map[string]string{EnvConsoleForwardedBy: "::/0"}, EnvConsoleForwardedBy + ": ::/0 is wider than a pod network"},
		{map[string]string{EnvConsoleForwardedBy: "10.244.0.0/16,fd00:10::/56"}, ""},
		{map[string]string{EnvConsoleMetricsAddr: "9466"}, EnvConsoleMetricsAddr + `: "9466" is not host:port`},
		{map[string]string{EnvConsoleAddr: ":9465", EnvConsoleMetricsAddr: ":9465"}, EnvConsoleMetricsAddr + `: ":9465" is RELAY_CONSOLE_ADDR itself`},
		{map[string]string{EnvConsoleAddr: "127.0.0.1:9465", EnvConsoleMetricsAddr: ":9466"}, ""},
		{map[string]string{EnvConsoleAllowedHosts: "relay.example.com:443"}, EnvConsoleAllowedHosts + ": \"relay.example.com:443\" is not a host name"},
	} {
		_, err := load(t, with(c.env))
		switch {
		case c.fail == "" && err != nil:
			t.Errorf("%v: %v", c.env, err)
		case c.fail != "" && (err == nil || !strings.Contains(problems(err), c.fail)):
			t.Errorf("%v: %v, want %q", c.env, err, c.fail)
		}
	}
	for addr, signedIn := range map[string]bool{"127.0.0.1:9465": false, "localhost:9465": false, "[::1]:9465": false, ":9465": true, "0.0.0.0:9465": true, "10.1.2.3:9465": true} {
		c, err := load(t, with(map[string]string{EnvConsoleAddr: addr}))
		if err != nil || c.Console.ReadsSignedIn(OnLoopback(addr)) != signedIn {
			t.Errorf("%s: reads signed-in %v (%v), want %v", addr, c != nil && c.Console.ReadsSignedIn(OnLoopback(addr)), err, signedIn)
		}
	}
	if c, _ := load(t, with(map[string]string{EnvConsoleAddr: ":9465", EnvConsoleReadAuth: "open"})); c == nil || c.Console.ReadsSignedIn(false) {
		t.Error("RELAY_CONSOLE_READ_AUTH=open beyond loopback is not open")
	}
	if c, _ := load(t, with(map[string]string{EnvConsoleReadAuth: "signed-in"})); c == nil || !c.Console.ReadsSignedIn(true) {
		t.Error("RELAY_CONSOLE_READ_AUTH=signed-in on loopback is open")
	}
}

// A credential over plain http:// to a host other than loopback is refused
// unless RELAY_ALLOW_INSECURE_HTTP=true; without a credential, or to
// loopback, or over https, it is fine.
func TestCredentialsOverPlainHTTP(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		fail string
	}{
		{map[string]string{EnvHookURL: "http://hook.internal/x", EnvHookToken: "t"}, EnvHookURL + ": http://hook.internal/x sends the hook's token"},
		{map[string]string{EnvHookURL: "http://hook.internal/x"}, ""},
		{map[string]string{EnvHookURL: "http://127.0.0.1:8080/x", EnvHookToken: "t"}, ""},
		{map[string]string{EnvHookURL: "http://localhost:8080/x", EnvHookToken: "t"}, ""},
		{map[string]string{EnvHookURL: "https://hook.internal/x", EnvHookToken: "t"}, ""},
		{map[string]string{EnvHookURL: "http://hook.internal/x", EnvHookToken: "t", EnvAllowInsecureHTTP: "true"}, ""},
		{map[string]string{EnvSchemaRegistryURL: "http://registry:8080", EnvSchemaRegistryUser: "u", EnvSchemaRegistrySecret: "p"}, EnvSchemaRegistryURL + ": http://registry:8080 sends the registry's credentials"},
		{map[string]string{EnvSchemaRegistryURL: "http://registry:8080"}, ""},
		{map[string]string{EnvSchemaRegistryURL: "https://registry:8080", EnvRegistryTokenURL: "http://idp.internal/token", EnvRegistryClientID: "c", EnvRegistryClientSecret: "s"},
			EnvRegistryTokenURL + ": http://idp.internal/token sends the client secret"},
	} {
		env := map[string]string{EnvSchemaRegistryURL: "https://registry:8080", EnvSchemaSubject: "orders-value", EnvSchemaAccept: "1"}
		for k, v := range c.env {
			env[k] = v
		}
		_, err := load(t, with(env))
		switch {
		case c.fail == "" && err != nil:
			t.Errorf("%v: %v", c.env, err)
		case c.fail != "" && (err == nil || !strings.Contains(problems(err), c.fail)):
			t.Errorf("%v: %v, want %q", c.env, err, c.fail)
		}
	}
}

// SASLCredentials: the username from the environment and the password
// from its file as the file is now; a change to another secret is not
// theirs.
func TestSASLCredentials(t *testing.T) {
	pw := writeFile(t, "sasl", "s3cret\n")
	tok := writeFile(t, "token", "h00k-token\n")
	c, err := load(t, with(map[string]string{
		KafkaPrefix + "SASL_PASSWORD_FILE": pw, KafkaPrefix + "SASL_USERNAME": "relay", EnvHookToken + "_FILE": tok,
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pw, []byte("r0tated\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.KafkaSecrets["sasl.password"].Reload(); err != nil {
		t.Fatal(err)
	}
	if user, pass, of := c.SASLCredentials(c.KafkaSecrets["sasl.password"]); user != "relay" || pass != "r0tated" || !of {
		t.Fatalf("SASLCredentials(the password) = %q, %q, %v", user, pass, of)
	}
	if _, _, of := c.SASLCredentials(c.HookToken); of {
		t.Fatal("the hook token counted as a SASL credential")
	}
}

// Pentest finding: a console token of 16 characters was enough, whatever
// they were. A word or pattern repeated, a run of consecutive characters,
// or too little variety is refused at start (and at every reload, as the
// length is); random tokens and passphrases pass.
func TestConsoleTokenIsHardToGuess(t *testing.T) {
	for token, want := range map[string]string{
		"passwordpassword":     "a shorter string repeated",
		"abcabcabcabcabcab":    "a shorter string repeated",
		"aaaaaaaaaaaaaaaaaaaa": "a shorter string repeated",
		"0123456789abcdef":     "a run of consecutive characters",
		"zyxwvutsrqponmlk-x7":  "a run of consecutive characters",
		"aaaaaaaabbbbbbbbc":    "a shorter string repeated",
		"aabbaabbccddccdd":     "too little variety",
		// Pentest: one character more no longer passes, nor do words.
		"passwordpassword!":            "a shorter string repeated",
		"adminadminadmin1":             "a shorter string repeated",
		"P@ssw0rdP@ssw0rd1":            "a shorter string repeated",
		"Password1234567!":             "made of common words",
		"qwertyuiopasdfgh":             "made of common words",
		"1qaz2wsx3edc4rfv":             "made of common words",
		"superSecretToken":             "made of common words",
		"consoletoken2024":             "made of common words",
		"Welcome2024!Welcome":          "made of common words",
		"3f9c1a7e5b2d8046":             "",
		"correct-horse-battery-staple": "",
		"0123456789abcdef-console":     "",
	} {
		_, err := load(t, with(map[string]string{EnvConsoleToken: token}))
		switch {
		case want == "" && err != nil:
			t.Errorf("%q refused: %v", token, err)
		case want != "" && (err == nil || !strings.Contains(problems(err), EnvConsoleToken+": "+want)):
			t.Errorf("%q: %v; want %q", token, err, want)
		}
	}
}
