package pipeline

// Routes names the topics of one source topic.
type Routes struct {
	Source     string
	Output     string
	Quarantine string
	Rejected   string
	// Replay is the replay topic relay consumes ("" when none): records
	// the replay command published from quarantine.
	Replay string
	// Tiers are the retry-tier topics, in the order of their delays.
	Tiers []string
	// Retired are tier topics of an earlier configuration that still hold
	// records of the group: relay reads them, never writes to them, so
	// their records are not stranded when tiers or the ordering policy
	// change.
	Retired []RetiredTier
}

// RetiredTier is a tier topic that is no longer configured, read as the
// configured tier Tier (an index into the policy's tiers): a record from
// it that fails again goes on to the tier after that one.
type RetiredTier struct {
	Topic string
	Tier  int
}

// Origin says where a consumed record comes from.
type Origin struct {
	Routes *Routes
	// Tier is the index of the tier topic, or -1 for the source and the
	// replay topic.
	Tier int
	// Replay is set for the replay topic.
	Replay bool
	// Retired is set for a retired tier topic.
	Retired bool
}

// Table finds the routes of every topic relay consumes.
type Table struct {
	byTopic map[string]Origin
}

// NewTable indexes the routes of every source.
func NewTable(routes []Routes) *Table {
	t := &Table{byTopic: map[string]Origin{}}
	for i := range routes {
		r := &routes[i]
		t.byTopic[r.Source] = Origin{Routes: r, Tier: -1}
		if r.Replay != "" {
			t.byTopic[r.Replay] = Origin{Routes: r, Tier: -1, Replay: true}
		}
		for n, tier := range r.Tiers {
			t.byTopic[tier] = Origin{Routes: r, Tier: n}
		}
		for _, rt := range r.Retired {
			t.byTopic[rt.Topic] = Origin{Routes: r, Tier: max(rt.Tier, 0), Retired: true}
		}
	}
	return t
}

// Of returns the origin of a consumed topic.
func (t *Table) Of(topic string) (Origin, bool) {
	o, ok := t.byTopic[topic]
	return o, ok
}

// quarantineOf names the quarantine topic of a source topic.
func (t *Table) quarantineOf(source string) string {
	if o, ok := t.byTopic[source]; ok {
		return o.Routes.Quarantine
	}
	return ""
}

// Topics lists every topic relay consumes: sources, tiers and replay.
func (t *Table) Topics() []string {
	out := make([]string, 0, len(t.byTopic))
	for topic := range t.byTopic {
		out = append(out, topic)
	}
	return out
}
