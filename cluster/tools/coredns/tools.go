//go:build tools

// Package tools records upstream's CoreDNS command so that go.mod and go.sum pin what its
// full plugin set needs, the versions of upstream's own build; cmd/coredns, which
// cluster/cluster.mk builds, uses a subset of them. It is never compiled: the build tag
// keeps it out.
package tools

import (
	_ "github.com/coredns/coredns"
)
