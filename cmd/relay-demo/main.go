// Command relay-demo is relay's main job on a local default: it creates the
// demo topics on the local broker, starts relay, produces a stream of orders,
// waits until relay has committed all of it, checks the output with an
// independent read_committed consumer, and prints what happened.
//
// It is run by `make demo` (scripts/demo.sh), after the local stack is up.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

func main() {
	os.Exit(run())
}

type options struct {
	bootstrap, registry, relayBin, logFile, httpAddr string
	source                                           string
	partitions, records                              int
}

func run() int {
	var o options
	flag.StringVar(&o.bootstrap, "bootstrap", "127.0.0.1:9092", "Kafka bootstrap servers")
	flag.StringVar(&o.registry, "registry", "http://127.0.0.1:8081/apis/ccompat/v7", "Confluent-compatible schema registry")
	flag.StringVar(&o.relayBin, "relay", "bin/relay", "relay binary")
	flag.StringVar(&o.logFile, "log", ".cache/logs/relay-demo.log", "where relay's log goes")
	flag.StringVar(&o.httpAddr, "http", "127.0.0.1:9464", "relay's metrics address")
	flag.StringVar(&o.source, "topic", "orders", "source topic")
	flag.IntVar(&o.partitions, "partitions", 3, "partitions of the demo topics")
	flag.IntVar(&o.records, "records", 20000, "records to produce")
	flag.Parse()
	if o.records <= 0 || o.partitions <= 0 {
		fmt.Fprintln(os.Stderr, "relay-demo: -records and -partitions must be positive")
		return 2
	}
	if err := demo(o); err != nil {
		fmt.Fprintln(os.Stderr, "relay-demo:", err)
		return 1
	}
	return 0
}

func demo(o options) error {
	group := "relay-demo"
	subject := o.source + "-value"
	ids, err := registerSchemas(o.registry, subject)
	if err != nil {
		return err
	}
	fmt.Printf("schemas %s: v1 id %d (not accepted), v2 id %d (accepted, upcast), v3 id %d (canonical)\n", subject, ids[1], ids[2], ids[3])
	hook, err := startHook()
	if err != nil {
		return err
	}
	defer hook.close()
	rulesPath := ".cache/relay-demo-rules.yaml"
	if err := os.WriteFile(rulesPath, []byte(demoRules), 0o644); err != nil {
		return err
	}
	env := append(os.Environ(),
		"RELAY_SOURCE_TOPICS="+o.source,
		"RELAY_GROUP_ID="+group,
		"RELAY_TRANSACTIONAL_ID=relay-demo-0",
		// Static membership: a rerun after a killed run gets its
		// partitions back at once, not after the session timeout.
		"RELAY_KAFKA_GROUP_INSTANCE_ID=relay-demo-0",
		"RELAY_KAFKA_BOOTSTRAP_SERVERS="+o.bootstrap,
		"RELAY_HTTP_ADDR="+o.httpAddr,
		"RELAY_SCHEMA_REGISTRY_URL="+o.registry,
		"RELAY_SCHEMA_SUBJECT="+subject,
		"RELAY_SCHEMA_ACCEPT=2-3",
		"RELAY_SCHEMA_READER_VERSION=3",
		"RELAY_RULES_FILE="+rulesPath,
		"RELAY_HOOK_URL="+hook.url(),
		"RELAY_HOOK_TIMEOUT=300ms",
		"RELAY_SCHEMA_TIMEOUT=500ms",
		"RELAY_RETRY_TIERS=2s,10s",
		// In-place retries hold the whole loop (every partition of this
		// instance): keep them short.
		"RELAY_BLOCKING_BACKOFF=20ms",
	)
	// Create the source, then everything relay needs, the operator's way.
	if err := ensureTopics(o.bootstrap, o.partitions, o.source); err != nil {
		return err
	}
	fmt.Println("$ relay topics apply --replication-factor 1")
	apply := exec.Command(o.relayBin, "topics", "apply", "--replication-factor", "1")
	apply.Env, apply.Stdout, apply.Stderr = env, os.Stdout, os.Stderr
	if err := apply.Run(); err != nil {
		return fmt.Errorf("relay topics apply: %w", err)
	}
	probe, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": o.bootstrap})
	if err != nil {
		return err
	}
	defer probe.Close()
	before := map[string]map[int32]int64{}
	for _, t := range terminalTopics(o.source) {
		if before[t], err = endOffsets(probe, t, o.partitions); err != nil {
			return err
		}
	}
	srcBefore, err := endOffsets(probe, o.source, o.partitions)
	if err != nil {
		return err
	}

	logf, err := os.Create(o.logFile)
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	cmd := exec.Command(o.relayBin, "run")
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	fmt.Printf("\nstarting relay (log: %s)\n", o.logFile)
	if err := cmd.Start(); err != nil {
		return err
	}
	// exited is closed when relay ends; waitErr is its result after that.
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Kill() // no-op once it has exited
		<-exited
	}()
	if err := waitReady(o.httpAddr, exited, 90*time.Second); err != nil {
		return fmt.Errorf("%w (see %s)", err, o.logFile)
	}

	fmt.Printf("producing %d orders to %s (%d partitions):\n", o.records, o.source, o.partitions)
	for _, k := range mix {
		fmt.Printf("  %5.1f%%  %s\n", float64(k.share)/10, k.name)
	}
	start := time.Now()
	sent, err := produceMix(o.bootstrap, o.source, ids, o.records)
	if err != nil {
		return err
	}
	res, err := waitOutcomes(o, before, srcBefore, sent, exited, 3*time.Minute)
	if err != nil {
		return fmt.Errorf("%w (see %s)", err, o.logFile)
	}
	took := time.Since(start)
	metrics, err := scrape(o.httpAddr)
	if err != nil {
		return err
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	<-exited
	printTable(o, metrics, res, took, waitErr)
	relayCmd := func(args ...string) {
		fmt.Printf("\n$ relay %s\n", strings.Join(quoted(args), " "))
		c := exec.Command(o.relayBin, args...)
		c.Env, c.Stdout, c.Stderr = env, os.Stdout, os.Stderr
		_ = c.Run()
	}
	if res.example != "" {
		relayCmd("quarantine", "show", res.example)
	}
	// The quarantine as an operational queue: what waits, since when, and
	// what a replay would do today (a dry run writes nothing).
	relayCmd("quarantine", "stats")
	relayCmd("replay", "--code", "SCHEMA_UNSUPPORTED", "--reason", "demo: would a replay help today?", "--dry-run")
	relayCmd("audit", "--source", o.source, "--progress", "none")
	if err := printConsole(o, group, subject, rulesPath); err != nil {
		return err
	}
	fmt.Println("\nThe local stack keeps running. Stop it with: make down   (make down PURGE=1 also deletes its data)")
	fmt.Println(`
Next, on a real cluster:
  make image                                   # dist/oci: relay's image, to push to your registry
  relay topics apply                           # with your RELAY_* variables: relay's topics
  helm install relay deploy/helm/relay \
    --set image.repository=REGISTRY/relay --set relay.sourceTopics=orders \
    --set kafka.bootstrapServers=BROKERS
  See docs/DEPLOYMENT.md (image, chart, upgrades) and deploy/helm/relay/README.md.`)
	if res.missing > 0 || res.duplicates > 0 || res.unexpected > 0 || waitErr != nil {
		return errors.New("demo run did not end cleanly (see above)")
	}
	return nil
}

