//go:build tools

// Package tools records what this module's command builds on, so that go.mod and go.sum
// pin everything it needs. It is never compiled: the build tag keeps it out.
package tools

import (
	_ "github.com/argoproj/argo-cd/v3/cmd/argocd-application-controller/commands"
	_ "github.com/argoproj/argo-cd/v3/cmd/argocd-repo-server/commands"
)
