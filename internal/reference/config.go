package reference

import (
	"relay/internal/config"
	"relay/internal/kafkaclient"
)

// variables renders config.Vars.
func variables(d *doc) {
	d.para("relay reads its configuration from environment variables only. A bad value stops relay before it " +
		"connects to anything (exit 2), naming the variable. An unknown `RELAY_*` variable is reported as a warning. " +
		"`relay config` prints the values in use, secrets masked, including those relay derives. " +
		"Every secret — the secret variables below, and every `" + config.KafkaPrefix + "*` property that holds a password, key or token — " +
		"can instead come from a file: `<NAME>_FILE` names it (setting both is an error); relay reads it again when it changes and on `SIGHUP`.")
	rows := make([][]string, 0, len(config.Vars))
	for _, v := range config.Vars {
		help := v.Help
		if v.Secret {
			help += ". Secret: masked by `relay config`; or set `" + v.Name + "_FILE` to a file holding it, read again when the file changes"
		}
		rows = append(rows, []string{code(v.Name), defaultOf(v), help})
	}
	d.table([]string{"variable", "default", "meaning"}, rows)
}

// defaultOf is how the table shows a variable's default.
func defaultOf(v config.Var) string {
	switch {
	case v.Required:
		return "required"
	case v.DefaultNote != "":
		return v.DefaultNote
	case v.Default != "":
		return code(v.Default)
	default:
		return "unset"
	}
}

// passthrough renders the RELAY_KAFKA_* rule and the managed properties.
func passthrough(d *doc) {
	var none config.Config // VarForProperty of a property nobody set applies the rule
	example := func(prop string) string {
		return code(none.VarForProperty(prop)) + " becomes " + code(prop)
	}
	d.para("Every `" + config.KafkaPrefix + "*` variable is passed to librdkafka as a property: strip the prefix, " +
		"lower-case the rest, and `_` becomes `.`. " + example("bootstrap.servers") + ", " +
		example("sasl.mechanism") + ". This is how SASL/SSL settings reach the clients. " +
		"The table above gives the defaults relay sets, or reads, itself, and the next one those of its clients; " +
		"every other property has librdkafka's default.")
	d.para("relay gives its clients these defaults in place of librdkafka's, so that what it holds in memory is bounded; " +
		"a `" + config.KafkaPrefix + "*` variable overrides each (`RELAY_KAFKA_QUEUED_MAX_MESSAGES_KBYTES=65536` restores librdkafka's prefetch). " +
		"Consumer defaults go to the loop's consumer and to every reader of relay's own topics, producer defaults to the transactional producers.")
	drows := [][]string{}
	for _, p := range kafkaclient.Defaults() {
		drows = append(drows, []string{code(p.Property), p.Client, code(p.Value), p.Why})
	}
	d.table([]string{"property", "client", "relay's default", "why"}, drows)
	d.para("relay sets these properties itself; setting one through `" + config.KafkaPrefix + "*` is an error (exit 2). " +
		"relay also sets `partition.assignment.strategy=range` and refuses another value.")
	rows := [][]string{}
	for _, m := range config.ManagedProperties() {
		rows = append(rows, []string{code(m.Property), m.Why})
	}
	d.table([]string{"managed property", "why"}, rows)
}
