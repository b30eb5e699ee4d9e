//go:build tools

// Package tools records the control-plane and node commands this module builds so that
// go.mod and go.sum pin everything they need. It is never compiled: the build tag
// keeps it out, and the commands are built by path (see cluster/cluster.mk).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
)
