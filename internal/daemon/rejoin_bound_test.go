package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"relay/internal/config"
)

// Rejoins after a refused group.instance.id are bounded: the fourth within
// the window gives up with the refusal, asking nothing of the brokers.
func TestRejoinsAreBounded(t *testing.T) {
	d := &daemon{cfg: &config.Config{}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	fenced := errors.New("fenced")
	now := time.Now()
	rejoins := []time.Time{now, now, now}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := d.rejoin(ctx, fenced, &rejoins)
	if c != nil || !errors.Is(err, fenced) || err == nil || !strings.Contains(err.Error(), "giving up") {
		t.Fatalf("rejoin = %v, %v; want the refusal, giving up", c, err)
	}
}
