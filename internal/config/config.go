package config

import (
	"errors"
	"log/slog"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"relay/internal/secret"
)

// Config is relay's validated configuration. Zero values are never used:
// Load fills every field from its variable or its documented default.
type Config struct {
	SourceTopics     []string
	GroupID          string
	TransactionalID  string
	OutputTopic      string // template with {topic}
	CommitInterval   time.Duration
	MaxRecordsPerTxn int
	ShutdownTimeout  time.Duration
	OpTimeout        time.Duration
	HTTPAddr         string // "" disables the HTTP endpoint
	LogLevel         slog.Level
	LogFormat        string

	QuarantineTopic string // templates with {topic}
	RejectedTopic   string
	ReplayTopic     string
	RetryTopic      string // also {delay}
	StateTopic      string // template with {group}

	RetryTiers           []Tier
	RetryMaxAttempts     int
	RetryMaxElapsed      time.Duration
	BlockingAttempts     int
	BlockingBackoff      time.Duration
	UnclassifiedAttempts int
	Ordering             string
	OrderingHold         bool
	// KeyPark bounds the followers key ordering parks in memory.
	KeyParkMaxRecords int
	// KeyParkDefault: RELAY_KEY_PARK_MAX_RECORDS is not set (its default
	// parks, where the source allows it).
	KeyParkDefault  bool
	KeyParkMaxBytes int
	KeyParkMaxWait  time.Duration
	KeyParkMaxAge   time.Duration

	SchemaRegistryURL    string // "" = no admission
	SchemaRegistryUser   string
	SchemaRegistrySecret *secret.Value // nil: none
	SchemaRegistryTLS    secret.TLSFiles
	// SchemaRegistryOAuth, when not nil, gets the registry's bearer
	// tokens by the client credentials grant.
	SchemaRegistryOAuth *secret.ClientCredentials
	SchemaSubject       string
	SchemaAccept        string // parsed by the schema package
	SchemaReaderVersion int    // 0 = highest accepted
	SchemaTimeout       time.Duration
	SchemaCacheSize     int
	RulesFile           string
	HookURL             string
	// AllowInsecureHTTP lets credentials go over plain http:// beyond
	// loopback (RELAY_ALLOW_INSECURE_HTTP; logged at start).
	AllowInsecureHTTP bool
	HookTimeout       time.Duration
	HookConcurrency   int
	HookBatch         int
	HookToken         *secret.Value // nil: none
	HookSigningSecret *secret.Value // nil: none
	HookTLS           secret.TLSFiles
	// TraceURL links a trace id to a tracing UI ({traceId}); "" none.
	TraceURL            string
	RedactPattern       *regexp.Regexp
	ErrorMessageMax     int
	CompatSpring        bool
	CompatConnect       bool
	QuarantineObjective time.Duration
	QuarantineRetention time.Duration
	OutputRetention     time.Duration
	// RequireDurable: refuse to start on a topic that a broker's loss
	// could lose records of (RELAY_TOPICS_DURABILITY=require).
	RequireDurable bool

	// Owners and Thresholds are RELAY_QUARANTINE_OWNER and
	// RELAY_QUARANTINE_ALERT_THRESHOLD by source topic ("" for them all).
	Owners     map[string]string
	Thresholds map[string]int
	// WatchMetrics are relay instances' /metrics URLs a replay watches.
	WatchMetrics []string
	Console      Console

	// raw holds every relay variable's effective text, for Effective.
	raw map[string]string
	// set names the relay variables the environment sets (the others
	// are at their default).
	set map[string]bool

	// Kafka holds the librdkafka properties from RELAY_KAFKA_*, with relay's
	// defaults applied (auto.offset.reset=earliest).
	Kafka map[string]string
	// kafkaVar maps a librdkafka property back to the variable that set it,
	// so errors reported by librdkafka can name the variable.
	kafkaVar map[string]string
	// KafkaSecrets are the secret properties read from files
	// (RELAY_KAFKA_SASL_PASSWORD_FILE and the like), by property: clients
	// take their current value when they are built.
	KafkaSecrets map[string]*secret.Value

	// TransactionTimeout and MaxPollInterval are read from the passthrough
	// (or derived, or librdkafka's defaults) because relay's own bounds
	// depend on them.
	TransactionTimeout time.Duration
	// OffsetMetadataMax is the brokers' offset.metadata.max.bytes as
	// relay read it at start (0: not read), which bounds a parked set in
	// a commit's metadata.
	OffsetMetadataMax int
	MaxPollInterval   time.Duration
	// SessionTimeout is session.timeout.ms: a loop stalled longer than
	// this has lost its group membership.
	SessionTimeout time.Duration
	// StaticMembership: the loop's consumer has a group.instance.id
	// (RELAY_STATIC_MEMBERSHIP), GroupInstanceID, which the group
	// coordinator lets only one live member hold (KIP-345).
	StaticMembership bool
	GroupInstanceID  string
	// txnTimeoutDerived: the user left transaction.timeout.ms unset, so
	// relay may still lower it to what the broker allows.
	txnTimeoutDerived bool
}

