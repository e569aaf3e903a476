package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
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

	SchemaRegistryURL    string // "" = no admission
	SchemaRegistryUser   string
	SchemaRegistrySecret string
	SchemaSubject        string
	SchemaAccept         string // parsed by the schema package
	SchemaReaderVersion  int    // 0 = highest accepted
	SchemaTimeout        time.Duration
	SchemaCacheSize      int
	RulesFile            string
	HookURL              string
	HookTimeout          time.Duration
	RedactPattern        *regexp.Regexp
	ErrorMessageMax      int
	CompatSpring         bool
	CompatConnect        bool
	QuarantineObjective  time.Duration
	QuarantineRetention  time.Duration
	OutputRetention      time.Duration

	// raw holds every relay variable's effective text, for Effective.
	raw map[string]string

	// Kafka holds the librdkafka properties from RELAY_KAFKA_*, with relay's
	// defaults applied (auto.offset.reset=earliest).
	Kafka map[string]string
	// kafkaVar maps a librdkafka property back to the variable that set it,
	// so errors reported by librdkafka can name the variable.
	kafkaVar map[string]string

	// TransactionTimeout and MaxPollInterval are read from the passthrough
	// (or derived, or librdkafka's defaults) because relay's own bounds
	// depend on them.
	TransactionTimeout time.Duration
	MaxPollInterval    time.Duration
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
// budget (see deriveTransactionTimeout): at least a minute, so a transaction
// open during a routine broker restart (about 15s away) is not aborted under
// relay, and never more than the broker's default transaction.max.timeout.ms,
// which the broker would refuse.
const (
	defaultTransactionTimeout   = 60 * time.Second
	transactionRideOut          = 30 * time.Second
	brokerMaxTransactionTimeout = 900 * time.Second
	defaultMaxPollInterval      = 300 * time.Second
	maxRecordsPerTxnLimit       = 1_000_000
)

var topicName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// Load reads the configuration through lookup (os.LookupEnv in production)
// and environ (os.Environ, for the RELAY_KAFKA_* passthrough). It returns
// every problem found, each as an *Error naming its variable.
func Load(lookup func(string) (string, bool), environ []string) (*Config, error) {
	p := parser{lookup: lookup, seen: map[string]string{}}
	c := &Config{
		SourceTopics:     p.list(EnvSourceTopics),
		GroupID:          p.raw(EnvGroupID),
		TransactionalID:  p.raw(EnvTransactionalID),
		OutputTopic:      p.raw(EnvOutputTopic),
		CommitInterval:   p.duration(EnvCommitInterval),
		MaxRecordsPerTxn: p.intRange(EnvMaxRecordsPerTxn, 1, maxRecordsPerTxnLimit),
		ShutdownTimeout:  p.duration(EnvShutdownTimeout),
		OpTimeout:        p.duration(EnvOpTimeout),
		HTTPAddr:         p.raw(EnvHTTPAddr),
		LogFormat:        p.enum(EnvLogFormat, "json", "text"),

		QuarantineTopic:      p.raw(EnvQuarantineTopic),
		RejectedTopic:        p.raw(EnvRejectedTopic),
		ReplayTopic:          p.raw(EnvReplayTopic),
		RetryTopic:           p.raw(EnvRetryTopic),
		StateTopic:           p.raw(EnvStateTopic),
		RetryTiers:           p.tiers(EnvRetryTiers),
		RetryMaxAttempts:     p.intRange(EnvRetryMaxAttempts, 1, 100),
		RetryMaxElapsed:      p.duration(EnvRetryMaxElapsed),
		BlockingAttempts:     p.intRange(EnvBlockingAttempts, 0, 10),
		BlockingBackoff:      p.duration(EnvBlockingBackoff),
		UnclassifiedAttempts: p.intRange(EnvUnclassifiedAttempts, 1, 100),
		Ordering:             p.enum(EnvOrdering, "unordered", "key", "partition"),
		OrderingHold:         p.enum(EnvOrderingOnQuarantine, "release", "hold") == "hold",
		SchemaRegistryURL:    p.raw(EnvSchemaRegistryURL),
		SchemaRegistryUser:   p.raw(EnvSchemaRegistryUser),
		SchemaRegistrySecret: p.raw(EnvSchemaRegistrySecret),
		SchemaSubject:        p.raw(EnvSchemaSubject),
		SchemaAccept:         p.raw(EnvSchemaAccept),
		SchemaTimeout:        p.duration(EnvSchemaTimeout),
		SchemaCacheSize:      p.intRange(EnvSchemaCacheSize, 1, 1_000_000),
		RulesFile:            p.raw(EnvRulesFile),
		HookURL:              p.raw(EnvHookURL),
		HookTimeout:          p.duration(EnvHookTimeout),
		RedactPattern:        p.regexp(EnvRedactPattern),
		ErrorMessageMax:      p.intRange(EnvErrorMessageMax, 64, 4096),
		QuarantineObjective:  p.duration(EnvQuarantineObjective),
		QuarantineRetention:  p.duration(EnvQuarantineRetention),
		OutputRetention:      p.duration(EnvOutputRetention),
	}
	if v := p.raw(EnvSchemaReaderVersion); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			p.fail(EnvSchemaReaderVersion, "%q is not a schema version (a whole number from 1)", v)
		}
		c.SchemaReaderVersion = n
	}
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
	c.LogLevel = p.level(EnvLogLevel)
	c.Kafka, c.kafkaVar = p.kafka(environ)
	c.MaxPollInterval = p.kafkaMillis(c, "max.poll.interval.ms", defaultMaxPollInterval)
	if _, set := c.Kafka["transaction.timeout.ms"]; set {
		c.TransactionTimeout = p.kafkaMillis(c, "transaction.timeout.ms", defaultTransactionTimeout)
	} else {
		c.TransactionTimeout, c.txnTimeoutDerived = c.deriveTransactionTimeout(), true
		c.Kafka["transaction.timeout.ms"] = strconv.FormatInt(c.TransactionTimeout.Milliseconds(), 10)
	}
	p.validate(c)
	p.validateFailures(c)
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	c.raw = p.seen
	return c, nil
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

