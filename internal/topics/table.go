package topics

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"
)

// View is a planned topic as the cluster has it, for JSON.
type View struct {
	Topic      string            `json:"topic"`
	Role       string            `json:"role"`
	Source     string            `json:"source,omitempty"`
	Partitions int               `json:"partitions"`
	Has        int               `json:"hasPartitions"`
	Configs    map[string]string `json:"configs,omitempty"`
	// Replicas and MinInsyncReplicas of an existing topic, 0 unknown;
	// Risk is what one broker's loss could do to it (Durability.Risk).
	Replicas          int    `json:"replicas,omitempty"`
	MinInsyncReplicas int    `json:"minInsyncReplicas,omitempty"`
	Risk              string `json:"risk,omitempty"`
	Status            string `json:"status"`
}

// Views are states as JSON shows them.
func Views(states []State) []View {
	out := make([]View, len(states))
	for i, s := range states {
		out[i] = View{Topic: s.Name, Role: s.Role, Source: s.Source, Partitions: s.Partitions, Has: s.Have, Configs: s.Configs,
			Replicas: s.Replicas, MinInsyncReplicas: s.MinInsync, Risk: s.Risk(), Status: statusOf(s)}
	}
	return out
}

// statusOf is "ok", or what is wrong with the topic, or how a broker's
// loss could hurt it.
func statusOf(s State) string {
	if p := s.Problem(); p != "" {
		return p
	}
	if r := s.Risk(); r != "" {
		return "at risk: " + r
	}
	return "ok"
}

// WriteTable writes states as a table.
func WriteTable(w io.Writer, states []State) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tROLE\tSOURCE\tNEEDS\tHAS\tREPLICAS\tMIN.ISR\tCONFIG\tSTATUS")
	for _, s := range states {
		has := strconv.Itoa(s.Have)
		if s.Have == 0 {
			has = "-"
		}
		conf := ""
		for _, k := range []string{"cleanup.policy", "retention.ms"} {
			if v, ok := s.Configs[k]; ok {
				if k == "retention.ms" {
					n, _ := strconv.ParseInt(v, 10, 64)
					v = (time.Duration(n) * time.Millisecond).String()
				}
				conf += k + "=" + v + " "
			}
		}
		reps, isr := "-", "-"
		if s.Replicas > 0 {
			reps = strconv.Itoa(s.Replicas)
		}
		if s.MinInsync > 0 {
			isr = strconv.Itoa(s.MinInsync)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Role, s.Source, s.Partitions, has, reps, isr, conf, statusOf(s))
	}
	_ = tw.Flush()
}
