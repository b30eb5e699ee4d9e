// Command pause is the sandbox ("infra") container of the real node's pods: it holds the
// pod's namespaces open and does nothing else. No image can be pulled here, so kubetrain
// builds its own and imports it into containerd under the name the kubelet and
// containerd expect (registry.k8s.io/pause:3.10, see cluster/node.py).
//
// As PID 1 of a pod sharing its PID namespace it must reap the orphans re-parented to it,
// and it must exit promptly on SIGTERM or SIGINT (PID 1 gets no default signal handlers).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (kubetrain)")
		return
	}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every child that has exited, without blocking on those still running.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
