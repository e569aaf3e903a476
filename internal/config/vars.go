package config

import (
	"fmt"
	"slices"
	"strings"
)

// Names of relay's environment variables. They are part of relay's interface:
// docs/REFERENCE.md lists them from Vars, and acceptance runs set them by name.
const (
	EnvSourceTopics     = "RELAY_SOURCE_TOPICS"
	EnvGroupID          = "RELAY_GROUP_ID"
	EnvTransactionalID  = "RELAY_TRANSACTIONAL_ID"
	EnvStaticMembership = "RELAY_STATIC_MEMBERSHIP"
	EnvCommitInterval   = "RELAY_COMMIT_INTERVAL"
	EnvMaxRecordsPerTxn = "RELAY_MAX_RECORDS_PER_TXN"
	EnvShutdownTimeout  = "RELAY_SHUTDOWN_TIMEOUT"
	EnvOutputTopic      = "RELAY_OUTPUT_TOPIC"
	EnvOpTimeout        = "RELAY_OP_TIMEOUT"
	EnvHTTPAddr         = "RELAY_HTTP_ADDR"
	EnvLogLevel         = "RELAY_LOG_LEVEL"
	EnvLogFormat        = "RELAY_LOG_FORMAT"

	EnvQuarantineTopic = "RELAY_QUARANTINE_TOPIC"
	EnvRejectedTopic   = "RELAY_REJECTED_TOPIC"
	EnvReplayTopic     = "RELAY_REPLAY_TOPIC"
	EnvRetryTopic      = "RELAY_RETRY_TOPIC"
	EnvStateTopic      = "RELAY_STATE_TOPIC"

	EnvRetryTiers           = "RELAY_RETRY_TIERS"
	EnvRetryMaxAttempts     = "RELAY_RETRY_MAX_ATTEMPTS"
	EnvRetryMaxElapsed      = "RELAY_RETRY_MAX_ELAPSED"
	EnvBlockingAttempts     = "RELAY_BLOCKING_ATTEMPTS"
	EnvBlockingBackoff      = "RELAY_BLOCKING_BACKOFF"
	EnvUnclassifiedAttempts = "RELAY_UNCLASSIFIED_MAX_ATTEMPTS"
	EnvOrdering             = "RELAY_ORDERING"
	EnvOrderingOnQuarantine = "RELAY_ORDERING_ON_QUARANTINE"
	EnvKeyParkMaxRecords    = "RELAY_KEY_PARK_MAX_RECORDS"
	EnvKeyParkMaxBytes      = "RELAY_KEY_PARK_MAX_BYTES"
	EnvKeyParkMaxWait       = "RELAY_KEY_PARK_MAX_WAIT"
	EnvKeyParkMaxAge        = "RELAY_KEY_PARK_MAX_AGE"
	EnvSchemaRegistryURL    = "RELAY_SCHEMA_REGISTRY_URL"
	EnvSchemaRegistryUser   = "RELAY_SCHEMA_REGISTRY_USER"
	EnvSchemaRegistrySecret = "RELAY_SCHEMA_REGISTRY_PASSWORD"
	EnvSchemaRegistryCA     = "RELAY_SCHEMA_REGISTRY_SSL_CA_LOCATION"
	EnvRegistryTokenURL     = "RELAY_SCHEMA_REGISTRY_OAUTH_TOKEN_ENDPOINT_URL"
	EnvRegistryClientID     = "RELAY_SCHEMA_REGISTRY_OAUTH_CLIENT_ID"
	EnvRegistryClientSecret = "RELAY_SCHEMA_REGISTRY_OAUTH_CLIENT_SECRET"
	EnvRegistryScope        = "RELAY_SCHEMA_REGISTRY_OAUTH_SCOPE"
	EnvSchemaRegistryCert   = "RELAY_SCHEMA_REGISTRY_SSL_CERTIFICATE_LOCATION"
	EnvSchemaRegistryKey    = "RELAY_SCHEMA_REGISTRY_SSL_KEY_LOCATION"
	EnvSchemaSubject        = "RELAY_SCHEMA_SUBJECT"
	EnvSchemaAccept         = "RELAY_SCHEMA_ACCEPT"
	EnvSchemaReaderVersion  = "RELAY_SCHEMA_READER_VERSION"
	EnvSchemaTimeout        = "RELAY_SCHEMA_TIMEOUT"
	EnvSchemaCacheSize      = "RELAY_SCHEMA_CACHE_SIZE"
	EnvRulesFile            = "RELAY_RULES_FILE"
	EnvHookURL              = "RELAY_HOOK_URL"
	EnvHookTimeout          = "RELAY_HOOK_TIMEOUT"
	EnvHookConcurrency      = "RELAY_HOOK_CONCURRENCY"
	EnvHookBatch            = "RELAY_HOOK_BATCH"
	EnvHookToken            = "RELAY_HOOK_TOKEN"
	EnvHookSigningSecret    = "RELAY_HOOK_SIGNING_SECRET"
	EnvHookCA               = "RELAY_HOOK_SSL_CA_LOCATION"
	EnvHookCert             = "RELAY_HOOK_SSL_CERTIFICATE_LOCATION"
	EnvHookKey              = "RELAY_HOOK_SSL_KEY_LOCATION"
	EnvRedactPattern        = "RELAY_REDACT_PATTERN"
	EnvErrorMessageMax      = "RELAY_ERROR_MESSAGE_MAX"
	EnvCompatHeaders        = "RELAY_COMPAT_HEADERS"
	EnvQuarantineObjective  = "RELAY_QUARANTINE_OBJECTIVE"
	EnvQuarantineRetention  = "RELAY_QUARANTINE_RETENTION"
	EnvOutputRetention      = "RELAY_OUTPUT_RETENTION"
	EnvTopicsDurability     = "RELAY_TOPICS_DURABILITY"
	EnvActor                = "RELAY_ACTOR"
	EnvTraceURL             = "RELAY_TRACE_URL"
	EnvQuarantineOwner      = "RELAY_QUARANTINE_OWNER"
	EnvQuarantineThreshold  = "RELAY_QUARANTINE_ALERT_THRESHOLD"
	EnvReplayWatchMetrics   = "RELAY_REPLAY_WATCH_METRICS"
	EnvConsoleAddr          = "RELAY_CONSOLE_ADDR"
	EnvConsoleToken         = "RELAY_CONSOLE_TOKEN"
	EnvConsoleUserHeader    = "RELAY_CONSOLE_USER_HEADER"
	EnvConsoleTrustedProxy  = "RELAY_CONSOLE_TRUSTED_PROXIES"
	EnvConsoleAuditMetrics  = "RELAY_CONSOLE_AUDIT_METRICS"
	EnvConsoleReadAuth      = "RELAY_CONSOLE_READ_AUTH"
	EnvAllowInsecureHTTP    = "RELAY_ALLOW_INSECURE_HTTP"
	EnvConsoleProxySocket   = "RELAY_CONSOLE_PROXY_SOCKET"
	EnvConsoleForwardedBy   = "RELAY_CONSOLE_FORWARDED_BY"
	EnvConsoleAllowedHosts  = "RELAY_CONSOLE_ALLOWED_HOSTS"
	EnvConsoleTrustUnsigned = "RELAY_CONSOLE_TRUST_UNSIGNED_HEADER"
	EnvConsoleInsecure      = "RELAY_CONSOLE_INSECURE"
	EnvConsoleMetricsAddr   = "RELAY_CONSOLE_METRICS_ADDR"

	// TraceIDPlaceholder is where RELAY_TRACE_URL takes the trace id.
	TraceIDPlaceholder = "{traceId}"

	// KafkaPrefix marks variables passed through to librdkafka:
	// RELAY_KAFKA_BOOTSTRAP_SERVERS becomes bootstrap.servers.
	KafkaPrefix = "RELAY_KAFKA_"
	// EnvBootstrapServers is the one passthrough relay requires.
	EnvBootstrapServers = KafkaPrefix + "BOOTSTRAP_SERVERS"
	// EnvAutoOffsetReset has a relay default (earliest) that differs from
	// librdkafka's (latest): a new group must never silently skip records
	// already in its topics.
	EnvAutoOffsetReset = KafkaPrefix + "AUTO_OFFSET_RESET"
	// EnvMetadataRefresh has a relay default (30s, librdkafka's is 5m):
	// partitions added to a source are picked up, and records held back
	// for want of output partitions are written, that much sooner.
	EnvMetadataRefresh = KafkaPrefix + "TOPIC_METADATA_REFRESH_INTERVAL_MS"
	// EnvTransactionTimeout has a relay default derived from the
	// transaction budget, see Vars.
	EnvTransactionTimeout = KafkaPrefix + "TRANSACTION_TIMEOUT_MS"
	// EnvMaxPollInterval keeps librdkafka's default; relay reads it to
	// check its own bounds against it.
	EnvMaxPollInterval = KafkaPrefix + "MAX_POLL_INTERVAL_MS"
)

