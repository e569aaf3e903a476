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

	"relay/internal/envelope"
)

func main() {
	os.Exit(run())
}

type options struct {
	bootstrap, relayBin, logFile, httpAddr string
	source                                 string
	partitions, records                    int
}

func run() int {
	var o options
	flag.StringVar(&o.bootstrap, "bootstrap", "127.0.0.1:9092", "Kafka bootstrap servers")
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
	output := o.source + ".valid"
	group := "relay-demo"
	if err := ensureTopics(o.bootstrap, o.partitions, o.source, output); err != nil {
		return err
	}
	before, err := endOffsets(o.bootstrap, o.source, o.partitions)
	if err != nil {
		return err
	}

	logf, err := os.Create(o.logFile)
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	cmd := exec.Command(o.relayBin, "run")
	cmd.Env = append(os.Environ(),
		"RELAY_SOURCE_TOPICS="+o.source,
		"RELAY_GROUP_ID="+group,
		"RELAY_TRANSACTIONAL_ID=relay-demo-0",
		"RELAY_KAFKA_BOOTSTRAP_SERVERS="+o.bootstrap,
		"RELAY_HTTP_ADDR="+o.httpAddr,
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	fmt.Printf("starting relay (log: %s)\n", o.logFile)
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
	if err := waitReady(o.httpAddr, exited, 60*time.Second); err != nil {
		return fmt.Errorf("%w (see %s)", err, o.logFile)
	}

	fmt.Printf("producing %d orders to %s (%d partitions)\n", o.records, o.source, o.partitions)
	start := time.Now()
	if err := produceOrders(o.bootstrap, o.source, o.records); err != nil {
		return err
	}
	end, err := endOffsets(o.bootstrap, o.source, o.partitions)
	if err != nil {
		return err
	}
	if err := waitCommitted(o.bootstrap, group, o.source, end, exited, 2*time.Minute); err != nil {
		return fmt.Errorf("%w (see %s)", err, o.logFile)
	}
	took := time.Since(start)
	metrics, err := scrape(o.httpAddr)
	if err != nil {
		return err
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	<-exited
	exitErr := waitErr

	check, err := verify(o.bootstrap, output, o.source, o.partitions, before, end)
	if err != nil {
		return err
	}
	printTable(o, metrics, check, took, exitErr)
	fmt.Println("\nThe local stack keeps running. Stop it with: make down   (make down PURGE=1 also deletes its data)")
	if check.missing > 0 || check.duplicates > 0 || exitErr != nil {
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	specs := make([]kafka.TopicSpecification, len(names))
	for i, n := range names {
		specs[i] = kafka.TopicSpecification{Topic: n, NumPartitions: partitions, ReplicationFactor: 1}
	}
	res, err := a.CreateTopics(ctx, specs)
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	for _, r := range res {
		if c := r.Error.Code(); c != kafka.ErrNoError && c != kafka.ErrTopicAlreadyExists {
			return fmt.Errorf("create topic %s: %w", r.Topic, r.Error)
		}
	}
	return nil
}

func endOffsets(bootstrap, topic string, partitions int) (map[int32]int64, error) {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "group.id": "relay-demo-probe"})
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	out := map[int32]int64{}
	for p := range int32(partitions) {
		_, hi, err := c.QueryWatermarkOffsets(topic, p, 10000)
		if err != nil {
			return nil, fmt.Errorf("watermarks of %s[%d]: %w", topic, p, err)
		}
		out[p] = hi
	}
	return out, nil
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

func produceOrders(bootstrap, topic string, n int) error {
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "enable.idempotence": true, "linger.ms": 5})
	if err != nil {
		return err
	}
	defer p.Close()
	dr := make(chan kafka.Event, 10000)
	failed := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			if m := (<-dr).(*kafka.Message); m.TopicPartition.Error != nil {
				select {
				case failed <- m.TopicPartition.Error:
				default:
				}
			}
		}
	}()
	for i := range n {
		customer := i % 500
		v := fmt.Sprintf(`{"orderId":"o-%06d","customer":"c-%03d","amount":%d.%02d,"currency":"EUR"}`, i, customer, 10+i%90, i%100)
		err := p.Produce(&kafka.Message{
			TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
			Key:            []byte(fmt.Sprintf("c-%03d", customer)),
			Value:          []byte(v),
		}, dr)
		if err != nil {
			return fmt.Errorf("produce: %w", err)
		}
	}
	<-done
	select {
	case err := <-failed:
		return fmt.Errorf("delivery: %w", err)
	default:
		return nil
	}
}

