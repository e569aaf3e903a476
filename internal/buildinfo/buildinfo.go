// Package buildinfo is what relay knows of its own build: the version and
// commit `make build` sets with -ldflags
// "-X relay/internal/buildinfo.Version=… -X relay/internal/buildinfo.Commit=…",
// the Go version, and the librdkafka version linked in.
package buildinfo

import (
	"runtime"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Set at build time.
var (
	Version = "dev"
	Commit  = "unknown"
)

// GoVersion is the Go release relay was built with.
func GoVersion() string { return runtime.Version() }

// Librdkafka is the version of the librdkafka relay runs.
func Librdkafka() string {
	_, v := kafka.LibraryVersion()
	return v
}
