package txn

import (
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// refusedQuiet is how long after the clients' last authentication failure
// the loop takes the broker to accept its credential again. librdkafka
// tries a refused connection again at least every
// reconnect.backoff.max.ms (10 s by default) and reports each failure, so
// 30 s without one means its connections authenticate.
const refusedQuiet = 30 * time.Second

// refusal is the clients' reports that the broker refuses relay's
// credential (SASL authentication failed) or a TLS handshake failed. The
// loop reports not ready while they come: librdkafka keeps trying, and
// relay with it, but nothing moves. Records are never failed for it.
type refusal struct {
	last atomic.Int64 // unix nanoseconds of the last report; 0: none
	on   atomic.Bool  // reported not ready for it
}

// credentialError reports whether e says relay's credential or a TLS
// handshake was refused.
func credentialError(e kafka.Error) bool {
	return e.Code() == kafka.ErrAuthentication || e.Code() == kafka.ErrSsl
}

// noteRefused records e, from the consumer (the loop's goroutine) or a
// producer (its events goroutine). The first of an episode is logged as
// an error and makes relay not ready.
func (l *Loop) noteRefused(client string, e kafka.Error) {
	l.refused.last.Store(time.Now().UnixNano())
	if l.refused.on.CompareAndSwap(false, true) {
		l.obs.Ready(false)
		l.log.Error("the broker refuses relay's credential, or the TLS handshake fails: relay keeps trying and reports not ready; "+
			"check RELAY_KAFKA_SASL_* and RELAY_KAFKA_SSL_* (a secret read from a _FILE is used from its next change, or on SIGHUP)",
			"client", client, "err", e)
	}
}

// checkRefused makes relay ready again once the reports have stopped for
// refusedQuiet, or a transaction committed since the last one. The loop
// calls it every round.
func (l *Loop) checkRefused(committed bool) {
	if !l.refused.on.Load() {
		return
	}
	if committed || time.Since(time.Unix(0, l.refused.last.Load())) > refusedQuiet {
		if l.refused.on.CompareAndSwap(true, false) {
			l.obs.Ready(true)
			l.log.Info("the broker accepts relay's credential again")
		}
	}
}
