package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
)

// A Go panic exits with status 2, which relay documents as a bad
// configuration: an operator would look for a typo. A crash is a runtime
// failure (exit 1), and says it is a bug. guarded covers the main
// goroutine, which runs the loop, the handler and the rebalance callbacks;
// goGuarded covers the goroutines relay starts itself. A panic on a
// client library's own goroutine, or a fatal runtime error, is beyond
// recover: `relay run`'s supervisor reports those (internal/supervise).

// guarded runs f and returns its exit code, or exitFailure if it panics.
func guarded(stderr io.Writer, f func() int) (code int) {
	defer func() {
		if r := recover(); r != nil {
			crashed(stderr, r)
			code = exitFailure
		}
	}()
	return f()
}

// goGuarded runs f on a goroutine of its own; a panic there ends relay
// with exitFailure.
func goGuarded(f func()) {
	go func() {
		defer func() {
			if r := recover(); r != nil {
				crashed(os.Stderr, r)
				os.Exit(exitFailure)
			}
		}()
		f()
	}()
}

func crashed(stderr io.Writer, r any) {
	fmt.Fprintf(stderr, "relay: internal error (a bug in relay, not a configuration problem; nothing past the committed offsets is lost): %v\n%s", r, debug.Stack())
}
