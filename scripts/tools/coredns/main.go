// Command coredns is CoreDNS with only the plugins the cluster of make
// test-k8s uses (scripts/k8s): kubernetes (the Services' and the
// StatefulSet's names), forward (everything else, to the host's
// resolver), bind, cache, errors, health and ready. It runs on the
// node, behind the kube-dns Service.
package main

import (
	_ "github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() { coremain.Run() }