// Var documents one environment variable.
type Var struct {
	Name     string
	Default  string // "" with Required=false means unset/disabled
	Required bool
	Help     string
	// DefaultNote, when set, is how the reference shows a default that is
	// not a fixed value of relay's (derived, or librdkafka's own).
	DefaultNote string
	// Secret: masked by relay config, and also read from the file that
	// <Name>_FILE names.
	Secret bool
}

// Vars lists relay's own variables, and the passthrough variables whose
// defaults relay sets or reads, in the order docs/REFERENCE.md shows them.
// The parser takes every default from here.
var Vars = []Var{
	{Name: EnvSourceTopics, Required: true, Help: "comma-separated source topics"},
	{Name: EnvTransactionalID, Required: true, Help: "`transactional.id` of this instance: unique per instance, stable across its restarts (e.g. `relay-$(POD_NAME)` in a StatefulSet)"},
	{Name: EnvBootstrapServers, Required: true, Help: "Kafka bootstrap servers (librdkafka `bootstrap.servers`)"},
	{Name: EnvGroupID, Default: "relay", Help: "consumer group"},
	{Name: EnvStaticMembership, Default: "true", Help: "`true`: relay joins its group as a static member, its `group.instance.id` its `" + EnvTransactionalID + "` (or `RELAY_KAFKA_GROUP_INSTANCE_ID`). A restart within `session.timeout.ms` keeps the partitions without a rebalance, and a second process with the same id is refused by the group coordinator, which is how relay tells a twin from a coordinator's abort after a freeze or a lost assignment (and resumes when there is no twin). The cost: a stopped instance's partitions wait `session.timeout.ms` before another takes them. `false`: a dynamic member, which leaves the group when it stops; a fence after a freeze or a lost assignment then stops relay (exit 1), as it cannot tell a twin"},
	{Name: EnvOutputTopic, Default: "{topic}.valid", Help: "output topic template (`{topic}` = source topic); records keep their source partition number"},
	{Name: EnvQuarantineTopic, Default: "{topic}.quarantine", Help: "quarantine topic template: terminal, original bytes plus the failure envelope"},
	{Name: EnvRejectedTopic, Default: "{topic}.rejected", Help: "business rejection topic template"},
	{Name: EnvReplayTopic, Default: "{topic}.replay", Help: "replay topic template (written only by `relay replay`)"},
	{Name: EnvRetryTopic, Default: "{topic}.retry.{delay}", Help: "retry tier topic template; `{delay}` is the tier's delay as written in `" + EnvRetryTiers + "`"},
	{Name: EnvStateTopic, Default: "_relay.{group}.state", Help: "compacted state topic template; `{group}` is the consumer group"},
	{Name: EnvRetryTiers, Default: "30s,5m", Help: "delays of the non-blocking retry tiers, in order; empty for none (then the blocking budget is all)"},
	{Name: EnvRetryMaxAttempts, Default: "5", Help: "attempts of a record at most, the first and in-place retries included (1..100)"},
	{Name: EnvRetryMaxElapsed, Default: "1h", Help: "time from a record's first failure after which it is not retried again"},
	{Name: EnvBlockingAttempts, Default: "2", Help: "in-place retries of a transient failure before the first tier (0..10); must fit the transaction budget"},
	{Name: EnvBlockingBackoff, Default: "200ms", Help: "wait before each in-place retry; a `Retry-After` up to this long is honoured in place, a longer one in a tier"},
	{Name: EnvUnclassifiedAttempts, Default: "2", Help: "attempts at most for an unexpected (unclassified) failure, then `UNCLASSIFIED_EXHAUSTED`"},
	{Name: EnvOrdering, Default: "key", Help: "ordering policy: `key` (later records of a key follow its failing record through the tiers; other keys flow; durable in the state topic), `partition` (a failing record waits in place, its partition paused, the tier delays as waits) or `unordered` (non-blocking retry tiers, order not kept)"},
	{Name: EnvOrderingOnQuarantine, Default: "release", Help: "key ordering: what the followers of a quarantined record do: `release` (they go on) or `hold` (they are quarantined too, code `KEY_HELD`)"},
	{Name: EnvKeyParkMaxRecords, Default: "10000", Help: "key ordering: followers of a blocked key parked in memory at most, per instance, instead of copied into the head's tier (their source offsets stay uncommitted until their turn; past the limits they are copied); 0: parking off. Parking starts only once every member of the group announces it (relay_group_features): a relay before 0.7.0 in the group, or one with 0 here, keeps it off for all. On a compacted source the default turns it off; a value set there is refused"},
	{Name: EnvKeyParkMaxBytes, Default: "33554432", Help: "key ordering: bytes of parked followers at most, per instance (keys, values, headers and their bookkeeping)"},
	{Name: EnvKeyParkMaxAge, Default: "5m", Help: "key ordering: a follower stays parked at most this long, whatever its head does (a head retried in one short tier again and again); then it is copied into the head's tier, and its partition's commit moves on; 0: no bound"},
	{Name: EnvKeyParkMaxWait, Default: "30s", Help: "key ordering: a follower is parked only if its key's head is due within this; behind a longer tier it is copied"},
	{Name: EnvSchemaRegistryURL, Help: "Confluent-compatible schema registry base URL (Apicurio: `.../apis/ccompat/v7`); empty: values are relayed unchecked"},
	{Name: EnvSchemaRegistryUser, Help: "registry basic-auth user (Confluent Cloud: the API key); with an empty user, `" + EnvSchemaRegistrySecret + "` is sent as a bearer token"},
	{Name: EnvSchemaRegistrySecret, Secret: true, Help: "registry password (Confluent Cloud: the API secret) or bearer token"},
	{Name: EnvRegistryTokenURL, Help: "OAuth 2.0 token endpoint: relay gets the registry's bearer token by the client credentials grant, and a new one before it expires (instead of `" + EnvSchemaRegistryUser + "`/`" + EnvSchemaRegistrySecret + "`)"},
	{Name: EnvRegistryClientID, Help: "OAuth client id, with `" + EnvRegistryTokenURL + "`"},
	{Name: EnvRegistryClientSecret, Secret: true, Help: "OAuth client secret, with `" + EnvRegistryTokenURL + "`"},
	{Name: EnvRegistryScope, Help: "OAuth scope to ask for, with `" + EnvRegistryTokenURL + "` (optional)"},
	{Name: EnvSchemaRegistryCA, Help: "PEM file of the CA that signs the registry's certificate; default: the system's roots"},
	{Name: EnvSchemaRegistryCert, Help: "PEM file of relay's client certificate for the registry (with `" + EnvSchemaRegistryKey + "`); read again when it changes"},
	{Name: EnvSchemaRegistryKey, Help: "PEM file of the private key of `" + EnvSchemaRegistryCert + "`"},
	{Name: EnvSchemaSubject, Help: "subject the writer schemas must be registered under (required with a registry)"},
	{Name: EnvSchemaAccept, Help: "accepted versions of the subject, e.g. `3-5` or `1,3-5` (required with a registry)"},
	{Name: EnvSchemaReaderVersion, Help: "canonical version every accepted record is upcast to; default: the highest accepted"},
	{Name: EnvSchemaTimeout, Default: "1s", Help: "deadline of one registry lookup"},
	{Name: EnvSchemaCacheSize, Default: "1000", Help: "writer schemas kept in memory at most (ids are immutable)"},
	{Name: EnvRulesFile, Help: "YAML file of CEL business rules (needs a registry: rules read the decoded record)"},
	{Name: EnvHookURL, Help: "optional HTTP hook called for every admitted record (needs a registry)"},
	{Name: EnvHookTimeout, Default: "2s", Help: "deadline of one hook call"},
	{Name: EnvHookConcurrency, Default: "32", Help: "hook calls in flight at once (under key ordering never two of one key; 1: one record at a time; at most 1024)"},
	{Name: EnvHookBatch, Default: "1", Help: "records per hook request at most: above 1, relay speaks the hook's batch protocol (one POST with many records, one result per record); 1: one request per record"},
	{Name: EnvHookToken, Secret: true, Help: "bearer token relay sends the hook (`Authorization: Bearer …`)"},
	{Name: EnvHookSigningSecret, Secret: true, Help: "key of the HMAC-SHA256 signature relay puts on every hook request: `Relay-Signature: t=<unix seconds>,v1=<hex HMAC of \"<t>.<body>\">` (see the security guide for verifying it)"},
	{Name: EnvHookCA, Help: "PEM file of the CA that signs the hook's certificate; default: the system's roots"},
	{Name: EnvHookCert, Help: "PEM file of relay's client certificate for the hook (with `" + EnvHookKey + "`); read again when it changes"},
	{Name: EnvHookKey, Help: "PEM file of the private key of `" + EnvHookCert + "`"},
	{Name: EnvRedactPattern, Help: "extra RE2 pattern redacted from error messages, next to the built-in ones (URL credentials, tokens, API keys, e-mail addresses, card numbers)"},
	{Name: EnvErrorMessageMax, Default: "512", Help: "bytes of `relay.error.message` at most (64..4096)"},
	{Name: EnvCompatHeaders, Help: "also write compatibility headers: `spring` (`kafka_dlt-*`), `connect` (`__connect.errors.*`), or both comma-separated"},
	{Name: EnvQuarantineObjective, Default: "168h", Help: "response objective for quarantined records; relay warns when quarantine retention is shorter"},
	{Name: EnvQuarantineRetention, Default: "720h", Help: "`retention.ms` that `relay topics apply` gives quarantine and rejected topics"},
	{Name: EnvTopicsDurability, Default: "warn", Help: "what relay does at start when one of its topics or sources could lose acknowledged records, or stop taking writes, when one broker is lost (fewer than 3 replicas, or `min.insync.replicas` not one below them): `warn` (log each) or `require` (refuse to start, naming them)"},
	{Name: EnvOutputRetention, Default: "168h", Help: "`retention.ms` that `relay topics apply` gives output and replay topics"},
	{Name: EnvTraceURL, Help: "link to a trace in your tracing UI, with `{traceId}` where the trace id goes (e.g. `https://jaeger.example/trace/{traceId}`): `relay quarantine show` prints it"},
	{Name: EnvQuarantineOwner, Help: "who owns the quarantine: one team for every source (`payments-team`) or one per source topic (`orders=payments-team,refunds=ledger-team`); shown by `relay console` and exported as the `owner` label of `relay_quarantine_topic_unresolved` and `relay_quarantine_alert_threshold`, so alerts route to the owner"},
	{Name: EnvQuarantineThreshold, Help: "unresolved quarantined failures of a source above which its owner is alerted (`RelayQuarantineOverThreshold`): one number for every source, or one per source topic (`orders=100,refunds=10`)"},
	{Name: EnvReplayWatchMetrics, Help: "comma-separated `/metrics` URLs of the relay instances: `relay replay` and the console's replays read `relay_hook_timeouts_total` there and stop a replay whose hook timeouts pass `--max-hook-timeouts`"},
	{Name: EnvConsoleAddr, Default: "127.0.0.1:9465", Help: "listen address of `relay console` (this host only by default)"},
	{Name: EnvConsoleMetricsAddr, Help: "a second listen address of `relay console` that serves only `/healthz` and `/metrics` (no page, no payload): for the kubelet's probes and Prometheus when `" + EnvConsoleAddr + "` is on loopback behind an authenticating proxy on `" + EnvConsoleProxySocket + "` (the chart's oauth2-proxy sidecar). Unset: both are served at `" + EnvConsoleAddr + "` only"},
	{Name: EnvConsoleToken, Secret: true, Help: "token that authorises the console's actions (discard, replay): an operator signs in with it and their name; at least 16 characters, no word or pattern repeated, no run of consecutive characters, not made of common words, enough variety (`openssl rand -hex 16`); unset (and no trusted proxy): the console is read-only"},
	{Name: EnvConsoleUserHeader, Help: "request header an authenticating proxy (oauth2-proxy: `X-Forwarded-User`) sets to the signed-in user: the console's actor; only with `" + EnvConsoleTrustedProxy + "`"},
	{Name: EnvConsoleTrustedProxy, Help: "comma-separated addresses or CIDR ranges of the proxies in front of the console: `" + EnvConsoleUserHeader + "` is believed only from them, and their `X-Forwarded-For` and `X-Forwarded-Proto`; a range wider than one address with a user header needs `" + EnvConsoleTrustUnsigned + "`, and a loopback address is refused with one (`kubectl port-forward` and any local process arrive from it: use `" + EnvConsoleProxySocket + "`)"},
	{Name: EnvConsoleInsecure, Default: "false", Help: "`true` lets the console, beyond loopback, take the console token over plain HTTP (no TLS of its own, no `X-Forwarded-Proto: https` from a proxy it trusts) and open reads (`" + EnvConsoleReadAuth + "=open`) without `" + EnvConsoleAllowedHosts + "`; `false` refuses both: the token would cross the network in clear, and any web page a reader opens could rebind its name to the console and read every failure"},
	{Name: EnvConsoleTrustUnsigned, Default: "false", Help: "`true` believes `" + EnvConsoleUserHeader + "` from a range of `" + EnvConsoleTrustedProxy + "` wider than one address, where any pod could set it (logged as a warning at start); the safe shape is an oauth2-proxy sidecar on `" + EnvConsoleProxySocket + "` (a loopback address is refused with a user header: `kubectl port-forward` arrives from it)"},
	{Name: EnvAllowInsecureHTTP, Default: "false", Help: "`true` lets relay send credentials (the hook's token, the registry's password or OAuth token, the token endpoint's client secret) over plain `http://` to a host other than loopback; relay logs a warning at start. Otherwise such a URL is refused"},
	{Name: EnvConsoleProxySocket, Help: "a Unix socket the console also listens on, for an authenticating proxy in its pod (the chart's oauth2-proxy sidecar): `" + EnvConsoleUserHeader + "` is believed on it, whatever the address; nobody reaching the console's TCP port, through a port-forward included, can set it"},
	{Name: EnvConsoleForwardedBy, Help: "comma-separated addresses or CIDR ranges of the proxies in front of the console (an ingress controller's pods): believed for the client's address in `X-Forwarded-For` and for `X-Forwarded-Proto`, never for the user header. Without it every client behind the ingress counts as one when wrong tokens and requests are limited"},
	{Name: EnvConsoleReadAuth, Help: "`open` or `signed-in`: whether reading the console (failures, payloads, history) needs a signed-in operator; `/healthz` is always open. Default: `open` when `" + EnvConsoleAddr + "` is on loopback and there is no `" + EnvConsoleProxySocket + "` (whose proxy brings people from elsewhere), `signed-in` otherwise"},
	{Name: EnvConsoleAllowedHosts, Help: "comma-separated host names the console answers to (the `Host` header), on every listener; a request for another is refused (DNS rebinding). Default: loopback's names on loopback, any host elsewhere (with a warning at start)"},
	{Name: EnvConsoleAuditMetrics, Help: "the Prometheus text file `relay audit --metrics-file` writes: the console's overview shows the last audit's result"},
	{Name: EnvActor, Help: "who `relay quarantine discard` and `relay replay` record in the ledger (`--actor` overrides it); default: user@host"},
	{Name: EnvCommitInterval, Default: "100ms", Help: "longest a transaction stays open; part of the transaction budget, which must fit in `transaction.timeout.ms` and `max.poll.interval.ms`"},
	{Name: EnvMaxRecordsPerTxn, Default: "5000", Help: "source records per transaction at most (1..1000000)"},
	{Name: EnvShutdownTimeout, Default: "30s", DefaultNote: "derived: `30s` or more", Help: "bound on a graceful stop (records the hook is working on finish, the open transaction commits, relay leaves the group); unset, it is derived from what a stop can take (the in-place retries of records in flight and two Kafka calls) plus 5s, at least 30s; set shorter than that, relay does not start"},
	{Name: EnvOpTimeout, Default: "5s", Help: "deadline of each blocking Kafka call (init, send offsets, commit, abort, committed-offset fetch); must be shorter than `transaction.timeout.ms`"},
	{Name: EnvHTTPAddr, Default: ":9464", Help: "listen address of `/metrics`, `/livez`, `/readyz`, `/startupz` (every interface by default, for the kubelet's probes and Prometheus; `127.0.0.1:9464` for this host only); empty disables the endpoint"},
	{Name: EnvLogLevel, Default: "info", Help: "`debug`, `info`, `warn` or `error`"},
	{Name: EnvLogFormat, Default: "json", Help: "`json` or `text`: structured `log/slog` on stderr, librdkafka's own lines included (`logger=librdkafka`); payloads are never logged"},
	{Name: EnvAutoOffsetReset, Default: "earliest", Help: "where a group with no committed offset starts. librdkafka's own default is `latest`, which silently skips everything already in the topics"},
	{Name: EnvMetadataRefresh, Default: "30000", Help: "how often the clients refresh topic metadata. librdkafka's own default is 5 minutes; relay's 30 s means partitions added to a source, and to its derived topics, are used within 30 s"},
	{Name: EnvTransactionTimeout, Default: "36000", DefaultNote: "derived: `36000` with no registry and no hook", Help: fmt.Sprintf(
		"unset: the transaction budget plus %.0f s, in whole seconds (36 s with no registry and no hook, 45 s with both, 51 s under the hook's batch protocol), at least a `message.timeout.ms` (`delivery.timeout.ms`) or `socket.timeout.ms` you set, which librdkafka requires to fit in it, at most `%d`, the broker's default `transaction.max.timeout.ms`; "+
			"at start-up it is lowered to the broker's own `transaction.max.timeout.ms` when that is less and the budget still fits. "+
			"The %.0f s ride out a routine broker restart (about 15 s away) without the broker aborting the open transaction under relay. "+
			"It is kept no longer: an instance that dies for good, and is not restarted under its `transactional.id`, holds back `read_committed` readers of its partitions until the broker aborts its transaction, up to this long, and so does the next owner of its source partitions when it died in a commit (its offsets are not stable until then). The broker aborts it within its cleanup interval (10 s by default) after the timeout: with 36 s, about when the session timeout (45 s) hands the partitions over anyway. "+
			"A value you set is kept as it is, and refused (naming this variable) when the budget does not fit it or the broker allows less. `relay config` shows the value in use",
		transactionRideOut.Seconds(), brokerMaxTransactionTimeout.Milliseconds(), transactionRideOut.Seconds())},
	{Name: EnvMaxPollInterval, DefaultNote: fmt.Sprintf("librdkafka: `%d`", defaultMaxPollInterval.Milliseconds()), Help: "read by relay to validate its own bounds"},
}

