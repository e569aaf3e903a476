package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/buildinfo"
	"relay/internal/config"
	"relay/internal/features"
	"relay/internal/kafkaclient"
	"relay/internal/telemetry"
)

// featuresEvery is how often relay looks at its group's members and their
// records, besides after each rebalance. A static member restarted within
// its session keeps its partitions without a rebalance (as when the last
// older member is replaced by a newer one), so only a look tells; a look
// costs one connection, one request, and the member records written to
// state partition 0 since the last.
const featuresEvery = 10 * time.Second

// memberPartition is the state-topic partition of the member records.
const memberPartition = 0

// announced are the features this instance announces: parking, when key
// ordering parks.
func announced(cfg *config.Config) []string {
	if cfg.Ordering == "key" && cfg.KeyParkMaxRecords > 0 {
		return []string{features.Park}
	}
	return []string{}
}

// shared are the settings every member of a group must run with the same
// value, as this instance has them: where records go between tiers, and
// in what order they are handled. A member with another value would
// write records into tier topics the others do not read, or read a key
// state as a policy it does not follow.
func shared(cfg *config.Config) map[string]string {
	labels := make([]string, len(cfg.RetryTiers))
	for i, t := range cfg.RetryTiers {
		labels[i] = t.Label // as written: it names the tier topics
	}
	return map[string]string{
		config.EnvOrdering:   cfg.Ordering,
		config.EnvRetryTiers: strings.Join(labels, ","),
		config.EnvRetryTopic: cfg.RetryTopic,
	}
}

// newMembers is a view of the group's members and their records.
func (d *daemon) newMembers() *members {
	return &members{cfg: d.cfg, groups: kafkaclient.GroupsOf(d.cfg), own: announced(d.cfg), settings: shared(d.cfg),
		records: map[string]features.Record{}, warned: map[string]bool{}, log: d.log}
}

// settingsCheckTimeout bounds the look at the group before joining it.
const settingsCheckTimeout = 30 * time.Second

// checkGroupSettings refuses to join a group one of whose members runs a
// shared setting (shared) with another value: the change of such a
// setting needs every instance stopped first. A look that cannot be made
// (the state topic or the group cannot be read now) is logged, and relay
// starts: the watch's looks log a conflict they find later. The member
// records read stay in m, which the watch then reads on from.
func (d *daemon) checkGroupSettings(ctx context.Context, m *members) error {
	ctx, cancel := context.WithTimeout(ctx, settingsCheckTimeout)
	defer cancel()
	if err := m.read(ctx); err != nil {
		d.log.Warn("could not read the group's member records before joining; relay joins without checking that the members' settings agree", "err", err)
		return nil
	}
	ms, err := describeMembers(ctx, m.groups, d.cfg.GroupID)
	if err != nil {
		d.log.Warn("could not describe the group before joining; relay joins without checking that the members' settings agree", "err", err)
		return nil
	}
	withRecords(ms, m.records, "", nil)
	conflicts := features.Conflicts(m.settings, ms, d.cfg.GroupInstanceID)
	if len(conflicts) == 0 {
		return nil
	}
	msgs := make([]string, len(conflicts))
	for i, c := range conflicts {
		msgs[i] = c.String()
	}
	return &ConfigError{Err: fmt.Errorf("group %s: %s: every member of a group must run the same %s; to change them, stop every instance of the group (scale to 0), then start them all with the new values (RUNBOOK, \"Upgrades: changing tiers and ordering\")",
		d.cfg.GroupID, strings.Join(msgs, "; "), strings.Join(slices.Sorted(maps.Keys(m.settings)), ", "))}
}

// watchFeatures starts watching what the group's members announce, for as
// long as ctx; key ordering parks only while every member announces it.
// done is closed once the watch has ended and the farewell record is
// written (or given up).
// m is the view the check before joining began (checkGroupSettings).
func (d *daemon) watchFeatures(ctx context.Context, metrics *telemetry.Metrics, m *members) (w *features.Watch, done <-chan struct{}) {
	w = features.NewWatch(m.look, featuresEvery, d.log.With("group", d.cfg.GroupID))
	w.Quiet = d.cfg.Ordering != "key" // no feature applies
	metrics.SetFeatures(func() map[string]bool {
		on := map[string]bool{}
		for _, f := range features.All {
			on[f] = w.On(f)
		}
		return on
	})
	ended := make(chan struct{})
	d.opts.Go(func() {
		defer close(ended)
		defer m.close()
		w.Run(ctx)
		m.farewell()
	})
	return w, ended
}

