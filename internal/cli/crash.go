package cli

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
)

// A Go panic exits with status 2, which relay documents as a bad
// configuration: an operator would look for a typo. A crash is a runtime
// failure (exit 1), and says it is a bug. Guarded covers the main
// goroutine, which runs the loop, the handler and the rebalance callbacks;
// GoGuarded covers the goroutines relay starts itself. A panic on a
// client library's own goroutine, or a fatal runtime error, is beyond
// recover: `relay run`'s supervisor reports those (internal/supervise).

// Guarded runs f and returns its exit code, or Failure if it panics.
func Guarded(stderr io.Writer, f func() int) (code int) {
	defer func() {
		if r := recover(); r != nil {
			crashed(stderr, r)
			code = Failure
		}
	}()
	return f()
}

// GoGuarded runs f on a goroutine of its own; a panic there ends relay:
// exit (os.Exit, which only main may name) with Failure.
func GoGuarded(f func(), exit func(int)) {
	go func() {
		defer func() {
			if r := recover(); r != nil {
				crashed(os.Stderr, r)
				exit(Failure)
			}
		}()
		f()
	}()
}

func crashed(stderr io.Writer, r any) {
	fmt.Fprintf(stderr, "relay: internal error (a bug in relay, not a configuration problem; nothing past the committed offsets is lost): %v\n%s", r, debug.Stack())
}
