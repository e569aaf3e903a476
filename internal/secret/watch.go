package secret

import (
	"context"
	"log/slog"
	"time"
)

// WatchInterval is how often Watch looks at the secret files. A mounted
// Secret is updated by the kubelet within about a minute of its change;
// a few seconds more do not matter, and a stat-free read of a few small
// files is nothing.
const WatchInterval = 5 * time.Second

// Watch reads values' files again every interval and whenever reload
// delivers, until ctx ends. For each secret that changed it logs which
// (never the value) and calls changed; a file that cannot be read keeps
// the value in use and is logged once per distinct error.
func Watch(ctx context.Context, values []*Value, interval time.Duration, reload <-chan struct{}, changed func(*Value), log *slog.Logger) {
	if len(values) == 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	last := map[*Value]string{}
	check := func(why string) {
		for _, v := range values {
			ok, err := v.Reload()
			switch {
			case err != nil:
				if last[v] != err.Error() {
					log.Warn("cannot read a secret file again; the value read before stays in use", "var", v.Var, "file", v.File, "err", err)
				}
				last[v] = err.Error()
			case ok:
				delete(last, v)
				log.Info("secret file changed; read again", "var", v.Var, "file", v.File, "seen", why)
				if changed != nil {
					changed(v)
				}
			default:
				delete(last, v)
			}
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			check("file changed")
		case <-reload:
			check("SIGHUP")
		}
	}
}
