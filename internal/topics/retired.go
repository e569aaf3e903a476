package topics

import (
	"regexp"
	"slices"
	"strings"
	"time"

	"relay/internal/config"
)

// A tier topic that leaves the configuration (RELAY_RETRY_TIERS changed,
// or RELAY_ORDERING=partition, which has no tiers) may still hold records
// the group has not consumed. relay run reads such topics until they are
// drained, and relay audit reads them for the copies they hold: both find
// them the same way, here.

// Retired is an existing topic named like a tier of a source that the
// configuration no longer uses.
type Retired struct {
	Topic string
	Delay time.Duration // 0 when the template has no {delay}
}

// RetiredTiers lists the topics among names that RELAY_RETRY_TOPIC names
// for src with some delay, other than every topic relay uses now (each
// source, and each source's output, quarantine, rejected, replay and tier
// topics, and the state topic). A name whose delay part is not one
// duration, repeated wherever the template says {delay}, is another topic
// that happens to match.
func RetiredTiers(cfg *config.Config, src string, names []string) []Retired {
	used := map[string]bool{}
	for _, s := range Plan(cfg, nil) {
		used[s.Name] = true
	}
	for _, s := range cfg.SourceTopics {
		used[s] = true
	}
	parts := cfg.TierTopicPattern(src)
	quoted := make([]string, len(parts))
	for i, p := range parts {
		quoted[i] = regexp.QuoteMeta(p)
	}
	re := regexp.MustCompile("^" + strings.Join(quoted, "(.+)") + "$")
	var out []Retired
	for _, name := range names {
		m := re.FindStringSubmatch(name)
		if m == nil || used[name] {
			continue
		}
		c := Retired{Topic: name}
		if len(m) > 1 {
			d, err := time.ParseDuration(m[1])
			if err != nil || d <= 0 || slices.ContainsFunc(m[2:], func(s string) bool { return s != m[1] }) {
				continue
			}
			c.Delay = d
		}
		out = append(out, c)
	}
	return out
}
