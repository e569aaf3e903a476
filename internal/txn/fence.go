package txn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// A fence usually means a zombie: another live instance started with the
// same transactional.id, and this one must stop (KIP-98). But a coordinator
// fences too when it aborts a transaction itself: after a broker restart
// longer than transaction.timeout.ms, or for a transaction that simply
// outlived that timeout, it aborts the transaction and bumps the producer
// epoch, and librdkafka reports the old epoch's next call as _FENCED. No
// other instance is involved then, and stopping would turn every rolling
// broker upgrade into relay restarts. So a fence is recovered from — a new
// producer, a rewind to the committed offsets, as after an unknown commit
// outcome — when it follows such a cause:
//   - the open transaction is older than transaction.timeout.ms, or
//   - relay saw the brokers fail (transport errors, retried calls) within
//     fenceWindow,
// and at most maxFenceRecoveries times without a commit in between. A real
// zombie, fenced while it runs normally, still stops; and two instances
// with the same id cannot fence each other in turn for long.

// maxFenceRecoveries bounds recoveries between two commits.
const maxFenceRecoveries = 3

// fenceWindow is how long a broker failure explains a fence: the
// coordinator fences at transaction.timeout.ms after the transaction began,
// so a failure seen up to twice that long ago may be its cause.
func (l *Loop) fenceWindow() time.Duration {
	return max(2*l.set.TxnTimeout, time.Minute)
}

// noteTrouble records err, if it says the brokers or the coordinator were
// unreachable or restarting. It is called from the loop and from the
// producer's event goroutine. Only such errors count: a zombie's fence is
// preceded by others (CONCURRENT_TRANSACTIONS while the new instance
// initialises), and those must not excuse it.
func (l *Loop) noteTrouble(err error) {
	var ke kafkaError
	if errors.As(err, &ke) && outageCodes[ke.Code()] {
		l.trouble.Store(time.Now().UnixNano())
	}
}

// outageCodes are the errors of brokers that are down, restarting or moving
// their coordinators.
var outageCodes = map[kafka.ErrorCode]bool{
	kafka.ErrTransport:                 true,
	kafka.ErrAllBrokersDown:            true,
	kafka.ErrTimedOut:                  true,
	kafka.ErrRequestTimedOut:           true,
	kafka.ErrNetworkException:          true,
	kafka.ErrCoordinatorNotAvailable:   true,
	kafka.ErrNotCoordinator:            true,
	kafka.ErrCoordinatorLoadInProgress: true,
	kafka.ErrBrokerNotAvailable:        true,
	kafka.ErrLeaderNotAvailable:        true,
	kafka.ErrNotLeaderForPartition:     true,
}

// isFence reports whether err says this producer's epoch was fenced.
func isFence(err error) bool {
	return isCode(err, kafka.ErrFenced) || isCode(err, kafka.ErrProducerFenced) || isCode(err, kafka.ErrInvalidProducerEpoch)
}

// fenceExplained says why a fence is not a zombie's, or "" when it may be.
func (l *Loop) fenceExplained(err error) string {
	if !isFence(err) || l.fenceRecoveries >= maxFenceRecoveries {
		return ""
	}
	if l.open && l.set.TxnTimeout > 0 && time.Since(l.started) >= l.set.TxnTimeout {
		return "the transaction outlived transaction.timeout.ms"
	}
	if t := l.trouble.Load(); t != 0 && time.Since(time.Unix(0, t)) <= l.fenceWindow() {
		return "the brokers failed shortly before (coordinator outage or restart)"
	}
	return ""
}

// onFatal acts on an error librdkafka calls fatal: a fence explained by an
// outage or an expired transaction is recovered from, and so is
// INVALID_TXN_STATE (the client's and the coordinator's view of the
// transaction disagree; no other instance is involved, and a new producer
// settles it); anything else stops relay.
func (l *Loop) onFatal(ctx context.Context, op string, err error) {
	if isCode(err, kafka.ErrInvalidTxnState) && l.fenceRecoveries < maxFenceRecoveries {
		l.fenceRecoveries++
		l.log.Warn("transaction state out of step with the coordinator: starting a new producer and rewinding to the committed offsets",
			"op", op, "err", err, "recovery", l.fenceRecoveries)
		l.reinit(ctx, op+" (invalid transaction state)")
		return
	}
	if why := l.fenceExplained(err); why != "" {
		l.fenceRecoveries++
		l.log.Warn("producer fenced, but not by another instance: starting a new producer and rewinding to the committed offsets",
			"op", op, "err", err, "because", why, "recovery", l.fenceRecoveries)
		l.reinit(ctx, "fenced after "+op)
		return
	}
	if isFence(err) {
		l.fatal = fmt.Errorf("%w: %s: fenced by another producer with this transactional.id (is RELAY_TRANSACTIONAL_ID shared by two instances?): %w", ErrFatal, op, err)
		return
	}
	l.fatal = fmt.Errorf("%w: %s: %w", ErrFatal, op, err)
}
