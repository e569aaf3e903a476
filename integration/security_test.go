package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	cryptorand "crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"maps"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/ledger"
	"relay/internal/topics"
)

// The secured listeners of the stack's broker (scripts/stack/kafka.sh):
// SASL_SSL with SCRAM, and SSL with client certificates required, under
// an authorizer that allows nothing without an ACL. The tests create their
// principals and ACLs through the plain listener, whose clients are super
// users, and remove them afterwards.
var (
	saslBootstrap = envOr("RELAY_TEST_SASL_SSL_BOOTSTRAP", "127.0.0.1:9097")
	sslBootstrap  = envOr("RELAY_TEST_SSL_BOOTSTRAP", "127.0.0.1:9098")
)

// tlsFile is a file of the stack's CA and certificates.
func tlsFile(name string) string {
	return filepath.Join(envOr("RELAY_STACK_DIR", filepath.Join(repoRoot, ".cache")), "tls", name)
}

// scramUser creates a SCRAM-SHA-512 user with a random password, deleted
// when the test ends.
func scramUser(t *testing.T) (user, password string) {
	t.Helper()
	user, password = "relay-"+randomHex(t, 4), randomHex(t, 16)
	setScramPassword(t, user, password)
	a := admin(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = a.AlterUserScramCredentials(ctx, nil, []kafka.UserScramCredentialDeletion{{User: user, Mechanism: kafka.ScramMechanismSHA512}})
	})
	return user, password
}