// managedProps are librdkafka properties relay sets itself; overriding them
// through RELAY_KAFKA_* would break the exactly-once contract.
var managedProps = map[string]string{
	"group.id":                  "set " + EnvGroupID + " instead",
	"transactional.id":          "set " + EnvTransactionalID + " instead",
	"enable.auto.commit":        "offsets are committed only inside transactions",
	"enable.auto.offset.store":  "offsets are committed only inside transactions",
	"isolation.level":           "relay reads read_committed so aborted records are never relayed",
	"enable.idempotence":        "transactions require the idempotent producer",
	"enable.partition.eof":      "relay does not use partition EOF events",
	"go.delivery.reports":       "relay reads the reports of failed deliveries to hold back the partition they came from",
	"go.delivery.report.fields": "relay reads only whether a delivery failed, and where",
}

// javaProps are properties of Kafka's Java client that users paste from a
// Java set-up, and what librdkafka takes instead.
var javaProps = map[string]string{
	"sasl.jaas.config": "set RELAY_KAFKA_SASL_USERNAME and RELAY_KAFKA_SASL_PASSWORD (PLAIN, SCRAM-SHA-256/512) " +
		"or RELAY_KAFKA_SASL_OAUTHBEARER_METHOD=oidc with RELAY_KAFKA_SASL_OAUTHBEARER_CLIENT_ID, _CLIENT_SECRET and _TOKEN_ENDPOINT_URL (OAUTHBEARER) instead",
	"ssl.truststore.location": "set RELAY_KAFKA_SSL_CA_LOCATION to a PEM file of the CA instead (`keytool -exportcert -rfc` turns a truststore entry into one)",
	"ssl.truststore.password": "librdkafka reads the CA from a PEM file (RELAY_KAFKA_SSL_CA_LOCATION), which has no password",
	"ssl.truststore.type":     "librdkafka reads the CA from a PEM file (RELAY_KAFKA_SSL_CA_LOCATION)",
	"ssl.keystore.type": "librdkafka reads a PKCS#12 keystore (RELAY_KAFKA_SSL_KEYSTORE_LOCATION and _PASSWORD), " +
		"or PEM files (RELAY_KAFKA_SSL_CERTIFICATE_LOCATION, RELAY_KAFKA_SSL_KEY_LOCATION); a JKS keystore must be converted (`keytool -importkeystore -deststoretype PKCS12`)",
	"sasl.login.callback.handler.class":  "librdkafka loads no Java classes: OAUTHBEARER with OIDC is built in (RELAY_KAFKA_SASL_OAUTHBEARER_METHOD=oidc)",
	"sasl.client.callback.handler.class": "librdkafka loads no Java classes (AWS MSK IAM: see the security guide)",
}

// defaultOf is the default Vars gives the variable name.
func defaultOf(name string) string {
	for _, v := range Vars {
		if v.Name == name {
			return v.Default
		}
	}
	return ""
}

// Managed is a librdkafka property relay sets itself, and why it cannot be
// set through RELAY_KAFKA_*.
type Managed struct {
	Property string
	Why      string
}

// ManagedProperties lists the managed properties, sorted by name.
func ManagedProperties() []Managed {
	out := make([]Managed, 0, len(managedProps))
	for p, why := range managedProps {
		out = append(out, Managed{Property: p, Why: why})
	}
	slices.SortFunc(out, func(a, b Managed) int { return strings.Compare(a.Property, b.Property) })
	return out
}
