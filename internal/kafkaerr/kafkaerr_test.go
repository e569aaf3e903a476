package kafkaerr

import (
	"fmt"
	"strings"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

type flags struct {
	code                    kafka.ErrorCode
	retriable, abort, fatal bool
}

func (e flags) Error() string          { return e.code.String() }
func (e flags) Code() kafka.ErrorCode  { return e.code }
func (e flags) IsRetriable() bool      { return e.retriable }
func (e flags) TxnRequiresAbort() bool { return e.abort }
func (e flags) IsFatal() bool          { return e.fatal }

func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		want Kind
	}{
		{nil, None},
		{fmt.Errorf("plain"), Unknown},
		{flags{code: kafka.ErrTimedOut, retriable: true}, Retriable},
		{flags{code: kafka.ErrInvalidTxnState, abort: true}, Abort},
		{flags{code: kafka.ErrFenced, abort: true, fatal: true}, Fatal},
		{fmt.Errorf("wrapped: %w", flags{code: kafka.ErrProducerFenced}), Fatal},
		{flags{code: kafka.ErrState}, Unknown},
	}
	for _, c := range cases {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

func TestCodeAndPredicates(t *testing.T) {
	lost := fmt.Errorf("fetch: %w", kafka.NewError(kafka.ErrUnknownTopicOrPart, "no topic", false))
	if Code(lost) != kafka.ErrUnknownTopicOrPart || !Missing(lost) || !Permanent(lost) || Transient(lost) {
		t.Errorf("unknown topic read wrong: code %v missing %v permanent %v transient %v", Code(lost), Missing(lost), Permanent(lost), Transient(lost))
	}
	busy := kafka.NewError(kafka.ErrCoordinatorLoadInProgress, "loading", false)
	if !Transient(busy) || Permanent(busy) || PartitionFault(busy) {
		t.Errorf("loading coordinator read wrong")
	}
	if !PartitionFault(kafka.NewError(kafka.ErrMsgSizeTooLarge, "big", false)) || PartitionFault(kafka.NewError(kafka.ErrPurgeQueue, "purged", false)) {
		t.Errorf("partition faults read wrong")
	}
	if Code(fmt.Errorf("plain")) != kafka.ErrUnknown || IsKafka(fmt.Errorf("plain")) || !IsKafka(busy) {
		t.Errorf("non-Kafka errors read wrong")
	}
	if !Permanent(flags{code: kafka.ErrState, fatal: true}) {
		t.Errorf("a fatal error must be permanent")
	}
}

func TestCredentialRefusedTellsRefusalsFromOutages(t *testing.T) {
	for msg, want := range map[string]bool{
		"sasl_ssl://b:9093/bootstrap: SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512": true,
		"Failed to acquire SASL OAUTHBEARER token: {\"error\":\"invalid_client\"}":                                                                                         true,
		"Failed to acquire SASL OAUTHBEARER token: Must supply an unexpired token: now=2ms, exp=1ms":                                                                       true,
		"SASL authentication error: {\"status\":\"invalid_token\"} (after 351ms in state AUTH_REQ)":                                                                        true,
		"SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker certificate could not be verified":                                           true,
		"SSL handshake failed: ssl/record/rec_layer_s3.c:303: error:0A000126:SSL routines::unexpected eof while reading":                                                   false,
		"Failed to acquire SASL OAUTHBEARER token: Failed to retrieve OIDC token from \"https://idp/token\": Couldn't connect to server":                                   false,
	} {
		code := kafka.ErrAuthentication
		if strings.HasPrefix(msg, "SSL") {
			code = kafka.ErrSsl
		}
		if got := CredentialRefused(kafka.NewError(code, msg, false)); got != want {
			t.Errorf("%q: refused %v, want %v", msg, got, want)
		}
	}
}

// Under TLS 1.3 a broker refusing relay's certificate says so after the
// handshake: librdkafka reports the alert as a transport error.
func TestTLSAlertOnReceiveIsACredentialError(t *testing.T) {
	e := kafka.NewError(kafka.ErrTransport, "ssl://b:9093/1: Receive failed: error:0A00045C:SSL routines::tlsv13 alert certificate required", false)
	if CredentialCode(e) != kafka.ErrSsl || !CredentialRefused(e) {
		t.Fatalf("code %v refused %v", CredentialCode(e), CredentialRefused(e))
	}
	props := map[string]string{"ssl.certificate.location": "/c.pem"}
	if vars := CredentialVars(e, props, func(p string) string { return p }); vars != "ssl.ca.location, ssl.certificate.location, ssl.key.location" {
		t.Fatalf("vars %q", vars)
	}
	plain := kafka.NewError(kafka.ErrTransport, "ssl://b:9093/1: Receive failed: Connection reset by peer", false)
	if CredentialCode(plain) != kafka.ErrTransport || CredentialVars(plain, props, func(p string) string { return p }) != "" {
		t.Fatal("a reset connection taken for a refusal")
	}
}