// setScramPassword creates user, or changes its password.
func setScramPassword(t *testing.T, user, password string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := admin(t).AlterUserScramCredentials(ctx, []kafka.UserScramCredentialUpsertion{{
		User: user, ScramCredentialInfo: kafka.ScramCredentialInfo{Mechanism: kafka.ScramMechanismSHA512, Iterations: 4096},
		Password: []byte(password), Salt: []byte(randomHex(t, 8)),
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for u, e := range res.Errors {
		if e.Code() != kafka.ErrNoError {
			t.Fatalf("SCRAM credential of %s: %v", u, e)
		}
	}
}

// grant gives principal acls; every ACL of principal is deleted when the
// test ends.
func grant(t *testing.T, principal string, acls ...topics.ACL) {
	t.Helper()
	a := admin(t)
	bindings := make(kafka.ACLBindings, 0, len(acls))
	for _, acl := range acls {
		bindings = append(bindings, acl.Binding(principal))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := a.CreateACLs(ctx, bindings)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Error.Code() != kafka.ErrNoError {
			t.Fatalf("ACL %s: %v", acls[i], r.Error)
		}
	}
	for _, b := range bindings {
		awaitACL(t, b, true)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = a.DeleteACLs(ctx, kafka.ACLBindingFilters{{Type: kafka.ResourceAny, ResourcePatternType: kafka.ResourcePatternTypeAny,
			Principal: principal, Operation: kafka.ACLOperationAny, PermissionType: kafka.ACLPermissionTypeAny}})
	})
}

// revoke deletes one ACL of principal.
func revoke(t *testing.T, principal string, acl topics.ACL) {
	t.Helper()
	b := acl.Binding(principal)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := admin(t).DeleteACLs(ctx, kafka.ACLBindingFilters{b}); err != nil {
		t.Fatal(err)
	}
	awaitACL(t, b, false)
}

// awaitACL waits until the broker's authorizer holds b (or no longer
// does): ACL changes reach it through the metadata log, after the admin
// call has returned.
func awaitACL(t *testing.T, b kafka.ACLBinding, present bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := admin(t).DescribeACLs(ctx, b)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if (len(res.ACLBindings) > 0) == present {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ACL %v present=%v after 30s, want %v", b, !present, present)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// requiredACLs is what relay documents command needs with env.
func requiredACLs(t *testing.T, env map[string]string, command string) []topics.ACL {
	t.Helper()
	all := map[string]string{"RELAY_KAFKA_BOOTSTRAP_SERVERS": bootstrap}
	for k, v := range env {
		all[k] = v
	}
	if all["RELAY_TRANSACTIONAL_ID"] == "" {
		all["RELAY_TRANSACTIONAL_ID"] = "unused"
	}
	var environ []string
	for k, v := range all {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := all[k]; return v, ok }, environ)
	if err != nil {
		t.Fatal(err)
	}
	acls, err := topics.ACLs(cfg, command)
	if err != nil {
		t.Fatal(err)
	}
	return acls
}

// scramEnv connects relay to the SASL_SSL listener as user, its password
// read from a file (a mounted Secret's form).
func scramEnv(t *testing.T, user, password string) map[string]string {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "sasl-password")
	if err := os.WriteFile(pw, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"RELAY_KAFKA_BOOTSTRAP_SERVERS":    saslBootstrap,
		"RELAY_KAFKA_SECURITY_PROTOCOL":    "SASL_SSL",
		"RELAY_KAFKA_SASL_MECHANISM":       "SCRAM-SHA-512",
		"RELAY_KAFKA_SASL_USERNAME":        user,
		"RELAY_KAFKA_SASL_PASSWORD_FILE":   pw,
		"RELAY_KAFKA_SSL_CA_LOCATION":      tlsFile("ca.pem"),
		"RELAY_KAFKA_SOCKET_TIMEOUT_MS":    "10000",
		"RELAY_KAFKA_RECONNECT_BACKOFF_MS": "200",
	}
}

func merge(maps ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// TestSCRAMWithOnlyTheDocumentedACLs: relay connects over SASL_SSL with
// SCRAM-SHA-512 as a principal holding only the ACLs `relay topics acls
// run` lists, and relays exactly once.
func TestSCRAMWithOnlyTheDocumentedACLs(t *testing.T) {
	s := newScenario(t, 3)
	user, password := scramUser(t)
	env := s.env("relay-" + user)
	grant(t, "User:"+user, requiredACLs(t, env, "run")...)
	s.src.produce(t, 300)
	r := startRelay(t, "relay", merge(env, scramEnv(t, user, password)))
	waitCaughtUp(t, s.group, s.src.topic, s.partitions, 90*time.Second)
	s.src.produce(t, 300)
	waitCaughtUp(t, s.group, s.src.topic, s.partitions, 60*time.Second)
	r.signal(syscall.SIGTERM)
	if code := r.wait(30 * time.Second); code != 0 {
		t.Fatalf("relay exited %d", code)
	}
	if out := r.stderr.String(); strings.Contains(out, "AUTHORIZATION_FAILED") || strings.Contains(out, "Authorization failed") {
		t.Errorf("an authorisation failure with the documented ACLs:\n%s", tail(out, 20))
	}
	assertExactlyOnce(t, s.src, s.output, s.group, s.partitions)
}

// runToExit runs relay with env until it exits, at most d, and returns its
// exit code and its stderr.
func runToExit(t *testing.T, name string, env map[string]string, d time.Duration) (int, string) {
	t.Helper()
	r := startRelay(t, name, env)
	code := r.wait(d)
	return code, r.stderr.String()
}

// A principal without one ACL that `relay topics acls run` lists is told,
// at start-up, which resource and operation it lacks (exit 2), before it
// consumes anything; the optional ones give a warning and relay goes on.
// Then, with the ACL back, relay relays everything exactly once.
func TestEachMissingACLIsNamedAtStartUp(t *testing.T) {
	s := newScenario(t, 2)
	s.src.produce(t, 100)
	user, password := scramUser(t)
	principal := "User:" + user
	env := merge(s.env("relay-"+user), scramEnv(t, user, password))
	acls := requiredACLs(t, env, "run")
	grant(t, principal, acls...)
	for i, acl := range acls {
		if acl.Resource == "TransactionalId" {
			continue // TestTransactionalIDWithoutACL: the brokers cannot be asked about it
		}
		revoke(t, principal, acl)
		name := fmt.Sprintf("without-%d-%s-%s", i, acl.Operation, acl.Resource)
		if acl.Optional {
			r := startRelay(t, name, env)
			warning := "relay's principal lacks an optional ACL"
			if acl.Resource == "Cluster" {
				warning = "cannot read the broker's transaction.max.timeout.ms"
			}
			r.waitLog(warning, 60*time.Second)
			r.waitLog("partitions assigned", 60*time.Second)
			r.stop()
		} else {
			before := committed(t, s.group, s.src.topic, s.partitions)
			code, out := runToExit(t, name, env, 60*time.Second)
			want := acl.Operation + " on " + acl.Resource + ` \"` + acl.Name + `\"`
			if acl.Prefixed {
				want = acl.Operation + " on " + acl.Resource + `s prefixed \"` + acl.Name + `\"`
			}
			if code != 2 || !strings.Contains(out, want) || !strings.Contains(out, "relay topics acls run") {
				t.Fatalf("without %s: exit %d; want 2 and the message naming %s:\n%s", acl, code, want, tail(out, 10))
			}
			// A relay that did not start committed nothing (one that
			// went on without an optional ACL may have).
			if after := committed(t, s.group, s.src.topic, s.partitions); !maps.Equal(after, before) {
				t.Fatalf("without %s: offsets %v committed (were %v) by a relay that should not have started", acl, after, before)
			}
		}
		grant(t, principal, acl)
	}
	r := startRelay(t, "all", env)
	waitCaughtUp(t, s.group, s.src.topic, s.partitions, 90*time.Second)
	r.stop()
	assertExactlyOnce(t, s.src, s.output, s.group, s.partitions)
}

// Without Write on its transactional id, relay stops when its producer
// starts (the brokers cannot be asked beforehand), naming the id, and
// nothing is committed.
func TestTransactionalIDWithoutACL(t *testing.T) {
	s := newScenario(t, 1)
	s.src.produce(t, 20)
	user, password := scramUser(t)
	env := merge(s.env("relay-"+user), scramEnv(t, user, password))
	var without []topics.ACL
	for _, acl := range requiredACLs(t, env, "run") {
		if acl.Resource != "TransactionalId" {
			without = append(without, acl)
		}
	}
	grant(t, "User:"+user, without...)
	code, out := runToExit(t, "relay", env, 60*time.Second)
	if code == 0 || !strings.Contains(out, "Transactional Id authorization failed") || !strings.Contains(out, "relay-"+user) {
		t.Fatalf("exit %d; want a failure naming the transactional id:\n%s", code, tail(out, 10))
	}
	if got := committed(t, s.group, s.src.topic, s.partitions); got[0] > 0 {
		t.Fatalf("offsets %v committed", got)
	}
}

// A wrong password, or a broker certificate relay does not trust, stops
// relay at start-up (exit 2) naming the variables to check: waiting would
// not fix either.
func TestRefusedKafkaCredentialsStopRelayNamingTheVariable(t *testing.T) {
	s := newScenario(t, 1)
	user, password := scramUser(t)
	env := s.env("relay-" + user)
	grant(t, "User:"+user, requiredACLs(t, env, "run")...)

	wrong := scramEnv(t, user, password+"-wrong")
	code, out := runToExit(t, "wrong-password", merge(env, wrong), 60*time.Second)
	if code != 2 || !strings.Contains(out, "RELAY_KAFKA_SASL_PASSWORD_FILE") || !strings.Contains(out, "relay's credential is refused") {
		t.Fatalf("wrong password: exit %d:\n%s", code, tail(out, 10))
	}
	if strings.Contains(out, password) {
		t.Fatal("the log shows the password")
	}

	other := filepath.Join(t.TempDir(), "other-ca.pem")
	_, _ = otherCA(t, other)
	untrusted := merge(scramEnv(t, user, password), map[string]string{"RELAY_KAFKA_SSL_CA_LOCATION": other})
	code, out = runToExit(t, "untrusted-ca", merge(env, untrusted), 60*time.Second)
	if code != 2 || !strings.Contains(out, "RELAY_KAFKA_SSL_CA_LOCATION: the TLS handshake with the broker failed") {
		t.Fatalf("untrusted CA: exit %d:\n%s", code, tail(out, 10))
	}
}

// TestMutualTLSAsThePrincipal: relay authenticates with a client
// certificate (CN=relay-tls, the principal User:relay-tls) and relays
// exactly once.
func TestMutualTLSAsThePrincipal(t *testing.T) {
	s := newScenario(t, 2)
	env := s.env("relay-mtls-" + randomHex(t, 3))
	grant(t, "User:relay-tls", requiredACLs(t, env, "run")...)
	s.src.produce(t, 200)
	r := startRelay(t, "relay", merge(env, map[string]string{
		"RELAY_KAFKA_BOOTSTRAP_SERVERS":        sslBootstrap,
		"RELAY_KAFKA_SECURITY_PROTOCOL":        "SSL",
		"RELAY_KAFKA_SSL_CA_LOCATION":          tlsFile("ca.pem"),
		"RELAY_KAFKA_SSL_CERTIFICATE_LOCATION": tlsFile("relay-tls.pem"),
		"RELAY_KAFKA_SSL_KEY_LOCATION":         tlsFile("relay-tls.key"),
	}))
	waitCaughtUp(t, s.group, s.src.topic, s.partitions, 90*time.Second)
	r.stop()
	assertExactlyOnce(t, s.src, s.output, s.group, s.partitions)

	// The same principal's name in a certificate of another CA: the broker
	// refuses it (under TLS 1.3, after the handshake), and relay stops
	// naming the certificate's variables.
	cert, key := foreignClientCert(t, t.TempDir())
	code, out := runToExit(t, "foreign-certificate", merge(env, map[string]string{
		"RELAY_KAFKA_BOOTSTRAP_SERVERS":        sslBootstrap,
		"RELAY_KAFKA_SECURITY_PROTOCOL":        "SSL",
		"RELAY_KAFKA_SSL_CA_LOCATION":          tlsFile("ca.pem"),
		"RELAY_KAFKA_SSL_CERTIFICATE_LOCATION": cert,
		"RELAY_KAFKA_SSL_KEY_LOCATION":         key,
	}), 60*time.Second)
	if code != 2 || !strings.Contains(out, "RELAY_KAFKA_SSL_CERTIFICATE_LOCATION") {
		t.Fatalf("a client certificate of another CA: exit %d:\n%s", code, tail(out, 8))
	}
}

// otherCA writes a CA certificate that signed nothing of the broker's,
// and returns its key.
func otherCA(t *testing.T, path string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), cryptorand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(cryptorand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

// foreignClientCert writes a client certificate (CN=relay-tls, the
// principal the mTLS test grants) signed by a CA the broker does not
// trust, and its key.
func foreignClientCert(t *testing.T, dir string) (certPath, keyPath string) {
	t.Helper()
	ca, caKey := otherCA(t, filepath.Join(dir, "foreign-ca.pem"))
	key, err := ecdsa.GenerateKey(elliptic.P256(), cryptorand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "relay-tls"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(cryptorand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, "foreign.pem"), filepath.Join(dir, "foreign.key")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath
}

// pairs is env as the name, value pairs scenario.cli takes.
func pairs(env map[string]string) []string {
	var out []string
	for k, v := range env {
		out = append(out, k, v)
	}
	return out
}

// TestOperatorCommandsWithOnlyTheirACLs: relay topics apply, relay
// quarantine, relay replay and relay audit each work over SASL_SSL for a
// principal holding only the ACLs `relay topics acls <command>` lists.
func TestOperatorCommandsWithOnlyTheirACLs(t *testing.T) {
	src := uniq(t, "apply-src")
	createTopics(t, 2, src)
	user, password := scramUser(t)
	env := merge(map[string]string{"RELAY_SOURCE_TOPICS": src, "RELAY_GROUP_ID": uniq(t, "apply-grp")}, scramEnv(t, user, password))
	grant(t, "User:"+user, requiredACLs(t, env, "topics")...)
	cmd := exec.Command(relayBin, "topics", "apply", "--replication-factor", replication)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("relay topics apply with the topics ACLs: %v\n%s", err, out)
	}
	waitTopics(t, 2, src+".valid", src+".quarantine", src+".rejected", src+".replay", src+".retry.30s", src+".retry.5m")

	f := newQuarantineFixture(t, 2, 2, 0, 0)
	r := f.startFixed(t)
	defer r.stop()
	as := func(command string) []string {
		user, password := scramUser(t)
		env := scramEnv(t, user, password)
		grant(t, "User:"+user, requiredACLs(t, f.s.env("unused", pairs(env)...), command)...)
		return pairs(env)
	}
	quarantine := as("quarantine")
	if res := f.s.cli(t, quarantine, "quarantine", "list"); res.code != 0 || !strings.Contains(res.stdout, f.garbage[0]) {
		t.Fatalf("relay quarantine list with the quarantine ACLs: exit %d", res.code)
	}
	if res := f.s.cli(t, quarantine, "quarantine", "discard", f.garbage[0], "--reason", "garbage"); res.code != 0 {
		t.Fatalf("relay quarantine discard with the quarantine ACLs: exit %d", res.code)
	}
	if res := f.s.cli(t, append(as("replay"), f.fixed()...), "replay", "--code", "SCHEMA_UNSUPPORTED", "--reason", "fix", "--rate", "10", "--progress", "none"); res.code != 0 {
		t.Fatalf("relay replay with the replay ACLs: exit %d", res.code)
	}
	// The console, with only `relay topics acls console`: a script's
	// discard through it is written.
	token := "console-token-" + randomHex(t, 8)
	addr := freeAddr(t)
	cenv := f.s.env("", append(as("console"), "RELAY_CONSOLE_ADDR", addr, "RELAY_CONSOLE_TOKEN", token)...)
	delete(cenv, "RELAY_TRANSACTIONAL_ID")
	con := startRelayCmd(t, "console", exec.Command(relayBin, "console"), cenv)
	con.waitLog("relay console listening", 60*time.Second)
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/discard", strings.NewReader(url.Values{"ids": {f.garbage[1]}, "reason": {"garbage too"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Relay-Actor", "script")
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 60 * time.Second}
	resp, err := noRedirect.Do(req)
	if err != nil || resp.StatusCode >= 400 {
		t.Fatalf("a discard through the console with the console ACLs: %v %v\n%s", resp, err, tail(con.stderr.String(), 20))
	}
	_ = resp.Body.Close()
	con.stop()
	if got := byState(ledgerOf(t, f.s)); got[ledger.Resolved] != 2 || got[ledger.Discarded] != 2 {
		t.Fatalf("ledger %v, want 2 resolved and 2 discarded", got)
	}
	if res := f.s.cli(t, as("audit"), "audit", "--source", f.s.src.topic); res.code != 0 {
		t.Fatalf("relay audit with the audit ACLs: exit %d", res.code)
	}
}

// TestSCRAMPasswordRotatesWithoutARestart: the password changes on the
// broker and then in relay's secret file while relay runs and records
// flow. The broker makes clients authenticate again every 10 s, so the
// old password stops working at once: relay must take the new one from
// the file (on SIGHUP here; on its own within seconds otherwise), and
// nothing is lost or duplicated, with no restart.
func TestSCRAMPasswordRotatesWithoutARestart(t *testing.T) {
	s := newScenario(t, 2)
	user, password := scramUser(t)
	env := s.env("relay-" + user)
	grant(t, "User:"+user, requiredACLs(t, env, "run")...)
	kenv := scramEnv(t, user, password)
	r := startRelay(t, "relay", merge(env, kenv))
	s.src.produce(t, 200)
	waitCaughtUp(t, s.group, s.src.topic, s.partitions, 90*time.Second)

	bg := s.src.produceInBackground(t, 20, 50, 500*time.Millisecond)
	rotated := randomHex(t, 16)
	setScramPassword(t, user, rotated)
	time.Sleep(2 * time.Second) // the window an operator leaves between the two
	if err := os.WriteFile(kenv["RELAY_KAFKA_SASL_PASSWORD_FILE"], []byte(rotated+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.signal(syscall.SIGHUP)
	r.waitLog("secret file changed; read again", 30*time.Second)
	bg.Wait()
	// Past two more re-authentications with the new password.
	time.Sleep(21 * time.Second)
	s.src.produce(t, 100)
	waitCaughtUp(t, s.group, s.src.topic, s.partitions, 90*time.Second)
	if r.exited() {
		t.Fatal("relay exited during the rotation")
	}
	out := r.stderr.String()
	if strings.Contains(out, password) || strings.Contains(out, rotated) {
		t.Fatal("the log shows a password")
	}
	r.stop()
	assertExactlyOnce(t, s.src, s.output, s.group, s.partitions)
}
