// The pod sandbox ("pause") process a kubelet's runtime starts first in every pod: it holds the
// pod's namespaces, reaps orphaned children (it is PID 1 when the pod shares its PID namespace)
// and exits on SIGINT/SIGTERM. The same job as upstream's pause.c, built with the host's Go
// because no registry is reachable for registry.k8s.io/pause.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	children := make(chan os.Signal, 16)
	signal.Notify(children, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			os.Exit(0)
		case <-children:
			for {
				var status syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