// farewellTimeout bounds the write of the record that says this instance
// stopped.
const farewellTimeout = 5 * time.Second

// farewell rewrites this instance's member record without its settings
// once it stops: a static member stays in the group until its session
// expires, and the instances started after every one was stopped (to
// change a shared setting) must not be refused for it. Its features stay
// announced: a static member restarted within its session keeps its
// partitions. A process killed writes no farewell; its settings count
// until its session expires.
func (m *members) farewell() {
	if m.written == "" || m.writer == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), farewellTimeout)
	defer cancel()
	if err := m.put(ctx, m.written, features.Record{Instance: m.cfg.GroupInstanceID, Version: buildinfo.Version, Features: m.own}); err != nil {
		m.log.Warn("could not write this instance's farewell member record; instances started with other settings are refused until its session expires", "err", err)
	}
}

// members is the features watch's view of the group: the member records
// read so far, and this instance's own.
type members struct {
	cfg    *config.Config
	groups groupDescriber
	own    []string
	// settings are this instance's shared settings; warned, the member
	// ids whose other settings were logged.
	settings map[string]string
	warned   map[string]bool
	log      *slog.Logger
	reader   *kafka.Consumer            // of state partition memberPartition, from its start
	caught   bool                       // the reader reached the partition's end once
	writer   *kafka.Producer            // of this instance's record
	records  map[string]features.Record // by member id
	written  string                     // the member id this instance's record was written for
}

// look reads the member records written since the last look, describes the
// group, and writes this instance's record when its member id is new. A
// record that cannot be written is tried again at the next look; meanwhile
// the others count this member as one without features.
func (m *members) look(ctx context.Context) ([]features.Member, error) {
	if err := m.read(ctx); err != nil {
		return nil, err
	}
	ms, err := describeMembers(ctx, m.groups, m.cfg.GroupID)
	if err != nil {
		return nil, err
	}
	if id := withRecords(ms, m.records, m.cfg.GroupInstanceID, m.own); id != "" && id != m.written {
		if err := m.write(ctx, id); err != nil {
			m.log.Warn("could not write this instance's member record; the group counts it as a member without features until it is written", "err", err)
		}
	}
	m.warnConflicts(ms)
	return ms, nil
}

// warnConflicts logs, once per member, a member of the group that runs a
// shared setting with another value (one that joined without the check
// before joining, or while it could not look).
func (m *members) warnConflicts(ms []features.Member) {
	for _, c := range features.Conflicts(m.settings, ms, m.cfg.GroupInstanceID) {
		if k := c.Member + "|" + c.Setting; !m.warned[k] {
			m.warned[k] = true
			m.log.Error("a member of the group runs a setting every member must share with another value: records may go to tiers the others do not read, or be ordered by another policy",
				"group", m.cfg.GroupID, "conflict", c.String(), "hint", "stop every instance of the group, then start them all with one value (RUNBOOK, \"Upgrades: changing tiers and ordering\")")
		}
	}
}

// withRecords gives each member the features of its record (by member
// id), and this instance (by its group.instance.id; none when dynamic) its
// own; ownID is this instance's member id ("" when it is not a member).
func withRecords(ms []features.Member, records map[string]features.Record, instance string, own []string) (ownID string) {
	for i := range ms {
		if instance != "" && ms[i].InstanceID == instance {
			ms[i].Features, ownID = own, ms[i].MemberID
			continue
		}
		if r, ok := records[ms[i].MemberID]; ok {
			ms[i].Features, ms[i].Settings = r.Features, r.Settings
		}
	}
	return ownID
}

