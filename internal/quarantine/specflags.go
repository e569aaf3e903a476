package quarantine

import "github.com/spf13/pflag"

// Bind registers sp's flags on fs (relay quarantine list's and relay
// replay's selection; the states only with withStates).
func (sp *Spec) Bind(fs *pflag.FlagSet, withStates bool) {
	fs.StringVar(&sp.Codes, "code", "", "error codes, comma-separated")
	fs.StringVar(&sp.Classes, "class", "", "error classes (relay.error.class), comma-separated")
	fs.Var(&keyFlag{&sp.Key}, "key", "record key, as text")
	fs.StringVar(&sp.MinAge, "min-age", "", "quarantined at least this long ago (e.g. 1h, 7d)")
	fs.StringVar(&sp.MaxAge, "max-age", "", "quarantined at most this long ago")
	fs.StringVar(&sp.SchemaVersions, "schema-version", "", "writer schema versions, comma-separated")
	fs.IntVar(&sp.Partition, "partition", -1, "source partition")
	fs.StringVar(&sp.Source, "source", "", "source topic")
	fs.StringVar(&sp.Since, "since", "", "quarantined at or after (RFC 3339 time, or a duration ago: 24h, 7d)")
	fs.StringVar(&sp.Until, "until", "", "quarantined at or before (RFC 3339 time, or a duration ago)")
	if withStates {
		fs.StringVar(&sp.States, "state", "", "states, comma-separated, or all (default open,replaying,failed-again)")
	}
}

// keyFlag is --key: set, even to "", it selects that key.
type keyFlag struct{ p **string }

func (k *keyFlag) String() string {
	if *k.p == nil {
		return ""
	}
	return **k.p
}
func (k *keyFlag) Set(v string) error { *k.p = &v; return nil }
func (k *keyFlag) Type() string       { return "string" }
