package txn

// This file holds the loop's one shape — Run, handle, end (the
// commit). What a failed call does to the open transaction (abort,
// re-initialisation, reloading the handler's state) is in abort.go,
// positions (rewind, waits) in position.go, rebalances in rebalance.go,
// the producer's life and its calls (produce, retry) in producer.go, held
// partitions in stall.go, fences in fence.go, commit spans in trace.go.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"go.opentelemetry.io/otel/trace"

	"relay/internal/kafkaerr"
	"relay/internal/retry"
)

// Settings bound the loop. Every field must be set (see config.Config),
// but for those that say what their zero value does.
type Settings struct {
	Topics         []string
	CommitInterval time.Duration // longest a transaction stays open
	MaxRecords     int           // source records per transaction at most
	OpTimeout      time.Duration // deadline of each blocking librdkafka call
	// ShutdownTimeout bounds the final commit or abort after ctx is done.
	ShutdownTimeout time.Duration
	// TxnTimeout is the producer's transaction.timeout.ms: a fence of a
	// transaction older than this may be the coordinator's, not a
	// zombie's (see fence.go).
	TxnTimeout time.Duration
	// SessionTimeout is the consumer's session.timeout.ms: a process
	// frozen longer than this has lost its membership, and a fence is
	// then taken for another instance's. MaxPollInterval is its
	// max.poll.interval.ms: a loop that has not polled for longer has
	// left the group. Zero: not checked.
	SessionTimeout  time.Duration
	MaxPollInterval time.Duration
	// StaticMember: the consumer has a group.instance.id, so the group
	// coordinator refuses a twin's (see twin.go). False: a fence after
	// the group moved on stops relay.
	StaticMember bool
	// WedgeAfter is how long a blocking librdkafka call may take before
	// the watchdog calls it wedged (see watchdog.go): well past the
	// call's own timeout. Zero: WedgeAfter(OpTimeout).
	WedgeAfter time.Duration
	// Tracer, when set, makes a commit span of every transaction (see
	// trace.go); it is the one optional field.
	Tracer trace.Tracer
}

// WedgeAfter is the watchdog's bound for calls with a timeout of op: twice
// the call's own timeout and 5 s more, so a loaded machine is not taken
// for a hang.
func WedgeAfter(op time.Duration) time.Duration { return 2*op + 5*time.Second }

// opAttempts is how often a retriable transactional call is made before its
// outcome counts as unknown.
const opAttempts = 3

// Loop is the transactional consume-transform-produce loop. It is not safe
// for concurrent use: Run owns it.
type Loop struct {
	set         Settings
	consumer    Consumer
	newProducer ProducerFactory
	producer    *handle // nil once abandoned, until the next is made
	handler     Handler
	log         *slog.Logger
	obs         Observer
	refused     refusal

	// The watchdog's state (see watchdog.go): the reapers of wedged
	// producers, how many of those are still open, and the times of
	// recent wedges.
	reapers    sync.WaitGroup
	wedgedOpen atomic.Int64
	wedges     []time.Time
	// detached is set once a consumer call wedged: close leaves the
	// consumer alone, and a rebalance callback the call runs later, on
	// its own goroutine, leaves the loop alone.
	detached atomic.Bool
	// lateInit is when an InitTransactions was last abandoned (see
	// selfFenced).
	lateInit time.Time
	// room is signalled at each delivery report, for a produce waiting
	// on a full queue (see waitRoom); roomTimer bounds that wait.
	room      chan struct{}
	roomTimer *time.Timer

	// State of the open transaction.
	open    bool
	started time.Time
	openFor time.Duration // how long it was open when due last looked
	// clock is when the coordinator may first have heard of the open
	// transaction (its first produce or offset send): its timeout counts
	// from there, not from begin. Zero until then.
	clock time.Time
	// round is when due last looked, and lastRound when it looked the
	// time before: a round of the loop polls once, so the longer of
	// round−lastRound and the time since round is about how long the
	// loop has gone without polling (see zombie).
	round, lastRound time.Time
	// freeze tells how long the process was frozen in the open
	// transaction (see zombie); nil outside Run.
	freeze   *freezeWatch
	records  int
	outputs  int
	next     map[tpKey]int64 // next offset to commit
	first    map[tpKey]int64 // first offset handled in this transaction
	assigned map[tpKey]bool
	// paused holds partitions waiting for a record that is not yet due,
	// with the time it is due.
	paused map[tpKey]time.Time
	// stalls are the partitions whose records cannot be written (see
	// stall.go); suspects and outSrc say, for the open transaction, which
	// partition to blame when it fails.
	stalls map[tpKey]*stall
	// revokedStalls are the stalls of revoked partitions, kept for
	// when they come back (see forgetStalls).
	revokedStalls map[tpKey]*stall
	suspects      map[tpKey]error
	outSrc        map[tpKey][]tpKey
	deliveries    deliveryFailures
	// txnFrom is how many records the producer had taken when the open
	// transaction began: reports from that ordinal on are its own.
	txnFrom    int64
	reportWait time.Duration // for a delivery report after an abort

	// recoveries are the times of recent recoveries from fatal errors
	// (see fence.go).
	recoveries []time.Time
	// twin is a fence waiting for the group coordinator's verdict on a
	// twin (see twin.go); nil when none is. assigns counts the
	// assignments the consumer was given, and assignsAtBegin is that
	// count when the open transaction began.
	twin                    *twinCheck
	assigns, assignsAtBegin int

	// fatal is set by the rebalance callback, which cannot return errors to
	// Run: librdkafka calls it from inside Poll.
	fatal   error
	backoff *backoff.ExponentialBackOff // after an abort no partition is blamed for
	// runCtx is Run's context, for the rebalance callback: librdkafka
	// calls it from inside Poll, without a context of its own.
	runCtx context.Context
	// rebalances counts the rebalance callbacks, for pollBatch.
	rebalances int
	// batchCap is the size of the next batch (see batched).
	batchCap int

	seq uint64    // transactions begun, for their commit spans
	tr  *txnTrace // the open transaction's tracing; nil without a tracer
}

