// Package kafkaerr is relay's one reading of librdkafka's errors: what a
// code means, and what a caller does about it (retry the call, abort the
// transaction, stop). Every Kafka client of relay — the transactional
// loop, the state-topic readers, preflight, the operator commands — asks
// here instead of testing kafka.Error by hand.
package kafkaerr

import (
	"context"
	"errors"
	"strings"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Flags is how an error's librdkafka flags are read. kafka.Error
// implements it; tests implement it too, because kafka.NewError cannot set
// the retriable or abort flags.
type Flags interface {
	error
	Code() kafka.ErrorCode
	IsRetriable() bool
	TxnRequiresAbort() bool
	IsFatal() bool
}

// Code is err's librdkafka code, kafka.ErrUnknown when err is not a Kafka
// error.
func Code(err error) kafka.ErrorCode {
	var ke Flags
	if errors.As(err, &ke) {
		return ke.Code()
	}
	return kafka.ErrUnknown
}

// Is reports whether err carries one of codes.
func Is(err error, codes ...kafka.ErrorCode) bool {
	var ke Flags
	if !errors.As(err, &ke) {
		return false
	}
	for _, c := range codes {
		if ke.Code() == c {
			return true
		}
	}
	return false
}

// Fenced reports whether err says a producer's epoch was fenced: another
// producer with its transactional.id, or the coordinator, took over.
func Fenced(err error) bool {
	return Is(err, kafka.ErrFenced, kafka.ErrProducerFenced, kafka.ErrInvalidProducerEpoch)
}

// IsKafka reports whether err came from a Kafka client at all (as opposed
// to a verdict of relay's own about what the client answered).
func IsKafka(err error) bool {
	var ke Flags
	return errors.As(err, &ke)
}

// Kind is what a caller does about an error from a transactional call.
type Kind int

const (
	None Kind = iota + 1
	// Retriable: the same call may be made again (librdkafka says so,
	// e.g. a timeout or a coordinator move).
	Retriable
	// Abort: the transaction cannot commit; abort it and reprocess from
	// the committed offsets.
	Abort
	// Fatal: the producer is unusable, typically fenced by a newer
	// instance with the same transactional.id.
	Fatal
	// Unknown: neither retriable, abortable nor fatal (e.g. a state
	// error). The transaction's outcome cannot be trusted.
	Unknown
)

// Classify reads librdkafka's flags. Order matters: a fatal error may also
// say it requires abort, and fatal wins.
func Classify(err error) Kind {
	if err == nil {
		return None
	}
	var ke Flags
	if !errors.As(err, &ke) {
		return Unknown
	}
	switch {
	case ke.IsFatal():
		return Fatal
	case ke.Code() == kafka.ErrFenced || ke.Code() == kafka.ErrProducerFenced:
		// Fencing is fatal even if a wrapper lost the flag (KIP-98).
		return Fatal
	case ke.TxnRequiresAbort():
		return Abort
	case ke.IsRetriable():
		return Retriable
	default:
		return Unknown
	}
}

// transient are answers that a later try of the same request may not
// give: the coordinator or leader is loading or moving, a commit is in
// flight (KIP-447's unstable offsets), or the broker could not be reached.
var transient = map[kafka.ErrorCode]bool{
	kafka.ErrCoordinatorLoadInProgress: true,
	kafka.ErrCoordinatorNotAvailable:   true,
	kafka.ErrNotCoordinator:            true,
	kafka.ErrUnstableOffsetCommit:      true,
	kafka.ErrTimedOut:                  true,
	kafka.ErrRequestTimedOut:           true,
	kafka.ErrTransport:                 true,
	kafka.ErrAllBrokersDown:            true,
	kafka.ErrNetworkException:          true,
	kafka.ErrRebalanceInProgress:       true,
}

// Transient reports whether asking again may give another answer: the
// error is one of the answers of a cluster in motion or out of reach.
func Transient(err error) bool { return transient[Code(err)] }

// permanent are answers that asking again will not change without an
// operator: not authorised, or no such topic.
var permanent = map[kafka.ErrorCode]bool{
	kafka.ErrTopicAuthorizationFailed:   true,
	kafka.ErrClusterAuthorizationFailed: true,
	kafka.ErrGroupAuthorizationFailed:   true,
	kafka.ErrUnknownTopicOrPart:         true,
}

// Permanent reports whether retrying err is pointless: a fatal error, or
// an answer only an operator can change.
func Permanent(err error) bool {
	var ke Flags
	if !errors.As(err, &ke) {
		return false
	}
	return ke.IsFatal() || permanent[ke.Code()]
}

// Outage reports whether err may come from a cluster that is out of reach
// or in motion rather than from an answer: a Kafka error that is not
// Permanent, or a call that ran out of its own deadline (librdkafka's
// admin calls end with context.DeadlineExceeded when no broker answers in
// time). Start-up waits these out; anything else is a verdict.
func Outage(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	return IsKafka(err) && !Permanent(err)
}

// Unreachable reports whether err says no broker answered: a call past
// its own deadline or cancelled, or a transient code (Transient). Any
// other error is an answer, if not the one asked for.
func Unreachable(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || Transient(err)
}

// partitionFaults are the delivery errors that say the output partition
// (or its topic) cannot take the record. Every other failed report is no
// partition's fault: when a transaction turns abortable, librdkafka purges
// every queued message (_PURGE_QUEUE, _PURGE_INFLIGHT) and reports each,
// before or after the one that failed; a timeout is an outage; a fence is
// handled by the transactional calls.
var partitionFaults = map[kafka.ErrorCode]bool{
	kafka.ErrUnknownPartition:         true,
	kafka.ErrUnknownTopic:             true,
	kafka.ErrUnknownTopicOrPart:       true,
	kafka.ErrMsgSizeTooLarge:          true,
	kafka.ErrRecordListTooLarge:       true,
	kafka.ErrInvalidRecord:            true,
	kafka.ErrInvalidMsg:               true,
	kafka.ErrInvalidMsgSize:           true,
	kafka.ErrTopicAuthorizationFailed: true,
	kafka.ErrPolicyViolation:          true,
	kafka.ErrTopicException:           true,
}

// PartitionFault reports whether a failed delivery blames the partition it
// was written to (it lacks the partition, refuses the record, or forbids
// writing), rather than the transaction or the network.
func PartitionFault(err error) bool { return partitionFaults[Code(err)] }

// undelivered are the codes of a record that was not written in time,
// without its partition refusing it: the partition had no leader, too few
// in-sync replicas, or did not answer.
var undelivered = map[kafka.ErrorCode]bool{
	kafka.ErrMsgTimedOut:                  true,
	kafka.ErrTimedOut:                     true,
	kafka.ErrRequestTimedOut:              true,
	kafka.ErrNotEnoughReplicas:            true,
	kafka.ErrNotEnoughReplicasAfterAppend: true,
	kafka.ErrLeaderNotAvailable:           true,
	kafka.ErrNotLeaderForPartition:        true,
}

// Undelivered reports whether a failed delivery says its record was not
// written in time, rather than refused. On its own it blames no
// partition: the brokers may be away for every one.
func Undelivered(err error) bool { return undelivered[Code(err)] }

// StaleGeneration reports whether err says the group refused this member's
// offsets: its generation or membership is no longer current.
func StaleGeneration(err error) bool {
	return Is(err, kafka.ErrIllegalGeneration, kafka.ErrUnknownMemberID, kafka.ErrFencedInstanceID, kafka.ErrRebalanceInProgress)
}

// Missing reports whether err says a topic or partition does not exist.
func Missing(err error) bool {
	return Is(err, kafka.ErrUnknownPartition, kafka.ErrUnknownTopicOrPart, kafka.ErrUnknownTopic)
}

// CredentialVars says, for an error that says the broker refused relay's
// credential (SASL authentication failed) or a TLS handshake failed, which
// variables set what to check, named by name (the variable of a
// librdkafka property) after props (the properties in use); "" for any
// other error.
func CredentialVars(err error, props map[string]string, name func(prop string) string) string {
	var list []string
	add := func(ps ...string) {
		for _, p := range ps {
			list = append(list, name(p))
		}
	}
	switch CredentialCode(err) {
	case kafka.ErrAuthentication, kafka.ErrSaslAuthenticationFailed:
		if strings.EqualFold(props["sasl.mechanism"], "OAUTHBEARER") || strings.EqualFold(props["sasl.mechanisms"], "OAUTHBEARER") {
			add("sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret", "sasl.oauthbearer.token.endpoint.url")
		} else {
			add("sasl.username", "sasl.password", "sasl.mechanism")
		}
	case kafka.ErrSsl:
		add("ssl.ca.location")
		if props["ssl.certificate.location"] != "" || props["ssl.keystore.location"] != "" {
			add("ssl.certificate.location", "ssl.key.location")
		}
	default:
		return ""
	}
	return strings.Join(list, ", ")
}

// refusedTexts are what librdkafka says (after the error code) when a
// credential or a certificate was refused, as opposed to a connection cut
// short or an identity provider out of reach, which may heal.
var refusedTexts = []string{
	"invalid credentials", "Authentication failed", // SASL PLAIN/SCRAM
	"invalid_client", "invalid_grant", "invalid_token", "unauthorized_client", "unexpired token", "invalid_scope", "access_denied", // OAUTHBEARER, OIDC
	"certificate verify failed", // TLS: relay does not trust the broker
}

// tlsRefusals are the TLS alerts of a peer refusing relay's certificate
// (or its lack of one), as OpenSSL words them after "tlsv13 alert ",
// "tlsv1 alert " or "sslv3 alert ". Other alerts (internal error, say) may
// heal.
var tlsRefusals = []string{"unknown ca", "bad certificate", "certificate required", "certificate unknown",
	"certificate expired", "certificate revoked", "unsupported certificate", "access denied"}

// tlsAlert reports whether msg carries a TLS alert refusing a certificate.
func tlsAlert(msg string) bool {
	msg = strings.ToLower(msg)
	for _, proto := range []string{"tlsv13 alert ", "tlsv1 alert ", "sslv3 alert "} {
		for i := strings.Index(msg, proto); i >= 0; {
			rest := msg[i+len(proto):]
			for _, r := range tlsRefusals {
				if strings.HasPrefix(rest, r) {
					return true
				}
			}
			j := strings.Index(rest, proto)
			if j < 0 {
				break
			}
			i += len(proto) + j
		}
	}
	return false
}

// CredentialCode is the code of a credential error: err's own, or ErrSsl
// for a transport error that carries a TLS alert refusing relay's
// certificate (under TLS 1.3 the broker's refusal comes after the
// handshake, and librdkafka reports it on the next receive).
func CredentialCode(err error) kafka.ErrorCode {
	c := Code(err)
	if c == kafka.ErrTransport && err != nil && tlsAlert(err.Error()) {
		return kafka.ErrSsl
	}
	return c
}

// CredentialRefused reports whether err, a credential error of
// CredentialVars, says the credential or certificate itself was refused:
// asking again will get the same answer.
func CredentialRefused(err error) bool {
	if err == nil {
		return false
	}
	if tlsAlert(err.Error()) {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, t := range refusedTexts {
		if strings.Contains(msg, strings.ToLower(t)) {
			return true
		}
	}
	return false
}
