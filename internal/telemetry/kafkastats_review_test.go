package telemetry

import (
	"testing"
	"time"
)

// The loop hands its consumer's statistics over on its own goroutine: it
// must not wait for a scrape that is reading (parsing a large document,
// observing the gauges) the ones before.
func TestStatisticsDoNotWaitForAScrape(t *testing.T) {
	m := &Metrics{}
	m.Statistics("consumer", `{"cgrp":{"state":"up","join_state":"steady"}}`)
	inScrape, release := make(chan struct{}), make(chan struct{})
	go m.kstats.each(func(string, *rdStats) {
		close(inScrape)
		<-release
	})
	<-inScrape
	defer close(release)
	done := make(chan struct{})
	go func() {
		m.Statistics("consumer", `{}`)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("Statistics waited for a scrape in progress")
	}
}
