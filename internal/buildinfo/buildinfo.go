// Package buildinfo is what relay knows of its own build: the version,
// commit and date `make build` and `make release` set with -ldflags
// "-X relay/internal/buildinfo.Version=… -X relay/internal/buildinfo.Commit=…
// -X relay/internal/buildinfo.Date=…", the Go version, and the librdkafka
// version linked in.
package buildinfo

import (
	"fmt"
	"io"
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

// Info is what `relay version` prints.
type Info struct {
	Version    string `json:"version"`
	Commit     string `json:"commit"`
	Date       string `json:"date"`
	Go         string `json:"go"`
	Librdkafka string `json:"librdkafka"`
	// Libraries are the C libraries linked into relay with librdkafka,
	// and their versions, as they report them.
	Libraries []Library `json:"libraries"`
}

// Get is this build's Info.
func Get() Info {
	return Info{Version: Version, Commit: Commit, Date: Date, Go: GoVersion(), Librdkafka: Librdkafka(), Libraries: Libraries()}
}

// Text writes i as `relay version` prints it by default.
func (i Info) Text(w io.Writer) {
	fmt.Fprintf(w, "relay %s\ncommit: %s\ndate: %s\ngo: %s\nlibrdkafka: %s\n", i.Version, i.Commit, i.Date, i.Go, i.Librdkafka)
	for _, l := range i.Libraries {
		fmt.Fprintf(w, "%s: %s\n", l.Name, l.Version)
	}
}
