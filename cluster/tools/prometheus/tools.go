//go:build tools

// Package tools records the Prometheus commands this module builds (the server and
// promtool) so that go.mod and go.sum pin everything they need. It is never compiled:
// the build tag keeps it out, and the commands are built by path (see cluster/cluster.mk).
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
