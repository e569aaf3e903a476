// Command kube-apiserver is Kubernetes' API server, as its own command
// builds it (k8s.io/kubernetes/cmd/kube-apiserver).
package main

import (
	"os"

	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	if err := app.NewAPIServerCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
