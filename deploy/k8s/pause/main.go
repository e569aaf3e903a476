// Command pause holds a pod's namespaces for the cluster of make test-k8s
// (scripts/k8s), as a sandbox image's one process does: it waits for
// SIGTERM or SIGINT and exits 0, and reaps the children it inherits as
// the namespace's first process.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