type parser struct {
	lookup func(string) (string, bool)
	errs   []error
	seen   map[string]string // effective text of each variable read
}

func (p *parser) fail(name, format string, args ...any) {
	p.errs = append(p.errs, &Error{Var: name, Problem: fmt.Sprintf(format, args...)})
}

// raw returns the variable's value, or its documented default when unset.
// A variable set to the empty string counts as set: RELAY_HTTP_ADDR= turns
// the endpoint off.
func (p *parser) raw(name string) string {
	if v, ok := p.lookup(name); ok {
		p.seen[name] = strings.TrimSpace(v)
		return strings.TrimSpace(v)
	}
	for _, v := range Vars {
		if v.Name == name {
			if v.Required {
				p.fail(name, "required but not set")
			}
			p.seen[name] = v.Default
			return v.Default
		}
	}
	return ""
}

func (p *parser) list(name string) []string {
	var out []string
	for _, s := range strings.Split(p.raw(name), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (p *parser) duration(name string) time.Duration {
	s := p.raw(name)
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		p.fail(name, "%q is not a duration (examples: 100ms, 2s, 1m)", s)
	case d <= 0:
		p.fail(name, "%q must be positive", s)
	}
	return d
}

func (p *parser) intRange(name string, lo, hi int) int {
	s := p.raw(name)
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		p.fail(name, "%q is not a whole number from %d to %d", s, lo, hi)
	}
	return n
}

// tiers reads a list of tier delays; empty means no tiers.
func (p *parser) tiers(name string) []Tier {
	var out []Tier
	for _, s := range p.list(name) {
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			p.fail(name, "%q is not a duration (example: 30s,5m)", s)
		case d < time.Second:
			p.fail(name, "tier delay %q is under 1s: use the blocking retry for that", s)
		case len(out) > 0 && d < out[len(out)-1].Delay:
			p.fail(name, "tier delays must not decrease: %s after %s", s, out[len(out)-1].Label)
		}
		out = append(out, Tier{Delay: d, Label: s})
	}
	if len(out) > 10 {
		p.fail(name, "%d tiers; at most 10", len(out))
	}
	return out
}