// read catches up with the member records: the first time to the end of
// the partition, then until a poll finds nothing new (a record written
// since is read at the next look; meanwhile its member counts as one
// without features).
func (m *members) read(ctx context.Context) error {
	if m.reader == nil {
		r, err := kafkaclient.Reader(m.cfg, m.cfg.ReaderGroup("members"), kafkaclient.Read{EOF: true})
		if err != nil {
			return fmt.Errorf("member records reader: %w", err)
		}
		topic := m.cfg.StateTopicName()
		if err := r.Assign([]kafka.TopicPartition{{Topic: &topic, Partition: memberPartition, Offset: kafka.OffsetBeginning}}); err != nil {
			_ = r.Close()
			return fmt.Errorf("member records reader: %w", err)
		}
		m.reader = r
	}
	for ctx.Err() == nil {
		switch ev := m.reader.Poll(200).(type) {
		case nil:
			if m.caught {
				return nil
			}
		case kafka.PartitionEOF:
			m.caught = true
			return nil
		case *kafka.Message:
			id, ok := strings.CutPrefix(string(ev.Key), features.KeyPrefix)
			if !ok {
				continue
			}
			if ev.Value == nil {
				delete(m.records, id)
				continue
			}
			if r, err := features.Decode(ev.Value); err == nil {
				m.records[id] = r
			}
		case kafka.Error:
			if ev.IsFatal() {
				return ev
			}
		}
	}
	return fmt.Errorf("member records of %s: not read to their end in time: %w", m.cfg.StateTopicName(), ctx.Err())
}

// write writes this instance's record for memberID, and waits until the
// brokers have it.
func (m *members) write(ctx context.Context, memberID string) error {
	if m.writer == nil {
		p, err := kafkaclient.Producer(m.cfg)
		if err != nil {
			return fmt.Errorf("member record writer: %w", err)
		}
		m.writer = p
	}
	topic := m.cfg.StateTopicName()
	if err := m.put(ctx, memberID, features.Record{Instance: m.cfg.GroupInstanceID, Version: buildinfo.Version, Features: m.own, Settings: m.settings}); err != nil {
		return err
	}
	m.written = memberID
	// This instance's records of its earlier joins speak for no member
	// any more: tombstones let compaction remove them.
	for _, id := range staleOwn(m.records, m.cfg.GroupInstanceID, memberID) {
		_ = m.writer.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: memberPartition}, Key: []byte(features.Key(id))}, nil)
		delete(m.records, id)
	}
	return nil
}

// put writes rec as memberID's record, and waits until the brokers have
// it.
func (m *members) put(ctx context.Context, memberID string, rec features.Record) error {
	topic := m.cfg.StateTopicName()
	done := make(chan kafka.Event, 1)
	if err := m.writer.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: memberPartition},
		Key: []byte(features.Key(memberID)), Value: rec.Encode()}, done); err != nil {
		return fmt.Errorf("member record: %w", err)
	}
	select {
	case ev := <-done:
		if msg, ok := ev.(*kafka.Message); ok && msg.TopicPartition.Error != nil {
			return fmt.Errorf("member record: %w", msg.TopicPartition.Error)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("member record: %w", errors.Join(ctx.Err(), errors.New("not acknowledged in time")))
	}
}

// staleOwn are the member ids of this instance's (group.instance.id
// instance's) earlier joins: every record of instance but memberID's.
// Another instance's records are never among them.
func staleOwn(records map[string]features.Record, instance, memberID string) []string {
	var out []string
	for id, r := range records {
		if id != memberID && instance != "" && r.Instance == instance {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

func (m *members) close() {
	if m.reader != nil {
		_ = m.reader.Close()
	}
	if m.writer != nil {
		m.writer.Close()
	}
}

// describeMembers are group's members as the group coordinator describes
// them (without their features).
func describeMembers(ctx context.Context, g groupDescriber, group string) ([]features.Member, error) {
	res, err := g.DescribeConsumerGroups(ctx, []string{group})
	if err != nil {
		return nil, err
	}
	if len(res.ConsumerGroupDescriptions) != 1 {
		return nil, fmt.Errorf("describe group %s: %d descriptions", group, len(res.ConsumerGroupDescriptions))
	}
	desc := res.ConsumerGroupDescriptions[0]
	if desc.Error.Code() != kafka.ErrNoError {
		return nil, fmt.Errorf("describe group %s: %w", group, desc.Error)
	}
	out := make([]features.Member, 0, len(desc.Members))
	for _, m := range desc.Members {
		out = append(out, features.Member{InstanceID: m.GroupInstanceID, MemberID: m.ConsumerID, ClientID: m.ClientID, Host: m.Host})
	}
	return out, nil
}

// pokeOnAssign is the loop's observer, which also has the features watch
// look at the group after each rebalance.
type pokeOnAssign struct {
	*telemetry.Metrics
	watch *features.Watch
}

func (o pokeOnAssign) Assigned(partitions int) {
	o.Metrics.Assigned(partitions)
	o.watch.Poke()
}
