// Package buildinfo is what relay knows of its own build: the version,
// commit and date `make build` and `make release` set with -ldflags
// "-X relay/internal/buildinfo.Version=… -X relay/internal/buildinfo.Commit=…
// -X relay/internal/buildinfo.Date=…", the Go version, and the librdkafka
// version linked in.
package buildinfo

import (
	"runtime"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Set at build time.
var (
	Version = "dev"
	Commit  = "unknown"
	// Date is the commit's time (SOURCE_DATE_EPOCH), not the build's: a
	// release build is reproducible.
	Date = "unknown"
)

// GoVersion is the Go release relay was built with.
func GoVersion() string { return runtime.Version() }

// Librdkafka is the version of the librdkafka relay runs.
func Librdkafka() string {
	_, v := kafka.LibraryVersion()
	return v
}