func ensureTopics(bootstrap string, partitions int, names ...string) error {
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": bootstrap})
	if err != nil {
		return err
	}
	defer a.Close()
	specs := make([]kafka.TopicSpecification, len(names))
	for i, n := range names {
		specs[i] = kafka.TopicSpecification{Topic: n, NumPartitions: partitions, ReplicationFactor: 1}
	}
	err = retryTransient("create topics", brokerRetryBound, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := a.CreateTopics(ctx, specs)
		if err != nil {
			return err
		}
		var errs []error
		for _, r := range res {
			if c := r.Error.Code(); c != kafka.ErrNoError && c != kafka.ErrTopicAlreadyExists {
				errs = append(errs, fmt.Errorf("%s: %w", r.Topic, r.Error))
			}
		}
		return errors.Join(errs...)
	})
	if err != nil {
		return err
	}
	// Wait until a watermark query succeeds on every partition: a topic
	// in the metadata can still answer "not leader" on a fresh broker.
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": bootstrap})
	if err != nil {
		return err
	}
	defer p.Close()
	for _, n := range names {
		if _, err := endOffsets(p, n, partitions); err != nil {
			return err
		}
	}
	return nil
}

// brokerRetryBound bounds the retries of one demo step against a broker
// that is still settling (a fresh stack, topics just created).
const brokerRetryBound = time.Minute

// watermarks is the client call endOffsets needs; *kafka.Producer has it.
type watermarks interface {
	QueryWatermarkOffsets(topic string, partition int32, timeoutMs int) (low, high int64, err error)
}

