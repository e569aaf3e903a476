package config

// Names of relay's environment variables. They are part of relay's interface:
// the README lists them from Vars, and acceptance runs set them by name.
const (
	EnvSourceTopics     = "RELAY_SOURCE_TOPICS"
	EnvGroupID          = "RELAY_GROUP_ID"
	EnvTransactionalID  = "RELAY_TRANSACTIONAL_ID"
	EnvCommitInterval   = "RELAY_COMMIT_INTERVAL"
	EnvMaxRecordsPerTxn = "RELAY_MAX_RECORDS_PER_TXN"
	EnvShutdownTimeout  = "RELAY_SHUTDOWN_TIMEOUT"
	EnvOutputTopic      = "RELAY_OUTPUT_TOPIC"
	EnvOpTimeout        = "RELAY_OP_TIMEOUT"
	EnvHTTPAddr         = "RELAY_HTTP_ADDR"
	EnvLogLevel         = "RELAY_LOG_LEVEL"
	EnvLogFormat        = "RELAY_LOG_FORMAT"

	// KafkaPrefix marks variables passed through to librdkafka:
	// RELAY_KAFKA_BOOTSTRAP_SERVERS becomes bootstrap.servers.
	KafkaPrefix = "RELAY_KAFKA_"
	// EnvBootstrapServers is the one passthrough relay requires.
	EnvBootstrapServers = KafkaPrefix + "BOOTSTRAP_SERVERS"
	// EnvAutoOffsetReset has a relay default (earliest) that differs from
	// librdkafka's (latest): a new group must never silently skip records
	// already in its topics.
	EnvAutoOffsetReset = KafkaPrefix + "AUTO_OFFSET_RESET"
	// EnvTransactionTimeout also has a relay default, see Vars.
	EnvTransactionTimeout = KafkaPrefix + "TRANSACTION_TIMEOUT_MS"
)

// Var documents one environment variable.
type Var struct {
	Name     string
	Default  string // "" with Required=false means unset/disabled
	Required bool
	Help     string
}

// Vars lists relay's own variables in the order the README shows them.
var Vars = []Var{
	{Name: EnvSourceTopics, Required: true, Help: "comma-separated source topics"},
	{Name: EnvTransactionalID, Required: true, Help: "transactional.id of this instance: unique per instance, stable across its restarts (e.g. relay-$(POD_NAME) in a StatefulSet)"},
	{Name: EnvBootstrapServers, Required: true, Help: "Kafka bootstrap servers (librdkafka bootstrap.servers)"},
	{Name: EnvGroupID, Default: "relay", Help: "consumer group"},
	{Name: EnvOutputTopic, Default: "{topic}.valid", Help: "output topic template; {topic} is the source topic. Records keep their source partition number"},
	{Name: EnvCommitInterval, Default: "100ms", Help: "longest a transaction stays open; must be shorter than transaction.timeout.ms and max.poll.interval.ms"},
	{Name: EnvMaxRecordsPerTxn, Default: "5000", Help: "source records per transaction at most (1..1000000)"},
	{Name: EnvShutdownTimeout, Default: "30s", Help: "bound on a graceful stop (finish or abort the open transaction, leave the group)"},
	{Name: EnvOpTimeout, Default: "5s", Help: "deadline of each blocking Kafka call (init, send offsets, commit, abort, committed-offset fetch); must be shorter than transaction.timeout.ms"},
	{Name: EnvHTTPAddr, Default: "127.0.0.1:9464", Help: "listen address of /metrics, /livez, /readyz; empty disables the endpoint"},
	{Name: EnvLogLevel, Default: "info", Help: "debug, info, warn or error"},
	{Name: EnvLogFormat, Default: "json", Help: "json or text (structured logs on stderr)"},
	{Name: EnvAutoOffsetReset, Default: "earliest", Help: "where a group with no committed offset starts; relay's default is earliest, not librdkafka's latest"},
	{Name: EnvTransactionTimeout, Default: "10000", Help: "transaction.timeout.ms; relay's default is 10s, not librdkafka's 60s: the transaction of an instance that dies for good blocks read_committed readers of its partitions until the broker aborts it after this long"},
}

// managedProps are librdkafka properties relay sets itself; overriding them
// through RELAY_KAFKA_* would break the exactly-once contract.
var managedProps = map[string]string{
	"group.id":                 "set " + EnvGroupID + " instead",
	"transactional.id":         "set " + EnvTransactionalID + " instead",
	"enable.auto.commit":       "offsets are committed only inside transactions",
	"enable.auto.offset.store": "offsets are committed only inside transactions",
	"isolation.level":          "relay reads read_committed so aborted records are never relayed",
	"enable.idempotence":       "transactions require the idempotent producer",
	"enable.partition.eof":     "relay does not use partition EOF events",
	"go.delivery.reports":      "relay turns per-message reports off; the commit reports failed deliveries",
}