// Tier is one non-blocking retry tier.
type Tier struct {
	Delay time.Duration
	Label string // the delay as written, for {delay} in topic names
}

// Error is one bad variable. Load returns all of them joined.
type Error struct {
	Var     string
	Problem string
}

func (e *Error) Error() string { return e.Var + ": " + e.Problem }

// Defaults that relay's validation depends on.
//
// transaction.timeout.ms, when unset, is derived from the transaction
// budget (see deriveTransactionTimeout): the budget plus transactionRideOut,
// so a transaction open during a routine broker restart (about 15s away) is
// not aborted under relay, and never more than the broker's default
// transaction.max.timeout.ms, which the broker would refuse.
const (
	transactionRideOut          = 30 * time.Second
	brokerMaxTransactionTimeout = 900 * time.Second
	defaultMaxPollInterval      = 300 * time.Second
	defaultSessionTimeout       = 45 * time.Second
	maxRecordsPerTxnLimit       = 1_000_000
	maxHookConcurrency          = 1024
)

var topicName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// Load reads the configuration through lookup (os.LookupEnv in production)
// and environ (os.Environ, for the RELAY_KAFKA_* passthrough). It returns
// every problem found, each as an *Error naming its variable.
func Load(lookup func(string) (string, bool), environ []string) (*Config, error) {
	p := parser{lookup: lookup, seen: map[string]string{}, set: map[string]bool{}}
	c := &Config{}
	p.readLoop(c)
	p.readFailures(c)
	p.readChecks(c)
	p.readConsole(c)
	c.LogLevel = p.level(EnvLogLevel)
	c.Kafka, c.kafkaVar, c.KafkaSecrets = p.kafka(environ)
	c.MaxPollInterval = p.kafkaMillis(c, "max.poll.interval.ms", defaultMaxPollInterval)
	c.SessionTimeout = p.kafkaMillis(c, "session.timeout.ms", defaultSessionTimeout)
	p.readMembership(c)
	if _, set := c.Kafka["transaction.timeout.ms"]; set {
		c.TransactionTimeout = p.kafkaMillis(c, "transaction.timeout.ms", c.deriveTransactionTimeout()) // the default only stands in for a bad value, which fails
	} else {
		c.TransactionTimeout, c.txnTimeoutDerived = c.deriveTransactionTimeout(), true
		c.Kafka["transaction.timeout.ms"] = strconv.FormatInt(c.TransactionTimeout.Milliseconds(), 10)
	}
	p.validate(c)
	p.validateFailures(c)
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	c.raw, c.set = p.seen, p.set
	return c, nil
}

// readLoop reads the transactional loop's variables.
func (p *parser) readLoop(c *Config) {
	c.SourceTopics = p.list(EnvSourceTopics)
	c.GroupID = p.raw(EnvGroupID)
	c.TransactionalID = p.raw(EnvTransactionalID)
	c.OutputTopic = p.raw(EnvOutputTopic)
	c.CommitInterval = p.duration(EnvCommitInterval)
	c.MaxRecordsPerTxn = p.intRange(EnvMaxRecordsPerTxn, 1, maxRecordsPerTxnLimit)
	c.ShutdownTimeout = p.duration(EnvShutdownTimeout)
	c.OpTimeout = p.duration(EnvOpTimeout)
	c.HTTPAddr = p.raw(EnvHTTPAddr)
	c.LogFormat = p.enum(EnvLogFormat, "json", "text")
}

// readMembership reads RELAY_STATIC_MEMBERSHIP and the group.instance.id
// it implies: the passthrough's, or the transactional id, unique per
// instance and stable across its restarts as an instance id must be.
func (p *parser) readMembership(c *Config) {
	c.StaticMembership = p.enum(EnvStaticMembership, "true", "false") == "true"
	own, set := c.Kafka["group.instance.id"]
	switch {
	case set && !c.StaticMembership:
		p.fail(EnvStaticMembership, "is false, and %s sets group.instance.id: a static member; unset one of them", c.VarForProperty("group.instance.id"))
	case set:
		c.GroupInstanceID = own
	case c.StaticMembership:
		c.GroupInstanceID = c.TransactionalID
	}
}

