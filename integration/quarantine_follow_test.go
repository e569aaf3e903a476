package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/envelope"
	"relay/internal/ledger"
	"relay/internal/quarantine"
	"relay/internal/statetopic"
)

// TestQuarantineIndexFollowsTheTopics: the index the console and the
// commands read follows the state topic and the quarantine topic on the
// real broker. A catch-up folds only what was written since the last one
// (a later change of a failure, a new failure), never what an aborted
// transaction wrote, and forgets a record retention deleted; a failure's
// history and bytes are read where they are.
func TestQuarantineIndexFollowsTheTopics(t *testing.T) {
	src, group := uniq(t, "src"), uniq(t, "grp")
	env := map[string]string{"RELAY_KAFKA_BOOTSTRAP_SERVERS": bootstrap, "RELAY_SOURCE_TOPICS": src, "RELAY_GROUP_ID": group}
	cfg := operatorConfig(t, env)
	state, qtopic := cfg.StateTopicName(), cfg.Derived(src).Quarantine
	createTopics(t, 2, state, qtopic)
	ad := admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "transactional.id": uniq(t, "txn"), "log_level": 3})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	go func() {
		for range p.Events() {
		}
	}()
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Second)
	// quarantine writes failure i's open change and its quarantine
	// record in one transaction, as relay does; abort rolls it back.
	quarantined := func(i int, abort bool) {
		t.Helper()
		id := fmt.Sprintf("%s/%d/%d", src, i%2, i)
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		e := &ledger.Event{ID: id, State: ledger.Open, At: at.Add(time.Duration(i) * time.Second), Actor: "relay", Reason: "quarantined",
			Code: "WIRE_FORMAT_INVALID", Source: ledger.Source{Topic: src, Partition: int32(i % 2), Offset: int64(i)}, Topic: qtopic, RecordTime: at}
		f := &envelope.Failure{ID: id, SourceTopic: src, SourcePartition: int32(i % 2), SourceOffset: int64(i), Class: "permanent",
			Code: "WIRE_FORMAT_INVALID", Message: "not the wire format", Attempt: 1, FirstFailedAt: at, LastFailedAt: at}
		q := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &qtopic, Partition: int32(i % 2)}, Key: fmt.Appendf(nil, "k-%d", i),
			Value: []byte("garbage"), Headers: envelope.AppendFailure([]kafka.Header(nil), f), Timestamp: at}
		for _, m := range []*kafka.Message{statetopic.EventMessage(state, e), q} {
			if err := p.Produce(m, nil); err != nil {
				t.Fatal(err)
			}
		}
		if abort {
			err = p.AbortTransaction(ctx)
		} else {
			err = p.CommitTransaction(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		quarantined(i, false)
	}
	quarantined(4, true)

	r := quarantine.NewReader(cfg, ad, "")
	if err := r.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	x := r.Index()
	ids := func(f *quarantine.Filter) (out []string) {
		for _, it := range x.Items(f, time.Now()) {
			out = append(out, it.ID+" "+string(it.State)+" "+it.Record)
		}
		return out
	}
	all := &quarantine.Filter{Partition: -1}
	if got := ids(all); len(got) != 4 || x.Len() != 4 {
		t.Fatalf("after the first read: %v (the aborted failure must not be there)", got)
	}

	// Failure 1 is resolved by a replay; failure 5 is quarantined.
	one := fmt.Sprintf("%s/1/1", src)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	res := &ledger.Event{ID: one, State: ledger.Resolved, At: at.Add(time.Minute), Actor: "relay", Reason: "replayed", ReplayID: "r-1",
		ReplayCount: 1, Outcome: ledger.OutcomeProcessed, Source: ledger.Source{Topic: src, Partition: 1, Offset: 1}}
	if err := p.Produce(statetopic.EventMessage(state, res), nil); err != nil {
		t.Fatal(err)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	quarantined(5, false)
	if err := r.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := x.Get(one); got == nil || got.State != ledger.Resolved || got.ReplayCount != 1 {
		t.Fatalf("failure 1 after the catch-up: %+v", got)
	}
	if got := ids(all); len(got) != 5 || x.Len() != 5 {
		t.Fatalf("after the catch-up: %v", got)
	}
	if rp := x.Replays(5); len(rp) != 1 || rp[0].ID != "r-1" || rp[0].Resolved != 1 {
		t.Fatalf("replays %+v", rp)
	}
	key := "k-5"
	if got := ids(&quarantine.Filter{Partition: -1, Key: &key}); len(got) != 1 {
		t.Fatalf("by key: %v", got)
	}

	// Its page reads its history and its record where they are.
	full, err := r.Full(ctx, one)
	if err != nil || full.Entry == nil || len(full.Entry.History) != 2 || full.Record == nil || string(full.Record.Value) != "garbage" ||
		full.Record.Failure.Message != "not the wire format" {
		t.Fatalf("failure 1's page: %+v %v", full, err)
	}

	// Retention (here DeleteRecords) deletes partition 0's first two
	// records: failures 0 and 2 keep their ledger, and their records are
	// gone.
	del := qtopic
	res2, err := ad.DeleteRecords(ctx, []kafka.TopicPartition{{Topic: &del, Partition: 0, Offset: 4}})
	if err != nil || res2.DeleteRecordsResults[0].TopicPartition.Error != nil {
		t.Fatalf("delete records: %v %+v", err, res2)
	}
	if err := r.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	gone := 0
	for _, it := range x.Items(all, time.Now()) {
		if it.Record == quarantine.Gone {
			gone++
		}
	}
	if gone != 2 {
		t.Fatalf("records gone after DeleteRecords: %d, want 2: %v", gone, ids(all))
	}
}
