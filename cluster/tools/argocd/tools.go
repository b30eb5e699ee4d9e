//go:build tools

// Package tools records the Argo CD command this module builds so that go.mod and go.sum
// pin everything it needs. It is never compiled: the build tag keeps it out, and the
// command is built by path (see cluster/cluster.mk).
package tools

import (
	_ "github.com/argoproj/argo-cd/v3/cmd"
)
