package txn

import (
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/kafkaerr"
)

// refusedQuiet is how long after the clients' last authentication failure
// the loop takes the broker to accept its credential again. librdkafka
// reports an error identical to a broker's last one at most every 30 s,
// and tries a refused connection again at least every
// reconnect.backoff.max.ms (10 s by default): a refusal that goes on is
// reported again within about 50 s.
const refusedQuiet = 60 * time.Second

// refusal is the clients' reports that the broker refuses relay's
// credential (SASL authentication failed) or a TLS handshake failed. The
// loop reports not ready while they come: librdkafka keeps trying, and
// relay with it, but nothing moves. Records are never failed for it.
//
// Any goroutine notes a report (last); only the loop's goroutine decides
// readiness (on), in checkRefused, so that no Ready call of another
// goroutine can land after the loop's and leave it wrong.
type refusal struct {
	last   atomic.Int64 // unix nanoseconds of the last report; 0: none
	logged atomic.Bool  // the episode's first report was logged
	// The loop's goroutine only: reported not ready for a refusal; and
	// the last refusal an end of the episode covered.
	on      bool
	cleared int64
}

// credentialError reports whether e says relay's credential or a TLS
// handshake was refused.
func credentialError(e kafka.Error) bool {
	c := kafkaerr.CredentialCode(e)
	return c == kafka.ErrAuthentication || c == kafka.ErrSsl
}

// noteRefused records e, from the consumer (the loop's goroutine) or a
// producer (its events goroutine); the first of an episode is logged.
func (l *Loop) noteRefused(client string, e kafka.Error) {
	l.refused.last.Store(time.Now().UnixNano())
	if l.refused.logged.CompareAndSwap(false, true) {
		l.log.Error("the broker refuses relay's credential, or the TLS handshake fails: relay keeps trying and reports not ready; "+
			"check RELAY_KAFKA_SASL_* and RELAY_KAFKA_SSL_* (a secret read from a _FILE is used from its next change, or on SIGHUP)",
			"client", client, "err", e)
	}
}

// checkRefused reports not ready when a refusal came since the last check,
// and ready again once none has come for refusedQuiet, or a transaction
// begun after the last one committed (committedSince: its begin; zero
// when nothing committed). The loop's goroutine calls it every round.
func (l *Loop) checkRefused(committedSince time.Time) {
	last := l.refused.last.Load()
	if last == 0 {
		return
	}
	at := time.Unix(0, last)
	if !l.refused.on && last > l.refused.cleared && time.Since(at) < refusedQuiet {
		l.refused.on = true
		l.obs.Ready(false)
	}
	if l.refused.on && (time.Since(at) > refusedQuiet || (!committedSince.IsZero() && at.Before(committedSince))) {
		l.refused.on, l.refused.cleared = false, last
		l.refused.logged.Store(false)
		l.obs.Ready(true)
		l.log.Info("the broker accepts relay's credential again")
	}
}
