//go:build tools

// Package tools records the metrics-server command this module builds so that go.mod
// and go.sum pin everything it needs. It is never compiled: the build tag keeps it out,
// and the command is built by path (see cluster/cluster.mk).
package tools

import (
	_ "sigs.k8s.io/metrics-server/cmd/metrics-server"
)
