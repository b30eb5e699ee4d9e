//go:build tools

// Package tools records the kwok commands this module builds so that go.mod and
// go.sum pin everything they need. It is never compiled: the build tag keeps it out,
// and the commands are built by path (see cluster/cluster.mk).
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
	_ "sigs.k8s.io/kwok/cmd/kwokctl"
)