// readFailures reads the failure state machine's variables: topics, retry
// budget, ordering, envelope and quarantine.
func (p *parser) readFailures(c *Config) {
	c.QuarantineTopic = p.raw(EnvQuarantineTopic)
	c.RejectedTopic = p.raw(EnvRejectedTopic)
	c.ReplayTopic = p.raw(EnvReplayTopic)
	c.RetryTopic = p.raw(EnvRetryTopic)
	c.StateTopic = p.raw(EnvStateTopic)
	c.RetryTiers = p.tiers(EnvRetryTiers)
	c.RetryMaxAttempts = p.intRange(EnvRetryMaxAttempts, 1, 100)
	c.RetryMaxElapsed = p.duration(EnvRetryMaxElapsed)
	c.BlockingAttempts = p.intRange(EnvBlockingAttempts, 0, 10)
	c.BlockingBackoff = p.duration(EnvBlockingBackoff)
	c.UnclassifiedAttempts = p.intRange(EnvUnclassifiedAttempts, 1, 100)
	c.Ordering = p.enum(EnvOrdering, "unordered", "key", "partition")
	c.OrderingHold = p.enum(EnvOrderingOnQuarantine, "release", "hold") == "hold"
	c.KeyParkMaxRecords = p.intRange(EnvKeyParkMaxRecords, 0, 1_000_000)
	c.KeyParkDefault = !p.set[EnvKeyParkMaxRecords]
	c.KeyParkMaxBytes = p.intRange(EnvKeyParkMaxBytes, 1<<20, 1<<34)
	c.KeyParkMaxWait = p.duration(EnvKeyParkMaxWait)
	c.KeyParkMaxAge = p.duration(EnvKeyParkMaxAge)
	c.QuarantineObjective = p.duration(EnvQuarantineObjective)
	c.QuarantineRetention = p.duration(EnvQuarantineRetention)
	c.OutputRetention = p.duration(EnvOutputRetention)
	c.RequireDurable = p.enum(EnvTopicsDurability, "warn", "require") == "require"
	c.RedactPattern = p.regexp(EnvRedactPattern)
	c.ErrorMessageMax = p.intRange(EnvErrorMessageMax, 64, 4096)
	for _, h := range p.list(EnvCompatHeaders) {
		switch strings.ToLower(h) {
		case "spring":
			c.CompatSpring = true
		case "connect":
			c.CompatConnect = true
		default:
			p.fail(EnvCompatHeaders, "%q is not spring or connect", h)
		}
	}
}

// readChecks reads the variables of the checks a record goes through:
// the schema registry, the rules and the hook.
func (p *parser) readChecks(c *Config) {
	c.SchemaRegistryURL = p.raw(EnvSchemaRegistryURL)
	c.SchemaRegistryUser = p.raw(EnvSchemaRegistryUser)
	c.SchemaRegistrySecret = p.secret(EnvSchemaRegistrySecret)
	c.SchemaRegistryTLS = p.tlsFiles(EnvSchemaRegistryCA, EnvSchemaRegistryCert, EnvSchemaRegistryKey)
	c.SchemaRegistryOAuth = p.clientCredentials(c)
	c.SchemaSubject = p.raw(EnvSchemaSubject)
	c.SchemaAccept = p.raw(EnvSchemaAccept)
	c.SchemaTimeout = p.duration(EnvSchemaTimeout)
	c.SchemaCacheSize = p.intRange(EnvSchemaCacheSize, 1, 1_000_000)
	c.RulesFile = p.raw(EnvRulesFile)
	c.HookURL = p.raw(EnvHookURL)
	c.HookTimeout = p.duration(EnvHookTimeout)
	c.HookConcurrency = p.intRange(EnvHookConcurrency, 1, maxHookConcurrency)
	c.HookBatch = p.intRange(EnvHookBatch, 1, maxHookConcurrency)
	c.HookToken = p.secret(EnvHookToken)
	c.HookSigningSecret = p.secret(EnvHookSigningSecret)
	c.HookTLS = p.tlsFiles(EnvHookCA, EnvHookCert, EnvHookKey)
	c.TraceURL = p.raw(EnvTraceURL)
	checkTraceURL(p, c.TraceURL)
	c.AllowInsecureHTTP = p.enum(EnvAllowInsecureHTTP, "false", "true") == "true"
	if !c.AllowInsecureHTTP {
		for _, u := range c.InsecureCredentialURLs() {
			p.fail(u.Var, "%s sends %s over plain http:// to a host other than loopback, where anyone on the way reads it: use https, or set %s=true to accept that",
				secret.MaskURL(u.URL), u.What, EnvAllowInsecureHTTP)
		}
	}
	if v := p.raw(EnvSchemaReaderVersion); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			p.fail(EnvSchemaReaderVersion, "%q is not a schema version (a whole number from 1)", v)
		}
		c.SchemaReaderVersion = n
	}
}

// VarForProperty names the variable that set a librdkafka property, for
// error messages from librdkafka's own validation.
func (c *Config) VarForProperty(prop string) string {
	if v, ok := c.kafkaVar[prop]; ok {
		return v
	}
	for alias, canonical := range propAliases {
		if v, ok := c.kafkaVar[alias]; ok && canonical == prop {
			return v
		}
	}
	return KafkaPrefix + strings.ToUpper(strings.ReplaceAll(prop, ".", "_"))
}