func endOffsets(w watermarks, topic string, partitions int) (map[int32]int64, error) {
	out := map[int32]int64{}
	for p := range int32(partitions) {
		err := retryTransient(fmt.Sprintf("watermarks of %s[%d]", topic, p), brokerRetryBound, func() error {
			_, hi, err := w.QueryWatermarkOffsets(topic, p, 10000)
			out[p] = hi
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// transientCodes are broker errors that a fresh broker, a new topic or a
// moving leader give for a while; librdkafka does not flag them retriable
// outside its own request paths.
var transientCodes = map[kafka.ErrorCode]bool{
	kafka.ErrNotLeaderForPartition:        true,
	kafka.ErrLeaderNotAvailable:           true,
	kafka.ErrUnknownTopicOrPart:           true,
	kafka.ErrUnknownPartition:             true,
	kafka.ErrReplicaNotAvailable:          true,
	kafka.ErrBrokerNotAvailable:           true,
	kafka.ErrNotController:                true,
	kafka.ErrNotCoordinator:               true,
	kafka.ErrCoordinatorNotAvailable:      true,
	kafka.ErrCoordinatorLoadInProgress:    true,
	kafka.ErrRequestTimedOut:              true,
	kafka.ErrNetworkException:             true,
	kafka.ErrTimedOut:                     true,
	kafka.ErrTimedOutQueue:                true,
	kafka.ErrTransport:                    true,
	kafka.ErrAllBrokersDown:               true,
	kafka.ErrKafkaStorageError:            true,
	kafka.ErrNotEnoughReplicas:            true,
	kafka.ErrOffsetNotAvailable:           true,
	kafka.ErrFencedLeaderEpoch:            true,
	kafka.ErrUnknownLeaderEpoch:           true,
	kafka.ErrNotEnoughReplicasAfterAppend: true,
}

// transient says whether err is worth trying again.
func transient(err error) bool {
	var ke kafka.Error
	return errors.As(err, &ke) && (ke.IsRetriable() || transientCodes[ke.Code()])
}

// retryTransient runs op until it succeeds, fails with an error that is
// not transient, or bound has passed, backing off from 100ms to 2s.
func retryTransient(what string, bound time.Duration, op func() error) error {
	deadline := time.Now().Add(bound)
	backoff := 100 * time.Millisecond
	for {
		err := op()
		switch {
		case err == nil:
			return nil
		case !transient(err):
			return fmt.Errorf("%s: %w", what, err)
		case time.Now().Add(backoff).After(deadline):
			return fmt.Errorf("%s: still failing after %s: %w", what, bound, err)
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 2*time.Second)
	}
}

func waitReady(addr string, exited <-chan struct{}, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("relay exited before it was ready")
		default:
		}
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("relay not ready within %s", d)
}

// scrape reads relay's counters and commit-latency histogram.
func scrape(addr string) (map[string]float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	return parseMetrics(resp.Body)
}

// parseMetrics sums samples by name; histogram buckets keep their le label.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		name := line[:i]
		if b := strings.Index(name, "{"); b >= 0 {
			if oc := strings.Index(name, `outcome="`); oc >= 0 {
				rest := name[oc+9:]
				out[name[:b]+"|"+rest[:strings.IndexByte(rest, '"')]] += v
			}
			if le := strings.Index(name, `le="`); le >= 0 {
				name = name[:b] + "|" + name[le+4:strings.Index(name[le+4:], `"`)+le+4]
			} else {
				name = name[:b]
			}
		}
		out[name] += v
	}
	return out, sc.Err()
}

// quantile estimates a quantile from cumulative histogram buckets (the upper
// bound of the bucket it falls in).
func quantile(m map[string]float64, name string, q float64) float64 {
	type bucket struct{ le, n float64 }
	var bs []bucket
	for k, v := range m {
		if rest, ok := strings.CutPrefix(k, name+"_bucket|"); ok {
			le := math.Inf(1)
			if rest != "+Inf" {
				le, _ = strconv.ParseFloat(rest, 64)
			}
			bs = append(bs, bucket{le, v})
		}
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	if len(bs) == 0 || bs[len(bs)-1].n == 0 {
		return math.NaN()
	}
	target := q * bs[len(bs)-1].n
	for _, b := range bs {
		if b.n >= target {
			return b.le
		}
	}
	return math.Inf(1)
}

func secs(s float64) string {
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return "n/a"
	}
	return (time.Duration(s * float64(time.Second))).Round(100 * time.Microsecond).String()
}

// quoted shell-quotes the arguments that need it, for display.
func quoted(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " ?:") {
			a = "'" + a + "'"
		}
		out[i] = a
	}
	return out
}

// printConsole writes the variables relay console needs to see the
// demo's quarantine (without the demo's in-process hook, gone with it)
// and a fresh sign-in token to a file, and prints the one command that
// opens it.
func printConsole(o options, group, subject, rulesPath string) error {
	tok := make([]byte, 12)
	if _, err := rand.Read(tok); err != nil {
		return err
	}
	token := "demo-" + hex.EncodeToString(tok)
	path := ".cache/relay-demo-console.env"
	vars := []string{
		"RELAY_SOURCE_TOPICS=" + o.source,
		"RELAY_GROUP_ID=" + group,
		"RELAY_KAFKA_BOOTSTRAP_SERVERS=" + o.bootstrap,
		"RELAY_SCHEMA_REGISTRY_URL=" + o.registry,
		"RELAY_SCHEMA_SUBJECT=" + subject,
		"RELAY_SCHEMA_ACCEPT=2-3",
		"RELAY_SCHEMA_READER_VERSION=3",
		"RELAY_RULES_FILE=" + rulesPath,
		"RELAY_RETRY_TIERS=2s,10s",
		"RELAY_CONSOLE_TOKEN=" + token,
	}
	if err := os.WriteFile(path, []byte(strings.Join(vars, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	fmt.Printf(`
See the quarantine in relay's console:
  env $(cat %s) %s console
  then open http://127.0.0.1:9465 and sign in with the token %s
  (any name) to replay or discard; reading needs no sign-in on this host.
`, path, o.relayBin, token)
	return nil
}