func (p *parser) regexp(name string) *regexp.Regexp {
	s := p.raw(name)
	if s == "" {
		return nil
	}
	re, err := regexp.Compile(s)
	if err != nil {
		p.fail(name, "not a valid RE2 regular expression: %v", err)
	}
	return re
}

func (p *parser) enum(name string, allowed ...string) string {
	s := strings.ToLower(p.raw(name))
	for _, a := range allowed {
		if s == a {
			return s
		}
	}
	p.fail(name, "%q is not one of %s", s, strings.Join(allowed, ", "))
	return allowed[0]
}

func (p *parser) level(name string) slog.Level {
	var l slog.Level
	s := p.enum(name, "debug", "info", "warn", "error")
	_ = l.UnmarshalText([]byte(s)) // s is one of the four names slog knows
	return l
}

// kafka collects RELAY_KAFKA_* into librdkafka properties.
func (p *parser) kafka(environ []string) (props, vars map[string]string) {
	props, vars = map[string]string{}, map[string]string{}
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, KafkaPrefix) || len(name) == len(KafkaPrefix) {
			continue
		}
		prop := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, KafkaPrefix), "_", "."))
		if why, managed := managedProps[prop]; managed {
			p.fail(name, "%s is managed by relay: %s", prop, why)
			continue
		}
		props[prop], vars[prop] = strings.TrimSpace(val), name
	}
	if _, ok := props["auto.offset.reset"]; !ok {
		props["auto.offset.reset"] = defaultOf(EnvAutoOffsetReset)
	}
	if _, ok := props["topic.metadata.refresh.interval.ms"]; !ok {
		props["topic.metadata.refresh.interval.ms"] = defaultOf(EnvMetadataRefresh)
	}
	if strings.TrimSpace(props["bootstrap.servers"]) == "" {
		p.fail(EnvBootstrapServers, "required but not set")
	}
	return props, vars
}

func (p *parser) kafkaMillis(c *Config, prop string, def time.Duration) time.Duration {
	s, ok := c.Kafka[prop]
	if !ok {
		return def
	}
	ms, err := strconv.Atoi(s)
	if err != nil || ms <= 0 {
		p.fail(c.VarForProperty(prop), "%q is not a positive number of milliseconds", s)
		return def
	}
	return time.Duration(ms) * time.Millisecond
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

// secretProp reports whether a librdkafka property holds a secret.
func secretProp(prop string) bool {
	for _, s := range []string{"password", "secret", "jaas", "token", "ssl.key", "oauthbearer.config", "credential", ".pem"} {
		if strings.Contains(prop, s) {
			return true
		}
	}
	return false
}

// secretVars are relay variables whose values relay config masks.
var secretVars = map[string]bool{EnvSchemaRegistrySecret: true}

// Effective lists the configuration as NAME=value lines, secrets masked, in
// the order of Vars and then the passthrough properties sorted by name.
func (c *Config) Effective() []string {
	var out []string
	for _, v := range Vars {
		if strings.HasPrefix(v.Name, KafkaPrefix) {
			continue
		}
		val := c.raw[v.Name]
		switch {
		case v.Name == EnvSchemaReaderVersion && val == "" && c.SchemaReaderVersion > 0:
			val = strconv.Itoa(c.SchemaReaderVersion) // derived from the accepted versions
		case secretVars[v.Name] && val != "":
			val = "****"
		case v.Name == EnvSchemaRegistryURL || v.Name == EnvHookURL:
			val = redactURL(val)
		}
		out = append(out, v.Name+"="+val)
	}
	props := make([]string, 0, len(c.Kafka))
	for p := range c.Kafka {
		props = append(props, p)
	}
	sort.Strings(props)
	for _, p := range props {
		val := c.Kafka[p]
		if secretProp(p) {
			val = "****"
		}
		out = append(out, c.VarForProperty(p)+"="+val)
	}
	return out
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
		if strings.HasPrefix(name, "RELAY_") && !strings.HasPrefix(name, KafkaPrefix) && !strings.HasPrefix(name, "RELAY_STACK_") && !known[name] {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