// propAliases maps librdkafka's alias properties to the names its error
// messages use.
var propAliases = map[string]string{
	"linger.ms":           "queue.buffering.max.ms",
	"retries":             "message.send.max.retries",
	"acks":                "request.required.acks",
	"compression.type":    "compression.codec",
	"delivery.timeout.ms": "message.timeout.ms",
}

// validate checks the rules that span several variables.
func (p *parser) validate(c *Config) {
	if len(c.SourceTopics) == 0 {
		if _, set := p.lookup(EnvSourceTopics); set {
			p.fail(EnvSourceTopics, "names no topic")
		}
	}
	sources := map[string]bool{}
	for _, t := range c.SourceTopics {
		if !topicName.MatchString(t) {
			p.fail(EnvSourceTopics, "%q is not a valid topic name (letters, digits, '.', '_', '-'; at most 249)", t)
		}
		sources[t] = true
	}
	if !strings.Contains(c.OutputTopic, "{topic}") && len(c.SourceTopics) > 1 {
		// One fixed output for several sources would merge partitions of
		// different topics under one partition number.
		p.fail(EnvOutputTopic, "%q has no {topic} but %s names %d topics", c.OutputTopic, EnvSourceTopics, len(c.SourceTopics))
	}
	for _, t := range c.SourceTopics {
		out := c.Derived(t).Output
		switch {
		case !topicName.MatchString(out):
			p.fail(EnvOutputTopic, "gives %q for source %q, not a valid topic name", out, t)
		case sources[out]:
			p.fail(EnvOutputTopic, "gives %q for source %q, which is itself a source topic: relay would consume its own output", out, t)
		}
	}
	if c.GroupID == "" {
		p.fail(EnvGroupID, "must not be empty")
	}
	if _, set := p.lookup(EnvTransactionalID); set && c.TransactionalID == "" {
		p.fail(EnvTransactionalID, "must not be empty")
	}
	if strings.ContainsAny(c.TransactionalID, " \t") {
		p.fail(EnvTransactionalID, "%q contains white space", c.TransactionalID)
	}
	if c.HTTPAddr != "" {
		if _, port, err := net.SplitHostPort(c.HTTPAddr); err != nil {
			p.fail(EnvHTTPAddr, "%q is not host:port", c.HTTPAddr)
		} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			p.fail(EnvHTTPAddr, "%q has no valid port", c.HTTPAddr)
		}
	}
	switch c.Kafka["auto.offset.reset"] {
	case "earliest", "smallest", "beginning", "latest", "largest", "end", "error":
	default:
		p.fail(c.VarForProperty("auto.offset.reset"), "%q is not one of earliest, latest, error", c.Kafka["auto.offset.reset"])
	}
	// A transaction must be able to end (commit interval plus one commit
	// call) before the broker aborts it, and before the group evicts us.
	if c.CommitInterval > 0 && c.CommitInterval+c.OpTimeout >= c.TransactionTimeout {
		p.fail(EnvCommitInterval, "%s plus %s (%s) must be shorter than transaction.timeout.ms (%s, %s)",
			c.CommitInterval, EnvOpTimeout, c.OpTimeout, c.TransactionTimeout, c.VarForProperty("transaction.timeout.ms"))
	}
	if c.CommitInterval > 0 && c.CommitInterval+c.OpTimeout >= c.MaxPollInterval {
		p.fail(EnvCommitInterval, "%s plus %s (%s) must be shorter than max.poll.interval.ms (%s, %s)",
			c.CommitInterval, EnvOpTimeout, c.OpTimeout, c.MaxPollInterval, c.VarForProperty("max.poll.interval.ms"))
	}
}

// Unknown lists RELAY_* variables in environ that relay does not know, so a
// typo is reported instead of silently ignored.
func Unknown(environ []string) []string {
	known := map[string]bool{}
	for _, v := range Vars {
		known[v.Name] = true
	}
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		known := known[name] || (strings.HasSuffix(name, secret.FileSuffix) && secretVar(strings.TrimSuffix(name, secret.FileSuffix)))
		if strings.HasPrefix(name, "RELAY_") && !strings.HasPrefix(name, KafkaPrefix) && !strings.HasPrefix(name, "RELAY_STACK_") && !known {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// ForOperators is lookup for the operator commands (topics, quarantine,
// replay): they run with the daemon's environment or without its instance
// identity, for they need no transactional id of their own.
func ForOperators(lookup func(string) (string, bool)) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := lookup(name)
		if name == EnvTransactionalID && (!ok || v == "") {
			return "relay-cli", true
		}
		return v, ok
	}
}
