//go:build tools

// Package tools records what this module needs so that go.mod and go.sum pin it: the
// controller-gen command and Volcano's API types it reads. It is never compiled: the
// build tag keeps it out (see cluster/cluster.mk).
package tools

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
	_ "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)