// New builds a loop. The consumer must be configured with
// enable.auto.commit=false and isolation.level=read_committed; the factory's
// producers with the instance's transactional.id.
func New(set Settings, c Consumer, f ProducerFactory, h Handler, log *slog.Logger, obs Observer) *Loop {
	if obs == nil {
		obs = NopObserver{}
	}
	if set.WedgeAfter <= 0 {
		set.WedgeAfter = WedgeAfter(set.OpTimeout)
	}
	return &Loop{
		set: set, consumer: c, newProducer: f, handler: h, log: log, obs: obs,
		next: map[tpKey]int64{}, first: map[tpKey]int64{}, assigned: map[tpKey]bool{},
		paused: map[tpKey]time.Time{}, stalls: map[tpKey]*stall{}, revokedStalls: map[tpKey]*stall{}, suspects: map[tpKey]error{},
		outSrc: map[tpKey][]tpKey{}, room: make(chan struct{}, 1), reportWait: 250 * time.Millisecond, backoff: retry.Schedule(50*time.Millisecond, 5*time.Second),
	}
}

// Run consumes until ctx is done or a fatal error occurs. On ctx done it
// stops polling, ends the open transaction within ShutdownTimeout and closes
// both clients; it returns nil. A fatal error (e.g. fenced by a newer
// instance) is returned wrapped in ErrFatal, after closing the clients.
func (l *Loop) Run(ctx context.Context) (err error) {
	defer func() {
		err = errors.Join(err, l.close())
	}()
	// A panic (relay's crash handling reports it) must not let the
	// consumer's close commit: closing serves the revoke, and the revoke
	// commits the open transaction, whose batch may have applied records
	// past one that was never handled. Deferred after close, this runs
	// before it.
	defer func() {
		if v := recover(); v != nil {
			l.fatal = fmt.Errorf("%w: panic: %v", ErrFatal, v)
			panic(v) //nolint:forbidigo // re-raised for the crash handler, after marking the loop fatal
		}
	}()
	l.runCtx = ctx
	if st := l.set.SessionTimeout; st > 0 {
		l.freeze = newFreezeWatch(min(time.Second, st/10))
		defer l.freeze.close()
	}
	if err := l.startProducer(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if err := l.consumer.SubscribeTopics(l.set.Topics, l.onRebalance); err != nil {
		return fmt.Errorf("%w: subscribe %v: %w", ErrFatal, l.set.Topics, err)
	}
	// Not ready yet if the clients were refused while the producer
	// started.
	l.checkRefused(time.Time{})
	if !l.refused.on {
		l.obs.Ready(true)
	}
	defer l.obs.Ready(false)
	// A transaction still open when Run returns is left to the coordinator
	// (a fatal error, or one in the shutdown's commit): its span says so.
	defer func() { l.traceEnd(TxnAbandoned, len(l.first)) }()

	for ctx.Err() == nil && l.fatal == nil {
		if l.twin != nil {
			l.settleTwin(ctx)
			continue
		}
		l.obs.Alive()
		l.checkRefused(time.Time{})
		switch ev := l.consumer.Poll(l.pollTimeout()).(type) {
		case *kafka.Message:
			if bh, ok := l.handler.(BatchHandler); ok && bh.BatchSize() > 1 {
				l.batched(ctx, bh, ev)
			} else {
				l.handle(ctx, ev)
			}
		case kafka.Error:
			l.consumerError(ev)
		case *kafka.Stats:
			l.obs.Statistics(kindConsumer, ev.String())
		}
		if ctx.Err() != nil {
			// Stopping: the open transaction is committed below, under
			// the shutdown's own bound. Ended here it would run with the
			// cancelled context, which gives each call one try.
			break
		}
		if l.fatal == nil && l.twin == nil && l.open && l.due() {
			l.end(ctx, "interval")
		}
		l.resumeDue()
	}
	if l.fatal != nil {
		if ctx.Err() != nil && errors.Is(l.fatal, ctx.Err()) {
			// Shutdown interrupted a recovery; nothing is open.
			return nil
		}
		if errors.Is(l.fatal, ErrInstanceFenced) {
			l.release()
		}
		return l.fatal
	}
	// Graceful stop: the open transaction is ended with a fresh deadline,
	// not with the cancelled root context.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.set.ShutdownTimeout)
	defer cancel()
	if l.open && l.twin == nil {
		l.end(sctx, "shutdown")
	}
	return l.fatal
}

// due says whether the open transaction is to end: it is full, or has
// been open for CommitInterval. It keeps how long it has been open for
// the next poll's timeout, so that a round of the loop reads the clock
// once.
func (l *Loop) due() bool {
	if l.records >= l.set.MaxRecords {
		return true
	}
	now := time.Now()
	l.lastRound, l.round = l.round, now
	l.openFor = now.Sub(l.started)
	return l.openFor >= l.set.CommitInterval
}

// pollTimeout is the time left until the open transaction is due, so a quiet
// partition does not keep a transaction open past the commit interval. It
// counts from due's reading at the end of the round before (every round
// that leaves a transaction open ends with due): the rest of that round
// takes far less than the millisecond a timeout is counted in.
func (l *Loop) pollTimeout() int {
	const idle = 100 * time.Millisecond
	d := idle
	if l.open {
		d = l.set.CommitInterval - l.openFor
	}
	return int(min(max(d, time.Millisecond), idle) / time.Millisecond)
}

// consumerError stops relay on a fatal consumer error; other errors are
// librdkafka's to recover from.
func (l *Loop) consumerError(e kafka.Error) {
	if fencedInstance(e) {
		// There is no membership left to end, and librdkafka's close
		// of a consumer fenced this way did not return (30 s, until
		// the watchdog gave up on it): close leaves it alone, and the
		// process ends without it (see ClientsLeft).
		l.detached.Store(true)
		l.fatal = fmt.Errorf("%w: %w: consumer: %w", ErrFatal, ErrInstanceFenced, e)
		return
	}
	if e.IsFatal() {
		l.fatal = fmt.Errorf("%w: consumer: %w", ErrFatal, e)
		return
	}
	if credentialError(e) {
		l.noteRefused("consumer", e)
	}
	l.log.Warn("consumer error", "err", e, "code", e.Code().String())
}

// admissible says whether m is to be handled, and gives its partition.
func (l *Loop) admissible(m *kafka.Message) (tpKey, bool) {
	if m.TopicPartition.Error != nil {
		l.log.Warn("consumer message error", "err", m.TopicPartition.Error)
		return tpKey{}, false
	}
	tp := keyOf(m.TopicPartition)
	if !l.assigned[tp] {
		// A message fetched before a revoke is stale: its partition has
		// gone to another member and the offset must not be committed.
		return tp, false
	}
	if _, waiting := l.paused[tp]; waiting {
		// Fetched before the partition was paused and rewound to a
		// record that is not due: it comes again after that record.
		return tp, false
	}
	if st, ok := l.stalls[tp]; ok && st.held {
		// Fetched before the partition was held back: it comes again.
		return tp, false
	}
	return tp, true
}

// handle runs one source record through the handler and adds its outputs
// and offset to the open transaction.
func (l *Loop) handle(ctx context.Context, m *kafka.Message) {
	tp, ok := l.admissible(m)
	if !ok {
		return
	}
	l.include(tp, int64(m.TopicPartition.Offset))
	if !l.begin(ctx) {
		return
	}
	rec := toRecord(m)
	outs, err := l.handler.Handle(l.handlerCtx(ctx), rec)
	if err != nil {
		if l.handlerFailed(ctx, tp, rec, err) {
			l.abort(ctx, "handler")
		}
		return
	}
	if err := l.produceAll(tp, rec, outs); err != nil {
		l.abortAfterProduce(ctx, err)
		return
	}
	l.applied(tp, rec.Offset, len(outs))
}

// include makes tp part of the open transaction from offset on, whatever
// happens to that record: librdkafka's position is already past it, so if
// begin, the handler or a produce fails, the rewind must seek tp back too,
// or the next commit skips the record.
func (l *Loop) include(tp tpKey, offset int64) {
	if _, seen := l.first[tp]; !seen {
		l.first[tp] = offset
	}
}

// begin opens a transaction unless one is open; false: it could not, and
// the failure has been dealt with.
func (l *Loop) begin(ctx context.Context) bool {
	if l.open && l.producer != nil {
		return true
	}
	if l.twin != nil {
		return false // no producer to begin with until the verdict
	}
	h := l.producer
	if err := l.producerCall(h, "begin", func() error { return h.BeginTransaction() }); err != nil {
		l.onTxnError(ctx, "begin", err)
		return false
	}
	l.open, l.started = true, time.Now()
	l.clock, l.round, l.lastRound = time.Time{}, l.started, l.started
	l.assignsAtBegin = l.assigns
	if l.freeze != nil {
		l.freeze.reset()
	}
	l.txnFrom = h.produced
	l.traceBegin()
	return true
}

// applied counts a record whose outputs are written in the open
// transaction: its offset commits with it. (Records of a batch are
// applied in any order: the offset is past the furthest.)
func (l *Loop) applied(tp tpKey, offset int64, outputs int) {
	l.next[tp] = max(l.next[tp], offset+1)
	l.records++
	l.outputs += outputs
	l.obs.Consumed(1)
}

// handlerFailed deals with a handler that gave no outputs for rec: a
// record not due makes its partition wait; a shutdown leaves the record
// in its source. abort says any other error: the transaction must be
// aborted. (Apart from handle, so that a record that passes pays for
// none of it.)
func (l *Loop) handlerFailed(ctx context.Context, tp tpKey, rec *Record, err error) (abort bool) {
	var notDue *NotDueError
	if errors.As(err, &notDue) {
		l.wait(tp, rec.Offset, notDue.Until)
		return false
	}
	if ctx.Err() != nil {
		// Shutting down: the handler gave up on the record, which
		// stays in its source; what was handled before it commits.
		l.log.Info("handler interrupted by shutdown; the record stays in its source",
			"topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset)
		return false
	}
	l.log.Error("handler failed; aborting transaction, the record stays in its source",
		"topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "err", err)
	l.suspect(tp, err)
	return true
}

// produceAll writes rec's outputs in the open transaction. On a failure
// it says so and returns the error: the transaction must be aborted.
func (l *Loop) produceAll(tp tpKey, rec *Record, outs []Output) error {
	for i := range outs {
		if err := l.produce(&outs[i]); err != nil {
			l.log.Error("produce failed; aborting transaction, the record stays in its source",
				"topic", outs[i].Topic, "partition", outs[i].Partition, "source_offset", rec.Offset, "err", err)
			if kafkaerr.PartitionFault(err) {
				// The output itself cannot be written. (Other errors are
				// no partition's fault: _STATE says an earlier delivery
				// failed, and its report names the partition; a full
				// queue is the brokers being slow.)
				l.suspect(tp, err)
			}
			return err
		}
		l.wrote(tp, &outs[i])
	}
	return nil
}

// clocked notes that the coordinator may hear of the open transaction
// from now on (a produce or an offset send registers it there).
func (l *Loop) clocked() {
	if l.clock.IsZero() {
		l.clock = time.Now()
	}
}

// end commits the open transaction: send offsets, then commit. On failure it
// aborts or re-initialises the producer and rewinds, as the error says.
func (l *Loop) end(ctx context.Context, why string) {
	if !l.open {
		return
	}
	if l.consumer.AssignmentLost() {
		// The group has moved on: its coordinator would refuse the
		// offsets, and the partitions may be another member's now.
		l.abort(ctx, "assignment lost")
		return
	}
	start := time.Now()
	offsets := make([]kafka.TopicPartition, 0, len(l.next))
	for k, off := range l.next {
		offsets = append(offsets, k.at(off))
	}
	var err error
	h := l.producer
	l.clocked()
	if len(offsets) > 0 {
		var cgm *kafka.ConsumerGroupMetadata
		cgm, err = l.consumer.GetConsumerGroupMetadata()
		if err == nil {
			err = l.retry(ctx, "send offsets", func(c context.Context) error {
				return h.SendOffsetsToTransaction(c, offsets, cgm)
			})
		}
	}
	if err == nil {
		err = l.retry(ctx, "commit", func(c context.Context) error { return h.CommitTransaction(c) })
	}
	if err != nil {
		l.onTxnError(ctx, "commit ("+why+")", err)
		return
	}
	l.obs.Committed(l.records, l.outputs, time.Since(start))
	l.checkRefused(l.started)
	if tl, ok := l.handler.(TxnListener); ok {
		tl.OnCommit()
	}
	if l.log.Enabled(ctx, slog.LevelDebug) { // else its arguments are built for nothing
		l.log.Debug("transaction committed", "records", l.records, "partitions", len(offsets), "why", why)
	}
	l.traceEnd(TxnCommitted, len(offsets))
	l.unstall()
	l.deliveries.clear() // reports of transactions aborted before
	l.reset()
	l.backoff.Reset()
}
