// Command gen writes docs/REFERENCE.md; go generate runs it (see package
// reference).
package main

import (
	"flag"
	"fmt"
	"os"

	"relay/internal/reference"
)

func main() {
	out := flag.String("o", "docs/REFERENCE.md", "file to write")
	flag.Parse()
	if err := os.WriteFile(*out, reference.Render(nil), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "reference:", err)
		os.Exit(1)
	}
}