func waitCommitted(bootstrap, group, topic string, end map[int32]int64, exited <-chan struct{}, d time.Duration) error {
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": bootstrap})
	if err != nil {
		return err
	}
	defer a.Close()
	tps := make([]kafka.TopicPartition, 0, len(end))
	for p := range end {
		tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: p})
	}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("relay exited early")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := a.ListConsumerGroupOffsets(ctx, []kafka.ConsumerGroupTopicPartitions{{Group: group, Partitions: tps}},
			kafka.SetAdminRequireStableOffsets(true))
		cancel()
		if err == nil {
			caught := true
			for _, tp := range res.ConsumerGroupsTopicPartitions[0].Partitions {
				if int64(tp.Offset) != end[tp.Partition] {
					caught = false
				}
			}
			if caught {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("relay did not commit everything within %s", d)
}

type checkResult struct{ outputs, missing, duplicates int }

// verify reads the output as a business consumer would (read_committed) and
// checks that each source record of this run appears exactly once.
func verify(bootstrap, output, source string, partitions int, before, end map[int32]int64) (checkResult, error) {
	var r checkResult
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers": bootstrap, "group.id": "relay-demo-verify", "enable.auto.commit": false,
		"isolation.level": "read_committed", "enable.partition.eof": true,
	})
	if err != nil {
		return r, err
	}
	defer func() { _ = c.Close() }()
	tps := make([]kafka.TopicPartition, partitions)
	for p := range partitions {
		tps[p] = kafka.TopicPartition{Topic: &output, Partition: int32(p), Offset: kafka.OffsetBeginning}
	}
	if err := c.Assign(tps); err != nil {
		return r, err
	}
	seen := map[string]int{}
	eof := map[int32]bool{}
	deadline := time.Now().Add(time.Minute)
	for len(eof) < partitions && time.Now().Before(deadline) {
		switch e := c.Poll(200).(type) {
		case *kafka.Message:
			delete(eof, e.TopicPartition.Partition)
			for _, h := range e.Headers {
				if h.Key == envelope.MessageID {
					seen[string(h.Value)]++
				}
			}
		case kafka.PartitionEOF:
			eof[e.Partition] = true
		}
	}
	if len(eof) < partitions {
		return r, errors.New("could not read the output to its end")
	}
	for p, hi := range end {
		for off := before[p]; off < hi; off++ {
			switch n := seen[envelope.ID(source, p, off)]; {
			case n == 0:
				r.missing++
			case n > 1:
				r.duplicates += n - 1
			}
			r.outputs += min(seen[envelope.ID(source, p, off)], 1)
		}
	}
	return r, nil
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

func printTable(o options, m map[string]float64, c checkResult, took time.Duration, exitErr error) {
	const lat = "relay_commit_duration_seconds"
	txns := m["relay_transactions_committed_total"]
	mean := math.NaN()
	if n := m[lat+"_count"]; n > 0 {
		mean = m[lat+"_sum"] / n
	}
	exit := "0 (graceful)"
	if exitErr != nil {
		exit = exitErr.Error()
	}
	fmt.Printf(`
relay demo: %s -> %s.valid
  records in (this run)          %d
  records out, verified          %d  (read_committed consumer; missing %d, duplicated %d)
  records committed by relay     %.0f
  transactions committed         %.0f  (aborted %.0f)
  commit latency mean            %s
  commit latency p50 / p99       <= %s / <= %s  (histogram bucket bounds)
  wall time                      %s  (%.0f records/s end to end)
  relay exit                     %s
`, o.source, o.source, o.records, c.outputs, c.missing, c.duplicates,
		m["relay_records_committed_total"], txns, m["relay_transactions_aborted_total"],
		secs(mean), secs(quantile(m, lat, .5)), secs(quantile(m, lat, .99)),
		took.Round(time.Millisecond), float64(o.records)/took.Seconds(), exit)
}

func secs(s float64) string {
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return "n/a"
	}
	return (time.Duration(s * float64(time.Second))).Round(100 * time.Microsecond).String()
}
