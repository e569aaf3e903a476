package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/envelope"
)

const quarantineUsage = `Usage:
  relay quarantine show <failure-id>   print a quarantined record's envelope as JSON

A failure id is topic/partition/offset of the record's first appearance, as
in the relay.failure.id header.
`

// cliLookup lets operator commands run with the daemon's environment or
// without its instance identity: they need no transactional id.
func cliLookup(lookup func(string) (string, bool)) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := lookup(name)
		if name == config.EnvTransactionalID && (!ok || v == "") {
			return "relay-cli", true
		}
		return v, ok
	}
}

// runQuarantine is `relay quarantine ...`.
func runQuarantine(ctx context.Context, args []string, lookup func(string) (string, bool), environ []string, stdout, stderr io.Writer) int {
	if len(args) != 2 || args[0] != "show" {
		fmt.Fprint(stderr, quarantineUsage)
		return exitUsage
	}
	id := args[1]
	src, part, _, err := parseFailureID(id)
	if err != nil {
		fmt.Fprintf(stderr, "relay quarantine show: %v\n", err)
		return exitUsage
	}
	cfg, ok := loadConfig(cliLookup(lookup), environ, stderr)
	if !ok {
		return exitUsage
	}
	topic := cfg.Expand(cfg.QuarantineTopic, src)
	found, err := findEnvelope(ctx, cfg, topic, part, id)
	if err != nil {
		fmt.Fprintf(stderr, "relay quarantine show: %v\n", err)
		return exitFailure
	}
	if found == nil {
		fmt.Fprintf(stderr, "relay quarantine show: %s is not in %s partition %d\n", id, topic, part)
		return exitFailure
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(found); err != nil {
		return exitFailure
	}
	return exitOK
}

// parseFailureID splits topic/partition/offset; the topic may contain '/'
// only in theory (Kafka forbids it), so the last two fields are numbers.
func parseFailureID(id string) (topic string, partition int32, offset int64, err error) {
	i := strings.LastIndex(id, "/")
	j := strings.LastIndex(id[:max(i, 0)], "/")
	if i <= 0 || j <= 0 {
		return "", 0, 0, fmt.Errorf("%q is not a failure id (topic/partition/offset)", id)
	}
	p, err1 := strconv.ParseInt(id[j+1:i], 10, 32)
	o, err2 := strconv.ParseInt(id[i+1:], 10, 64)
	if err1 != nil || err2 != nil || p < 0 || o < 0 {
		return "", 0, 0, fmt.Errorf("%q is not a failure id (topic/partition/offset)", id)
	}
	return id[:j], int32(p), o, nil
}

// findEnvelope reads one quarantine partition, committed records only,
// and returns the last envelope with the failure id: records keep their
// source partition number, so the one partition is enough.
func findEnvelope(ctx context.Context, cfg *config.Config, topic string, partition int32, id string) (*envelope.View, error) {
	var found *envelope.View
	err := readToEnd(ctx, cfg, "relay-cli", topic, []int32{partition}, 2*time.Minute, func(m *kafka.Message) {
		hs := toHeaders(m.Headers)
		if v, ok := envelope.Lookup(hs, envelope.FailureID); !ok || string(v) != id {
			return
		}
		f, _ := envelope.Parse(hs)
		tp, _ := envelope.Lookup(hs, envelope.TraceParent)
		view := envelope.NewView(f, string(tp), m.Key, len(m.Value))
		view.Location = &envelope.Where{Topic: topic, Partition: partition, Offset: int64(m.TopicPartition.Offset)}
		found = &view
	})
	if err != nil {
		return nil, err
	}
	return found, nil
}

func toHeaders(hs []kafka.Header) []envelope.Header {
	out := make([]envelope.Header, len(hs))
	for i, h := range hs {
		out[i] = envelope.Header{Key: h.Key, Value: h.Value}
	}
	return out
}
