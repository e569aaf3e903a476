package txn

// This file holds what the loop is: its settings and its state, and New.
// What it does is in loop.go.

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"go.opentelemetry.io/otel/trace"

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
	// metadataRefused: the brokers refused a commit's offset metadata as
	// too large once already, and the handler was told (MetadataRefuser).
	metadataRefused bool
	// freeze tells how long the process was frozen in the open
	// transaction (see zombie); nil outside Run.
	freeze  *freezeWatch
	records int
	outputs int
	next    map[tpKey]int64 // next offset to commit
	// handledTo is, per partition, the position its last commit stood
	// for (its next record), kept for a Floors handler: a record it hands
	// back lies below it, and must not take the commit back.
	handledTo map[tpKey]int64
	first     map[tpKey]int64 // first offset handled in this transaction
	assigned  map[tpKey]bool
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
	// lostSinceInit says the consumer lost its assignment (a session
	// that expired, a freeze) after the producer in use was
	// initialised: another instance may have held this
	// group.instance.id meanwhile and bumped the producer epoch, so a
	// fence later, even after the group gave the partitions back, asks
	// for the coordinator's verdict (see zombie).
	lostSinceInit bool

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
		next: map[tpKey]int64{}, first: map[tpKey]int64{}, assigned: map[tpKey]bool{}, handledTo: map[tpKey]int64{},
		paused: map[tpKey]time.Time{}, stalls: map[tpKey]*stall{}, revokedStalls: map[tpKey]*stall{}, suspects: map[tpKey]error{},
		outSrc: map[tpKey][]tpKey{}, room: make(chan struct{}, 1), reportWait: 250 * time.Millisecond, backoff: retry.Schedule(50*time.Millisecond, 5*time.Second),
	}
}
